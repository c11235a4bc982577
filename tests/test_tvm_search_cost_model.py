"""TCL's cost model inside a real MetaSchedule search (stock tune_tir, fast builder, LocalRunner)."""

import json
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.testing import te_workload  # noqa: E402

from tcl.tvm.builder import default_target, import_cpu_tensor_intrin, make_builder, make_runner  # noqa: E402
from tcl.tvm.search_cost_model import CostModel  # noqa: E402

pytestmark = pytest.mark.tvm


@pytest.mark.slow
def test_tune_tir_with_tcl_cost_model(exported_model, tmp_path):
    from tvm import te

    _, path, _ = exported_model
    import_cpu_tensor_intrin()
    func = te.create_prim_func(te_workload.matmul(64, 64, 64))
    model = CostModel(path, min_samples=8, ramp=16)
    builder = make_builder(max_workers=2)
    try:
        db = ms.tune_tir(func, default_target(num_cores=2), str(tmp_path), max_trials_global=32,
                         num_trials_per_iter=16, builder=builder, runner=make_runner(repeat=1),
                         cost_model=model, seed=0)
    finally:
        if hasattr(builder, "shutdown"):
            builder.shutdown()
    records = db.get_all_tuning_records()
    assert len(records) >= 16
    assert model.stats["predict_calls"] >= 1 and model.stats["predicted"] >= 16
    assert model.stats["update_calls"] >= 1
    (res,) = model.tasks.values()
    assert len(res.secs) >= 16 and res.coef is not None  # the session's residual was fitted
    # save/load round trip keeps the per-task correction
    model.save(str(tmp_path / "state.json"))
    other = CostModel(path, min_samples=8, ramp=16)
    other.load(str(tmp_path / "state.json"))
    (res2,) = other.tasks.values()
    np.testing.assert_allclose(res2.coef, res.coef)


def test_scores_read_the_descriptor_of_the_tuned_platform(exported_model):
    """CostModel(platform=P) scores each candidate as the ONNX model does under P's hardware
    descriptor; without P, under the platform the model was exported with."""
    from tvm import te

    from tcl.features import featurize_traces
    from tcl.hardware import hardware_vector
    from tcl.runtime import Scorer

    _, path, exported_platform = exported_model
    mod = tvm.IRModule({"main": te.create_prim_func(te_workload.matmul(64, 64, 64))})
    ctx = ms.TuneContext(mod=mod, target=default_target(num_cores=2), space_generator="post-order-apply",
                         rand_state=0)
    args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    candidates = [ms.MeasureCandidate(s, args_info) for s in ctx.generate_design_space()]
    seq, length, workload = featurize_traces([str(c.sch.trace) for c in candidates])
    scorer = Scorer(path)

    def scored_under(platform):
        hw = np.repeat(hardware_vector(platform)[None], len(candidates), 0)
        return scorer.score(seq, length, workload, hw)

    other = {**exported_platform, "cores": 1, "vector_bits": 256, "l2_kb": 2048}
    got_default = CostModel(path, adapt=False).predict(ctx, candidates)
    got_other = CostModel(path, adapt=False, platform=other).predict(ctx, candidates)
    np.testing.assert_allclose(got_default, scored_under(exported_platform), rtol=1e-6)
    np.testing.assert_allclose(got_other, scored_under(other), rtol=1e-6)
    assert not np.allclose(got_default, got_other)


def test_tuned_platform_is_this_host_or_the_rpc_devices():
    from tcl.tvm.hardware import detect_host
    from tcl.tvm.tune import tuned_platform

    target = default_target(num_cores=1)
    here = tuned_platform(target, None, None)
    assert here["cores"] == 1 and here["host_detected"] and here["cpu_model"] == detect_host()["cpu_model"]
    device = {"cpu_model": "a device", "host_cores": 4, "l2_kb": 512}
    there = tuned_platform(target, ("127.0.0.1", 9190), device)
    assert there["cpu_model"] == "a device" and there["l2_kb"] == 512 and not there["host_detected"]
    assert tuned_platform(target, ("127.0.0.1", 9190), None) is None  # the model's own platform


def test_exploration_bonus_is_the_ridge_predictive_spread():
    """spread(x) = sqrt(x1^T (X1^T X1 + alpha I)^-1 x1), x1 = [x, 1]: small near what was measured."""
    from tcl.tvm.search_cost_model import _TaskResidual

    rng = np.random.default_rng(0)
    x, secs = rng.normal(size=(40, 5)), rng.random(40) + 0.1
    res = _TaskResidual()
    res.add(x, secs)
    res.fit(alpha=2.0)
    x1 = np.hstack([x, np.ones((40, 1))])
    a = x1.T @ x1 + 2.0 * np.eye(6)
    np.testing.assert_allclose(res.coef, np.linalg.solve(a, x1.T @ (secs.min() / secs)))
    query = np.vstack([x[:3], 10 * rng.normal(size=(3, 5))])
    want = [np.sqrt(v @ np.linalg.solve(a, v)) for v in np.hstack([query, np.ones((6, 1))])]
    got = res.spread(query)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert got[3:].min() > got[:3].max()  # far from every measured program: larger bonus


@pytest.mark.slow
def test_tcl_tune_cli_one_workload(exported_model, tmp_path, capsys):
    import json

    from tcl.cli import main

    _, path, _ = exported_model
    rc = main(["tune", "--workload", "matmul:64,64,64", "--trials", "16", "--cost-model", "tcl",
               "--model", str(path), "--out", str(tmp_path)])
    assert rc == 0
    report = json.loads((tmp_path / "tcl" / "report.json").read_text())
    (task,) = report["tasks"].values()
    curve = task["best_vs_trials"]
    assert len(curve) == 16 and all(a >= b for a, b in zip(curve, curve[1:]))  # best so far
    assert 0 < report["weighted_best_s"] < 1 and report["cost_model_stats"]["predicted"] > 0
    assert (tmp_path / "tcl" / "report.png").stat().st_size > 0
    assert "matmul:64,64,64: tuned with tcl" in capsys.readouterr().out


MLP_TASKS = ("max_pool2d-", "max_pool2d2-", "max_pool2d4-", "mean-", "reshape-", "fused_relu1-")


def small_training_set(dst):
    """Six training tasks of the shipped dataset, as they are stored (packed)."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parent.parent / "datasets" / "znver4-2c"
    if not src.is_dir():
        pytest.skip("needs the repository's datasets/znver4-2c")
    for d in src.iterdir():
        if d.is_dir() and d.name.startswith(MLP_TASKS):
            shutil.copytree(d, dst / d.name)
    shutil.copy(src / "platform.json", dst / "platform.json")
    return dst


@pytest.mark.slow
def test_mlp_baseline_pretrains_caches_and_tunes_one_task(tmp_path, capsys):
    """TVM's MLPModel fails on its first update when one task is tuned from scratch; pretrained on a
    dataset (cached) it tunes like the other cost models."""
    import json

    from tcl.cli import main
    from tcl.tvm.baselines import pretrained_mlp

    data = small_training_set(tmp_path / "data")
    cache = tmp_path / "cache"
    first = pretrained_mlp(data, cache_dir=cache)
    (cached,) = cache.glob("mlp-data-*.tar")
    again = pretrained_mlp(data, cache_dir=cache)  # loaded, not retrained
    tasks = [json.loads(f.read_text()) for f in data.glob("*/task.json")]
    n_train = sum(t["summary"]["programs"] for t in tasks if t["split"] == "train")  # only the training split
    assert again.trainer.state.data_size == first.trainer.state.data_size == n_train > 100
    assert again.trainer.state.untrained_size == 0
    for a, b in zip(first.trainer.state.model.state_dict().values(), again.trainer.state.model.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())

    import os

    os.environ["TCL_CACHE"] = str(cache)
    try:
        rc = main(["tune", "--workload", "matmul:64,64,64", "--trials", "16", "--cost-model", "mlp",
                   "--mlp-data", str(data), "--out", str(tmp_path / "out")])
    finally:
        del os.environ["TCL_CACHE"]
    assert rc == 0
    report = json.loads((tmp_path / "out" / "mlp" / "report.json").read_text())
    (task,) = report["tasks"].values()
    assert len(task["best_vs_trials"]) == 16 and 0 < report["weighted_best_s"] < 1
    assert cached.stat().st_mtime == next(cache.glob("mlp-data-*.tar")).stat().st_mtime  # reused


def test_mlp_fixes_let_train_full_meet_a_batch_of_one():
    """Every workload has 129 programs, so the validation loader always ends in a batch of one,
    which stock TVM 0.27 cannot score (a 0-d tensor); with tcl's fixes train_full completes."""
    from unittest import mock

    from tvm.s_tir.meta_schedule.cost_model.mlp_model import MLPModel

    from tcl.tvm.baselines import mlp_fixes

    model = MLPModel()
    trainer = model.trainer
    trainer.num_epoch_full = 10
    rng = np.random.default_rng(0)
    for g in range(5):
        n = trainer.batch_size + 1
        feats = [rng.random((3, 172)).astype("float32") for _ in range(n)]
        trainer.state.add_to_group(feats, rng.random(n) + 0.1, f"workload{g}")
    with mlp_fixes():
        trainer.train_full()
    assert trainer.state.untrained_size == 0
    assert np.isfinite(trainer.predict_incremental([feats[0], feats[1]])).all()

    # an update with a measured batch of one program (a task whose design space is used up)
    with pytest.raises((IndexError, ValueError)):  # stock: the 0-d prediction breaks the loss, then concatenate
        trainer.update([feats[0]], np.array([0.5]), "workload9")
    with mlp_fixes():
        trainer.update([feats[1]], np.array([0.5]), "workload10")
    assert "workload10" in trainer.state.data

    # without the 0-d fix (StepLR alone patched) the same training fails
    import torch

    class StepLR(torch.optim.lr_scheduler.StepLR):
        def __init__(self, *args, verbose=None, **kw):
            super().__init__(*args, **kw)

    with pytest.raises(IndexError), mock.patch.object(torch.optim.lr_scheduler, "StepLR", StepLR):
        trainer.train_full()


def test_tile_sizes_of_printed_traces_match_the_reference():
    """In the search the featurizer reads str(trace), TVM's printed Python; its tile sizes read back
    as the database's trace JSON gives them."""
    from tcl.features import featurize_traces
    from tcl.tile_decisions import innermost_factors, innermost_factors_of_trace

    fixture = Path(__file__).parent / "fixtures" / "ms" / "conv2d_1x16x14x14_32_3x3"
    records = ms.database.JSONDatabase(work_dir=str(fixture)).get_all_tuning_records()
    seq, _, _ = featurize_traces([str(r.trace) for r in records])
    lines = (fixture / "database_tuning_record.json").read_text().splitlines()
    expected = np.array([innermost_factors_of_trace(json.loads(line)[1][0]) for line in lines if line.strip()])
    got = innermost_factors(seq)
    assert len(got) == len(expected) > 0
    # the database hands records back in its own order: compare them as sorted rows
    np.testing.assert_array_equal(got[np.lexsort(got.T[::-1])], expected[np.lexsort(expected.T[::-1])])


def test_saved_state_of_other_features_is_refused(exported_model, tmp_path):
    _, path, _ = exported_model
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"model": str(path), "tasks": {"1": {"x": [[0.0] * 5] * 16,
                                                                             "secs": [1e-3] * 16}}}))
    with pytest.raises(ValueError, match="another version of tcl"):
        CostModel(path).load(str(state))
