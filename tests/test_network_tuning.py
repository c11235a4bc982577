"""Whole-network tuning end to end on a tiny network: a real MetaSchedule session with TVM's builder
and LocalRunner, the exported library loaded back and run, outputs compared with the untuned build
and with the framework the network came from."""

import json
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("tvm")
torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from tcl.tvm.network_import import from_onnx, from_torch, parse_shapes  # noqa: E402
from tcl.tvm.network_tuning import load_library, outputs, run_library, tune_network  # noqa: E402
from tcl.tvm.network_tuning_config import TCL_SEARCH  # noqa: E402

pytestmark = pytest.mark.slow
TARGET = '{"kind": "llvm", "num-cores": 1}'


def tiny_module():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16)).eval()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    out = tmp_path_factory.mktemp("tuned")
    module = tiny_module()
    net = from_torch(module, (torch.randn(2, 32),), "tiny")
    report = tune_network(net, out, trials=16, target=TARGET, trials_per_iter=8)
    return out, net, module, report


def test_tune_export_load_run_matches_untuned_and_pytorch(tuned):
    out, net, module, report = tuned
    assert report["trials"] == 16 and report["search"] == TCL_SEARCH
    assert [t["name"] for t in report["tasks"]] and all(t["best_s"] > 0 for t in report["tasks"])
    assert report["estimated_s"] == pytest.approx(sum(t["weight"] * t["best_s"] for t in report["tasks"]))
    assert report["curve"] and report["curve"][-1][1] == pytest.approx(report["estimated_s"])
    split = report["time_split"]  # every part was spent, and together they are the session
    assert split["build_s"] > 0 and split["search_s"] > 0 and split["measure_s"] > 0
    assert sum(split.values()) == pytest.approx(report["seconds"], abs=0.2)
    e2e = report["end_to_end"]
    for what in ("tuned", "untuned", "reference"):
        assert e2e[what]["median_s"] > 0 and e2e[what]["min_s"] <= e2e[what]["median_s"] <= e2e[what]["max_s"]
    assert e2e["reference"]["label"] == "PyTorch eager"
    assert e2e["max_abs_diff_vs_untuned"] < 1e-4
    # the library file alone runs the network: weights are inside, only the input is given
    vm, dev = load_library(out / "network.so")
    got = outputs(run_library(vm, dev, net.inputs)())[0]
    with torch.no_grad():
        want = module(torch.from_numpy(net.inputs[0])).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    saved = json.loads((out / "report.json").read_text())
    assert saved["library"] == str(out / "network.so")


def test_kernel_seconds_times_each_tuned_kernel_inside_the_network(tuned):
    from tcl.tvm.network_tuning import kernel_seconds

    out, net, _, report = tuned
    kernels = kernel_seconds(out / "network.so", net.inputs, repeats=5)
    tasks = {t["name"] for t in report["tasks"]}
    assert {name.removesuffix("_prepacked") for name in kernels} == tasks
    assert all(s > 0 for s in kernels.values())
    assert not any(name.startswith("vm.builtin.") for name in kernels)


def test_database_is_stock_and_a_second_run_resumes_it(tuned, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    out, net, _, first = tuned
    db = ms.database.JSONDatabase(work_dir=str(out / "db"))
    assert len(db.get_all_tuning_records()) == first["trials"]
    again = tune_network(net, out, trials=8, target=TARGET, trials_per_iter=8, measure=False)
    assert again["resumed_records"] == first["trials"]
    assert len(ms.database.JSONDatabase(work_dir=str(out / "db")).get_all_tuning_records()) == first["trials"] + 8
    # what was best before stays counted: the estimate can only improve
    assert again["estimated_s"] <= first["estimated_s"] * (1 + 1e-9)


def test_a_resumed_run_measures_the_tasks_without_a_program_first(tmp_path):
    from tcl.tvm.network_import import from_relax

    net = from_torch(tiny_module(), (torch.randn(1, 32),), "tiny")
    first = tune_network(net, tmp_path, trials=4, target=TARGET, trials_per_iter=4, measure=False)
    assert [t["batches"] for t in first["tasks"]].count(0) == len(first["tasks"]) - 1
    # the same network given as a Relax module: the same tasks, the same database keys
    again = tune_network(from_relax(net.mod, net.inputs), tmp_path, trials=4, target=TARGET, trials_per_iter=4,
                         measure=False)
    assert again["resumed_records"] == 4
    untouched = [i for i, t in enumerate(first["tasks"]) if t["batches"] == 0]
    assert again["tasks"][untouched[0]]["batches"] == 1 and again["estimated_s"] is not None


def test_minutes_budget_ends_the_session(tmp_path):
    net = from_torch(tiny_module(), (torch.randn(1, 32),), "tiny")
    report = tune_network(net, tmp_path, minutes=0.25, target=TARGET, trials_per_iter=4, measure=False,
                          search={"population_size": 32, "genetic_num_iters": 1})
    # the session stops at the first task choice after 15 s; what is running then is still measured
    assert 0 < report["trials"] and report["seconds"] < 15 + 90
    assert report["budget"] == {"minutes": 0.25, "trials": None}
    # the search settings reach MetaSchedule's evolutionary search: one generation per batch
    log = "".join(p.read_text() for p in (tmp_path / "logs").glob("*task_*.log"))
    assert "Evolve iter #0" in log and "Evolve iter #1" not in log


def test_a_build_past_the_tuning_timeout_is_a_failed_candidate_not_a_stall(tmp_path, capsys):
    net = from_torch(tiny_module(), (torch.randn(1, 32),), "tiny")
    report = tune_network(net, tmp_path, trials=4, target=TARGET, trials_per_iter=4, measure=False,
                          search={"population_size": 32, "genetic_num_iters": 1}, build_timeout_sec=0.001)
    assert report["trials"] == 4 and report["builds_timed_out"] == 4
    # no latency comes from a program that was never built
    assert all(t["best_s"] is None for t in report["tasks"]) and report["estimated_s"] is None
    from tcl.cli.tvm_commands import print_summary

    print_summary({"tcl": report}, tmp_path, net)
    assert "(4 candidates dropped: build over 0.001 s)" in capsys.readouterr().out


def test_onnx_file_through_the_cli(tmp_path, capfd):
    from tcl.cli import main

    module = tiny_module()
    path = tmp_path / "tiny.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's notice
        torch.onnx.export(module, (torch.randn(1, 32),), str(path), input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}}, dynamo=False)
    # a symbolic batch needs a shape; the error names the input and what to pass
    with pytest.raises(ValueError, match="--input-shape 'x:1,32'"):
        from_onnx(path)
    assert parse_shapes("x:3,32") == {"x": (3, 32)}
    out = tmp_path / "out"
    rc = main(["tune", "--onnx", str(path), "--input-shape", "x:3,32", "--trials", "8", "--target", TARGET,
               "--out", str(out)])
    assert rc == 0
    printed, err = capfd.readouterr()
    assert "onnxruntime (1 threads)" in printed and "compiled library" in printed
    assert "tuning time with tcl: search " in printed  # where the budget went
    # the terminal gets our progress only: MetaSchedule's logs and TVM's C++ warnings go to files
    assert "[tcl]" in err and "[INFO]" not in err and "Warning" not in err, err
    assert (out / "tcl" / "logs" / "stderr.log").exists()
    assert "vm = relax.VirtualMachine" in printed
    report = json.loads((out / "report.json").read_text())["runs"]["tcl"]
    assert report["end_to_end"]["reference"]["label"] == "onnxruntime"
    assert report["cache_flush"] is True  # the default runner times each program from flushed caches
    assert (out / "report.png").stat().st_size > 0
    vm, dev = load_library(out / "tcl" / "network.so")
    x = np.random.default_rng(1).standard_normal((3, 32)).astype("float32")
    import onnxruntime as ort

    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(outputs(run_library(vm, dev, [x])())[0], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("argv, message", [
    (["--onnx", "{missing}"], "no such ONNX file"),
    (["--onnx", "{garbage}"], "not an ONNX model"),
    (["--network", "resnet18", "--minutes", "0"], "must be more than 0"),
])
def test_bad_tune_input_is_one_line(tmp_path, argv, message):
    import subprocess

    garbage = tmp_path / "g.onnx"
    garbage.write_bytes(b"\x00not onnx at all" * 10)
    argv = [a.format(missing=tmp_path / "none.onnx", garbage=garbage) for a in argv]
    r = subprocess.run([sys.executable, "-m", "tcl.cli", "tune", *argv, "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]  # argparse prints its usage first
    assert last.startswith("tcl tune: error: ") and message in last, r.stderr


def test_prepacked_weights_are_converted_at_compile_time_and_give_the_plain_build_s_outputs(tmp_path):
    """Tuned with weights layout-free (the default), the programs read blocked weights that the compiled
    module holds as constants, so no conversion runs per inference; the plain build (weights in the
    network's layout) is the reference."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.network_tuning import PREPACK_WEIGHTS, tuned_module

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(8, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                                 torch.nn.Conv2d(32, 16, 3, padding=1)).eval()
    net = from_torch(module, (torch.randn(1, 8, 16, 16),), "tinyconv")
    assert PREPACK_WEIGHTS
    got = {}
    for prepack in (True, False):
        out = tmp_path / str(prepack)
        report = tune_network(net, out, trials=16, target=TARGET, trials_per_iter=8, prepack_weights=prepack)
        assert report["prepack_weights"] is prepack and report["end_to_end"]["max_abs_diff_vs_untuned"] < 1e-4
        vm, dev = load_library(out / "network.so")
        got[prepack] = outputs(run_library(vm, dev, net.inputs)())[0]
        mod = tuned_module(net, ms.database.JSONDatabase(work_dir=str(out / "db")), tvm.target.Target(json.loads(TARGET)),
                           prepack)
        main = mod["main"].script()
        called = sorted({name for name in (g.name_hint for g in mod.get_global_vars()) if f"R.call_tir({name}," in main
                         or f"R.call_tir(cls.{name}," in main})
        convs = [n for n in called if "conv2d" in n]
        if prepack:  # the tuned convolutions take converted constants; the conversions themselves were folded away
            assert convs and all(n.endswith("_prepacked") for n in convs), called
            assert "weight_prepack" not in main
        else:
            assert not any("prepack" in n for n in called), called
    with torch.no_grad():
        want = module(torch.from_numpy(net.inputs[0])).numpy()
    np.testing.assert_allclose(got[True], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[True], got[False], rtol=1e-5, atol=1e-6)
