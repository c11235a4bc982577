"""RDU distance kernels, in C++ (GIL released, threads, no N x N matrix in memory)."""

from __future__ import annotations

import numpy as np

from .. import _core


def _rows(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def knn_mean_distance(x, group, k: int = 10, threads: int = 0) -> np.ndarray:
    """Mean distance from each row to its k nearest neighbours of the same group (task)."""
    return _core.knn_mean_distance(_rows(x), np.asarray(group, np.int32), int(k), int(threads))


def min_distance(x, y, threads: int = 0) -> np.ndarray:
    """Distance from each row of x to the nearest row of y (inf when y is empty)."""
    x = _rows(x)
    y = _rows(y).reshape(-1, x.shape[1])
    return _core.min_distance(x, y, int(threads))


def greedy_select(x, group, budget, r, u, selected=None, weights=(1.0, 1.0, 1.0), threads: int = 0,
                  coverage_k: int = 0) -> np.ndarray:
    """Picks budget[g] new rows of each group g, one at a time, by wr*R + wd*D + wu*u.

    D is each candidate's distance to the nearest selected row (already `selected` ones and the
    picks so far), divided by its maximum over the remaining candidates; r and u must already be
    normalised (e.g. to [0, 1]). R is r, or with coverage_k > 0 the coverage gain on each group's
    coverage_k-nearest-neighbour graph (reference.greedy_select; r is then ignored).
    Returns the picked row indices, group by group, in pick order.
    """
    x = _rows(x)
    n = x.shape[0]
    sel = np.zeros(n, np.uint8) if selected is None else np.asarray(selected, np.uint8)
    wr, wd, wu = (float(w) for w in weights)
    return _core.greedy_select(x, np.asarray(group, np.int32), np.asarray(budget, np.int64),
                               np.asarray(r, np.float32), np.asarray(u, np.float32), sel,
                               wr, wd, wu, int(coverage_k), int(threads))
