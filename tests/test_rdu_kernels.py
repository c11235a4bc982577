"""The C++ RDU kernels against their numpy definitions."""

import numpy as np
import pytest

from tcl.sampling import kernels, reference


def data(n=600, d=12, groups=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    g = rng.integers(0, groups, n).astype(np.int32)
    return x, g, rng


@pytest.mark.parametrize("k", [1, 5, 30])
def test_knn_mean_distance(k):
    x, g, _ = data()
    np.testing.assert_allclose(kernels.knn_mean_distance(x, g, k, threads=2), reference.knn_mean_distance(x, g, k), rtol=1e-5)


def test_knn_mean_distance_small_groups():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = kernels.knn_mean_distance(x, [0, 0, 1], k=4)
    np.testing.assert_allclose(out, [np.sqrt(8), np.sqrt(8), 0.0])


def test_min_distance():
    x, _, rng = data()
    y = rng.normal(size=(37, x.shape[1])).astype(np.float32)
    np.testing.assert_allclose(kernels.min_distance(x, y, threads=2), reference.min_distance(x, y), rtol=1e-5)
    assert np.all(np.isinf(kernels.min_distance(x, np.zeros((0, x.shape[1]), np.float32))))


@pytest.mark.parametrize("weights", [(1, 1, 1), (0, 1, 0), (0.3, 1, 2), (1, 0, 0)])
def test_greedy_select(weights):
    x, g, rng = data()
    r, u = rng.random(len(x)), rng.random(len(x))
    selected = rng.random(len(x)) < 0.05
    budget = [10, 0, 25, 200]
    got = kernels.greedy_select(x, g, budget, r, u, selected, weights, threads=2)
    want = reference.greedy_select(x, g, budget, r, u, selected, weights)
    np.testing.assert_array_equal(got, want)
    assert not selected[got].any() and len(set(got.tolist())) == len(got)


@pytest.mark.parametrize("weights,k", [((1, 1, 1), 10), ((1, 0, 0), 3), ((0.5, 1, 2), 25)])
def test_greedy_select_coverage(weights, k):
    x, g, rng = data()
    u = rng.random(len(x))
    selected = rng.random(len(x)) < 0.05
    budget = [10, 0, 25, 200]
    got = kernels.greedy_select(x, g, budget, np.zeros(len(x)), u, selected, weights, threads=2, coverage_k=k)
    want = reference.greedy_select(x, g, budget, np.zeros(len(x)), u, selected, weights, coverage_k=k)
    np.testing.assert_array_equal(got, want)
    assert not selected[got].any() and len(set(got.tolist())) == len(got)


def test_coverage_gain_moves_on_once_a_cluster_is_covered():
    # Two tight clusters, the first twice as big: R alone takes a point of the big one first,
    # then the small one (its points now gain more than the big cluster's), unlike fixed density.
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 0.01, (20, 2)), rng.normal(5, 0.01, (10, 2))]).astype(np.float32)
    picks = kernels.greedy_select(x, np.zeros(30, np.int32), [2], np.zeros(30), np.zeros(30), None, (1, 0, 0),
                                  coverage_k=9)
    assert picks[0] < 20 and picks[1] >= 20


def test_pure_diversity_is_k_center():
    # With only D, the second pick is the farthest point from the first: on a line, the other end.
    x = np.array([[0.0], [1.0], [2.0], [10.0]], np.float32)
    picks = kernels.greedy_select(x, [0, 0, 0, 0], [3], np.zeros(4), np.zeros(4), [1, 0, 0, 0], (0, 1, 0))
    assert picks.tolist() == [3, 2, 1]


def test_bad_shapes():
    with pytest.raises(ValueError, match="group must have one entry"):
        kernels.knn_mean_distance(np.zeros((3, 2)), [0, 0], 1)
    with pytest.raises(ValueError, match="group ids"):
        kernels.knn_mean_distance(np.zeros((2, 2)), [0, -1], 1)
