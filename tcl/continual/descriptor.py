"""The parts of a knowledge base that read the hardware descriptor, and how exact preservation
keeps earlier platforms' scores while they learn a new one.

The descriptor is the KB's only way to tell platforms apart. FiLM layers (on every step's encoder
output and on the pooled embedding) and descriptor adapters (a low-rank change of the encoder, the
Mamba in_proj and the head's first layer per descriptor, tcl.model.cost_model.DescriptorAdapter)
read it relative to the first platform's descriptor, so they are zero there; the hardware
projection reads it directly. All of them see the descriptor linearly before any nonlinearity,
which is what lets DescriptorProjection keep earlier platforms exact.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
import torch.nn as nn

from ..model.cost_model import MambaCostModel
from ..program_data import ProgramData

__all__ = ["DescriptorProjection", "platform_hardware", "with_hardware_film"]


def platform_hardware(data: ProgramData, task_ids) -> list[list[float]]:
    """The distinct hardware descriptors of these tasks' programs (one per platform)."""
    return np.unique(data.hardware[data.programs_of(task_ids)], axis=0).tolist()


def with_hardware_film(model: MambaCostModel, reference, steps: bool = True, adapter_rank: int = 0) -> MambaCostModel:
    """The same model with FiLM layers relative to `reference` (a hardware descriptor): it
    scores every program as before under that descriptor; under another, the FiLM weights
    (zero here) rescale the pooled embedding and (steps) every step's encoder output, and
    (adapter_rank > 0) descriptor adapters change the encoder, in_proj and head. The KB
    gets them before it learns a second platform, so its size stays constant from then on.
    A model that has FiLM layers already (a KB, or `tcl train --hardware-film`) keeps them and its
    reference; it gets only the layers it lacks, zero as well."""
    has_film = model.hardware_film is not None
    steps = steps or model.cfg.hardware_film_steps
    adapter_rank = max(adapter_rank, model.cfg.hardware_adapter_rank)
    if has_film and steps == model.cfg.hardware_film_steps and adapter_rank == model.cfg.hardware_adapter_rank:
        return model  # a KB already: its reference and layers stay
    out = MambaCostModel(replace(model.cfg, hardware_film=True, hardware_film_steps=steps,
                                 hardware_adapter_rank=adapter_rank))
    missing = out.load_state_dict(model.state_dict(), strict=False).missing_keys
    assert all(k.startswith("hardware_") or "adapter" in k for k in missing), missing
    if not has_film:
        with torch.no_grad():
            out.hardware_ref.copy_(torch.as_tensor(reference, dtype=torch.float32))
    return out.train(model.training)


class DescriptorProjection:
    """Keeps the KB's scores under earlier platforms' descriptors exactly as they were while the
    parameters that read the descriptor learn a new platform (CKDConfig.preserve = "exact").

    Those parameters act on the descriptor linearly: the FiLM layers on d = h - hardware_ref, the
    descriptor adapters' up-projections on d (x) (A x) (so their projector is the FiLM one's
    Kronecker product with the identity of the rank), the hardware projection's first Linear on
    [h, 1]. So a change dW leaves every earlier platform's output alone iff dW x = 0 for each
    earlier input x: after every optimizer step the change from the incoming KB's weights is
    projected onto the orthogonal complement of the earlier inputs' span. The rest of the KB is
    frozen, so old scores are unchanged (up to float rounding). One platform uses one dimension of
    each input space, so a KB can tell apart at most hardware_dim + 1 platforms this way; a new
    platform whose descriptor lies in the earlier ones' span has nothing left to learn with
    (ValueError).

    gain = |d| / |P d| for the new platform's d: how much the projection shrinks what the new
    platform's input leaves to learn with. A step of the same size then moves the new platform's
    scores gain times less, so compress multiplies the learning rate by it (1 for the second
    platform, whose only earlier input is the reference's zero)."""

    def __init__(self, model: MambaCostModel, old_hw: list, new_hw: list):
        self.sites = []  # (weight, bias or None, projector P, weight's incoming value, bias's)
        self.gain = 1.0
        ref = model.hardware_ref if model.hardware_film is not None else None
        if ref is not None:
            new_d = [torch.as_tensor(h) - ref for h in new_hw]
            delta = self._projector([torch.as_tensor(h) - ref for h in old_hw], new_d)
            self.gain = float(np.mean([float(d.norm() / (delta @ d.float()).norm()) for d in new_d]))
            for film in (model.hardware_film, model.hardware_film_steps):
                if film is not None:
                    self._add(film, delta)
            # an adapter's input is d (x) (A x), flattened with d's index outermost
            for adapter in model.adapters():
                self._add(adapter.up, torch.kron(delta, torch.eye(adapter.rank)))
        if model.hardware_proj is not None:
            one = torch.ones(1)
            self._add(model.hardware_proj[0], self._projector([torch.cat([torch.as_tensor(h), one]) for h in old_hw],
                                                              [torch.cat([torch.as_tensor(h), one]) for h in new_hw]))

    @staticmethod
    def _projector(old_inputs, new_inputs) -> torch.Tensor:
        """The orthogonal projector onto the complement of the old inputs' span."""
        proj = torch.eye(len(new_inputs[0]))
        if old_inputs:
            x = torch.stack(old_inputs).float()
            u, s, _ = torch.linalg.svd(x.T, full_matrices=False)
            basis = u[:, s > 1e-6 * max(float(s.max()), 1e-12)]
            proj = proj - basis @ basis.T
        for h in new_inputs:
            if float((proj @ h.float()).norm()) <= 1e-4 * max(float(h.norm()), 1e-12):
                raise ValueError("the new platform's hardware descriptor is a combination of earlier platforms' "
                                 "(or the same): exact preservation leaves it nothing to learn with; "
                                 "use CKDConfig(preserve='keep') (tcl distill --preserve keep)")
        return proj

    def _add(self, linear: nn.Linear, proj: torch.Tensor):
        bias = linear.bias
        assert proj.shape[0] == linear.in_features + (bias is not None)
        self.sites.append((linear.weight, bias, proj, linear.weight.detach().clone(),
                           None if bias is None else bias.detach().clone()))

    @torch.no_grad()
    def apply(self):
        for weight, bias, proj, w0, b0 in self.sites:
            dw = weight - w0 if bias is None else torch.cat([weight - w0, (bias - b0)[:, None]], 1)
            dw = dw @ proj
            weight.copy_(w0 + dw[:, :weight.shape[1]])
            if bias is not None:
                bias.copy_(b0 + dw[:, -1])
