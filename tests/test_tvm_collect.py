"""tcl.tvm.collect end to end on one tiny task: LocalRunner, a real RPC tracker + server, resume
after an interrupted run (cut line, kill -9), re-measuring on another target, and the readers."""

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.tvm
tvm = pytest.importorskip("tvm")

from tvm.s_tir import meta_schedule as ms  # noqa: E402

from tcl.packing import is_packed, pack_dataset
from tcl.records import read, read_platform  # noqa: E402
from tcl.tvm import networks as nets  # noqa: E402
from tcl.tvm.builder import default_target  # noqa: E402
from tcl.tvm.collect import CollectError, collect, remeasure, task_split  # noqa: E402

TASK = "sweep_matmul_64x64x64"  # a tiny task with a large design space
SMALL = dict(task_filter="matmul_64x64x64", batch_size=3, repeat=2, population=32)


def _records_file(d: Path) -> Path:
    (task_dir,) = [p for p in d.iterdir() if p.name.startswith(TASK)]
    return task_dir / "database_tuning_record.json"


def _trace_lines(path: Path) -> list[str]:
    return [json.dumps(json.loads(l)[1][0]) for l in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    stream = io.StringIO()
    result = collect("sweep", out, 6, default_target(2), held_out=("bert_tiny",), progress_stream=stream, **SMALL)
    return out, result, stream.getvalue()


def test_collect_local_writes_a_stock_database(local):
    out, result, progress = local
    assert result["measured"] == 6 and result["tasks_worked_on"] == 1 and result["stopped"] is None
    rec_file = _records_file(out)
    d = rec_file.parent
    shash = d.name.rsplit("-", 1)[1]

    # stock MetaSchedule reads it; the directory is keyed by the workload's structural hash
    db = ms.database.JSONDatabase(work_dir=str(d))
    records = db.get_all_tuning_records()
    assert len(records) == 6
    assert json.loads((d / "database_workload.json").read_text().splitlines()[0])[0] == shash
    assert len({str(r.trace) for r in records}) == 6  # no duplicate traces
    ok = [r for r in records if min(float(s) for s in r.run_secs) < 1e9]
    assert ok, "no program of a 64x64x64 matmul ran"
    for r in records:
        secs = [float(s) for s in r.run_secs]
        assert secs == [1e10] or (len(secs) == 2 and all(0 < s < 1 for s in secs))  # 2 repeats, or a failure

    info = json.loads((d / "task.json").read_text())
    assert info["name"] == TASK and info["shash"] == shash and info["networks"] == ["sweep"]
    assert info["split"] == "train" and info["flops"] == 2 * 64**3
    assert info["summary"]["programs"] + info["summary"]["failures"] == 6 and info["summary"]["cv_median"] >= 0

    plat = json.loads((out / "platform.json").read_text())
    assert plat["cores"] == 2 and plat["vector_isa"] and plat["vector_bits"] >= 128
    assert plat["l2_kb"] and plat["memory_gb"] and plat["host_detected"] and plat["rpc"] is None

    # the project's numpy-only reader loads the dataset too
    res = read(out)
    assert len(res.records) + len(res.failed) == 6 and res.skipped == 0
    assert read_platform(d)["target"] == plat["target"]

    log = (out / "collect-log.txt").read_text()
    assert "task 1/1 " + TASK in log and "with evolutionary search" in log  # both halves of the mix ran
    assert "6/6 programs" in progress and "ETA" in progress


def test_remeasure_same_programs_on_another_target(local, tmp_path):
    src, _, _ = local
    packed = tmp_path / "packed"  # the source as shipped: .xz databases
    shutil.copytree(src, packed)
    pack_dataset(packed)
    result = remeasure(packed, tmp_path / "haswell", "llvm -mcpu=haswell -num-cores=1", batch_size=3, repeat=2,
                       progress_stream=io.StringIO())
    assert result["measured"] == 6
    assert _trace_lines(_records_file(tmp_path / "haswell")) == _trace_lines(_records_file(src))
    plat = json.loads((tmp_path / "haswell" / "platform.json").read_text())
    assert plat["mcpu"] == "haswell" and plat["cores"] == 1 and plat["vector_isa"] == "avx2"
    assert plat["vector_bits"] == 256
    target = json.loads(_records_file(tmp_path / "haswell").read_text().splitlines()[0])[1][2]
    assert target["mcpu"] == "haswell"


def test_collecting_into_a_packed_dataset_restores_it(local, tmp_path):
    src, _, _ = local
    out = tmp_path / "ds"
    shutil.copytree(src, out)
    pack_dataset(out)
    collect("sweep", out, 6, default_target(2), max_minutes=1e-6, held_out=("bert_tiny",),
            progress_stream=io.StringIO(), **SMALL)
    assert not is_packed(out)  # the stock files are back, byte for byte, for TVM to append to
    assert _records_file(out).read_bytes() == _records_file(src).read_bytes()
    assert len(ms.database.JSONDatabase(work_dir=str(_records_file(out).parent)).get_all_tuning_records()) == 6


def test_resume_after_a_cut_line(local, tmp_path):
    src, _, _ = local
    out = tmp_path / "resume"
    shutil.copytree(src, out)
    rec = _records_file(out)
    lines = rec.read_bytes().splitlines(keepends=True)
    rec.write_bytes(b"".join(lines[:4]) + lines[4][:40])  # a kill in the middle of writing line 5
    result = collect("sweep", out, 8, default_target(2), held_out=("bert_tiny",), progress_stream=io.StringIO(),
                     **SMALL)
    assert result["measured"] == 4  # 8 wanted, 4 intact records kept
    new = rec.read_bytes().splitlines(keepends=True)
    assert len(new) == 8 and new[:4] == lines[:4]
    assert len(set(_trace_lines(rec))) == 8
    assert "dropped a line cut by an interrupted run" in (out / "collect-log.txt").read_text()
    # a finished task is not touched again; a time limit stops before any work
    again = collect("sweep", out, 8, default_target(2), held_out=("bert_tiny",), progress_stream=io.StringIO(), **SMALL)
    assert again["measured"] == 0 and again["tasks_worked_on"] == 0
    stopped = collect("sweep", out, 20, default_target(2), max_minutes=1e-6, held_out=None,
                      progress_stream=io.StringIO(), **SMALL)
    assert stopped["stopped"] == "max_minutes" and stopped["measured"] == 0


def test_resume_after_kill_9(tmp_path):
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "tcl.tvm.collect", "--network", "sweep", "--task-filter", "matmul_64x64x64",
           "--programs-per-task", "9", "--batch-size", "3", "--repeat", "2", "--random-fraction", "1",
           "--num-cores", "2", "--held-out", "none", "--out", str(out)]
    # cwd outside the source tree: the installed tcl (with its compiled _core) is the one imported
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        deadline = time.time() + 150
        while time.time() < deadline and proc.poll() is None:
            recs = list(out.glob("*/database_tuning_record.json"))
            if recs and recs[0].read_bytes().count(b"\n") >= 3:
                break
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    rec = _records_file(out)
    kept = rec.read_bytes()
    kept = kept[: kept.rfind(b"\n") + 1]  # the complete lines
    n_kept = kept.count(b"\n")
    assert 3 <= n_kept < 9, f"{n_kept} records when killed"
    result = collect("sweep", out, 9, default_target(2), random_fraction=1.0, held_out=None,
                     progress_stream=io.StringIO(), **SMALL)
    assert result["measured"] == 9 - n_kept
    assert rec.read_bytes().startswith(kept)  # written records stay
    assert len(set(_trace_lines(rec))) == 9
    assert len(ms.database.JSONDatabase(work_dir=str(rec.parent)).get_all_tuning_records()) == 9


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def rpc_tracker():
    pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado")
    port, server_port = _free_port(), _free_port()
    # own process groups: the server serves sessions in child processes, which must go too
    procs = [subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1",
                               "--port", str(port), "--port-end", str(port + 1), "--silent"],
                              start_new_session=True)]
    try:
        from tvm import rpc

        deadline = time.time() + 60
        while True:  # the tracker is up
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline and procs[0].poll() is None, "the RPC tracker did not start"
                time.sleep(0.2)
        procs.append(subprocess.Popen([sys.executable, "-m", "tvm.exec.rpc_server", "--host", "127.0.0.1",
                                       "--port", str(server_port), "--port-end", str(server_port + 1),
                                       "--tracker", f"127.0.0.1:{port}", "--key", "tcl-test", "--silent"],
                                      start_new_session=True))
        while "tcl-test" not in rpc.connect_tracker("127.0.0.1", port).summary().get("queue_info", {}):
            assert time.time() < deadline and procs[1].poll() is None, "the RPC server did not register"
            time.sleep(0.3)
        yield port
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=20)


def test_collect_through_rpc_tracker(rpc_tracker, tmp_path):
    out = tmp_path / "rpc"
    result = collect("sweep", out, 4, default_target(2), rpc=f"127.0.0.1:{rpc_tracker}", key="tcl-test",
                     random_fraction=1.0, held_out=None, progress_stream=io.StringIO(), **SMALL)
    assert result["measured"] == 4
    records = ms.database.JSONDatabase(work_dir=str(_records_file(out).parent)).get_all_tuning_records()
    assert len(records) == 4
    assert any(len(r.run_secs) == 2 and 0 < float(r.run_secs[0]) < 1 for r in records)
    assert json.loads((out / "platform.json").read_text())["rpc"] == f"127.0.0.1:{rpc_tracker} key=tcl-test"
    with pytest.raises(CollectError, match="no RPC server with key 'other'"):
        collect("sweep", tmp_path / "x", 4, default_target(2), rpc=f"127.0.0.1:{rpc_tracker}", key="other")


def test_clear_errors(tmp_path):
    with pytest.raises(CollectError, match="unknown network 'resnet1000'.*resnet18"):
        collect("resnet1000", tmp_path, 4)
    with pytest.raises(CollectError, match="mcpu='not-a-cpu'"):
        collect("sweep", tmp_path, 4, "llvm -mcpu=not-a-cpu -num-cores=1")
    if not tvm.device("cuda", 0).exist:
        with pytest.raises(CollectError, match="no cuda device on this machine"):
            collect("sweep", tmp_path, 4, "cuda")
    start = time.time()
    with pytest.raises(CollectError, match="cannot reach the TVM RPC tracker"):
        collect("sweep", tmp_path, 4, default_target(2), rpc=f"127.0.0.1:{_free_port()}", key="k")
    assert time.time() - start < 30
    assert [p.name for p in tmp_path.iterdir()] == [".collect.lock"]  # nothing but the lock before the checks pass
    for bad, match in [(dict(batch_size=0), "--batch-size must be positive"),
                       (dict(random_fraction=7), "--random-fraction must be between 0 and 1"),
                       (dict(programs_per_task=-5), "--programs-per-task must be positive"),
                       (dict(max_minutes=0), "--max-minutes must be positive"),
                       (dict(genetic_iters=0), "--genetic-iters must be positive"),
                       (dict(conv_layouts=("NCWH",)), "--conv-layouts takes one or more of NHWC, NCHW, not NCWH"),
                       (dict(conv_layouts=()), "--conv-layouts takes one or more")]:
        kwargs = {"programs_per_task": 4, **bad}
        start = time.time()
        with pytest.raises(CollectError, match=match):
            collect("sweep", tmp_path / "bad", kwargs.pop("programs_per_task"), **kwargs)
        assert time.time() - start < 5 and not (tmp_path / "bad").exists()  # refused before any set-up


def _listener(reply: bytes | None):
    """A TCP server on 127.0.0.1 that accepts and then says `reply` (None: nothing at all)."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    conns = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            conns.append(c)
            if reply is not None:
                c.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return srv, conns


@pytest.mark.parametrize("reply", [None, b"HTTP/1.0 400 Bad request\r\n\r\n"], ids=["silent", "http"])
def test_rpc_port_that_is_not_a_tracker_fails_fast(tmp_path, reply):
    from tcl.tvm.collect import check_tracker

    srv, conns = _listener(reply)
    try:
        start = time.time()
        with pytest.raises(CollectError, match="not .*a TVM RPC tracker"):
            check_tracker("127.0.0.1", srv.getsockname()[1], "k", timeout=2)
        assert time.time() - start < 10
    finally:
        srv.close()
        for c in conns:
            c.close()


def test_refuses_another_host_or_target(local, tmp_path):
    src, _, _ = local
    out = tmp_path / "other-host"
    shutil.copytree(src, out)
    plat = json.loads((out / "platform.json").read_text())
    plat.update(vendor="SomeOtherVendor", cpu_model="Another CPU", name="another-cpu-2c")
    (out / "platform.json").write_text(json.dumps(plat))
    with pytest.raises(CollectError, match="another host.*another-cpu-2c.*SomeOtherVendor"):
        collect("sweep", out, 8, default_target(2), held_out=None, progress_stream=io.StringIO(), **SMALL)
    with pytest.raises(CollectError, match="holds data of platform"):
        collect("sweep", src, 8, default_target(1), held_out=None, progress_stream=io.StringIO(), **SMALL)
    assert len(_records_file(out).read_text().splitlines()) == 6  # nothing added


def test_as_tuned_measures_as_tcl_tune_and_is_a_platform_of_its_own(local, tmp_path):
    """--as-tuned: the tasks with their weights prepacked (layout-free constants, as tcl tune extracts
    them) and every program timed from flushed caches in tcl tune's repeats. Such a dataset refuses
    warm measurements and the other way round, and a re-measurement keeps its way of measuring."""
    from tcl.tvm.collect import run_collect
    from tcl.tvm.collect_options import add_collect_arguments
    from tcl.tvm.network_tuning_config import FLUSHED_REPEATS

    out = tmp_path / "as-tuned"
    kw = dict(task_filter="matmul", max_tasks=1, batch_size=3, repeat=2, population=32, held_out=None,
              progress_stream=io.StringIO())
    result = collect("bert_tiny", out, 3, default_target(2), as_tuned=True, **kw)
    assert result["measured"] == 3
    plat = json.loads((out / "platform.json").read_text())
    assert plat["measurement"] == {"prepack_weights": True, "cache_flush": True}
    assert plat["name"].endswith("-2c-as-tuned")
    (d,) = [p for p in out.iterdir() if p.is_dir()]
    records = ms.database.JSONDatabase(work_dir=str(d)).get_all_tuning_records()
    assert len(records) == 3
    func = records[0].workload.mod["main"]
    assert list(func.attrs["layout_free_buffers"])  # the weights are the program's to lay out
    plain = nets.tasks_for("bert_tiny", default_target(2))
    assert d.name.rsplit("-", 1)[1] not in {t.shash for t in plain}  # another task than the warm datasets'
    for r in records:
        secs = [float(s) for s in r.run_secs]
        assert secs == [1e10] or len(secs) == FLUSHED_REPEATS

    with pytest.raises(CollectError, match="measured as `tcl tune` measures.*not on warm caches"):
        collect("bert_tiny", out, 6, default_target(2), **kw)
    with pytest.raises(CollectError, match="measured on warm caches.*not as `tcl tune` measures"):
        collect("sweep", local[0], 8, default_target(2), as_tuned=True, held_out=None, progress_stream=io.StringIO(),
                **SMALL)
    assert len(records) == len(ms.database.JSONDatabase(work_dir=str(d)).get_all_tuning_records())

    again = remeasure(out, tmp_path / "again", default_target(2), batch_size=3, progress_stream=io.StringIO())
    assert again["measured"] == 3
    assert json.loads((tmp_path / "again" / "platform.json").read_text())["measurement"] == plat["measurement"]
    secs = [len(r.run_secs) for r in ms.database.JSONDatabase(work_dir=str(tmp_path / "again" / d.name))
            .get_all_tuning_records()]
    assert set(secs) <= {1, FLUSHED_REPEATS}

    import argparse
    args = add_collect_arguments(argparse.ArgumentParser()).parse_args(
        ["--programs-from", str(local[0]), "--as-tuned", "--out", str(tmp_path / "x")])
    with pytest.raises(CollectError, match="--as-tuned: the programs of .* were measured on warm caches"):
        run_collect(args)


def test_host_identity_in_platform_json(local):
    from tcl.tvm.hardware import platform_name, same_host

    out, _, _ = local
    plat = json.loads((out / "platform.json").read_text())
    for k in ("vendor", "cpu_family", "cpu_model_number", "stepping", "isa_flags", "l2_kb", "host_cores"):
        assert k in plat
    assert plat["name"] == platform_name(plat) and plat["name"].endswith("-2c")
    assert same_host(plat, dict(plat)) == [] and same_host(plat, {**plat, "stepping": -1}) == ["stepping"]
    assert same_host(plat, {"vendor": plat["vendor"]}) == []  # fields one side lacks are not compared
    zen1 = {"vendor": "AuthenticAMD", "cpu_family": 23, "cpu_model_number": 1, "cpu_model": "AMD EPYC 7551", "cores": 2}
    assert platform_name(zen1) == "zen1-epyc-2c"
    assert platform_name({**zen1, "cpu_family": 25, "cpu_model_number": 17, "mcpu": "haswell", "host_mcpu": "znver4",
                          "cores": 1}) == "zen4-epyc-1c-haswell"


def test_pack_during_a_collection_loses_nothing(tmp_path):
    """`tcl pack` while a collection writes is refused; the collection's records all survive."""
    from tcl.cli import main as tcl_main

    out = tmp_path / "ds"
    cmd = [sys.executable, "-m", "tcl.tvm.collect", "--network", "sweep", "--task-filter", "matmul_64x64x64",
           "--programs-per-task", "12", "--batch-size", "2", "--repeat", "1", "--num-cores", "1",
           "--held-out", "none", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while not (list(out.glob("*/database_tuning_record.json"))
                   and _records_file(out).read_bytes().count(b"\n") >= 4):
            assert proc.poll() is None and time.time() < deadline, "the collection did not start writing"
            time.sleep(0.2)
        assert tcl_main(["pack", str(out)]) == 2  # refused: the collection holds the lock
        assert proc.wait(timeout=300) == 0
    finally:
        proc.kill()
    assert len(_records_file(out).read_bytes().splitlines()) == 12 and not is_packed(out)
    assert tcl_main(["pack", str(out)]) == 0 and is_packed(out)  # once it is done, pack works
    assert len(read(out).records) + len(read(out).failed) == 12


def test_killed_collector_leaves_no_workers(tmp_path):
    """SIGTERM ends `tcl collect --workers 2` and its worker processes at once, keeping what was written;
    a worker whose collector is killed outright (SIGKILL) ends by itself."""
    import signal

    import psutil

    records = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        out = tmp_path / sig.name
        cmd = [sys.executable, "-m", "tcl.tvm.collect", "--network", "sweep", "--task-filter", "matmul", "--max-tasks", "2",
               "--programs-per-task", "64", "--batch-size", "2", "--repeat", "1", "--num-cores", "1",
               "--held-out", "none", "--workers", "2", "--out", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 240
            while not any(p.stat().st_size for p in out.glob("*/database_tuning_record.json")):
                assert proc.poll() is None and time.time() < deadline, "the collection did not start writing"
                time.sleep(0.2)
            children = psutil.Process(proc.pid).children()  # the two workers and multiprocessing's resource tracker
            assert sum("spawn_main" in " ".join(c.cmdline()) for c in children) == 2
            proc.send_signal(sig)
            proc.wait(timeout=30)
            _, alive = psutil.wait_procs(children, timeout=20)
            assert not alive, f"{sig.name}: workers still running: {alive}"
        finally:
            proc.kill()
        records.append(sum(len(p.read_bytes().splitlines()) for p in out.glob("*/database_tuning_record.json")))
    assert all(n >= 1 for n in records)


def test_one_collection_per_directory(tmp_path):
    from tcl.packing import dataset_lock

    held = dataset_lock(tmp_path)  # as a running collection holds it
    try:
        start = time.time()
        with pytest.raises(CollectError, match="another process .*is writing"):
            collect("sweep", tmp_path, 4, default_target(2), held_out=None, **SMALL)
        assert time.time() - start < 5  # the lock comes first, before TVM's set-up
    finally:
        held.close()


def test_network_tasks_and_split():
    target = default_target(2)
    bert = nets.network_tasks("bert_tiny", target)
    assert len(bert) >= 10 and sum(t.weight for t in bert) > len(bert)  # repeated layers share tasks
    matmuls = [t for t in bert if "matmul" in t.name]
    assert matmuls and all(t.flops > 0 for t in matmuls)
    dcgan = nets.network_tasks("dcgan", target)
    assert any("conv2d_transpose" in t.name for t in dcgan)
    held = {t.shash for t in bert}
    assert task_split({"shash": bert[0].shash, "networks": ["vit_tiny"]}, held) == "test"  # shared: held out
    assert task_split({"shash": dcgan[0].shash, "networks": ["dcgan"]}, held) == "train"
    assert task_split({"shash": "1", "networks": ["resnet50"]}, set()) == "test"
    with pytest.raises(nets.UnknownNetworkError):
        nets.network_tasks("nope", target)


def _conv_data_shapes(tasks) -> list[list[int]]:
    shapes = []
    for t in tasks:
        if t.name.startswith("fused_conv2d"):
            data = t.mod[t.mod.get_global_vars()[0]].params[0]
            shapes.append([int(d) for d in data.shape])
    return shapes


def test_network_tasks_in_both_layouts_are_the_tasks_the_datasets_hold():
    """Collection gathers each network's convolutions as PyTorch gives them (NCHW, what the datasets
    began with) and as tcl tune compiles them (NHWC); a task the layout does not change comes once.
    The NCHW tasks are the datasets' task directories (named after each task's structural hash), so a
    collection resumes into them."""
    target = default_target(1)
    nchw = nets.network_tasks("resnet18", target)
    nhwc = nets.network_tasks("resnet18", target, conv_layout="NHWC")
    both = nets.tasks_for("resnet18", target)
    assert [1, 3, 224, 224] in _conv_data_shapes(nchw) and [1, 224, 224, 3] in _conv_data_shapes(nhwc)  # the stem
    assert all("transpose" not in t.name for t in nchw)
    assert [t.shash for t in both] == list(dict.fromkeys([t.shash for t in nchw + nhwc]))
    assert len(both) < len(nchw) + len(nhwc)  # the classifier's matmul is the same task in both
    assert [t.shash for t in nets.tasks_for("resnet18", target, conv_layouts=("NCHW",))] == [t.shash for t in nchw]
    from tcl.tvm.adapt import tasks_of
    assert [t.shash for t in tasks_of("resnet18", target)] == [t.shash for t in nhwc]  # what tcl tune tunes

    root = Path(__file__).resolve().parent.parent / "datasets" / "intel-f6m167-xeon-1c"
    if root.is_dir():
        held = {d.name.rsplit("-", 1)[1] for d in root.iterdir() if d.is_dir()}
        assert {t.shash for t in nchw} <= held


def test_held_out_hashes_follow_the_layouts(tmp_path):
    """The held-out split's cache is kept per set of layouts: adding a layout recomputes it."""
    from tcl.tvm.task_dirs import held_out_hashes

    target = default_target(1)
    only = held_out_hashes(target, tmp_path, ("vit_tiny",), ("NCHW",))
    cache = json.loads((tmp_path / ".held_out_tasks.json").read_text())
    assert cache["conv_layouts"] == ["NCHW"]
    both = held_out_hashes(target, tmp_path, ("vit_tiny",), ("NCHW", "NHWC"))
    assert only < both  # the patch embedding's convolution in NHWC is another task
    assert json.loads((tmp_path / ".held_out_tasks.json").read_text())["conv_layouts"] == ["NCHW", "NHWC"]
    assert held_out_hashes(target, tmp_path, ("vit_tiny",), ("NCHW", "NHWC")) == both


def test_sweep_covers_every_operator_family():
    from tcl.tvm.sweep import _BUILDERS, SHAPES

    tasks = nets.sweep_tasks()
    assert len({t.name for t in tasks}) == len(tasks) == len(SHAPES)
    assert {op for op, _ in SHAPES} == set(_BUILDERS)  # every family has shapes
    assert all(sum(op == fam for op, _ in SHAPES) >= 2 or fam == "conv3d_ncdhw" for fam in _BUILDERS)
    assert all(t.flops > 0 for t in tasks if "pool" not in t.name and "reduce" not in t.name)
    # the original sweep's tasks keep their names (dataset directories are named after them)
    assert tasks[0].name == "sweep_matmul_1x1000x512" and tasks[8].name == "sweep_conv2d_1x56x56x64x64x3x1x1"


def test_audio_network_has_conv1d_tasks():
    tasks = nets.network_tasks("wav2vec_features", default_target(1))
    assert sum("conv1d" in t.name for t in tasks) >= 5


def test_workers_share_the_runner_and_pin_measurement(tmp_path):
    """Two collecting processes: every task gets its programs once; with two CPUs allowed, programs run on
    the last one and everything else on the others."""
    allowed = sorted(os.sched_getaffinity(0))
    pin = [allowed[-1]] if len(allowed) > 1 else None
    out = tmp_path / "w"
    result = collect("sweep", out, 4, default_target(1), held_out=None, progress_stream=io.StringIO(),
                     task_filter="matmul_", max_tasks=3, batch_size=2, repeat=1, population=32, workers=2,
                     measure_cpus=pin)
    assert result["measured"] == 12 and result["tasks_worked_on"] == 3 and result["programs_per_hour"] > 0
    dirs = [p for p in out.iterdir() if p.is_dir()]
    assert len(dirs) == 3
    for d in dirs:
        lines = (d / "database_tuning_record.json").read_text().splitlines()
        assert len(lines) == 4 and len(set(_trace_lines(d / "database_tuning_record.json"))) == 4
    assert sorted(os.sched_getaffinity(0)) == allowed  # the calling process keeps its CPUs
    with pytest.raises(CollectError, match="leaves no CPU"):
        collect("sweep", tmp_path / "x", 4, default_target(1), measure_cpus=allowed)


def test_native_stderr_of_worker_processes_goes_to_the_log(tmp_path, capfd):
    """What TVM's C++ side of a collecting process writes to stderr (e.g. its warnings about pooling
    tasks' schedule rules) lands in the dataset's tvm-stderr.txt; the terminal keeps the progress."""
    from tcl.tvm.console import native_output_to

    log = tmp_path / "tvm-stderr.txt"
    with native_output_to(log) as terminal:
        subprocess.run([sys.executable, "-c", "import os; os.write(2, b'Warning: Unknown schedule rule\\n')"],
                       check=True)
        print("[collect] 1/1 programs", file=terminal)
    err = capfd.readouterr().err
    assert "Unknown schedule rule" not in err and "[collect] 1/1 programs" in err
    assert "Unknown schedule rule" in log.read_text()
