"""TCL's cost model inside a real MetaSchedule search (stock tune_tir, fast builder, LocalRunner)."""

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.s_tir.meta_schedule.testing import te_workload  # noqa: E402

from tcl.tvm.builder import default_target, import_cpu_tensor_intrin, make_builder, make_runner  # noqa: E402
from tcl.tvm.cost_model import CostModel  # noqa: E402

pytestmark = pytest.mark.tvm


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
    assert "weighted best ms" in capsys.readouterr().out
