"""Adapting a model to a new platform (tcl.continual.adapt) and `tcl adapt` on this host with a real
builder and runner."""

import json
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_ckd import other_hardware  # noqa: E402
from test_features import MS_FIXTURE  # noqa: E402

import tcl  # noqa: E402
from tcl.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from tcl.continual import CKDConfig, load_kb  # noqa: E402
from tcl.continual.adapt import adapt, as_knowledge_base, preservation  # noqa: E402
from tcl.errors import FormatError  # noqa: E402
from tcl.program_data import ProgramData  # noqa: E402
from tcl.sampling.sampler import LookupOracle, SamplingConfig  # noqa: E402
from tcl.scoring import predict  # noqa: E402
from tcl.train import fit  # noqa: E402

CFG = CKDConfig(progress_epochs=2, compress_epochs=2, min_steps=0, threads=1, group_size=16)
SAMPLING = SamplingConfig(fraction=0.25, rounds=2, epochs=1, min_steps=0, threads=1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A model `tcl train` wrote (two databases standing in for one platform), loaded."""
    out = tmp_path_factory.mktemp("adapt") / "model.pt"
    fit([str(MS_FIXTURE / "matmul_128"), str(MS_FIXTURE / "conv2d_1x16x14x14_32_3x3")], str(out), epochs=2,
        threads=1, progress=False, model_config={"d_model": 32})
    return load_checkpoint(out)


@pytest.fixture(scope="module")
def new_platform():
    return other_hardware(ProgramData(tcl.featurize(MS_FIXTURE / "matmul_128")))


def test_a_trained_model_becomes_a_kb_that_scores_as_before(trained, new_platform):
    model, ck = trained
    assert ck["meta"]["hardware"], "tcl train records the descriptors it trained under"
    kb, ewc = as_knowledge_base(model, ck, CFG)
    assert ewc.hardware == ck["meta"]["hardware"] and kb.hardware_film is not None
    old = ProgramData(tcl.featurize(MS_FIXTURE / "matmul_128"))
    for data in (old, new_platform):  # the added layers are zero: the same scores under any descriptor
        np.testing.assert_allclose(predict(kb, data), predict(model, data), atol=1e-5)


def test_a_model_without_its_descriptors_is_refused(trained):
    model, ck = trained
    meta = {k: v for k, v in ck["meta"].items() if k != "hardware"}
    with pytest.raises(FormatError, match="hardware descriptors"):
        as_knowledge_base(model, {**ck, "meta": meta}, CFG)


def test_adapt_measures_its_budget_and_keeps_the_earlier_platform(trained, new_platform):
    model, ck = trained
    kb, ewc = as_knowledge_base(model, ck, CFG)
    old = ProgramData(tcl.featurize(MS_FIXTURE / "matmul_128"))
    before = predict(kb, old)
    oracle = LookupOracle(new_platform.cost)
    res = adapt(kb, ewc, new_platform, [0], oracle, SAMPLING, CFG)
    n = len(new_platform)
    assert len(res.selected) == int(np.ceil(0.25 * n)) == len(set(res.selected.tolist()))
    np.testing.assert_array_equal(res.costs, new_platform.cost[res.selected])
    assert oracle.calls == SAMPLING.rounds and res.preserve == "exact"
    assert res.kb.size_mb() == kb.size_mb()  # no growth
    assert ewc.platforms == len(ck["meta"]["hardware"]) + 1
    np.testing.assert_allclose(predict(res.kb, old), before, atol=1e-5)  # exact under the earlier descriptor
    assert not np.allclose(predict(res.kb, new_platform), predict(kb, new_platform), atol=1e-5)


def test_a_descriptor_inside_the_earlier_span_falls_back_to_keep(trained, new_platform):
    model, ck = trained
    kb, ewc = as_knowledge_base(model, ck, CFG)
    known = ProgramData(tcl.featurize(MS_FIXTURE / "matmul_128"))  # the same descriptor as trained under
    assert preservation(kb, ewc, new_platform, [0], CFG).preserve == "exact"
    assert preservation(kb, ewc, known, [0], CFG).preserve == "keep"
    assert preservation(kb, ewc, known, [0], replace(CFG, preserve="keep")).preserve == "keep"


@pytest.mark.slow
def test_tcl_adapt_measures_on_this_host_resumes_and_exports(tmp_path, trained):
    pytest.importorskip("tvm")
    from tcl.cli import main
    from tcl.runtime import Scorer

    model_path = tmp_path / "start.pt"
    save_checkpoint(model_path, trained[0], "mamba", trained[1]["meta"])
    out = tmp_path / "adapted"
    argv = ["adapt", "--workload", "matmul:32,32,32", "--out", str(out), "--model", str(model_path),
            "--pool-size", "16", "--fraction", "0.25", "--rounds", "2", "--threads", "1", "--min-repeat-ms", "1"]
    assert main(argv) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["pool"] == 16 and report["budget"] == 4 and report["measured"] == 4 and report["reused"] == 0
    (task,) = [d for d in out.iterdir() if (d / "database_tuning_record.json").is_file()]
    records = [json.loads(line) for line in (task / "database_tuning_record.json").read_text().splitlines()]
    assert len(records) == 4 and all(r[1][1] and min(r[1][1]) > 0 for r in records)  # real latencies
    pool = json.loads((out / "candidates" / task.name / "candidates.json").read_text())["records"]
    traces = [p[0] for p in pool]  # (the database writes booleans as 0/1: compare as values, not text)
    picked = [traces.index(r[1][0]) for r in records]  # each measured program is a pool candidate ...
    seq, length, _ = tcl.featurize_traces([json.dumps(pool[k][0]) for k in picked], pool[0][3])
    fs = tcl.featurize(task)  # ... featurized in the pool exactly as the dataset featurizes it
    np.testing.assert_array_equal(seq[:, :length.max()], fs.seq[np.argsort(fs.line)][:, :length.max()])
    _, ewc, _ = load_kb(out / "model.pt")
    assert ewc.platforms == len(trained[1]["meta"]["hardware"]) + 1
    scores = Scorer(out / "model.onnx").score_traces([json.dumps(r[0]) for r in pool], pool[0][3])
    assert scores.shape == (16,) and np.isfinite(scores).all()
    assert json.loads((out / "platform.json").read_text())["name"] == report["platform"]

    assert main(argv) == 0  # again: the pool is kept and nothing is measured twice
    again = json.loads((out / "report.json").read_text())
    assert again["reused"] == 4 and len((task / "database_tuning_record.json").read_text().splitlines()) == 4


def test_a_pool_holds_each_program_once_even_when_the_design_space_is_one_program():
    pytest.importorskip("tvm")
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm import networks as nets
    from tcl.tvm.adapt import generate_pool
    from tcl.tvm.measure import _trace_key
    from tcl.tvm.targets import parse_target
    from tcl.tvm.tune import workload_task

    a = te.placeholder((64,), name="a")
    mod = tvm.IRModule({"main": te.create_prim_func([a, te.compute((64,), lambda i: a[i] * 2.0, name="b")])})
    target = parse_target("llvm -num-cores=1")
    for task in (nets.Task("scale", mod, 1, 64.0, ["test"]), workload_task("matmul:32,32,32")):
        pool = generate_pool(task, target, ms.cost_model.RandomModel(), 24, 0.5, 0, 16)
        keys = [_trace_key(c.sch.trace) for c in pool]
        assert len(keys) == len(set(keys)) and 1 <= len(keys) <= 24
    assert len(keys) == 24  # the matmul's design space has many programs


def test_tcl_adapt_refuses_bad_arguments_before_any_work(tmp_path, capsys):
    pytest.importorskip("tvm")
    from tcl.cli import main

    out = tmp_path / "out"
    assert main(["adapt", "--network", "resnet18,nosuch", "--out", str(out)]) == 2
    assert "unknown network 'nosuch'" in capsys.readouterr().err
    assert main(["adapt", "--network", "resnet18", "--out", str(out), "--fraction", "0"]) == 2
    assert "--fraction must be more than 0" in capsys.readouterr().err
    for bad in (["--fraction", "2"], ["--count", "0"], ["--pool-size", "-1"], ["--minutes", "0"]):
        with pytest.raises(SystemExit) as e:
            main(["adapt", "--network", "resnet18", "--out", str(out), *bad])
        assert e.value.code == 2
    assert not out.exists()
