"""A knowledge base platform after platform: the first platform, each later one, and learning one
from the programs the RDU sampler picks.

Only the KB, its EWC state and the new platform's programs are used: no earlier platform's data,
and the KB never grows (the active column is thrown away after compress).
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from ..metrics import held_out_summary
from ..model.cost_model import MambaCostModel
from ..program_data import ProgramData
from ..scoring import score_tasks
from ..train import train
from .config import CKDConfig
from .descriptor import platform_hardware, with_hardware_film
from .ewc import OnlineEWC
from .phases import compress, progress

__all__ = ["EpochChoice", "check_split", "first_platform", "learn_platform", "sampled_subset"]


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


def check_split(task_ids, cfg: CKDConfig) -> tuple[list, list]:
    """(tasks learned from, tasks held back to choose the epoch): a seeded CKDConfig.check_fraction
    of the tasks, at least one, and at least one left to learn from."""
    tasks = sorted(int(t) for t in task_ids)
    if not cfg.check_fraction or len(tasks) < 2:
        return tasks, []
    n_check = min(max(1, round(cfg.check_fraction * len(tasks))), len(tasks) - 1)
    order = np.random.default_rng(cfg.seed).permutation(tasks)
    return sorted(int(t) for t in order[n_check:]), sorted(int(t) for t in order[:n_check])


class EpochChoice:
    """compress's on_epoch: keeps the student of the epoch whose mean Top-1 over the check tasks
    is best, starting from the incoming KB as epoch 0; a tie keeps the earlier epoch."""

    def __init__(self, kb: MambaCostModel, data: ProgramData, check_ids):
        self.data, self.check_ids = data, check_ids
        self.scores = [self._score(kb)]
        self.best_epoch, self.best = 0, copy.deepcopy(kb.state_dict())

    def _score(self, model) -> float:
        return held_out_summary(score_tasks(model, self.data, self.check_ids), min_programs=1)["task_mean"]

    def __call__(self, epoch: int, student) -> None:
        s = self._score(student)
        self.scores.append(s)
        if s > self.scores[self.best_epoch]:
            self.best_epoch, self.best = epoch, copy.deepcopy(student.state_dict())

    def chosen(self, student):
        """The student with the chosen epoch's weights."""
        student.load_state_dict(self.best)
        return student


def learn_platform(kb: MambaCostModel, ewc: OnlineEWC, data: ProgramData, task_ids, cfg: CKDConfig,
                   report: dict | None = None):
    """progress -> compress -> consolidate on one new platform; returns (new KB, EWC, seconds).
    With CKDConfig.check_fraction, `report` (if given) gets the epoch kept and the check tasks'
    mean Top-1 after each epoch."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    fit, check = check_split(task_ids, cfg)
    choice = EpochChoice(kb, data, check) if check else None
    ac = progress(kb, data, fit, cfg)
    new_kb = compress(kb, ac, ewc, data, fit, cfg, on_epoch=choice)
    if choice is not None:
        new_kb = choice.chosen(new_kb)
        if report is not None:
            report.update(check_epoch=choice.best_epoch, check_top1=choice.scores)
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
