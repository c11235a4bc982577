"""ONNX export vs torch on real features, and the onnxruntime Scorer's contract.
(`exported_model` is made once per session in conftest.py.)"""

import json
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

import tcl  # noqa: E402
from tcl.export import export_onnx, read_metadata, torch_scores  # noqa: E402
from tcl.hardware import HARDWARE_DIM, hardware_vector  # noqa: E402
from tcl.runtime import Scorer  # noqa: E402
from test_features import ANSOR_DIRS, MS_FIXTURE  # noqa: E402



def real_features():
    fs = tcl.featurize([MS_FIXTURE, *ANSOR_DIRS])
    idx = np.random.default_rng(0).choice(len(fs), size=min(700, len(fs)), replace=False)
    return fs.seq[idx], fs.length[idx], fs.workload[idx]


def test_onnxruntime_matches_torch_on_real_features(exported_model):
    model, path, platform = exported_model
    seq, length, workload = real_features()
    hw = np.broadcast_to(hardware_vector(platform), (len(length), HARDWARE_DIM))  # as exported
    scorer = Scorer(path)
    ours = scorer.score(seq, length, workload)  # the platform's hardware vector from metadata
    ref = torch_scores(model, seq, length, workload, hw)
    np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=0)
    # batch sizes the export never saw, including 1
    np.testing.assert_allclose(scorer.score(seq[:1], length[:1], workload[:1]), ref[:1], atol=1e-5, rtol=0)


def test_metadata_and_size(exported_model):
    _, path, platform = exported_model
    meta = read_metadata(path)
    assert meta["spec_version"] == tcl.SPEC.version and meta["platform"] == platform
    assert meta["config"]["d_model"] == 128
    # 0.351 MB of weights plus a graph of ~100 nodes, without stack traces, shapes or long names
    assert path.stat().st_size < 400_000


def test_onnx_takes_any_batch_and_length(exported_model):
    """One Scan node over time: a raw session takes sequences cut to any length from 2 to seq_len
    and any batch size, and scores them as torch scores the full padded sequences."""
    import onnx
    import onnxruntime as ort

    model, path, platform = exported_model
    assert [n.op_type for n in onnx.load(str(path)).graph.node].count("Scan") == model.cfg.n_layer
    seq, length, workload = real_features()
    hw = np.broadcast_to(hardware_vector(platform), (len(length), HARDWARE_DIM)).astype(np.float32)
    ref = torch_scores(model, seq, length, workload, hw)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for steps, batch in [(seq.shape[1], 3), (2, 1), (17, 64), (40, 500)]:
        idx = np.flatnonzero(length <= steps)[:batch]
        feed = {"seq": np.ascontiguousarray(seq[idx, :steps]), "lengths": length[idx].astype(np.int64),
                "workload": workload[idx], "hardware": hw[idx]}
        np.testing.assert_allclose(sess.run(None, feed)[0], ref[idx], atol=1e-5, rtol=0)


def test_shipped_onnx_matches_shipped_checkpoint():
    """The default ONNX model in the wheel is the default checkpoint, exported."""
    from tcl.evaluate import DEFAULT_MODEL
    from tcl.runtime import default_onnx_path
    from tcl.checkpoint import load_checkpoint

    model, _ = load_checkpoint(DEFAULT_MODEL)
    scorer = Scorer(default_onnx_path())
    assert scorer.metadata["platform"]["mcpu"] == "znver4" and scorer.metadata["config"] == model.cfg.to_dict()
    seq, length, workload = real_features()
    hw = np.broadcast_to(scorer.hardware, (len(length), HARDWARE_DIM))
    np.testing.assert_allclose(scorer.score(seq, length, workload), torch_scores(model, seq, length, workload, hw),
                               atol=1e-5, rtol=1e-5)  # float32 sums in another order: relative error near 1e-6


def test_scorer_feeds_full_sequences_to_a_fixed_length_model(exported_model, tmp_path):
    """Models exported before the length was dynamic declare seq as [batch, seq_len, D]."""
    import onnx

    model, path, platform = exported_model
    proto = onnx.load(str(path))
    seq_input = next(i for i in proto.graph.input if i.name == "seq")
    seq_input.type.tensor_type.shape.dim[1].dim_value = model.cfg.seq_len
    fixed = tmp_path / "fixed.onnx"
    onnx.save(proto, str(fixed))
    scorer = Scorer(fixed)
    assert scorer.fixed_length == model.cfg.seq_len
    seq, length, workload = real_features()
    hw = np.broadcast_to(hardware_vector(platform), (len(length), HARDWARE_DIM))
    np.testing.assert_allclose(scorer.score(seq, length, workload), torch_scores(model, seq, length, workload, hw),
                               atol=1e-5, rtol=0)


def test_scorer_refuses_another_feature_version(exported_model, tmp_path):
    import onnx

    _, path, _ = exported_model
    proto = onnx.load(str(path))
    for p in proto.metadata_props:
        if p.key == "tcl.spec_version":
            p.value = json.dumps(tcl.SPEC.version + 1)
    bad = tmp_path / "old.onnx"
    onnx.save(proto, str(bad))
    with pytest.raises(tcl.FormatError, match="feature spec version"):
        Scorer(bad)
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(tcl.FormatError, match="not a loadable ONNX model"):
        Scorer(tmp_path / "junk.onnx")


def test_scorer_scores_traces_without_torch(exported_model, tmp_path):
    _, path, _ = exported_model
    recs = [json.loads(line)[1][0] for line in
            (MS_FIXTURE / "matmul_128" / "database_tuning_record.json").read_text().splitlines()[:20]]
    code = (
        "import sys, json, numpy as np\n"
        "from tcl.runtime import Scorer\n"
        f"traces = json.loads({json.dumps(json.dumps(recs))})\n"
        f"s = Scorer({str(path)!r}).score_traces(traces)\n"
        "assert s.shape == (20,) and np.isfinite(s).all()\n"
        "assert 'torch' not in sys.modules, 'the scorer imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


def test_tcl_export_cli_from_a_checkpoint(tmp_path):
    from tcl.cli import main
    from tcl.checkpoint import load_checkpoint
    from tcl.train import fit

    fit(MS_FIXTURE, out=tmp_path / "m.pt", epochs=1, val_fraction=0.0, threads=1, progress=False)
    (tmp_path / "platform.json").write_text(json.dumps({"cores": 2, "vector_bits": 512}))
    assert main(["export", str(tmp_path / "m.pt"), "--out", str(tmp_path / "m.onnx"),
                 "--platform", str(tmp_path / "platform.json")]) == 0
    model, _ = load_checkpoint(tmp_path / "m.pt")
    seq, length, workload = real_features()
    hw = np.broadcast_to(hardware_vector({"cores": 2, "vector_bits": 512}), (len(length), HARDWARE_DIM))
    np.testing.assert_allclose(Scorer(tmp_path / "m.onnx").score(seq, length, workload),
                               torch_scores(model, seq, length, workload, hw), atol=1e-5, rtol=0)
    assert read_metadata(tmp_path / "m.onnx")["arch"] == "mamba"


@pytest.mark.slow
@pytest.mark.parametrize("adapter_rank", [0, 4])
def test_a_knowledge_base_with_film_exports_and_reloads(tmp_path, adapter_rank):
    """The continual-distillation KB (FiLM of the pooled embedding and of every step, relative to
    its first platform, and descriptor adapters) through a checkpoint and ONNX, scored for its
    reference platform and for another one."""
    from tcl.architectures import build_model
    from tcl.checkpoint import load_checkpoint, save_checkpoint
    from tcl.continual.descriptor import with_hardware_film

    torch.manual_seed(0)
    first, other = {"cores": 1, "vector_bits": 256}, {"cores": 2, "vector_bits": 512}
    kb = with_hardware_film(build_model("mamba").eval(), hardware_vector(first), adapter_rank=adapter_rank)
    torch.nn.init.normal_(kb.hardware_film.weight, std=0.1)
    torch.nn.init.normal_(kb.hardware_film_steps.weight, std=0.1)
    for adapter in kb.adapters():
        torch.nn.init.normal_(adapter.up.weight, std=0.1)
    save_checkpoint(tmp_path / "kb.pt", kb, "mamba", {})
    loaded, _ = load_checkpoint(tmp_path / "kb.pt")
    assert torch.equal(loaded.hardware_ref, kb.hardware_ref)
    seq, length, workload = real_features()
    scores = {}
    for name, platform in (("first", first), ("other", other)):
        export_onnx(loaded, tmp_path / f"{name}.onnx", platform=platform)
        hw = np.broadcast_to(hardware_vector(platform), (len(length), HARDWARE_DIM))
        scores[name] = Scorer(tmp_path / f"{name}.onnx").score(seq, length, workload)
        np.testing.assert_allclose(scores[name], torch_scores(kb, seq, length, workload, hw), atol=1e-5, rtol=0)
    assert not np.allclose(scores["first"], scores["other"])
