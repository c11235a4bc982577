"""The sampling loop: rounds of pick -> measure -> retrain on the measured programs only."""

import numpy as np
import pytest

pytest.importorskip("torch")

import tcl  # noqa: E402
from tcl.sampling.sampler import LookupOracle, SamplingConfig, run_sampling  # noqa: E402
from tcl.train import ProgramData  # noqa: E402
from test_features import MS_FIXTURE  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return ProgramData(tcl.featurize(MS_FIXTURE))


@pytest.mark.parametrize("method", ["rdu", "random", "biased_diversity"])
def test_rounds_spend_the_per_task_budget(data, method):
    oracle = LookupOracle(data.cost)
    cfg = SamplingConfig(method=method, fraction=0.25, rounds=2, epochs=2, mc_samples=4, threads=1)
    res = run_sampling(data, [0, 1], cfg, oracle, progress=False)
    assert oracle.calls == 2 and len(res.rounds) == 2
    assert len(set(res.selected.tolist())) == len(res.selected)
    per_task = np.bincount(data.task[res.selected], minlength=2)
    assert per_task.tolist() == [10, 10]  # 25% of each task's 40 programs
    np.testing.assert_array_equal(res.costs, data.cost[res.selected])
    assert res.model is not None


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
