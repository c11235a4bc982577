"""The tile sizes a MetaSchedule program chose, read back from its featurized rows.

The pretrained model sees each tile decision as a log-scaled number, so it cannot tell an innermost
tile of 16 from one of 18; on a 16-lane CPU the first fills whole vectors and the second does not.
The in-loop learner (tcl.tvm.search_cost_model) gets these numbers besides its pooled features, so
what a tuning run measures can teach it which tile sizes divide the vector width.
`innermost_factors_of_trace` is the plain reference: the same numbers from a trace's JSON.
"""

from __future__ import annotations

import numpy as np

from .features import SPEC

TILE_ROWS = 8  # tile decisions kept per program, in trace order (conv and matmul sketches have 3-8)
MULTIPLES = (4, 8, 16)  # vector lanes of float32 on SSE/NEON, AVX2 and AVX-512
NUM_FEATURES = 2 * len(MULTIPLES) + 4 * TILE_ROWS  # columns of `alignment_features`
_TILE_KIND = SPEC.kind_names.index("SamplePerfectTile")


def innermost_factors(seq: np.ndarray, rows: int = TILE_ROWS) -> np.ndarray:
    """[N, rows] the innermost factor of each program's first `rows` SamplePerfectTile decisions, in
    trace order; 0 where a program has fewer. A MetaSchedule row's numbers are
    [outputs, decision..., ...], each stored as log1p, so the innermost factor is slot `outputs`."""
    is_tile = seq[:, :, _TILE_KIND] > 0
    rank = np.cumsum(is_tile, 1) - 1
    i, j = np.nonzero(is_tile & (rank < rows))
    numbers = seq[i, j, SPEC.num_kinds:].astype(np.float64)  # only the kept tile rows: cheap in the search loop
    outputs = np.clip(np.rint(np.expm1(numbers[:, 0])).astype(np.int64), 1, SPEC.num_numeric - 1)
    out = np.zeros((len(seq), rows))
    out[i, rank[i, j]] = np.rint(np.expm1(numbers[np.arange(len(i)), outputs]))
    return out


def innermost_factors_of_trace(trace_json, rows: int = TILE_ROWS) -> list[int]:
    """The reference for one program: its trace JSON `[[insts], [decisions]]`, as in a tuning record."""
    insts, decisions = trace_json
    decided = {int(i): d for i, d in decisions}
    factors = [int(decided[i][-1]) for i, inst in enumerate(insts) if inst[0] == "SamplePerfectTile"]
    return (factors + [0] * rows)[:rows]


def alignment_features(inner: np.ndarray) -> np.ndarray:
    """[N, NUM_FEATURES] from `innermost_factors`: per multiple m, the share of tile
    decisions whose innermost factor m divides and whether it divides the largest one (the
    vectorised loop, in conv and matmul sketches); per tile decision, log2 of its innermost factor
    and which multiples divide it."""
    has = inner > 0
    largest = inner.max(1)
    columns = []
    for m in MULTIPLES:
        columns.append((has & (inner % m == 0)).sum(1) / np.maximum(has.sum(1), 1))
        columns.append((largest > 0) & (largest % m == 0))
    per_row = [np.log2(np.maximum(inner, 1))] + [has & (inner % m == 0) for m in MULTIPLES]
    return np.hstack([np.stack(columns, 1), np.stack(per_row, 2).reshape(len(inner), -1)]).astype(np.float64)
