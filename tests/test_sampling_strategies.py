"""Selection strategies: every method on one code path, budgets per task, nothing picked twice."""

import numpy as np
import pytest

from tcl.sampling import reference
from tcl.sampling.methods import REGISTRY, SamplingMethod, get_method, method_names, register
from tcl.sampling.strategies import (Weights, normalize_per_group, per_task_budget, score_axis_embedding, select,
                                     top_probability)


def pool(n=400, d=8, tasks=5, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.integers(0, tasks, n), rng


@pytest.mark.parametrize("method", method_names())
def test_every_method_respects_budgets(method):
    x, g, rng = pool()
    selected = rng.random(len(g)) < 0.1
    budget = per_task_budget(g, fraction=0.1)
    picks = select(method, x, g, budget, selected, u=rng.random(len(g)), p=rng.random(len(g)), rng=rng)
    assert len(set(picks.tolist())) == len(picks)
    assert not selected[picks].any()
    assert np.array_equal(np.bincount(g[picks], minlength=len(budget)), budget)


def test_rdu_matches_reference_composition():
    x, g, rng = pool()
    u = rng.random(len(g))
    w = Weights(r=0.5, d=1.0, u=2.0, k=7, u_speed=0.0, r_kind="density")
    budget = per_task_budget(g, fraction=0.2)
    got = select("rdu", x, g, budget, u=u, weights=w)
    r = normalize_per_group(1 / (1 + reference.knn_mean_distance(x, g, 7)), g)
    want = reference.greedy_select(x, g, budget, r, normalize_per_group(u, g), None, (0.5, 1.0, 2.0))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("method", ["rdu", "rd"])
def test_coverage_r_matches_reference(method):
    x, g, rng = pool()
    u = rng.random(len(g))
    selected = rng.random(len(g)) < 0.1
    w = Weights(r=0.5, d=1.0, u=2.0, k=7, u_speed=0.0, r_kind="coverage")
    budget = per_task_budget(g, fraction=0.2)
    got = select(method, x, g, budget, selected, u=u, weights=w)
    want = reference.greedy_select(x, g, budget, np.zeros(len(g)), normalize_per_group(u, g), selected,
                                   (0.5, 1.0, 2.0 if method == "rdu" else 0.0), coverage_k=7)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="r_kind"):
        select(method, x, g, budget, u=u, weights=Weights(r_kind="dense"))


def test_default_rdu_is_light_coverage_plus_diversity_plus_upper_confidence_bound():
    x, g, rng = pool()
    u, p = rng.random(len(g)) * 0.1, rng.random(len(g))
    budget = per_task_budget(g, fraction=0.2)
    want = reference.greedy_select(x, g, budget, np.zeros(len(g)), normalize_per_group(u + p, g), None,
                                   (0.25, 1.0, 1.0), coverage_k=10)
    np.testing.assert_array_equal(select("rdu", x, g, budget, u=u, p=p), want)


def test_rdu_u_speed_adds_the_predicted_score_to_the_spread():
    x, g, rng = pool()
    u, p = rng.random(len(g)) * 0.1, rng.random(len(g))
    budget = per_task_budget(g, fraction=0.2)
    got = select("rdu", x, g, budget, u=u, p=p, weights=Weights(r=1.0, u_speed=2.0, r_kind="density"))
    r = normalize_per_group(1 / (1 + reference.knn_mean_distance(x, g, 10)), g)
    want = reference.greedy_select(x, g, budget, r, normalize_per_group(u + 2.0 * p, g), None, (1.0, 1.0, 1.0))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="predicted scores"):
        select("rdu", x, g, budget, u=u, weights=Weights(u_speed=1.0))


def test_score_axis_appends_the_scaled_rank_of_the_predicted_score():
    x, g, rng = pool()
    p = rng.random(len(g))
    got = score_axis_embedding(x, p, g, 3.0)
    for t in np.unique(g):  # plain definition, task by task
        idx = np.nonzero(g == t)[0]
        centred = x[idx] - x[idx].mean(0)
        radius = np.sqrt((centred ** 2).sum(1).mean())
        np.testing.assert_allclose(got[idx, :-1], centred / radius, rtol=1e-5, atol=1e-6)
        order = np.argsort(p[idx])
        np.testing.assert_allclose(got[idx[order], -1], 3.0 * np.arange(len(idx)) / (len(idx) - 1), rtol=1e-6)
    u = rng.random(len(g))
    budget = per_task_budget(g, fraction=0.2)
    w = Weights(score_axis=3.0)
    want = reference.greedy_select(got, g, budget, np.zeros(len(g)), normalize_per_group(u + p, g), None,
                                   (0.25, 1.0, 1.0), coverage_k=10)
    np.testing.assert_array_equal(select("rdu", x, g, budget, u=u, p=p, weights=w), want)
    # rd has no model signals: the axis is rdu's alone
    np.testing.assert_array_equal(select("rd", x, g, budget, weights=w), select("rd", x, g, budget))
    with pytest.raises(ValueError, match="predicted scores"):
        select("rdu", x, g, budget, u=u, weights=Weights(score_axis=1.0, u_speed=0.0))


def test_score_axis_spreads_the_picks_along_the_predicted_speed():
    # features that say nothing about speed: without the axis the picks' scores are anywhere;
    # with a strong axis each task's picks cover its score range evenly
    rng = np.random.default_rng(5)
    g = np.repeat(np.arange(4), 100)
    x, p = rng.normal(size=(400, 6)), rng.random(400)
    budget = per_task_budget(g, fraction=0.1)
    picks = select("rdu", x, g, budget, u=np.zeros(400), p=p, weights=Weights(r=0.0, u=0.0, score_axis=50.0))
    for t in range(4):
        mine = picks[g[picks] == t]
        rank = np.argsort(np.argsort(p[g == t]))[mine - 100 * t] / 99
        assert np.histogram(rank, bins=5, range=(0, 1))[0].min() >= 1, rank


def test_top_probability_counts_the_samples_that_rank_a_program_in_its_tasks_top():
    rng = np.random.default_rng(3)
    g = rng.integers(0, 4, 120)
    samples = rng.normal(size=(9, 120))
    q = top_probability(samples, g, fraction=0.1)
    for i in range(120):  # plain definition: sample by sample, the program's rank in its task
        idx = np.nonzero(g == g[i])[0]
        k = int(np.ceil(0.1 * len(idx)))
        assert q[i] == pytest.approx(np.mean([(s[idx] > s[i]).sum() < k for s in samples]))
    assert np.allclose(np.bincount(g, weights=q), np.ceil(0.1 * np.bincount(g)))  # no ties: k per sample


def test_rdu_top_kind_uses_the_top_probability_as_u():
    x, g, rng = pool()
    samples = rng.normal(size=(16, len(g)))
    q = top_probability(samples, g)
    budget = per_task_budget(g, fraction=0.2)
    got = select("rdu", x, g, budget, u=samples.std(0), q=q, weights=Weights(r=1.0, u_kind="top", r_kind="density"))
    r = normalize_per_group(1 / (1 + reference.knn_mean_distance(x, g, 10)), g)
    want = reference.greedy_select(x, g, budget, r, normalize_per_group(q, g), None, (1.0, 1.0, 1.0))
    np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="top probabilities"):
        select("rdu", x, g, budget, u=samples.std(0), weights=Weights(u_kind="top"))
    with pytest.raises(ValueError, match="u_kind"):
        select("rdu", x, g, budget, u=samples.std(0), q=q, weights=Weights(u_kind="bottom"))


def test_uncertainty_takes_the_most_uncertain():
    x, g, rng = pool()
    u = rng.random(len(g))
    picks = select("uncertainty", x, g, [2] * 5, u=u)
    for t in range(5):
        idx = np.nonzero(g == t)[0]
        assert set(picks[g[picks] == t]) == set(idx[np.argsort(-u[idx])[:2]])


def test_budget_rules_and_errors():
    g = np.array([0] * 50 + [1] * 5 + [2] * 1)
    assert per_task_budget(g, fraction=0.1).tolist() == [5, 1, 1]
    assert per_task_budget(g, count=28, minimum=2).tolist() == [25, 2, 1]
    with pytest.raises(ValueError, match="unknown sampling method"):
        select("magic", np.zeros((3, 2)), [0, 0, 0], [1])
    with pytest.raises(ValueError, match="needs the model's uncertainty"):
        select("rdu", np.zeros((3, 2)), [0, 0, 0], [1])


def test_the_registry_names_every_method_once_with_what_the_loop_needs_of_it():
    assert method_names() == ("rdu", "rd", "diversity", "biased_diversity", "uncertainty", "random")
    for name, m in REGISTRY.items():
        assert isinstance(m, SamplingMethod) and m.name == name and get_method(m) is m
        assert m.round0 in REGISTRY and not get_method(m.round0).needs(Weights())  # round 0 has no model
        assert m.embedding in ("model", "features")
        assert set(m.weight_fields) <= set(Weights.__dataclass_fields__)
    # with no model yet, the methods that need its scores pick as rd; random and diversity as themselves
    assert {n: m.round0 for n, m in REGISTRY.items()} == {
        "rdu": "rd", "rd": "rd", "diversity": "diversity", "biased_diversity": "rd", "uncertainty": "rd",
        "random": "random"}
    assert get_method("rdu").embedding == "features" and get_method("diversity").embedding == "model"
    assert [n for n, m in REGISTRY.items() if not m.reads_embedding] == ["uncertainty", "random"]
    assert [n for n, m in REGISTRY.items() if not m.uses_model] == ["random"]
    # a run reads its own weights and those of its round-0 stand-in
    assert get_method("uncertainty").weight_fields_read == {"r", "d", "r_kind", "k"}
    assert get_method("random").weight_fields_read == set()
    assert {"u_speed", "score_axis", "r_kind"} <= get_method("rdu").weight_fields_read
    with pytest.raises(ValueError, match="own"):
        register(type("Again", (SamplingMethod,), {"name": "rdu"}))


def test_select_takes_a_method_object_too():
    x, g, rng = pool()
    budget = per_task_budget(g, fraction=0.1)
    np.testing.assert_array_equal(select(get_method("diversity"), x, g, budget), select("diversity", x, g, budget))
