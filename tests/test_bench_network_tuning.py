"""bench/network_tuning.py's bookkeeping: the three ratios from runs, and the database prefix that a
smaller budget is compiled from."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("bench_network_tuning", ROOT / "bench" / "network_tuning.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _run(curve, e2e, eager=None):
    return {"curve": curve, "end_to_end": {"3.0": {"median_s": e2e[0]}, "6.0": {"median_s": e2e[1]}},
            "untuned": {"median_s": 10.0}, "pytorch_eager": {"median_s": eager} if eager else None}


def test_ratios_pair_runs_by_seed():
    runs = {
        # XGB reaches its final 2.0 at 300 s; TCL is at or below 2.0 from 60 s (seed 0) and 150 s (seed 1)
        "xgb": {"0": _run([[10, 5.0], [300, 2.0], [360, 2.0]], (3.0, 2.4)),
                "1": _run([[10, 6.0], [200, 2.5], [360, 2.5]], (3.0, 3.6))},
        "tcl": {"0": _run([[10, 3.0], [60, 1.9], [360, 1.5]], (2.0, 1.2), eager=1.2),
                "1": _run([[10, 4.0], [150, 2.5], [360, 2.2]], (2.0, 1.8), eager=0.9)},
    }
    s = bench.summarize(runs)
    assert s["time_ratio_to_xgb_final_by_seed"] == [pytest.approx(5.0), pytest.approx(200 / 150)]
    assert s["time_ratio_to_xgb_final"] == pytest.approx((5.0 * 200 / 150) ** 0.5)
    assert s["latency_ratio_equal_time_by_seed"] == [pytest.approx(2.0), pytest.approx(2.0)]
    assert s["vs_pytorch"] == pytest.approx((1.0 * 0.5) ** 0.5)
    assert s["end_to_end_s"]["tcl"]["6.0"] == pytest.approx((1.2 * 1.8) ** 0.5)


def test_a_tcl_run_that_never_reaches_xgb_makes_the_time_ratio_null():
    runs = {"xgb": {"0": _run([[10, 5.0], [300, 1.0]], (3.0, 2.0))},
            "tcl": {"0": _run([[10, 3.0], [300, 1.5]], (2.0, 1.9))}}
    s = bench.summarize(runs)
    assert s["time_ratio_to_xgb_final_by_seed"] == [None] and s["time_ratio_to_xgb_final"] is None


def test_records_by_counts_the_batches_measured_by_then():
    events = [{"seconds": 5.0, "size": 32}, {"seconds": 9.0, "size": 32}, {"seconds": 20.0, "size": 7}]
    assert bench.records_by(events, 4.0) == 0
    assert bench.records_by(events, 9.0) == 64
    assert bench.records_by(events, 60.0) == 71


def test_database_prefix_keeps_the_first_records_in_measuring_order():
    pytest.importorskip("tvm")
    from tcl.tvm.dataset import records_in_file_order

    db_dir = ROOT / "tests" / "fixtures" / "ms" / "matmul_128"
    all_records = records_in_file_order(db_dir)
    mem = bench.database_prefix(db_dir, 3)
    got = mem.get_all_tuning_records()
    assert len(got) == 3
    want = sorted(str(r.trace) for r in all_records[:3])
    assert sorted(str(r.trace) for r in got) == want


def test_search_setting_parses_one_cost_models_settings():
    import argparse

    assert bench.search_setting("xgb:population_size=256,genetic_num_iters=2") == \
        ("xgb", {"population_size": 256, "genetic_num_iters": 2})
    assert bench.search_setting("tcl:genetic_mutate_prob=0.5") == ("tcl", {"genetic_mutate_prob": 0.5})
    for bad in ("xgb", ":population_size=2", "xgb:population_size", "xgb:population_size=big"):
        with pytest.raises(argparse.ArgumentTypeError, match="MODEL:KEY=VALUE"):
            bench.search_setting(bad)
