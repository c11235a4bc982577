"""Tile sizes read back from featurized rows against the plain reference, on stock-TVM databases and
the tuning runs' own trace text."""

import json
from pathlib import Path

import numpy as np

from tcl.features import featurize, featurize_traces
from tcl.tile_decisions import (MULTIPLES, NUM_FEATURES, TILE_ROWS, alignment_features, innermost_factors,
                                innermost_factors_of_trace)

FIXTURES = Path(__file__).parent / "fixtures" / "ms"


def _traces(db: Path) -> list:
    lines = (db / "database_tuning_record.json").read_text().splitlines()
    return [json.loads(line)[1][0] for line in lines if line.strip()]


def test_innermost_factors_match_the_reference_on_stock_databases():
    for db in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        fs = featurize([db])
        expected = np.array([innermost_factors_of_trace(t) for t in _traces(db)])
        assert expected[:, 0].min() > 0  # every program of a conv or matmul has a tile decision
        order = np.argsort(fs.line)  # the featurizer's rows in file order
        np.testing.assert_array_equal(innermost_factors(fs.seq[order]), expected, err_msg=db.name)


def test_in_loop_trace_text_reads_the_same_as_the_database():
    db = FIXTURES / "matmul_128"
    traces = _traces(db)
    seq, _, _ = featurize_traces([json.dumps(t) for t in traces])
    np.testing.assert_array_equal(innermost_factors(seq), [innermost_factors_of_trace(t) for t in traces])


def test_a_factor_past_the_kept_rows_is_dropped():
    trace = [[["SamplePerfectTile", [], [], []]] * (TILE_ROWS + 2), [[i, [2, i + 1]] for i in range(TILE_ROWS + 2)]]
    assert innermost_factors_of_trace(trace) == list(range(1, TILE_ROWS + 1))


def test_alignment_features_by_hand():
    inner = np.zeros((2, TILE_ROWS))
    inner[0, :3] = [16, 18, 4]  # the largest, 18, fills no whole AVX-512 vector
    inner[1, :2] = [8, 32]
    f = alignment_features(inner)
    assert f.shape == (2, 2 * len(MULTIPLES) + 4 * TILE_ROWS) == (2, NUM_FEATURES)
    # per multiple 4, 8, 16: (share of the decisions it divides, whether it divides the largest)
    np.testing.assert_allclose(f[0, :6], [2 / 3, 0, 1 / 3, 0, 1 / 3, 0])
    np.testing.assert_allclose(f[1, :6], [1, 1, 1, 1, 1 / 2, 1])
    rows = f[0, 6:].reshape(TILE_ROWS, 4)  # log2, divided by 4, 8, 16
    np.testing.assert_allclose(rows[:3], [[4, 1, 1, 1], [np.log2(18), 0, 0, 0], [2, 1, 0, 0]])
    assert not rows[3:].any()
