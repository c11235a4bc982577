"""bench/tuning.py's bookkeeping: curves from a run's report, and reuse of stored runs (seeds
accumulate across invocations only when the settings and the model are the same)."""

import json
from argparse import Namespace

import numpy as np
from bench_module import load_bench

tuning = load_bench("tuning")


def _run(seed, best):
    return {"seed": seed, "seconds": 1.0, "cost_model_stats": None,
            "tasks": {"a": {"weight": 2, "best_vs_trials": best, "wall_s_at_trial": [1.0, 2.0, 3.0][:len(best)]}}}


def _args(**kw):
    base = dict(budgets=[2, 3], max_tasks=1, trials_per_iter=16, model=None, model_sha256="m1", explore=0.5)
    return Namespace(**{**base, **kw})


def test_weighted_curve_extends_the_last_value_and_weights():
    c = tuning.weighted_curve({"tasks": {"a": {"weight": 2, "best_vs_trials": [3.0, 1.0]},
                                         "b": {"weight": 1, "best_vs_trials": [5.0, 4.0, 2.0]}}}, 3)
    np.testing.assert_allclose(c, [11.0, 6.0, 4.0])
    assert tuning.first_reaching(c, 6.0) == 2
    assert tuning.first_reaching(c, 1.0) is None


def test_stored_runs_are_reused_only_with_the_same_settings(tmp_path):
    out = tmp_path / "tuning.json"
    settings = {"budgets": [1, 3], "max_tasks": 1, "trials_per_iter": 16, "model": None, "model_sha256": "m1",
                "explore": 0.5}
    (tmp_path / "tuning_details.json").write_text(json.dumps(
        {"runs": {"resnet18": {"tcl": [_run(0, [3.0, 2.0, 1.0])]}}, "settings": settings}))
    (tmp_path / "tuning_partial.json").write_text(json.dumps(
        {"runs": {"resnet18": {"xgb": [_run(1, [4.0, 4.0, 2.0])]}}, "settings": settings}))
    found = tuning.stored_runs(out, _args())
    assert set(found) == {("resnet18", "tcl", 0), ("resnet18", "xgb", 1)}
    assert found[("resnet18", "tcl", 0)]["tasks"]["a"]["best_vs_trials"] == [3.0, 2.0, 1.0]
    # a different largest budget or task count: nothing is reused
    assert tuning.stored_runs(out, _args(budgets=[2, 4])) == {}
    assert tuning.stored_runs(out, _args(max_tasks=2)) == {}
    # another TCL model or exploration weight: only the runs of the other cost models are reused
    assert set(tuning.stored_runs(out, _args(model_sha256="m2"))) == {("resnet18", "xgb", 1)}
    assert set(tuning.stored_runs(out, _args(explore=0.0))) == {("resnet18", "xgb", 1)}


def test_trials_to_target_per_seed_and_on_the_mean_curve():
    tcl = [np.array([5.0, 3.0, 3.0]), np.array([4.0, 2.0, 1.0])]
    xgb = [np.array([9.0, 4.0, 2.0]), np.array([9.0, 9.0, 2.0])]
    # per seed: seed 0 never reaches 2.0; on the mean curves 2.0 <= (2 + 2) / 2 at trial 3
    assert tuning.trials_to_xgb_final(tcl, xgb) == (None, 3)
    assert tuning.trials_to_xgb_final(xgb, xgb) == (3.0, 3)
