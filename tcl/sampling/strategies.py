"""The pieces the sampling methods (tcl.sampling.methods) are built from, and `select`, the one
entry point that runs a method.

`Weights` holds every method's weights and options; the helpers turn the model's signals into
per-task scores (normalize_per_group, top_probability), reshape the embedding (score_axis_embedding,
unit_rms_per_group) and measure R (representativeness); per_task_budget splits a budget over tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import kernels


@dataclass(frozen=True)
class Weights:
    """Weights and options of the sampling methods (each method reads the fields listed in its
    `weight_fields`). The defaults are the best of the RDU forms bench/sampling.py compared
    (docs/sampling.md, docs/results.md): a light coverage R, D, and U = spread + predicted score."""

    r: float = 0.25
    d: float = 1.0
    u: float = 1.0
    bias: float = 1.0  # biased_diversity: weight of the predicted speed
    u_speed: float = 1.0  # rdu: U = sigma + u_speed * p (an upper confidence bound; 0: the spread alone)
    u_kind: str = "spread"  # rdu's U: "spread" (sigma, + u_speed * p) or "top" (q, top_probability)
    top_fraction: float = 0.1  # u_kind "top": the share of a task's programs that counts as its top
    r_kind: str = "coverage"  # R: "density" (kNN, fixed) or "coverage" (facility-location gain, updated per pick)
    k: int = 10  # neighbours for R
    score_axis: float = 0.0  # rdu: > 0 adds the predicted-score rank as a coordinate of R's and D's space


def normalize_per_group(v, group) -> np.ndarray:
    """Min-max scaling to [0, 1] within each group (0 where a group is constant)."""
    v = np.asarray(v, np.float64)
    group = np.asarray(group)
    out = np.zeros(len(v), np.float64)
    for g in np.unique(group):
        idx = group == g
        lo, hi = v[idx].min(), v[idx].max()
        out[idx] = (v[idx] - lo) / (hi - lo) if hi > lo else 0.0
    return out


def top_probability(samples, group, fraction: float = 0.1) -> np.ndarray:
    """q[i]: the fraction of score samples (rows of `samples`, [n_samples, N]) in which program i
    is among the ceil(fraction x size) highest-scored programs of its group (ties count as in)."""
    samples = np.asarray(samples, np.float64)
    group = np.asarray(group)
    q = np.zeros(samples.shape[1], np.float64)
    for g in np.unique(group):
        idx = np.nonzero(group == g)[0]
        k = max(1, int(np.ceil(fraction * len(idx))))
        s = samples[:, idx]
        kth = -np.partition(-s, k - 1, axis=1)[:, k - 1:k]  # the k-th highest score of each sample
        q[idx] = (s >= kth).mean(0)
    return q


def score_axis_embedding(x, p, group, weight: float) -> np.ndarray:
    """x with one more coordinate, `weight` x the rank of the predicted score p within the task
    (0 slowest .. 1 fastest), after scaling each task's rows to unit RMS distance from their mean,
    so that D (and R) also spread the picks along the task's predicted speed: picks spread evenly
    over each task's true latency order gave the best task-mean Top-1 of any 10% tried
    (bench/sampling.py's oracle_strata diagnostic, docs/results.md)."""
    p = np.asarray(p, np.float64)
    group = np.asarray(group)
    out = np.concatenate([unit_rms_per_group(x, group), np.empty((len(p), 1), np.float32)], axis=1)
    for g in np.unique(group):
        idx = np.nonzero(group == g)[0]
        rank = np.argsort(np.argsort(p[idx], kind="stable"), kind="stable")
        out[idx, -1] = weight * rank / max(1, len(idx) - 1)
    return out


def unit_rms_per_group(x, group) -> np.ndarray:
    """Rows of x centred on their group's mean and scaled to unit RMS distance from it, so that
    coordinates appended or concatenated beside them weigh the same in every task."""
    x = np.asarray(x, np.float32)
    group = np.asarray(group)
    out = np.empty_like(x)
    for g in np.unique(group):
        idx = np.nonzero(group == g)[0]
        centred = x[idx] - x[idx].mean(0)
        radius = float(np.sqrt((centred.astype(np.float64) ** 2).sum(1).mean()))
        out[idx] = centred / radius if radius > 0 else centred
    return out


def representativeness(x, group, k: int = 10, threads: int = 0) -> np.ndarray:
    """R of r_kind "density": 1 / (1 + mean distance to the k nearest programs of the task)."""
    return 1.0 / (1.0 + kernels.knn_mean_distance(x, group, k, threads))


def select(method, x, group, budget, selected=None, u=None, p=None, weights: Weights = Weights(),
           rng: np.random.Generator | None = None, threads: int = 0, q=None) -> np.ndarray:
    """Indices of the programs to measure next, picked by `method` (a name in
    tcl.sampling.methods.REGISTRY, or a SamplingMethod): budget[g] new ones of each task g, none of
    `selected`. u, p, q: the model's uncertainty, predicted score and top_probability per program,
    where the method needs them (SamplingMethod.needs)."""
    from .methods import SIGNALS, get_method  # the methods are built from this module's helpers

    m = get_method(method)
    if weights.r_kind not in ("density", "coverage"):
        raise ValueError(f"r_kind must be 'density' or 'coverage', not {weights.r_kind!r}")
    if weights.u_kind not in ("spread", "top"):
        raise ValueError(f"u_kind must be 'spread' or 'top', not {weights.u_kind!r}")
    given = {"u": u, "p": p, "q": q}
    for signal in m.needs(weights):
        if given[signal] is None:
            raise ValueError(f"{m.name} needs {SIGNALS[signal]} (with weights {weights})")
    group = np.asarray(group, np.int32)
    selected = np.zeros(len(group), bool) if selected is None else np.asarray(selected, bool)
    return m.pick(np.asarray(x, np.float32), group, np.asarray(budget, np.int64), selected, u=u, p=p, q=q,
                  weights=weights, rng=rng, threads=threads)


def per_task_budget(group, fraction: float | None = None, count: int | None = None, minimum: int = 1) -> np.ndarray:
    """Programs to measure per task: a fraction of each task's pool (or a total count split in
    proportion to pool sizes), at least `minimum` per task so that every task gets programs."""
    sizes = np.bincount(np.asarray(group), minlength=int(np.max(group)) + 1 if len(group) else 0)
    if (fraction is None) == (count is None):
        raise ValueError("give exactly one of fraction and count")
    if fraction is not None:
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        want = np.ceil(sizes * fraction)
    else:
        want = np.floor(sizes * (count / max(1, sizes.sum())))
    return np.minimum(sizes, np.maximum(want, minimum)).astype(np.int64)
