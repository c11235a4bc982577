"""Online elastic weight consolidation, and the record of the platforms a KB has learned.

One running Fisher F* and one anchor theta* over all platforms: the penalty is
sum (lambda / 2) F* (theta - theta*)^2, and after each platform F* <- gamma F* + F_new / mean(F_new)
(normalised per platform) and the anchor moves to the new KB. The same state keeps the platforms'
hardware descriptors, which compress keeps the KB's scores under.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from ..model.losses import lambda_rank_loss
from ..program_data import ProgramData, batches, task_groups
from .config import CKDConfig
from .descriptor import platform_hardware

__all__ = ["OnlineEWC"]


class OnlineEWC:
    """One running Fisher and one anchor over all platforms seen so far, and those platforms'
    hardware descriptors (what compress keeps the KB's scores under)."""

    def __init__(self, fisher: dict | None = None, anchor: dict | None = None, platforms: int = 0,
                 hardware: list | None = None):
        self.fisher, self.anchor, self.platforms = fisher, anchor, platforms
        self.hardware = [list(map(float, h)) for h in (hardware or [])]

    def penalty(self, model: nn.Module, lam: float) -> torch.Tensor:
        if self.fisher is None:
            return torch.zeros(())
        total = torch.zeros(())
        for name, p in model.named_parameters():
            total = total + (self.fisher[name] * (p - self.anchor[name]) ** 2).sum()
        return 0.5 * lam * total

    def consolidate(self, model: nn.Module, data: ProgramData, task_ids, cfg: CKDConfig):
        """Folds the model's Fisher on these programs (squared gradients of the ranking loss) into
        the running one; moves the anchor; records the platform's descriptor."""
        fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
        for p in model.parameters():
            p.requires_grad_(True)
        rng = np.random.default_rng(cfg.seed)
        model.eval()  # no dropout noise in the curvature estimate
        for idx, gid in batches(task_groups(data, task_ids, cfg.group_size, rng), cfg.batch_tasks):
            model.zero_grad()
            lambda_rank_loss(model(*data.inputs(idx)), torch.from_numpy(data.label[idx]), gid).backward()
            for n, p in model.named_parameters():
                if p.grad is not None:
                    fisher[n] += p.grad.detach() ** 2
        scale = torch.cat([f.flatten() for f in fisher.values()]).mean().clamp(min=1e-12)
        fisher = {n: f / scale for n, f in fisher.items()}  # normalised per platform
        if self.fisher is not None:
            fisher = {n: cfg.gamma * self.fisher[n] + f for n, f in fisher.items()}
        self.fisher = fisher
        self.anchor = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.platforms += 1
        for h in platform_hardware(data, task_ids):
            if h not in self.hardware:
                self.hardware.append(h)
        model.zero_grad()

    def state_dict(self) -> dict:
        return {"fisher": self.fisher, "anchor": self.anchor, "platforms": self.platforms, "hardware": self.hardware}

    @classmethod
    def from_state_dict(cls, state: dict | None) -> OnlineEWC:
        return cls(**state) if state else cls()
