"""The sampling loop: rounds of pick -> measure -> retrain on the measured programs only."""

import numpy as np
import pytest

pytest.importorskip("torch")

import tcl  # noqa: E402
from tcl.sampling.sampler import LookupOracle, SamplingConfig, run_sampling  # noqa: E402
from tcl.sampling.strategies import Weights  # noqa: E402
from tcl.program_data import ProgramData  # noqa: E402
from test_features import MS_FIXTURE  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return ProgramData(tcl.featurize(MS_FIXTURE))


# These tests are about the picks, not about the models: each round trains its epochs and no more
# (min_steps 0), which keeps the file quick.
QUICK = {"min_steps": 0}


@pytest.mark.parametrize("method,u_kind,r_kind,score_axis", [
    ("rdu", "spread", "density", 0.0), ("rdu", "top", "density", 0.0), ("rdu", "spread", "coverage", 0.0),
    ("rdu", "spread", "coverage", 4.0), ("random", "spread", "density", 0.0),
    ("biased_diversity", "spread", "density", 0.0)])
def test_rounds_spend_the_per_task_budget(data, method, u_kind, r_kind, score_axis):
    oracle = LookupOracle(data.cost)
    cfg = SamplingConfig(method=method, fraction=0.25, rounds=2, epochs=2, mc_samples=4, threads=1, **QUICK,
                         weights=Weights(u_kind=u_kind, r_kind=r_kind, score_axis=score_axis))
    res = run_sampling(data, [0, 1], cfg, oracle, progress=False)
    assert oracle.calls == 2 and len(res.rounds) == 2
    assert len(set(res.selected.tolist())) == len(res.selected)
    per_task = np.bincount(data.task[res.selected], minlength=2)
    assert per_task.tolist() == [10, 10]  # 25% of each task's 40 programs
    np.testing.assert_array_equal(res.costs, data.cost[res.selected])
    assert res.model is not None


def test_a_start_model_gives_round_0_its_signals_and_every_round_its_weights(data, monkeypatch):
    import tcl.train
    from tcl.sampling import sampler

    start, _ = tcl.train.train(data, [0, 1], model_config={"d_model": 16}, epochs=2, progress=False, threads=1)
    seen, inits = [], []
    real_signals, real_train = sampler.model_signals, tcl.train.train
    monkeypatch.setattr(sampler, "model_signals", lambda model, *a, **k: seen.append(model) or real_signals(model, *a, **k))
    monkeypatch.setattr(tcl.train, "train", lambda *a, **k: inits.append(k["init"]) or real_train(*a, **k))
    cfg = SamplingConfig(method="uncertainty", fraction=0.25, rounds=2, epochs=1, mc_samples=4, threads=1, **QUICK,
                         init_model=start)
    res = run_sampling(data, [0, 1], cfg, LookupOracle(data.cost), progress=False)
    # round 0 asks the start model (without one it has no model and picks on the feature rows)
    assert seen[0] is start and len(seen) == 2 and seen[1] is not start
    assert inits == [start, start]  # each round fine-tunes the start model on what is measured so far
    assert res.model.cfg.d_model == 16 and np.bincount(data.task[res.selected]).tolist() == [10, 10]


@pytest.mark.parametrize("method,embedding,on_features", [("rdu", None, True), ("diversity", None, False),
                                                         ("rdu", "model", False), ("diversity", "features", True),
                                                         ("rdu", "both", True)])
def test_r_and_d_measure_on_each_methods_default_embedding(data, monkeypatch, method, embedding, on_features):
    from tcl.sampling import sampler

    calls = []
    real = sampler.feature_embedding
    monkeypatch.setattr(sampler, "feature_embedding", lambda *a: calls.append(1) or real(*a))
    cfg = SamplingConfig(method=method, embedding=embedding, fraction=0.25, rounds=2, epochs=1, mc_samples=4,
                         threads=1, **QUICK)
    run_sampling(data, [0, 1], cfg, LookupOracle(data.cost), progress=False)
    # round 0 has no model and always uses the feature rows; round 1 the embedding asked for
    assert len(calls) == (2 if on_features else 1)
    with pytest.raises(ValueError, match="embedding"):
        run_sampling(data, [0, 1], SamplingConfig(embedding="pixels"), LookupOracle(data.cost), progress=False)


def test_both_embeddings_side_by_side_each_at_unit_spread_per_task(data, monkeypatch):
    from tcl.sampling import sampler
    from tcl.sampling.strategies import unit_rms_per_group

    seen = []
    real = sampler.select
    monkeypatch.setattr(sampler, "select", lambda method, x, group, *a, **k: seen.append((x, group)) or
                        real(method, x, group, *a, **k))
    cfg = SamplingConfig(method="rdu", embedding="both", fraction=0.25, rounds=2, epochs=1, mc_samples=4, threads=1,
                         **QUICK)
    res = run_sampling(data, [0, 1], cfg, LookupOracle(data.cost), progress=False)
    x, group = seen[1]
    pool = data.programs_of([0, 1])
    emb, _ = sampler.model_signals(res.model, data, pool, 1)  # the last model's width is round 1's
    features = sampler.feature_embedding(data, pool)
    assert x.shape[1] == emb.shape[1] + features.shape[1]
    np.testing.assert_allclose(x[:, emb.shape[1]:], unit_rms_per_group(features, group), rtol=1e-5, atol=1e-6)
    for g in np.unique(group):  # each view: centred, unit RMS distance from the task's mean
        for view in (x[group == g, :emb.shape[1]], x[group == g, emb.shape[1]:]):
            assert np.allclose(view.mean(0), 0, atol=1e-4)  # float32 rows
            assert np.sqrt((view.astype(np.float64) ** 2).sum(1).mean()) == pytest.approx(1, rel=1e-4)


def test_labels_come_from_measured_programs_only(data):
    idx = data.programs_of([0])[5:15]
    sub = data.measured(idx, data.cost[idx])
    assert sub.label.max() == 1.0 and np.all(sub.label > 0)
    best = data.cost[idx].min()
    np.testing.assert_allclose(sub.label, best / data.cost[idx], rtol=1e-6)
    # a failed measurement (inf) is left out
    costs = data.cost[idx].copy()
    costs[0] = np.inf
    assert len(data.measured(idx, costs)) == len(idx) - 1


def test_tcl_sample_cli_lookup(tmp_path):
    from tcl.cli import main

    out = tmp_path / "picks.json"
    rc = main(["sample", str(MS_FIXTURE), "--out", str(out), "--fraction", "0.25", "--rounds", "2",
               "--epochs", "2", "--min-steps", "0", "--threads", "1", "--quiet", "--model-out", str(tmp_path / "m.pt"),
               "--u-kind", "top", "--r-kind", "coverage", "--score-axis", "2"])
    assert rc == 0
    import json

    res = json.loads(out.read_text())
    assert res["measured"] == 20 and res["pool"] == 80 and len(res["picks"]) == 20
    assert all(p["line"] >= 1 and p["seconds"] > 0 for p in res["picks"])
    assert (tmp_path / "m.pt").stat().st_size > 0


def test_tcl_sample_cli_starts_from_a_given_model(data, tmp_path):
    from tcl.cli import main
    from tcl.checkpoint import load_checkpoint, save_checkpoint
    from tcl.train import train

    start, _ = train(data, [0, 1], model_config={"d_model": 16}, epochs=1, progress=False, threads=1)
    save_checkpoint(tmp_path / "start.pt", start, "mamba", {})
    rc = main(["sample", str(MS_FIXTURE), "--out", str(tmp_path / "picks.json"), "--fraction", "0.25",
               "--rounds", "2", "--epochs", "1", "--min-steps", "0", "--threads", "1", "--quiet",
               "--init", str(tmp_path / "start.pt"),
               "--model-out", str(tmp_path / "m.pt")])
    assert rc == 0
    model, _ = load_checkpoint(tmp_path / "m.pt")
    # fine-tuned from the start model (a fresh model would have the default width)
    assert model.cfg.d_model == 16
    assert any(not np.array_equal(a, b) for a, b in zip(model.state_dict().values(), start.state_dict().values()))


@pytest.mark.tvm
@pytest.mark.slow
def test_sampling_with_real_measurement_on_a_tiny_task(tmp_path):
    pytest.importorskip("tvm")
    from tcl.tvm.oracle import TVMOracle

    fs = tcl.featurize(MS_FIXTURE / "matmul_128")
    data = ProgramData(fs)
    oracle = TVMOracle(fs, tmp_path / "measured")
    try:
        cfg = SamplingConfig(method="rdu", count=6, rounds=2, epochs=1, mc_samples=4, threads=1, **QUICK)
        res = run_sampling(data, [0], cfg, oracle, progress=False)
    finally:
        oracle.close()
    assert len(res.selected) == 6 and oracle.calls == 2
    assert np.all(np.isfinite(res.costs)) and np.all(res.costs > 0)
    # what was measured is a stock database of the new platform, readable by tcl
    again = tcl.featurize(tmp_path / "measured")
    assert len(again) == 6
    np.testing.assert_allclose(np.sort(again.cost), np.sort(res.costs))
