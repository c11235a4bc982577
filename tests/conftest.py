"""Shared, expensive fixtures: made once per test session."""

import pytest


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
