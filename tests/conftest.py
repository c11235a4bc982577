"""Shared, expensive fixtures (made once per test session), and the slow marks of files that keep
none of their own."""

import os
import warnings

import pytest

# Child Pythons (CLI runs, TVM's popen workers) import the installed tcl, not the checkout the tests
# run from: with a wheel install the checkout's tcl/ has no compiled _core.
os.environ["PYTHONSAFEPATH"] = "1"

# Tests over a few seconds each, by file and test function, in files that carry no slow marks of
# their own: `pytest -m "not slow"` leaves them out. A name that matches no test of its file (once
# that file is collected) is reported, so the list cannot go stale unnoticed.
SLOW = {
    "test_ckd.py": {"test_distill_cli_learns_a_platform_from_an_rdu_sample",
                    "test_distill_cli_reads_only_the_new_platform"},
    "test_tvm_collect.py": {
        # the `local` fixture runs a real collection: every test that uses it
        "test_collect_local_writes_a_stock_database", "test_remeasure_same_programs_on_another_target",
        "test_collecting_into_a_packed_dataset_restores_it", "test_resume_after_a_cut_line",
        "test_refuses_another_host_or_target", "test_host_identity_in_platform_json",
        "test_resume_after_kill_9", "test_collect_through_rpc_tracker", "test_pack_during_a_collection_loses_nothing",
        "test_workers_share_the_runner_and_pin_measurement", "test_killed_collector_leaves_no_workers",
    },
}


def pytest_collection_modifyitems(config, items):
    seen: dict[str, set] = {}
    for item in items:
        names = SLOW.get(item.path.name)
        if names is None:
            continue
        name = getattr(item, "originalname", item.name)
        seen.setdefault(item.path.name, set()).add(name)
        if name in names:
            item.add_marker(pytest.mark.slow)
    for file, names in seen.items():
        for stale in sorted(SLOW[file] - names):
            warnings.warn(f"tests/conftest.py SLOW names {file}::{stale}, which is not there", stacklevel=1)


@pytest.fixture(scope="session")
def exported_model(tmp_path_factory):
    """(torch model, path of its ONNX export, platform) for a fresh default-size cost model."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import tcl
    from tcl.export import export_onnx
    from tcl.hardware import HARDWARE_DIM
    from tcl.model import CostModelConfig, MambaCostModel

    torch.manual_seed(0)
    cfg = CostModelConfig(feature_dim=tcl.SPEC.row_dim, seq_len=tcl.SPEC.seq_len,
                          workload_dim=tcl.SPEC.workload_dim, hardware_dim=HARDWARE_DIM)
    model = MambaCostModel(cfg).eval()
    platform = {"cores": 2, "threads": 2, "vector_bits": 512, "target": "llvm -mcpu=znver4"}
    path = tmp_path_factory.mktemp("onnx") / "model.onnx"
    export_onnx(model, path, platform=platform)
    return model, path, platform
