"""bench/continual.py's summary over seed runs: means, standard errors, and each method against
joint within the same seed."""

import json

import pytest
from bench_module import load_bench

continual = load_bench("continual")


def _row(avg, forgetting=0.0):
    return {"avg_top1": avg, "forgetting": forgetting, "size_mb": 0.36}


def test_mean_over_seeds_pairs_each_method_with_joint_of_the_same_seed(tmp_path):
    runs = [{"a -> b": {"ckd": _row(0.70, 0.02), "joint": _row(0.74)}},
            {"a -> b": {"ckd": _row(0.80, 0.00), "joint": _row(0.76)}, "b -> a": {"ckd": _row(0.5)}}]
    paths = []
    for k, r in enumerate(runs):
        paths.append(tmp_path / f"s{k}.json")
        paths[-1].write_text(json.dumps(r))
    out = tmp_path / "seeds.json"
    summary = continual.main(["--mean-of", *map(str, paths), "--out", str(out)])
    ckd = summary["a -> b"]["ckd"]
    assert ckd["avg_top1"]["mean"] == pytest.approx(0.75) and ckd["avg_top1"]["n"] == 2
    assert ckd["avg_top1"]["stderr"] == pytest.approx(0.05)  # std 0.0707 over sqrt(2)
    assert ckd["forgetting"]["mean"] == pytest.approx(0.01)
    assert ckd["minus_joint"]["mean"] == pytest.approx(0.0)  # -0.04 and +0.04
    assert "minus_joint" not in summary["a -> b"]["joint"]
    assert summary["b -> a"]["ckd"]["avg_top1"]["stderr"] is None  # one seed: no spread
    assert "minus_joint" not in summary["b -> a"]["ckd"]
    stored = json.loads(out.read_text())
    assert stored["orders"] == summary
    # pooled over the orders: every paired difference once (here only a -> b has joint)
    assert stored["minus_joint_both_orders"]["ckd"]["n"] == 2


def test_mean_over_seeds_reads_each_platforms_final_top1_from_the_details(tmp_path):
    paths = []
    for k, (ckd_last, joint_last) in enumerate([([0.6, 0.8], [0.7, 0.9]), ([0.4, 0.6], [0.5, 0.5])]):
        path = tmp_path / f"s{k}.json"
        path.write_text(json.dumps({"a -> b": {"ckd": _row(0.7), "joint": _row(0.7)}}))
        nan = float("nan")
        matrix = {"ckd": [[0.6, nan], ckd_last], "joint": [[nan, nan], joint_last]}
        path.with_name(f"s{k}_details.json").write_text(json.dumps(
            {"orders": {"a -> b": {m: {"platforms": ["a", "b"], "matrix": v} for m, v in matrix.items()}}}))
        paths.append(path)
    summary = continual.main(["--mean-of", *map(str, paths), "--out", str(tmp_path / "seeds.json")])
    ckd, joint = summary["a -> b"]["ckd"]["final_top1"], summary["a -> b"]["joint"]["final_top1"]
    assert ckd["a"]["mean"] == pytest.approx(0.5) and ckd["b"]["mean"] == pytest.approx(0.7)
    assert joint["a"]["mean"] == pytest.approx(0.6) and joint["b"]["n"] == 2
