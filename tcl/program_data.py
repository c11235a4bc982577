"""The programs a cost model learns from: one container, the splits by task, and the batches.

Splits are by task, never by program: tasks whose task.json says split "test" are held out; when no
task has a split (e.g. Ansor logs), a fraction of the tasks is held out by seed. A batch is a few
groups of programs, each group from one task, because the loss only ranks programs within a task.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from .features import FeatureSet, TaskInfo
from .hardware import HARDWARE_DIM, hardware_vector, task_platform

__all__ = ["ProgramData", "batches", "hold_out", "split_tasks", "task_groups", "task_key"]


def task_key(t: TaskInfo) -> str:
    """Identifies a task across files and runs: its workload on its target."""
    return f"{t.workload}|{t.target}"


class ProgramData:
    """The programs of one or more FeatureSets with their descriptors, tasks numbered globally."""

    def __init__(self, featuresets: FeatureSet | list[FeatureSet]):
        fss = [featuresets] if isinstance(featuresets, FeatureSet) else list(featuresets)
        if not fss:
            raise ValueError("no feature sets given")
        offsets = np.cumsum([0] + [len(fs.tasks) for fs in fss])

        def cat(arrays):  # one feature set: no copy of its (large) arrays
            return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)

        self.tasks: list[TaskInfo] = [t for fs in fss for t in fs.tasks]
        self.seq = cat([fs.seq for fs in fss])
        self.length = cat([fs.length for fs in fss]).astype(np.int64)
        self.task = np.concatenate([fs.task + o for fs, o in zip(fss, offsets)]).astype(np.int64)
        self.label = cat([fs.label for fs in fss]).astype(np.float32, copy=False)
        self.cost = cat([fs.cost for fs in fss])
        self.workload = cat([fs.workload for fs in fss])
        hw = np.zeros((len(self.tasks), HARDWARE_DIM), np.float32)
        for i, t in enumerate(self.tasks):
            hw[i] = hardware_vector(task_platform(t))
        self.hardware = hw[self.task]
        self._index_tasks()

    def _index_tasks(self):
        order = np.argsort(self.task, kind="stable")  # each task's programs, in file order
        bounds = np.searchsorted(self.task[order], np.arange(len(self.tasks) + 1))
        self._by_task = [order[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def measured(self, idx, cost) -> ProgramData:
        """Programs idx with the latencies `cost` measured for them, labelled from those alone
        (best measured latency of the task / latency); failed measurements (inf, nan) are left out.
        Task numbering is unchanged."""
        idx, cost = np.asarray(idx), np.asarray(cost, np.float64)
        ok = np.isfinite(cost) & (cost > 0)
        idx, cost = idx[ok], cost[ok]
        sub = copy.copy(self)
        sub.seq, sub.length, sub.task = self.seq[idx], self.length[idx], self.task[idx]
        sub.workload, sub.hardware, sub.cost = self.workload[idx], self.hardware[idx], cost
        best = np.full(len(self.tasks), np.inf)
        np.minimum.at(best, sub.task, cost)
        sub.label = (best[sub.task] / cost).astype(np.float32)
        sub._index_tasks()
        return sub

    def __len__(self) -> int:
        return len(self.length)

    def programs_of(self, task_ids) -> np.ndarray:
        """Program indices of the tasks, in ascending order."""
        parts = [self._by_task[int(t)] for t in task_ids]
        return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def inputs(self, idx: np.ndarray):
        """Model inputs of programs idx, cropped to their longest sequence (padding is at the end,
        so a shorter crop changes no valid step and saves the work on padding)."""
        length = self.length[idx]
        L = max(int(length.max()), 1)
        return (torch.from_numpy(self.seq[idx, :L]), torch.from_numpy(length),
                torch.from_numpy(self.workload[idx]), torch.from_numpy(self.hardware[idx]))


def hold_out(tasks: list[TaskInfo], ids, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Split task ids into (kept, held out): `fraction` of the distinct task keys, chosen by seed
    (independent of file order); at least one when fraction > 0, never all of them."""
    ids = list(ids)
    keys = sorted({task_key(tasks[i]) for i in ids})
    n = min(max(round(fraction * len(keys)), 1), len(keys) - 1) if fraction > 0 else 0
    held = {keys[j] for j in np.random.default_rng(seed).permutation(len(keys))[:n]}
    return ([i for i in ids if task_key(tasks[i]) not in held],
            [i for i in ids if task_key(tasks[i]) in held])


def split_tasks(tasks: list[TaskInfo], test_fraction: float = 0.0, seed: int = 0):
    """(train ids, test ids): task.json's split where any task has one, else test_fraction."""
    if any(t.split for t in tasks):
        return ([i for i, t in enumerate(tasks) if t.split != "test"],
                [i for i, t in enumerate(tasks) if t.split == "test"])
    return hold_out(tasks, range(len(tasks)), test_fraction, seed)


def task_groups(data: ProgramData, task_ids, group_size: int, rng) -> list[np.ndarray]:
    """One epoch's groups: each task's programs shuffled and cut into near-equal groups of at most
    group_size, the groups shuffled; groups of one program (no pair to rank) are dropped."""
    groups = []
    for t in task_ids:
        p = rng.permutation(data.programs_of([t]))
        n_groups = -(-len(p) // group_size)  # ceil
        groups += [g for g in np.array_split(p, n_groups) if len(g) > 1] if len(p) else []
    rng.shuffle(groups)
    return groups


def batches(groups: list[np.ndarray], batch_tasks: int):
    """Yields (program indices, each program's group number in the batch as a tensor) for every
    run of `batch_tasks` groups, in order."""
    for a in range(0, len(groups), batch_tasks):
        chunk = groups[a:a + batch_tasks]
        yield np.concatenate(chunk), torch.from_numpy(np.repeat(np.arange(len(chunk)), [len(g) for g in chunk]))
