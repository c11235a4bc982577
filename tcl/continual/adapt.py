"""Adapting a knowledge base to a new platform from a tenth of its measurements: the paper's
pipeline end to end.

1. The new platform's candidate programs (the pool) are featurized before any is measured.
2. The sampler (tcl.sampling.sampler) picks what to measure in rounds, starting from the KB's own
   scores and MC-dropout uncertainty under the new platform's descriptor (not from nothing), and
   every round fine-tunes a copy of the KB on what has been measured so far.
3. The KB learns the measured programs by continual distillation (learn_platform: progress, then
   compress): no earlier platform's data, and the KB does not grow.

Any tcl checkpoint can be the starting KB: one `tcl distill` wrote as it is, a model `tcl train`
wrote (such as the shipped default) after as_knowledge_base adds the descriptor-reading layers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from ..errors import FormatError
from ..program_data import ProgramData
from ..sampling.sampler import SamplingConfig, run_sampling
from .config import CKDConfig
from .descriptor import DescriptorProjection, platform_hardware, with_hardware_film
from .ewc import OnlineEWC
from .learn import learn_platform

__all__ = ["Adaptation", "adapt", "as_knowledge_base", "preservation"]


def as_knowledge_base(model, checkpoint: dict, cfg: CKDConfig):
    """(KB, its state) from a loaded checkpoint (tcl.checkpoint.load_checkpoint's two values).

    A KB of `tcl distill` comes with its state. A model of `tcl train` gets FiLM layers and
    descriptor adapters that are zero, so it scores every program exactly as before under every
    descriptor, and a state naming the platforms it was trained on (the checkpoint's "hardware"),
    which exact preservation then keeps."""
    if checkpoint.get("ewc"):
        return model, OnlineEWC.from_state_dict(checkpoint["ewc"])
    if checkpoint.get("arch") != "mamba":
        raise FormatError(f"only a Mamba cost model can be adapted, not {checkpoint.get('arch')!r}")
    hardware = checkpoint.get("meta", {}).get("hardware")
    if not hardware:
        raise FormatError("the model does not record the hardware descriptors it was trained under "
                          "(meta 'hardware'); retrain it with this tcl or make a knowledge base with tcl distill")
    kb = with_hardware_film(model, hardware[0], steps=cfg.hardware_film_steps, adapter_rank=cfg.hardware_adapter_rank)
    return kb, OnlineEWC(platforms=len(hardware), hardware=hardware)


def preservation(kb, ewc: OnlineEWC, data: ProgramData, task_ids, cfg: CKDConfig) -> CKDConfig:
    """`cfg`, or with preserve "keep" where exact preservation cannot learn the new platform: its
    descriptor is a combination of the earlier ones' (e.g. a host the KB knows under other target
    settings), so the parameters that read it have nothing left to learn with."""
    if cfg.preserve != "exact":
        return cfg
    new_hw = platform_hardware(data, task_ids)
    try:
        DescriptorProjection(kb, [h for h in ewc.hardware if h not in new_hw], new_hw)
    except ValueError:
        return replace(cfg, preserve="keep")
    return cfg


@dataclass
class Adaptation:
    kb: object  # the adapted knowledge base
    ewc: OnlineEWC  # its state, the new platform included
    selected: np.ndarray  # programs measured, in the order they were
    costs: np.ndarray  # their latencies (inf: failed)
    rounds: list[dict]  # the sampler's rounds
    seconds: dict  # {"sample": picking, measuring and the rounds' training, "distill": learning the KB}
    preserve: str  # how the earlier platforms were kept (CKDConfig.preserve; see preservation)
    check: dict  # with CKDConfig.check_fraction: the epoch kept and the check tasks' Top-1 by epoch


def adapt(kb, ewc: OnlineEWC, data: ProgramData, task_ids, oracle, sampling: SamplingConfig, ckd: CKDConfig,
          progress: bool = False, say=None) -> Adaptation:
    """Measures `sampling`'s budget of the programs of `task_ids` (all of the new platform) through
    `oracle`, picked with the KB's signals, and distills them into the KB. say(text): told what
    starts (e.g. a status line).

    `ewc` is updated in place; `kb` itself is left unchanged."""
    say = say or (lambda text: None)
    ckd = preservation(kb, ewc, data, task_ids, ckd)
    t0 = time.perf_counter()
    say(f"picking and measuring in {sampling.rounds} rounds, each retraining on what is measured so far")
    res = run_sampling(data, task_ids, replace(sampling, init_model=kb, arch="mamba"), oracle, progress=progress)
    t1 = time.perf_counter()
    say(f"distilling {len(res.selected)} measured programs into the model (preserve {ckd.preserve})")
    measured = data.measured(res.selected, res.costs)
    learned = sorted({int(t) for t in measured.task})
    if not learned:
        raise ValueError("no program was measured without failing: nothing to adapt to")
    check: dict = {}
    new_kb, ewc, _ = learn_platform(kb, ewc, measured, learned, ckd, check)
    return Adaptation(new_kb, ewc, res.selected, res.costs, res.rounds,
                      {"sample": t1 - t0, "distill": time.perf_counter() - t1}, ckd.preserve, check)
