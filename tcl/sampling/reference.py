"""Plain numpy versions of the RDU kernels: the definitions the C++ ones are tested against."""

from __future__ import annotations

import numpy as np


def knn_distance(x, group, k: int = 10) -> np.ndarray:
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


def greedy_select(x, group, budget, r, u, selected=None, weights=(1.0, 1.0, 1.0)) -> np.ndarray:
    x = np.asarray(x, np.float64)
    group = np.asarray(group)
    selected = np.zeros(len(x), bool) if selected is None else np.asarray(selected, bool)
    wr, wd, wu = weights
    picks = []
    for g in range(len(budget)):
        idx = np.nonzero(group == g)[0]
        cand = [i for i in idx if not selected[i]]
        chosen = [i for i in idx if selected[i]]
        md = min_distance(x[cand], x[chosen]) if cand else np.zeros(0)
        left = np.ones(len(cand), bool)
        for _ in range(min(budget[g], len(cand))):
            finite = left & np.isfinite(md)
            max_md = md[finite].max() if finite.any() else 0.0
            dn = np.where(np.isfinite(md), md / max_md if max_md > 0 else 0.0, 1.0)
            score = wr * np.asarray(r)[cand] + wd * dn + wu * np.asarray(u)[cand]
            score[~left] = -np.inf
            b = int(np.argmax(score))
            left[b] = False
            picks.append(cand[b])
            md = np.minimum(md, np.sqrt(((x[cand] - x[cand[b]]) ** 2).sum(-1)))
    return np.array(picks, np.int64)
