"""bench/network_tuning.py's bookkeeping: the three ratios from runs, and the database prefix that a
smaller budget is compiled from."""

import json
from pathlib import Path

import pytest
from bench_module import load_bench

ROOT = Path(__file__).resolve().parent.parent
bench = load_bench("network_tuning")


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


def test_ratios_at_the_largest_budget_come_from_the_side_by_side_timing_where_given():
    runs = {"xgb": {"0": _run([[10, 5.0], [300, 2.0]], (3.0, 2.4))},
            "tcl": {"0": _run([[10, 3.0], [60, 1.9]], (2.0, 1.2), eager=1.2)}}
    final = {"xgb/0": {"median_s": 2.0}, "tcl/0": {"median_s": 1.6}, "reference": {"median_s": 0.8}}
    s = bench.summarize(runs, final)
    assert s["latency_ratio_equal_time_by_seed"] == [pytest.approx(2.0 / 1.6)]
    assert s["vs_pytorch"] == pytest.approx(0.8 / 1.6)
    assert s["end_to_end_s"]["tcl"]["6.0"] == pytest.approx(1.2)  # the runs' own timing at each budget stays


def test_runs_on_warm_caches_are_their_own_kind_with_their_own_ratios():
    assert bench.cost_model_of("tcl+warm") == ("tcl", False) and bench.cost_model_of("xgb") == ("xgb", True)
    assert bench.stored_settings({"settings": {"minutes": 1}}) == {"minutes": 1, "cache_flush": False}
    assert bench.stored_settings({"settings": {"cache_flush": True}}) == {"cache_flush": True}
    runs = {"xgb": {"0": _run([[10, 5.0], [300, 2.0]], (3.0, 2.4))},
            "tcl": {"0": _run([[10, 3.0], [60, 1.9]], (2.0, 1.2), eager=1.2)},
            "xgb+warm": {"0": _run([[10, 4.0], [300, 3.0]], (3.0, 2.4))},
            "tcl+warm": {"0": _run([[10, 3.5], [100, 2.9]], (2.0, 1.2), eager=1.2)}}
    side = {"xgb/0": {"median_s": 2.0}, "tcl/0": {"median_s": 1.6}, "xgb+warm/0": {"median_s": 1.8},
            "tcl+warm/0": {"median_s": 1.2}, "reference": {"median_s": 0.6}}
    warm = bench.summarize_warm(runs, side)
    assert warm["time_ratio_to_xgb_final_by_seed"] == [pytest.approx(3.0)]
    assert warm["latency_ratio_equal_time_by_seed"] == [pytest.approx(1.5)]
    assert warm["vs_pytorch"] == pytest.approx(0.5)
    assert bench.summarize(runs, side)["latency_ratio_equal_time_by_seed"] == [pytest.approx(2.0 / 1.6)]
    assert bench.summarize_warm({k: runs[k] for k in ("tcl", "xgb", "tcl+warm")}, side) is None
    assert bench.breakdown_kinds(runs) == list(runs)


def test_a_summary_keeps_the_networks_of_this_host_that_a_run_does_not_tune():
    previous = {"host": "h", "settings": {"minutes": 24}, "networks": {"a": {"runs": 1}, "b": {"runs": 2}},
                "unused": 0}
    assert bench.kept_networks(previous, "h", ["b"]) == {"a": {"settings": {"minutes": 24}, "runs": 1}}
    kept = {"settings": {"minutes": 6}, "runs": 1}  # already carries its own settings
    assert bench.kept_networks({**previous, "networks": {"a": kept}}, "h", []) == {"a": kept}
    assert bench.kept_networks(previous, "other host", ["b"]) == {}
    assert bench.kept_networks({}, "h", ["b"]) == {}


def test_side_by_side_times_every_library_and_the_reference_in_turn(tmp_path):
    pytest.importorskip("tvm")
    torch = pytest.importorskip("torch")
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.network_import import from_torch
    from tcl.tvm.network_tuning import export
    from tcl.tvm.targets import parse_target

    torch.manual_seed(0)
    net = from_torch(torch.nn.Sequential(torch.nn.Linear(8, 4)).eval(), (torch.randn(1, 8),), "tiny")
    library = export(net, ms.database.MemoryDatabase(), parse_target("llvm -num-cores=1"), tmp_path / "net.so")
    timed = bench.side_by_side({"tcl/0": library, "xgb/0": library}, net, threads=1, rounds=3)
    assert set(timed) == {"tcl/0", "xgb/0", "reference"}
    assert all(t["repeats"] == 3 and 0 < t["min_s"] <= t["median_s"] <= t["max_s"] for t in timed.values())


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


def _tasks(best):
    return {"tasks": [{"name": n, "weight": w, "best_s": s} for n, (w, s) in best.items()]}


def test_breakdown_sets_each_conv_and_matmul_beside_its_pytorch_op():
    tasks = {"fused_conv2d_add": {"operands": [[1, 3, 8, 8], [4, 3, 3, 3]], "flops": 2e6},
             "fused_matmul_add": {"operands": [[1, 16], [16, 10]], "flops": 3e2},  # weights transposed by TVM
             "fused_relu": {"operands": [[1, 4, 6, 6]], "flops": 1e2}}
    ops = {("aten::conv2d", ((1, 3, 8, 8), (4, 3, 3, 3))): (1e-3, 2.0),
           ("aten::linear", ((1, 16), (10, 16))): (2e-4, 1.0),
           ("aten::relu", ((1, 4, 6, 6),)): (5e-5, 2.0),
           ("aten::add", ((1, 4, 6, 6), (1, 4, 6, 6))): (3e-5, 1.0)}
    runs = {"tcl": {"0": _tasks({"fused_conv2d_add": (2, 2e-3), "fused_matmul_add": (1, 1e-4), "fused_relu": (2, 1e-5)})},
            "xgb": {"0": _tasks({"fused_conv2d_add": (2, 3e-3), "fused_matmul_add": (1, None), "fused_relu": (2, 2e-5)})}}
    in_network = {"tcl": {"fused_conv2d_add": 5e-3, "fused_matmul_add": 1e-4, "fused_relu": 3e-5}}  # per inference
    b = bench.breakdown(tasks, runs, ops, in_network)
    assert [r["task"] for r in b["tasks"]] == ["fused_conv2d_add", "fused_matmul_add"]  # heaviest in PyTorch first
    # inside the network, per call: the conv runs twice per inference
    assert [r["tcl_in_network_s"] for r in b["tasks"]] == pytest.approx([2.5e-3, 1e-4])
    assert "xgb_in_network_s" not in b["tasks"][0] and b["other_in_network_s"] == {"tcl": pytest.approx(3e-5)}
    conv, matmul = b["tasks"]
    assert (conv["pytorch_op"], conv["pytorch_s"], conv["tcl_s"], conv["xgb_s"]) == ("aten::conv2d", 1e-3, 2e-3, 3e-3)
    assert conv["weight"] == 2 and conv["gflop"] == pytest.approx(2e-3)
    assert (matmul["pytorch_op"], matmul["tcl_s"], matmul["xgb_s"]) == ("aten::linear", 1e-4, None)
    # the unmatched task (weight 2) and the unmatched PyTorch ops (relu twice, add once per inference)
    assert b["other_s"]["tcl"] == pytest.approx(2e-5) and b["other_s"]["xgb"] == pytest.approx(4e-5)
    assert b["other_s"]["pytorch"] == pytest.approx(2 * 5e-5 + 3e-5)
    assert b["pytorch_profiled_s"] == pytest.approx(2 * 1e-3 + 2e-4 + 2 * 5e-5 + 3e-5)


def test_matching_op_needs_the_data_and_weight_shapes():
    ops = {("aten::conv2d", ((1, 3, 8, 8), (4, 3, 3, 3))): (1e-3, 1.0), ("aten::add", ((1, 3, 8, 8), (4, 3, 3, 3))): (1, 1)}
    assert bench.matching_op([[1, 3, 8, 8], [4, 3, 3, 3]], ops) == ("aten::conv2d", ((1, 3, 8, 8), (4, 3, 3, 3)))
    assert bench.matching_op([[1, 3, 8, 8], [3, 4, 3, 3]], ops) is None  # a 4-D weight is never transposed
    # tuned in NHWC: NHWC data and OHWI weights are PyTorch's NCHW and OIHW
    assert bench.matching_op([[1, 8, 8, 3], [4, 3, 3, 3]], ops) == ("aten::conv2d", ((1, 3, 8, 8), (4, 3, 3, 3)))
    assert bench.matching_op([[1, 8, 8, 3], [4, 3, 3, 8]], ops) is None  # the data NHWC, the weights not
    assert bench.matching_op([[1, 3, 8, 8]], ops) is None


def test_a_networks_tasks_meet_their_pytorch_ops():
    """The shapes TVM's tasks take are the ones torch.profiler records for the same layers."""
    pytest.importorskip("tvm")
    torch = pytest.importorskip("torch")
    from tcl.tvm.network_import import from_torch
    from tcl.tvm.targets import parse_target

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                 torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 10))
    x = (torch.randn(1, 3, 8, 8),)
    tasks = bench.task_operands(from_torch(module, x, "tiny"), parse_target("llvm -num-cores=1"))
    ops = bench.pytorch_op_seconds(module, x, threads=1, iterations=3)
    heavy = [name for name in tasks if any(k in name for k in bench.MATMUL_TASK)]
    assert len(heavy) == 2
    assert {bench.matching_op(tasks[n]["operands"], ops)[0] for n in heavy} == {"aten::conv2d", "aten::linear"}
    assert all(tasks[n]["flops"] > 0 for n in heavy)
    assert all(n == 1.0 and s > 0 for s, n in ops.values())


def test_other_tasks_sum_is_none_while_a_task_has_no_program():
    tasks = {"fused_relu": {"operands": [[1, 4]], "flops": 4.0}}
    runs = {"tcl": {"0": _tasks({"fused_relu": (1, None)})}}
    assert bench.breakdown(tasks, runs, {})["other_s"] == {"tcl": None, "pytorch": 0.0}


def test_a_run_not_reused_starts_from_an_empty_directory(tmp_path, monkeypatch):
    """An interrupted run leaves a database; tuning into it would resume it, and the curve would
    count only the second sitting's time."""
    pytest.importorskip("tvm")
    import argparse

    import tcl.tvm.network_tuning as nt
    from tcl.tvm.network_import import from_builtin

    out = tmp_path / "resnet18" / "mlp" / "seed0"
    (out / "db").mkdir(parents=True)
    (out / "db" / "database_tuning_record.json").write_text("stale\n")
    seen = {}

    def fake_tune(network, out_dir, **kw):
        seen["leftover"] = sorted(p.name for p in Path(out_dir).rglob("*"))
        raise RuntimeError("stop here")

    monkeypatch.setattr(nt, "tune_network", fake_tune)
    args = argparse.Namespace(minutes=1.0, budgets=[1.0], target=None, trials_per_iter=16, search={})
    with pytest.raises(RuntimeError, match="stop here"):
        bench.run_one(from_builtin("resnet18"), "mlp", 0, args, tmp_path)
    assert seen["leftover"] == []


def test_a_run_is_reused_only_for_the_same_imported_network(tmp_path, monkeypatch):
    """A change to how networks are imported (e.g. batch norm folded) changes the tasks tuned: a run
    stored before it is made again."""
    pytest.importorskip("tvm")
    import argparse

    import tcl.tvm.network_tuning as nt
    from tcl.tvm.network_import import from_builtin

    def fake_tune(network, out_dir, **kw):
        raise RuntimeError("tuned again")

    monkeypatch.setattr(nt, "tune_network", fake_tune)
    args = argparse.Namespace(minutes=1.0, budgets=[1.0], target=None, trials_per_iter=16, search={})
    network = from_builtin("resnet18")
    settings = bench.run_settings(network, "xgb", args)
    done = tmp_path / "resnet18" / "xgb" / "seed0" / "bench_run.json"
    done.parent.mkdir(parents=True)
    done.write_text(json.dumps({"settings": settings, "trials": 7}))
    assert bench.run_one(network, "xgb", 0, args, tmp_path)["trials"] == 7
    done.write_text(json.dumps({"settings": {**settings, "network": "another module"}, "trials": 7}))
    with pytest.raises(RuntimeError, match="tuned again"):
        bench.run_one(network, "xgb", 0, args, tmp_path)
