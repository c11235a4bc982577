"""Plain numpy versions of the RDU kernels: the definitions the C++ ones are tested against."""

from __future__ import annotations

import numpy as np


def knn_mean_distance(x, group, k: int = 10) -> np.ndarray:
    """Mean distance from each row to its k nearest other rows of the same group (0 for a group of one)."""
    x = np.asarray(x, np.float64)
    group = np.asarray(group)
    out = np.zeros(len(x), np.float64)
    for g in np.unique(group):
        idx = np.nonzero(group == g)[0]
        kk = min(k, len(idx) - 1)
        if kk <= 0:
            continue
        for i in idx:  # one row at a time: memory stays O(group size)
            d = np.sqrt(((x[idx] - x[i]) ** 2).sum(-1))
            d[idx == i] = np.inf
            out[i] = np.sort(d)[:kk].mean()
    return out


def min_distance(x, y) -> np.ndarray:
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if len(y) == 0:
        return np.full(len(x), np.inf)
    return np.sqrt(((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)).min(1)


def coverage_similarity(x, k: int = 10) -> np.ndarray:
    """S[j, i] = exp(-||x_j - x_i|| / scale) where i is j itself or one of j's k nearest rows, else 0;
    scale = the mean distance to the k nearest rows (so S does not depend on the embedding's units)."""
    x = np.asarray(x, np.float64)
    n = len(x)
    # row by row, so the temporaries stay O(n d) rather than O(n^2 d)
    d = np.stack([np.sqrt(((x - xi) ** 2).sum(-1)) for xi in x]) if n else np.zeros((0, 0))
    kk = min(k, n - 1)
    s = np.zeros((n, n))
    if kk <= 0:
        np.fill_diagonal(s, 1.0)
        return s
    off = d + np.diag(np.full(n, np.inf))
    nn = np.argsort(off, axis=1, kind="stable")[:, :kk]
    rows = np.arange(n)[:, None]
    scale = off[rows, nn].mean()
    s[rows, nn] = np.exp(-off[rows, nn] / scale) if scale > 0 else 1.0
    np.fill_diagonal(s, 1.0)
    return s


def greedy_select(x, group, budget, r, u, selected=None, weights=(1.0, 1.0, 1.0), coverage_k: int = 0) -> np.ndarray:
    """Greedy wr*R + wd*D + wu*u per group, one pick at a time. R is r, or with coverage_k > 0 the
    coverage gain, recomputed after every pick: how much choosing i raises
    sum_j max_{s chosen} S[j, s] (a facility-location objective over the kNN graph,
    coverage_similarity), over its maximum among the remaining candidates. Dense programs score
    high until their neighbourhood is covered; then their R falls, so R stops pulling picks
    together. D = distance to the nearest chosen row over its maximum among the remaining ones."""
    x = np.asarray(x, np.float64)
    group = np.asarray(group)
    r, u = np.asarray(r, np.float64), np.asarray(u, np.float64)
    selected = np.zeros(len(x), bool) if selected is None else np.asarray(selected, bool)
    wr, wd, wu = weights
    picks = []
    for g in range(len(budget)):
        idx = np.nonzero(group == g)[0]
        if len(idx) == 0:
            continue
        chosen = selected[idx].copy()
        if coverage_k > 0:
            s = coverage_similarity(x[idx], coverage_k)
            best = (s * chosen[None, :]).max(1)  # 0 where nothing chosen covers j
        md = min_distance(x[idx], x[idx[chosen]])
        for _ in range(min(budget[g], int((~chosen).sum()))):
            left = ~chosen
            if coverage_k > 0:
                gain = np.maximum(s - best[:, None], 0.0).sum(0)
                max_gain = gain[left].max()
                rn = gain / max_gain if max_gain > 0 else np.zeros(len(idx))
            else:
                rn = r[idx]
            finite = left & np.isfinite(md)
            max_md = md[finite].max() if finite.any() else 0.0
            dn = np.where(np.isfinite(md), md / max_md if max_md > 0 else 0.0, 1.0)
            score = wr * rn + wd * dn + wu * u[idx]
            score[chosen] = -np.inf
            b = int(np.argmax(score))
            chosen[b] = True
            picks.append(idx[b])
            if coverage_k > 0:
                best = np.maximum(best, s[:, b])
            md = np.minimum(md, np.sqrt(((x[idx] - x[idx[b]]) ** 2).sum(-1)))
    return np.array(picks, np.int64)
