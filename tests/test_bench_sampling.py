"""bench/sampling.py's bookkeeping: stored runs are reused only with the same settings, and the
100%-data runs (the same for every method) are summarised under every method."""

import json
from argparse import Namespace

import numpy as np
import pytest
from bench_module import load_bench

from tcl.sampling.methods import method_names

sampling = load_bench("sampling")

SETTINGS = {"rounds": 3, "epochs": 20, "min_steps": 200, "embedding": "model", "test_fraction": 0.2,
            "average_last": 0.0, "u_speed": 0.0, "rdu_weights": [1.0, 1.0, 1.0],
            "u_kind": "spread", "r_kind": "density", "warm_start": False, "score_axis": 0.0}


def _run(platform, method, rate, seed, top1):
    return {"platform": platform, "method": method, "rate": rate, "seed": seed, "top1": top1,
            "top5": top1 + 0.1, "task_top1": top1 - 0.1, "task_top5": top1, "seconds": 1.0}


def test_summary_spreads_full_data_over_methods_and_averages_seeds():
    runs = {("p", "rdu", 0.1, 0): _run("p", "rdu", 0.1, 0, 0.5), ("p", "rdu", 0.1, 1): _run("p", "rdu", 0.1, 1, 0.7),
            ("p", "all", 1.0, 0): _run("p", "all", 1.0, 0, 0.8)}
    s = sampling.summarise(runs, ["rdu", "random"])
    assert s["p"]["rdu"]["0.1"]["top1"] == pytest.approx(0.6)
    assert s["p"]["rdu"]["0.1"]["top1_std"] == pytest.approx(0.1)
    assert [r["seed"] for r in s["p"]["rdu"]["0.1"]["runs"]] == [0, 1]
    assert s["p"]["random"]["1.0"] is s["p"]["rdu"]["1.0"]
    assert "0.1" not in s["p"]["random"]


def test_stored_runs_round_trip_and_need_the_same_settings(tmp_path):
    runs = {("p", "rdu", 0.1, 0): _run("p", "rdu", 0.1, 0, 0.5), ("p", "all", 1.0, 0): _run("p", "all", 1.0, 0, 0.8)}
    path = tmp_path / "sampling_details.json"
    path.write_text(json.dumps({"accuracy": sampling.summarise(runs, ["rdu", "random"]), "settings": SETTINGS}))
    found = sampling.stored_runs(path, Namespace(**SETTINGS))
    assert set(found) == set(runs)
    assert found[("p", "all", 1.0, 0)]["top1"] == 0.8
    assert sampling.stored_runs(path, Namespace(**{**SETTINGS, "epochs": 10})) == {}
    assert sampling.stored_runs(tmp_path / "missing.json", Namespace(**SETTINGS)) == {}
    # runs stored before average_last existed ran without averaging
    older = {k: v for k, v in SETTINGS.items() if k != "average_last"}
    path.write_text(json.dumps({"accuracy": sampling.summarise(runs, ["rdu", "random"]), "settings": older}))
    assert set(sampling.stored_runs(path, Namespace(**SETTINGS))) == set(runs)
    assert sampling.stored_runs(path, Namespace(**{**SETTINGS, "average_last": 0.5})) == {}
    # warm-started runs (from another platform's model) are not runs from scratch, and the other way round
    assert sampling.stored_runs(path, Namespace(**{**SETTINGS, "warm_start": True})) == {}
    # another rdu setting drops the stored rdu runs only (100% of the data does not use it)
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "u_speed": 1.0}))) == {("p", "all", 1.0, 0)}
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "rdu_weights": [0.0, 1.0, 1.0]}))) == {
        ("p", "all", 1.0, 0)}
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "score_axis": 4.0}))) == {("p", "all", 1.0, 0)}
    # R's kind and the R, D weights are shared by rdu and rd (rdu without U), and by the methods whose
    # round-0 picks (no model yet) are rd's: biased_diversity and uncertainty
    reading_r = {("p", m, 0.1, 0) for m in ("rd", "biased_diversity", "uncertainty")}
    for i, m in enumerate(("rd", "random", "diversity", "biased_diversity", "uncertainty")):
        runs[("p", m, 0.1, 0)] = _run("p", m, 0.1, 0, 0.1 + 0.1 * i)
    path.write_text(json.dumps({"accuracy": sampling.summarise(runs, list(method_names())), "settings": older}))
    kept = {("p", "all", 1.0, 0), ("p", "random", 0.1, 0), ("p", "diversity", 0.1, 0)}
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "r_kind": "coverage"}))) == kept
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "rdu_weights": [0.5, 1.0, 1.0]}))) == kept
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "rdu_weights": [1.0, 1.0, 0.5]}))) == {
        *kept, *reading_r}
    # sampler-only settings keep the 100% runs; the embedding keeps the runs whose picks never read it
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "min_steps": 100}))) == {("p", "all", 1.0, 0)}
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "embedding": "features"}))) == {
        ("p", "all", 1.0, 0), ("p", "random", 0.1, 0), ("p", "uncertainty", 0.1, 0)}
    # no embedding given: each method's default (features for rdu, the model's for the others) is compared
    assert set(sampling.stored_runs(path, Namespace(**{**SETTINGS, "embedding": None}))) == {*kept, *reading_r}


@pytest.mark.parametrize("kind", sampling.ORACLES)
def test_oracle_picks_follow_the_true_latencies(kind):
    rng = np.random.default_rng(0)
    group = np.repeat(np.arange(3), [50, 20, 1]).astype(np.int32)
    cost = rng.random(len(group)) + 0.01
    budget = np.array([5, 2, 1])
    picks = sampling.oracle_picks(cost, group, budget, kind, rng)
    assert np.bincount(group[picks], minlength=3).tolist() == budget.tolist() and len(set(picks)) == len(picks)
    for g in range(3):
        idx = np.nonzero(group == g)[0]
        order = idx[np.argsort(cost[idx])]
        mine = picks[group[picks] == g]
        assert order[0] in mine  # every kind measures the task's fastest program
        rank = np.sort(np.searchsorted(cost[order], cost[mine]))
        if kind == "oracle_top":
            assert rank.tolist() == list(range(budget[g]))
        elif kind == "oracle_strata" and g == 0:
            assert rank.tolist() == [0, 12, 24, 37, 49]  # evenly spaced, the slowest included


def test_runs_stored_before_the_task_mean_count_for_the_pooled_score_only():
    old = _run("p", "rdu", 0.1, 0, 0.5)
    del old["task_top1"], old["task_top5"]
    runs = {("p", "rdu", 0.1, 0): old, ("p", "rdu", 0.1, 1): _run("p", "rdu", 0.1, 1, 0.7)}
    assert not sampling.complete(old) and sampling.complete(runs[("p", "rdu", 0.1, 1)])
    s = sampling.summarise(runs, ["rdu"])["p"]["rdu"]["0.1"]
    assert s["top1"] == pytest.approx(0.6) and s["task_top1"] == pytest.approx(0.6)  # seed 1 alone: 0.7 - 0.1
    only_old = sampling.summarise({("p", "rdu", 0.1, 0): old}, ["rdu"])["p"]["rdu"]["0.1"]
    assert only_old["task_top1"] is None and only_old["top1"] == 0.5


def test_task_means_weigh_every_ranked_task_once():
    per_task = {"a": {"top1": 0.5, "top5": 1.0, "programs": 200}, "b": {"top1": 1.0, "top5": 1.0, "programs": 3},
                "single": {"top1": 1.0, "top5": 1.0, "programs": 1}}
    assert sampling.task_means(per_task) == {"task_top1": pytest.approx(0.75), "task_top5": pytest.approx(1.0)}


def test_pooled_shares_weigh_best_latency_by_occurrences():
    from types import SimpleNamespace

    import numpy as np

    def task(name, networks):
        return SimpleNamespace(workload=name, target="cpu", networks=networks)

    tasks = [task("a", {"bert": 12}), task("b", {"resnet": 2, "other": 1}), task("c", None), task("d", {"bert": 1})]
    programs = {0: np.array([0, 1]), 1: np.array([2, 3]), 2: np.array([4]), 3: np.array([], np.int64)}
    data = SimpleNamespace(tasks=tasks, cost=np.array([1.0, 2.0, 4.0, 5.0, 3.0]), programs_of=lambda ids: programs[ids[0]])
    # numerators: a/bert 12 * 1, b/resnet 2 * 4, b/other 1 * 4, c/all 1 * 3 -> total 27; d (every
    # program failed) is not in the pooled score
    shares = sampling.pooled_shares(data, [0, 1, 2, 3], top=3)
    assert [(r["task"], r["network"], r["programs"]) for r in shares] == [("a|cpu", "bert", 2), ("b|cpu", "resnet", 2),
                                                                        ("b|cpu", "other", 2)]
    assert [r["share"] for r in shares] == pytest.approx([12 / 27, 8 / 27, 4 / 27])


def test_paired_compares_rdu_run_by_run_on_the_same_platform_and_seed():
    runs = {}
    for pl, seed, rdu, rnd, full in [("p", 0, 0.6, 0.5, 0.6), ("p", 1, 0.3, 0.4, 0.5), ("q", 0, 0.9, 0.7, 1.0)]:
        runs[(pl, "rdu", 0.1, seed)] = _run(pl, "rdu", 0.1, seed, rdu)
        runs[(pl, "random", 0.1, seed)] = _run(pl, "random", 0.1, seed, rnd)
        runs[(pl, "all", 1.0, seed)] = _run(pl, "all", 1.0, seed, full)
    runs[("q", "random", 0.1, 5)] = _run("q", "random", 0.1, 5, 0.0)  # no rdu run of this seed: not a pair
    p = sampling.paired(runs)
    assert sampling.paired(runs, metric="task_top1")["0.1"]["random"]["mean_diff"] == pytest.approx(
        p["0.1"]["random"]["mean_diff"])  # the fixture's task means are its pooled scores - 0.1
    assert list(p) == ["0.1"]
    assert p["0.1"]["random"]["pairs"] == 3 and p["0.1"]["random"]["ahead"] == 2
    assert p["0.1"]["random"]["mean_diff"] == pytest.approx((0.1 - 0.1 + 0.2) / 3)
    assert p["0.1"]["random"]["diff_stderr"] == pytest.approx(np.std([0.1, -0.1, 0.2], ddof=1) / np.sqrt(3))
    assert p["0.1"]["all"]["pairs"] == 3 and p["0.1"]["all"]["at_least_97pct"] == 1
    assert p["0.1"]["all"]["mean_ratio"] == pytest.approx((1.0 + 0.6 + 0.9) / 3)
    # another invocation's 100% runs (e.g. from scratch beside warm-started ones), by (platform, seed)
    ref = sampling.paired(runs, reference={("p", 0): _run("p", "all", 1.0, 0, 0.5)})
    assert ref["0.1"]["all_reference"] == {"pairs": 1, "mean_ratio": pytest.approx(0.6 / 0.5), "at_least_97pct": 1}
    assert "all_reference" not in p["0.1"]


def test_ratios_to_full_take_every_method_over_the_same_seeds_full_data_run():
    runs = {("p", "all", 1.0, 0): _run("p", "all", 1.0, 0, 0.8), ("p", "all", 1.0, 1): _run("p", "all", 1.0, 1, 0.5),
            ("p", "rdu", 0.1, 0): _run("p", "rdu", 0.1, 0, 0.8), ("p", "random", 0.1, 0): _run("p", "random", 0.1, 0, 0.4),
            ("p", "random", 0.1, 1): _run("p", "random", 0.1, 1, 0.5)}
    r = sampling.ratios_to_full(runs, "top1")
    assert set(r) == {"0.1"} and set(r["0.1"]) == {"rdu", "random"}
    assert r["0.1"]["rdu"] == {"pairs": 1, "mean_ratio": pytest.approx(1.0), "at_least_97pct": 1}
    assert r["0.1"]["random"]["pairs"] == 2 and r["0.1"]["random"]["mean_ratio"] == pytest.approx(0.75)
    assert r["0.1"]["random"]["at_least_97pct"] == 1


def test_reference_runs_are_the_runs_of_another_invocation(tmp_path):
    runs = {("p", "rdu", 0.1, 0): _run("p", "rdu", 0.1, 0, 0.5), ("p", "all", 1.0, 0): _run("p", "all", 1.0, 0, 0.8),
            ("q", "all", 1.0, 2): _run("q", "all", 1.0, 2, 0.7)}
    path = tmp_path / "scratch_details.json"
    path.write_text(json.dumps({"accuracy": sampling.summarise(runs, ["rdu", "random"])}))
    full, sampled = sampling.reference_runs(path)
    assert set(full) == {("p", 0), ("q", 2)} and full[("p", 0)]["top1"] == 0.8
    assert set(sampled) == {("p", "rdu (reference)", 0.1, 0)} and sampled[("p", "rdu (reference)", 0.1, 0)]["top1"] == 0.5
    # this invocation's rdu against the reference's rdu, run by run
    mine = {("p", "rdu", 0.1, 0): _run("p", "rdu", 0.1, 0, 0.7)}
    pair = sampling.paired({**mine, **sampled})["0.1"]["rdu (reference)"]
    assert pair["pairs"] == 1 and pair["mean_diff"] == pytest.approx(0.2)
    with pytest.raises(SystemExit, match="no such file"):
        sampling.reference_runs(tmp_path / "missing.json")


def test_pick_coverage_measures_gaps_along_each_tasks_latency_order():
    # task 0: latencies 1..5 (in scrambled order), picks at ranks 0 and 2 -> gaps 0, 0.5, 0.5
    # task 1: latencies 10, 20, 40, only the slowest picked -> gap 1, best found 10 / 40
    # task 2: one program, left out
    cost = np.array([3.0, 1.0, 5.0, 2.0, 4.0, 40.0, 10.0, 20.0, 7.0])
    group = np.array([0, 0, 0, 0, 0, 1, 1, 1, 2], np.int32)
    picked = np.array([True, True, False, False, False, True, False, False, True])
    c = sampling.pick_coverage(cost, group, picked)
    assert c["largest_rank_gap"] == pytest.approx((0.5 + 1.0) / 2)
    assert c["best_found"] == pytest.approx((1.0 + 10 / 40) / 2)
    # every program of a task picked: no gap wider than one rank step
    assert sampling.pick_coverage(cost[:5], group[:5], np.ones(5, bool))["largest_rank_gap"] == pytest.approx(0.25)


def test_summary_keeps_pick_coverage_where_runs_recorded_it():
    runs = {("p", "rdu", 0.1, 0): {**_run("p", "rdu", 0.1, 0, 0.5), "largest_rank_gap": 0.2, "best_found": 0.9},
            ("p", "rdu", 0.1, 1): _run("p", "rdu", 0.1, 1, 0.7)}
    s = sampling.summarise(runs, ["rdu"])["p"]["rdu"]["0.1"]
    assert s["largest_rank_gap"] == pytest.approx(0.2) and s["best_found"] == pytest.approx(0.9)
    assert s["runs"][0]["largest_rank_gap"] == 0.2 and "largest_rank_gap" not in s["runs"][1]


@pytest.mark.parametrize("method", ["rdu", "oracle_strata"])
def test_a_sampled_run_records_where_its_picks_lie(method):
    pytest.importorskip("torch")
    from test_features import MS_FIXTURE

    args = Namespace(**{**SETTINGS, "rounds": 2, "epochs": 1, "min_steps": 2, "embedding": None,
                        "test_fraction": 0.5, "threads": 1})
    run = sampling.run_one(str(MS_FIXTURE), method, 0.25, 0, args)
    assert 0 < run["largest_rank_gap"] <= 1 and 0 < run["best_found"] <= 1
    if method == "oracle_strata":  # it picks each task's fastest
        assert run["best_found"] == pytest.approx(1.0)
    assert "largest_rank_gap" not in sampling.run_one(str(MS_FIXTURE), "all", 1.0, 0, args)


def test_runs_to_do_skip_stored_runs_unless_rerun():
    runs = {("p", "rdu", 0.1, 0): _run("p", "rdu", 0.1, 0, 0.5), ("p", "all", 1.0, 0): _run("p", "all", 1.0, 0, 0.8),
            ("p", "random", 0.1, 0): _run("p", "random", 0.1, 0, 0.3)}
    args = Namespace(seeds=[0, 1], rates=[0.2, 0.1, 1.0], methods=["rdu", "random"], rerun=[])
    todo = sampling.runs_to_do(["p"], args, runs)
    # 10% and 100% of every seed first (the longest runs first), then the other rates seed by seed
    assert todo == [("p", "all", 1.0, 1), ("p", "rdu", 0.1, 1), ("p", "random", 0.1, 1),
                    ("p", "rdu", 0.2, 0), ("p", "random", 0.2, 0), ("p", "rdu", 0.2, 1), ("p", "random", 0.2, 1)]
    args = Namespace(seeds=[0], rates=[0.1], methods=["rdu", "random"], rerun=["random"])
    assert sampling.runs_to_do(["p"], args, runs) == [("p", "random", 0.1, 0)]
