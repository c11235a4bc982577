"""bench/adapt.py: which dataset stands for a host, the measuring time of the picks, and the run-by-run
comparison it reports."""

import json

import pytest
from bench_module import load_bench

bench = load_bench("adapt")


def _platform(root, name, cores, bits, tasks):
    (root / name).mkdir()
    (root / name / "platform.json").write_text(json.dumps({"cores": cores, "vector_bits": bits}))
    for i in range(tasks):
        (root / name / f"task{i}").mkdir()
        (root / name / f"task{i}" / "task.json").write_text("{}")


def test_the_host_is_adapted_to_on_its_dataset_with_the_most_tasks(tmp_path):
    for name, cores, bits, tasks in (("a-1c", 1, 512, 3), ("b-2c-sse", 2, 128, 2), ("c-2c", 2, 512, 2)):
        _platform(tmp_path, name, cores, bits, tasks)
    assert bench.native_dataset(sorted(tmp_path.iterdir())).name == "a-1c"


def test_among_equal_task_counts_the_most_cores_then_the_widest_vectors(tmp_path):
    for name, cores, bits in (("a-1c", 1, 256), ("b-2c-sse", 2, 128), ("c-2c", 2, 512)):
        _platform(tmp_path, name, cores, bits, 2)
    assert bench.native_dataset(sorted(tmp_path.iterdir())).name == "c-2c"


def test_measuring_time_counts_each_run_at_least_min_repeat_ms():
    assert bench.seconds_measured([0.001, 0.5], repeat=3, min_repeat_ms=100) == pytest.approx(3 * 0.1 + 3 * 0.5)


def _run(method, rate, seed, top1, task_mean, seconds):
    return {"host": "h", "method": method, "rate": rate, "seed": seed, "top1": top1, "top5": 1.0,
            "task_mean": task_mean, "seconds_measured": seconds}


def test_summary_and_pairs_per_seed():
    runs = {}
    for seed, (rdu, rnd, full) in enumerate(((0.6, 0.5, 0.8), (0.7, 0.4, 0.7))):
        for r in (_run("rdu", 0.1, seed, rdu, rdu, 10.0), _run("random", 0.1, seed, rnd, rnd, 8.0),
                  _run("full", 1.0, seed, full, full, 100.0), _run("zero_shot", 0.0, seed, 0.3, 0.3, 0.0)):
            runs[bench.run_key(r["host"], r["method"], r["rate"], r["seed"])] = r
    summary = bench.summarise(runs)
    assert summary["h"]["rdu"]["0.1"]["top1"] == pytest.approx(0.65) and summary["h"]["rdu"]["0.1"]["seeds"] == [0, 1]
    assert summary["h"]["full"]["1.0"]["seconds_measured"] == 100.0
    pairs = bench.paired(runs)["h"]["0.1"]
    assert pairs["top1_minus_random"]["mean"] == pytest.approx(0.2) and pairs["top1_minus_random"]["pairs"] == 2
    assert pairs["top1_minus_random"]["stderr"] == pytest.approx(0.1)  # differences 0.1 and 0.3
    assert pairs["task_mean_ratio_to_full"]["mean"] == pytest.approx((0.6 / 0.8 + 1.0) / 2)
    assert pairs["seconds_ratio_to_full"]["mean"] == pytest.approx(0.1)
    assert pairs["top1_minus_zero_shot"]["mean"] == pytest.approx(0.35)


def test_a_variants_runs_pair_with_the_same_variant_and_with_plain_rdu():
    runs = {}
    for seed, (rdu, rdu_lr, rnd_lr) in enumerate(((0.6, 0.7, 0.5), (0.5, 0.8, 0.6))):
        for r in (_run("rdu", 0.1, seed, rdu, rdu, 10.0), _run("rdu+logratio1", 0.1, seed, rdu_lr, rdu_lr, 10.0),
                  _run("random+logratio1", 0.1, seed, rnd_lr, rnd_lr, 8.0)):
            runs[bench.run_key(r["host"], r["method"], r["rate"], r["seed"])] = r
    assert bench.summarise(runs)["h"]["rdu+logratio1"]["0.1"]["top1"] == pytest.approx(0.75)
    pairs = bench.paired(runs)["h"]
    assert set(pairs) == {"0.1", "0.1+logratio1"}
    assert "top1_minus_random" not in pairs["0.1"]  # plain rdu has no plain random to pair with
    assert pairs["0.1+logratio1"]["top1_minus_random"]["mean"] == pytest.approx(0.2)
    assert pairs["0.1+logratio1"]["top1_minus_rdu"]["mean"] == pytest.approx(0.2)  # 0.1 and 0.3
    assert bench.base_method("rdu+logratio1") == "rdu"


def test_keep_runs_are_a_variant_and_pair_with_the_one_zero_shot_run():
    args = bench.argparse.Namespace(log_ratio_weight=0.0, preserve="keep", check_fraction=0.0)
    assert bench.variant(args) == "+keep"
    log_ratio = bench.argparse.Namespace(log_ratio_weight=1.0, preserve="exact", check_fraction=0.0)
    assert bench.variant(log_ratio) == "+logratio1"
    runs = {}
    for seed, (rdu_keep, zs) in enumerate(((0.7, 0.6), (0.8, 0.5))):
        for r in (_run("rdu+keep", 0.1, seed, rdu_keep, rdu_keep, 10.0), _run("zero_shot", 0.0, seed, zs, zs, 0.0)):
            runs[bench.run_key(r["host"], r["method"], r["rate"], r["seed"])] = r
    pairs = bench.paired(runs)["h"]["0.1+keep"]
    assert pairs["top1_minus_zero_shot"]["mean"] == pytest.approx(0.2)  # zero-shot distils nothing: no variant
    assert pairs["top1_minus_zero_shot"]["pairs"] == 2


def test_the_summary_keeps_rows_whose_runs_were_made_on_another_machine():
    runs = {bench.run_key("h", "rdu", 0.1, 0): _run("rdu", 0.1, 0, 0.6, 0.6, 10.0)}
    out = {"hosts": bench.summarise(runs), "paired": bench.paired(runs)}
    previous = {"hosts": {"h": {"rdu": {"0.1": "stale"}, "random": {"0.2": "kept"}}, "other": {"rdu": {"0.1": {}}},
                          "gone": {"rdu": {"0.1": {}}}},
                "paired": {"h": {"0.1": "stale", "0.2": "kept"}, "other": {"0.1": {}}, "gone": {"0.1": {}}}}
    bench.kept_elsewhere(out, previous, {"h", "other"})
    assert set(out["hosts"]) == {"h", "other"} and set(out["paired"]) == {"h", "other"}
    assert out["hosts"]["h"]["rdu"] == bench.summarise(runs)["h"]["rdu"]  # this machine's runs win
    assert out["paired"]["h"]["0.1"] == bench.paired(runs)["h"]["0.1"]
    assert out["hosts"]["h"]["random"] == {"0.2": "kept"} and out["paired"]["h"]["0.2"] == "kept"


def test_a_kb_source_whose_descriptor_the_kb_already_spans_is_kept_not_refused(tmp_path):
    """Target settings of one host can make a source's descriptor a combination of the earlier ones';
    the KB is still made (the earlier platforms kept as tcl.continual.adapt.preservation allows)."""
    import shutil

    from test_features import MS_FIXTURE

    from tcl.continual.config import CKDConfig
    from tcl.continual.kb import load_kb

    sources = []
    for name in ("a", "b"):  # the same hardware twice
        for task in ("matmul_128", "conv2d_1x16x14x14_32_3x3"):
            shutil.copytree(MS_FIXTURE / task, tmp_path / name / task)
        (tmp_path / name / "platform.json").write_text(json.dumps({"cores": 2, "vector_bits": 512}))
        sources.append(tmp_path / name)
    cfg = CKDConfig(progress_epochs=1, compress_epochs=1, min_steps=0, threads=1)
    kb = bench.knowledge_base(sources, tmp_path / "work", cfg)
    assert load_kb(kb)[1].platforms == 2

    # the KB's scores (pooled, task mean, each network's Top-1) on the two tasks, which the fixture
    # does not split
    from tcl.continual.adapt import as_knowledge_base

    kb_model, _, ck = load_kb(kb)
    data, tasks, _ = bench.dataset(sources[1])
    s = bench.scores(as_knowledge_base(kb_model, ck, cfg)[0], data, tasks, min_programs=1)
    assert 0 < s["top1"] <= 1 and 0 < s["task_mean"] <= 1 and s["network_top1"]
    assert all(0 < v <= 1 for v in s["network_top1"].values())


def test_zero_shot_and_scratch_are_stored_without_the_variants_that_do_not_change_them():
    args = bench.argparse.Namespace(log_ratio_weight=1.0, preserve="keep", check_fraction=0.2)
    suffix = bench.variant(args)
    assert suffix == "+logratio1+keep+check0.2"
    assert bench.stored_method("rdu", suffix) == "rdu+logratio1+keep+check0.2"
    assert bench.stored_method("full", suffix) == "full+logratio1+keep+check0.2"
    assert bench.stored_method("zero_shot", suffix) == "zero_shot"
    assert bench.stored_method("scratch", suffix) == "scratch+logratio1"  # only the log-ratio term trains it
    assert bench.stored_method("scratch", "+keep") == "scratch"
