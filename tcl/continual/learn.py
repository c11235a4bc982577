"""A knowledge base platform after platform: the first platform, each later one, and learning one
from the programs the RDU sampler picks.

Only the KB, its EWC state and the new platform's programs are used: no earlier platform's data,
and the KB never grows (the active column is thrown away after compress).
"""

from __future__ import annotations

import time

import torch

from ..model.cost_model import MambaCostModel
from ..program_data import ProgramData
from ..train import train
from .config import CKDConfig
from .descriptor import platform_hardware, with_hardware_film
from .ewc import OnlineEWC
from .phases import compress, progress

__all__ = ["first_platform", "learn_platform", "sampled_subset"]


def first_platform(data: ProgramData, task_ids, cfg: CKDConfig, model_config: dict | None = None):
    """The KB of the first platform: plain training (CKDConfig.train_config), the descriptor-reading
    layers (zero here), then its Fisher; returns (KB, EWC, seconds)."""
    t0 = time.perf_counter()
    kb, _ = train(data, task_ids, (), cfg.train_config(), arch="mamba", model_config=model_config, progress=False)
    if cfg.hardware_film:
        kb = with_hardware_film(kb, platform_hardware(data, task_ids)[0], steps=cfg.hardware_film_steps,
                                adapter_rank=cfg.hardware_adapter_rank)
    ewc = OnlineEWC()
    ewc.consolidate(kb, data, task_ids, cfg)
    return kb, ewc, time.perf_counter() - t0


def learn_platform(kb: MambaCostModel, ewc: OnlineEWC, data: ProgramData, task_ids, cfg: CKDConfig):
    """progress -> compress -> consolidate on one new platform; returns (new KB, EWC, seconds)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    ac = progress(kb, data, task_ids, cfg)
    new_kb = compress(kb, ac, ewc, data, task_ids, cfg)
    ewc.consolidate(new_kb, data, task_ids, cfg)
    return new_kb, ewc, time.perf_counter() - t0


def sampled_subset(data: ProgramData, task_ids, fraction: float, seed: int = 0, threads: int | None = None,
                   progress_bar: bool = False):
    """The new platform's programs the RDU sampler picks (`fraction` of each task's programs),
    labelled from their measurements alone; returns (those programs, their task ids, the
    sampler's last model: one trained from scratch on them).

    The latencies come from the dataset (LookupOracle): for a platform not yet measured, run
    `tcl sample` with a TVM oracle instead and distil on what it measured."""
    from ..sampling.sampler import LookupOracle, SamplingConfig, run_sampling

    res = run_sampling(data, task_ids, SamplingConfig(method="rdu", fraction=fraction, seed=seed, threads=threads),
                       LookupOracle(data.cost), progress=progress_bar)
    sub = data.measured(res.selected, res.costs)
    return sub, sorted({int(t) for t in sub.task}), res.model
