"""The Top-k score and pairwise ranking accuracy (docs/training.md, "Metrics"), implemented once.
numpy only.

Per task, with programs ranked by predicted score (higher = predicted faster; ties keep the earlier
program first):
    top-k = best measured latency of the task / best latency among the k highest-ranked programs.
Per network, weighted by how often each task occurs in it (w_i):
    top-k = sum_i w_i * best_i / sum_i w_i * best_topk_i
Pooled over a set of networks (TLP's way): numerator and denominator are summed over every
(network, task) pair before dividing, so a network's share is its total best latency.
Pairwise accuracy: over pairs of one task's programs with different latencies, the fraction whose
scores order them like the latencies (a score tie counts half); pooled and per network it counts
the pairs of every task once, unweighted.
Task mean: the unweighted mean Top-1 over tasks with at least TASK_MEAN_MIN_PROGRAMS programs, so
that the score is not decided by the few tasks that carry most of a pooled weight (a task of a few
programs is ranked right by luck, hence the floor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["TASK_MEAN_MIN_PROGRAMS", "TaskScore", "evaluate_predictions", "held_out_summary", "pairwise_counts",
           "score_task", "spearman", "summarize", "top_k_latency"]

KS = (1, 5)
TASK_MEAN_MIN_PROGRAMS = 16


def top_k_latency(latency, score, k: int) -> float:
    """Best latency among the k programs with the highest scores."""
    order = np.argsort(-np.asarray(score, np.float64), kind="stable")[:k]
    return float(np.asarray(latency, np.float64)[order].min())


def spearman(a, b) -> float:
    """Spearman rank correlation of two equally long vectors (ties get distinct ranks)."""
    rank = lambda v: np.argsort(np.argsort(np.asarray(v)))
    return float(np.corrcoef(rank(a), rank(b))[0, 1])


def pairwise_counts(latency, score, block: int = 1024) -> tuple[float, int]:
    """(right, pairs) over the pairs with different latencies; a tie in score is half right."""
    lat = np.asarray(latency, np.float64)
    s = np.asarray(score, np.float64)
    right, pairs = 0.0, 0
    for a in range(0, len(lat), block):  # blocks of rows keep memory at block * n
        faster = lat[a:a + block, None] < lat[None, :]  # [i, j]: i is faster than j
        ds = s[a:a + block, None] - s[None, :]
        pairs += int(faster.sum())
        right += float((faster & (ds > 0)).sum()) + 0.5 * float((faster & (ds == 0)).sum())
    return right, pairs


@dataclass
class TaskScore:
    """What the metrics need of a task: best latency, best latency of each top-k, pair counts."""

    best: float
    top: dict  # k -> best latency among the k highest-ranked programs
    right: float
    pairs: int
    programs: int

    def ratio(self, k: int) -> float:
        return self.best / self.top[k]

    @property
    def pairwise(self) -> float:
        return self.right / self.pairs if self.pairs else math.nan


def score_task(latency, score, ks=KS) -> TaskScore:
    lat = np.asarray(latency, np.float64)
    if lat.size == 0:
        raise ValueError("a task needs at least one measured program")
    right, pairs = pairwise_counts(lat, score)
    return TaskScore(float(lat.min()), {k: top_k_latency(lat, score, k) for k in ks}, right, pairs,
                     int(lat.size))


def _nan_to_none(x: float):
    return None if isinstance(x, float) and math.isnan(x) else x


def _pool(members, ks) -> dict:
    """members: [(weight, TaskScore)] -> {"top1": ..., "pairwise": ...}, the weighted TLP pool."""
    out = {}
    for k in ks:
        num = sum(w * t.best for w, t in members)
        den = sum(w * t.top[k] for w, t in members)
        out[f"top{k}"] = num / den if den > 0 else math.nan
    distinct = {id(t): t for _, t in members}.values()  # pairs of a task count once
    pairs = sum(t.pairs for t in distinct)
    out["pairwise"] = sum(t.right for t in distinct) / pairs if pairs else math.nan
    return {k: _nan_to_none(v) for k, v in out.items()}


def summarize(tasks: dict, networks: dict | None = None, ks=KS) -> dict:
    """Per-task, per-network and pooled scores.

    tasks: {task name: TaskScore}. networks: {task name: {network: occurrences}}; a task missing
    there (or with an empty dict) counts once under network "all".
    Returns {"pooled": {top1, top5, pairwise}, "networks": {net: {..., "tasks": n}},
             "tasks": {name: {top1, top5, pairwise, programs}}}.
    """
    networks = networks or {}
    by_net: dict[str, list] = {}
    for name, t in tasks.items():
        for net, w in (networks.get(name) or {"all": 1.0}).items():
            by_net.setdefault(net, []).append((float(w), t))
    per_task = {name: {**{f"top{k}": t.ratio(k) for k in ks}, "pairwise": _nan_to_none(t.pairwise),
                       "programs": t.programs} for name, t in tasks.items()}
    return {
        "pooled": _pool([m for ms in by_net.values() for m in ms], ks),
        "networks": {n: {**_pool(ms, ks), "tasks": len(ms)} for n, ms in sorted(by_net.items())},
        "tasks": per_task,
    }


def evaluate_predictions(latency, score, task, names, networks=None, ks=KS) -> dict:
    """summarize() from per-program arrays: latency [N], score [N], task [N] index into names."""
    latency, score, task = np.asarray(latency), np.asarray(score), np.asarray(task)
    order = np.argsort(task, kind="stable")  # programs of a task together, in their order
    bounds = np.flatnonzero(np.diff(task[order])) + 1
    scores = {}
    for idx in np.split(order, bounds) if len(order) else []:
        scores[names[task[idx[0]]]] = score_task(latency[idx], score[idx], ks)
    return summarize(scores, networks, ks)


def held_out_summary(result: dict, min_programs: int = TASK_MEAN_MIN_PROGRAMS) -> dict:
    """Pooled Top-1/Top-5 and the task mean (over tasks with at least `min_programs` programs) of a
    summarize() result; `tasks` is how many tasks the mean is over."""
    top1 = [t["top1"] for t in result["tasks"].values() if t["programs"] >= min_programs and t["top1"] is not None]
    return {"top1": result["pooled"]["top1"], "top5": result["pooled"]["top5"],
            "task_mean": sum(top1) / len(top1) if top1 else None, "tasks": len(top1)}
