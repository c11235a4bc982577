"""bench/search_size.py's bookkeeping: variant names, the estimate read off a run's curve, and a stored
run reused only when its settings match."""

import json

import pytest
from bench_module import load_bench

bench = load_bench("search_size")


def test_a_variant_names_the_cost_model_search_and_batch():
    v = bench.parse_variant("tcl:128x2")
    assert v == {"cost_model": "tcl", "population_size": 128, "genetic_num_iters": 2, "trials_per_iter": 16,
                 "conv_layout": bench.CONV_LAYOUT}
    assert bench.variant_name(bench.parse_variant("xgb:256x4/32@NCHW")) == "xgb:256x4/32@NCHW"
    with pytest.raises(Exception, match="MODEL:POPxGENS"):
        bench.parse_variant("tcl-128")
    with pytest.raises(Exception, match="layout 'NCHWc'"):
        bench.parse_variant("tcl:128x2@NCHWc")


def test_the_estimate_at_a_time_is_the_last_one_before_it():
    curve = [[100.0, 0.05], [150.0, 0.045], [400.0, 0.04]]
    assert bench.estimate_at(curve, 60) is None  # not every task had a program yet
    assert bench.estimate_at(curve, 180) == 45.0 and bench.estimate_at(curve, 400) == 40.0


def test_a_stored_run_is_reused_only_with_the_same_settings(tmp_path, monkeypatch):
    v = bench.parse_variant("xgb:256x2@NCHW")
    monkeypatch.setattr(bench, "run_settings", lambda v, seed, *rest, **kw: {**v, "seed": seed})
    out = tmp_path / "xgb-256x2-b16-NCHW-s0"
    out.mkdir()
    report = {"seconds": 360.0, "trials": 400, "time_split": {}, "builds_timed_out": 0,
              "events": [{"seconds": 200.0, "estimate_s": 0.05}], "curve": [[200.0, 0.05]]}
    (out / "report.json").write_text(json.dumps(report))
    # stored before the layout was a setting: an NCHW run
    (out / "bench_settings.json").write_text(json.dumps({k: x for k, x in {**v, "seed": 0}.items() if k != "conv_layout"}))
    args = type("A", (), {"work": str(tmp_path), "minutes": 6.0, "network": "resnet18"})
    run = bench.run_one(v, 0, args)
    assert run["trials"] == 400 and run["every_task_measured_s"] == 200.0
    assert run["estimated_ms"] == {"1": None, "2": None, "3": None, "4": 50.0, "5": 50.0, "6": 50.0}


def test_a_run_of_another_model_is_kept_apart(tmp_path):
    v = bench.parse_variant("tcl:128x2")
    other = tmp_path / "other.onnx"
    other.write_bytes(b"another model")
    shipped = bench.run_dir(v, 0, tmp_path)
    assert shipped.name == "tcl-128x2-b16-NHWC-s0"
    assert bench.run_dir(v, 0, tmp_path, str(other)).name.startswith("tcl-128x2-b16-NHWC-s0-m")
    xgb = bench.parse_variant("xgb:256x2")
    assert bench.run_dir(xgb, 0, tmp_path, str(other)) == bench.run_dir(xgb, 0, tmp_path)  # no TCL model in it


def test_a_run_with_another_exploration_weight_is_kept_apart(tmp_path):
    tcl, xgb = bench.parse_variant("tcl:128x2"), bench.parse_variant("xgb:256x2")
    assert bench.run_dir(tcl, 1, tmp_path, explore=0.0).name == "tcl-128x2-b16-NHWC-s1-e0"
    assert bench.run_dir(xgb, 1, tmp_path, explore=0.0) == bench.run_dir(xgb, 1, tmp_path)
    settings = bench.run_settings(tcl, 1, 6.0, "resnet18", explore=0.0)
    assert settings["explore"] == 0.0 and "explore" not in bench.run_settings(tcl, 1, 6.0, "resnet18")
    assert "explore" not in bench.run_settings(xgb, 1, 6.0, "resnet18", explore=0.0)
