"""Which programs to measure next: RDU and the baselines it is compared with, on one code path.

Every strategy picks `budget[g]` new programs of each task g from the candidates that are not yet
measured, given program embeddings `x` (rows), the model's uncertainty `u` and predicted score
`p` (higher = faster) per program. Scores are normalised to [0, 1] within each task at every call
(one call = one sampling round), so the weights mean the same on every task and round.

- rdu:               wr * R + wd * D + wu * U, greedy (D updated after every pick); U is the
                     spread of the model's scores sigma, plus u_speed x the predicted score p when
                     u_speed > 0 (then U is an upper confidence bound p + sigma: for a Top-k
                     metric only the programs that may be among the fastest need their rank known);
                     with u_kind "top", U is instead the probability q that the program is among
                     the top `top_fraction` of its task (over the MC-dropout samples, see
                     top_probability): uncertain about the one question Top-k asks;
                     with score_axis > 0, R and D measure distances in x plus one coordinate,
                     the rank of p within the task (score_axis_embedding), to spread the
                     picks over the predicted speed (measured, not the default: README)
- rd:                R + D, no uncertainty
- diversity:         D only: greedy k-center
- biased_diversity:  D + bias * predicted speed (BALTO-like: diversity toward fast programs)
- uncertainty:       the most uncertain programs (ALT-like)
- random:            uniform within each task

R (representativeness), r_kind "density": 1 / (1 + mean distance to the k nearest neighbours in the
task), fixed during a round; r_kind "coverage": the gain in a facility-location objective on the
task's kNN graph (how much of the not-yet-covered neighbourhood the program would stand for,
kernels.greedy_select with coverage_k), updated after every pick so that a dense region stops
pulling once one of its programs is picked.
D (diversity) = distance to the nearest measured/picked program, over its maximum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import kernels

METHODS = ("rdu", "rd", "diversity", "biased_diversity", "uncertainty", "random")


@dataclass(frozen=True)
class Weights:
    """Weights of the RDU score. The defaults are the best of the RDU forms bench/sampling.py
    compared (README, "Sampling"): a light coverage R, D, and U = spread + predicted score."""

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
    (bench/sampling.py's oracle_strata diagnostic, README)."""
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
    return 1.0 / (1.0 + kernels.knn_distance(x, group, k, threads))


def select(method: str, x, group, budget, selected=None, u=None, p=None, weights: Weights = Weights(),
           rng: np.random.Generator | None = None, threads: int = 0, q=None) -> np.ndarray:
    """Indices of the programs to measure next (see module doc); q: top_probability of the
    programs, for rdu with u_kind "top"."""
    if method not in METHODS:
        raise ValueError(f"unknown sampling method {method!r}; choose one of {', '.join(METHODS)}")
    x = np.asarray(x, np.float32)
    group = np.asarray(group, np.int32)
    n = len(group)
    selected = np.zeros(n, bool) if selected is None else np.asarray(selected, bool)
    budget = np.asarray(budget, np.int64)
    if weights.r_kind not in ("density", "coverage"):
        raise ValueError(f"r_kind must be 'density' or 'coverage', not {weights.r_kind!r}")
    if weights.u_kind not in ("spread", "top"):
        raise ValueError(f"u_kind must be 'spread' or 'top', not {weights.u_kind!r}")
    top_u = method == "rdu" and weights.u_kind == "top"
    if top_u and q is None:
        raise ValueError("rdu with u_kind 'top' needs the top probabilities q")
    if (method == "uncertainty" or (method == "rdu" and not top_u)) and u is None:
        raise ValueError(f"{method} needs the model's uncertainty u")
    if (method == "biased_diversity" or (method == "rdu" and not top_u and weights.u_speed)) and p is None:
        raise ValueError(f"{method} needs the model's predicted scores p")
    zeros = np.zeros(n)

    if method == "random":
        rng = rng or np.random.default_rng(0)
        picks = []
        for g, b in enumerate(budget):
            cand = np.nonzero((group == g) & ~selected)[0]
            picks.append(rng.choice(cand, size=min(b, len(cand)), replace=False))
        return np.concatenate(picks).astype(np.int64) if picks else np.zeros(0, np.int64)
    if method == "uncertainty":
        un = normalize_per_group(u, group)
        picks = []
        for g, b in enumerate(budget):
            cand = np.nonzero((group == g) & ~selected)[0]
            picks.append(cand[np.argsort(-un[cand], kind="stable")[:b]])
        return np.concatenate(picks).astype(np.int64) if picks else np.zeros(0, np.int64)

    w = weights
    coverage_k = 0  # > 0: R is the coverage gain, computed by the kernel itself
    if method == "diversity":
        r, un, wts = zeros, zeros, (0.0, 1.0, 0.0)
    elif method == "biased_diversity":
        r, un, wts = normalize_per_group(p, group), zeros, (w.bias, 1.0, 0.0)
    else:
        if method == "rdu" and w.score_axis > 0:
            if p is None:
                raise ValueError("rdu with score_axis > 0 needs the model's predicted scores p")
            x = score_axis_embedding(x, p, group, w.score_axis)
        coverage_k = w.k if w.r_kind == "coverage" else 0
        r = zeros if coverage_k else normalize_per_group(representativeness(x, group, w.k, threads), group)
        if top_u:
            un = normalize_per_group(q, group)
        elif method == "rdu":
            un = np.asarray(u, np.float64) + (w.u_speed * np.asarray(p, np.float64) if w.u_speed else 0.0)
            un = normalize_per_group(un, group)
        else:
            un = zeros
        wts = (w.r, w.d, w.u if method == "rdu" else 0.0)
    return kernels.greedy_select(x, group, budget, r, un, selected, wts, threads, coverage_k=coverage_k)


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
