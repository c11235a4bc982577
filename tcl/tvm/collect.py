"""Collect measured programs per tuning task into stock MetaSchedule JSONDatabase directories.

Layout of a dataset directory:
    platform.json                  hardware descriptor + target + date (tcl.tvm.hardware)
    collect-log.txt                what happened, including every failed build/run message
    .held_out_tasks.json           cache: structural hashes of the held-out networks' tasks
    <task name>-<shash>/           one stock JSONDatabase per task (readable by ms.database.JSONDatabase)
        database_workload.json, database_tuning_record.json, task.json (name, weights, networks,
        flops, split, summary: programs, failures, median coefficient of variation of the repeats)

Per task, the first `random_fraction` of the programs are random samples of the design space
(ReplayTrace, as TenSet) and the rest come from evolutionary search guided by XGBoost trained on the
task's measured programs (a good tail). Identical traces are measured once. A failed build or run is
stored as run_secs [1e10], never as a latency. Records are appended after each measured batch, so a
killed run (even kill -9) loses at most that batch; running the same command again continues.
"""
from __future__ import annotations

import argparse
import itertools
import fcntl
import json
import logging
import os
import shutil
import socket
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target, codegen

from . import networks as nets
from .builder import default_target, import_cpu_tensor_intrin, make_builder, make_runner
from .dataset import records_in_file_order
from ..records import is_packed, pack_dataset
from .hardware import platform_descriptor

FAILED = 1e10  # what MetaSchedule stores as run_secs for a failed build or run
LOG = logging.getLogger("tcl.collect")


class CollectError(RuntimeError):
    """A problem the user can fix: unknown network, a target TVM cannot build, an unreachable tracker."""


# ---------------------------------------------------------------------------------------------
# Targets, trackers


def parse_target(spec: str | dict | Target | None = None, num_cores: int | None = None,
                 mcpu: str | None = None) -> Target:
    """A Target from None (this host), a JSON dict, or 'llvm -mcpu=haswell -num-cores=1'-style text."""
    if isinstance(spec, Target):
        return spec
    if spec is None or spec == "llvm":
        return default_target(num_cores, mcpu)
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        spec = json.loads(spec)
    if isinstance(spec, str):
        kind, *flags = spec.split()
        spec = {"kind": kind}
        for f in flags:
            k, _, v = f.lstrip("-").partition("=")
            spec[k] = int(v) if v.isdigit() else v
    spec = dict(spec)
    if spec.get("kind") == "llvm":
        spec.setdefault("mcpu", mcpu or codegen.llvm_get_system_cpu())
        spec.setdefault("num-cores", num_cores or default_target().attrs["num-cores"])
    try:
        return Target(spec)
    except Exception as e:  # TVM raises several types for a bad target
        raise CollectError(f"not a valid TVM target: {spec} ({str(e).splitlines()[-1]})") from None


def check_target(target: Target) -> None:
    """Compile a tiny function for `target`, so a bad target fails now with a clear message."""
    if target.kind.name == "llvm":
        mcpu = str(target.attrs.get("mcpu", ""))
        if mcpu and not codegen.llvm_is_valid_cpu(mcpu, codegen.llvm_get_system_triple()):
            raise CollectError(f"LLVM does not know mcpu={mcpu!r} (target {target})")
    from tvm import te

    a = te.placeholder((8,), name="A")
    b = te.compute((8,), lambda i: a[i] + 1.0, name="B")
    try:
        tvm.compile(tvm.IRModule({"main": te.create_prim_func([a, b])}), target=target)
    except Exception as e:
        raise CollectError(f"TVM cannot build for target {target}: {str(e).strip().splitlines()[-1]}") from None


def local_device_target(target: Target) -> Target:
    """A GPU target measured on this machine: the device must exist; a bare kind ({"kind": "cuda"})
    gets the device's limits (MetaSchedule's GPU rules need max_threads_per_block and friends)."""
    if target.kind.name == "llvm":
        return target
    dev = tvm.device(target.kind.name, 0)
    if not dev.exist:
        raise CollectError(f"no {target.kind.name} device on this machine; measure through --rpc on a machine "
                           "that has one, or use an llvm target")
    return target if "max_threads_per_block" in target.attrs else Target.from_device(dev)


def parse_rpc(rpc: str | None) -> tuple[str, int] | None:
    if not rpc:
        return None
    host, _, port = rpc.rpartition(":")
    if not host or not port.isdigit():
        raise CollectError(f"--rpc wants HOST:PORT of a TVM RPC tracker, not {rpc!r}")
    return host, int(port)


def check_tracker(host: str, port: int, key: str, timeout: float = 5.0) -> None:
    """The tracker answers and has a server registered under `key` (or fails with what to do)."""
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise CollectError(f"cannot reach the TVM RPC tracker at {host}:{port} ({e}); start one with "
                           f"`python -m tvm.exec.rpc_tracker --host {host} --port {port}`") from None
    from tvm import rpc

    summary = rpc.connect_tracker(host, port).summary()
    keys = {k.split(":")[-1] for info in summary.get("server_info", []) for k in [info.get("key", "")]}
    if key not in keys and key not in summary.get("queue_info", {}):
        raise CollectError(f"no RPC server with key {key!r} at tracker {host}:{port} (registered: "
                           f"{sorted(keys) or 'none'}); start one with `python -m tvm.exec.rpc_server "
                           f"--tracker={host}:{port} --key={key}`")


# ---------------------------------------------------------------------------------------------
# Task directories


def _write_json(path: Path, obj) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)  # atomic: a kill never leaves half a file


def _repair_lines(path: Path) -> int:
    """Drop a last line cut by a kill (no newline, or not JSON); returns how many bytes were dropped."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    keep = len(data) if data.endswith(b"\n") else data.rfind(b"\n") + 1
    if keep:  # the last complete line must parse too
        start = data.rfind(b"\n", 0, keep - 1) + 1
        try:
            json.loads(data[start:keep])
        except ValueError:
            keep = start
    if keep != len(data):
        with open(path, "r+b") as f:
            f.truncate(keep)
    return len(data) - keep


def task_dir(out_dir: Path, task: nets.Task) -> Path:
    """The task's directory: an existing one with the same structural hash, else <name>-<shash>."""
    found = sorted(out_dir.glob(f"*-{task.shash}"))
    return found[0] if found else out_dir / f"{task.name}-{task.shash}"


def held_out_hashes(target: Target, out_dir: Path | None = None, held_out=nets.HELD_OUT) -> set[str]:
    """Structural hashes of every task of the held-out networks (cached in out_dir)."""
    cache = out_dir / ".held_out_tasks.json" if out_dir is not None else None
    if cache is not None and cache.exists():
        data = json.loads(cache.read_text())
        if sorted(data["hashes"]) == sorted(held_out):
            return {h for hs in data["hashes"].values() for h in hs}
    hashes = {n: sorted(t.shash for t in nets.tasks_for(n, target)) for n in held_out}
    if cache is not None:
        _write_json(cache, {"target": str(target), "hashes": hashes})
    return {h for hs in hashes.values() for h in hs}


def task_split(info: dict, held_out: set[str], held_out_networks=nets.HELD_OUT) -> str:
    """'test' for a task of a held-out network or shared with one, else 'train'."""
    if info["shash"] in held_out or set(info.get("networks", [])) & set(held_out_networks):
        return "test"
    return "train"


def _update_task_info(d: Path, task: nets.Task, network: str, split: tuple | None, **extra) -> dict:
    """Create or update task.json; split = (held-out hashes, held-out networks) or None."""
    path = d / "task.json"
    info = json.loads(path.read_text()) if path.exists() else {
        "name": task.name, "shash": task.shash, "flops": task.flops, "weight": task.weight,
        "weights": {}, "networks": []}
    info["weights"][network] = task.weight
    if network not in info["networks"]:
        info["networks"].append(network)
    if split is not None:
        info["split"] = task_split(info, *split)
    info.update(extra)
    _write_json(path, info)
    return info


def _count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def summarize(records) -> dict:
    """Counts and the spread of repeated measurements (coefficient of variation) of a task's records."""
    ok = [[float(s) for s in r.run_secs] for r in records if min(float(s) for s in r.run_secs) < FAILED / 10]
    cvs = [statistics.pstdev(s) / statistics.mean(s) for s in ok if len(s) > 1]
    return {"programs": len(ok), "failures": len(records) - len(ok),
            "cv_median": round(statistics.median(cvs), 5) if cvs else None,
            "best_secs": min(statistics.mean(s) for s in ok) if ok else None}


# ---------------------------------------------------------------------------------------------
# Measuring


class Progress:
    """One status line on stderr: programs done, rate, ETA (a line every 30 s when not a terminal)."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.done, self.stream = total, 0, stream
        self.start = self.last = time.time()
        self.tty = stream.isatty()

    def update(self, n: int, what: str = "") -> None:
        self.done += n
        now = time.time()
        if not self.tty and now - self.last < 30 and self.done < self.total:
            return
        self.last = now
        rate = self.done / max(now - self.start, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        eta_s = f"{int(eta // 3600)}h{int(eta % 3600 // 60):02d}m{int(eta % 60):02d}s" if eta != float("inf") else "?"
        line = f"[collect] {self.done}/{self.total} programs  {rate * 60:.1f}/min  ETA {eta_s}  {what}"
        print(("\r" + line[:150].ljust(150)) if self.tty else line, end="" if self.tty else "\n",
              file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=self.stream)


@dataclass
class Measurer:
    """Builds and runs candidates, appends their records to a task's database."""

    target: Target
    builder: ms.builder.Builder
    runner: ms.runner.Runner
    measured: int = 0
    failed: int = 0
    seconds: float = 0.0

    def close(self) -> None:
        """Stop the builder's and the runner's worker processes."""
        if hasattr(self.builder, "shutdown"):
            self.builder.shutdown()
        if getattr(self.runner, "pool", None) is not None:  # LocalRunner, RPCRunner
            self.runner.pool.shutdown()

    def measure(self, db, workload, cands) -> list:
        start = time.time()
        built = self.builder.build([ms.builder.BuilderInput(c.sch.mod, self.target) for c in cands])
        results: list = [None] * len(cands)
        todo = []
        for i, (c, b) in enumerate(zip(cands, built)):
            if b.error_msg:
                results[i] = ms.runner.RunnerResult(None, "build: " + b.error_msg)
            else:
                todo.append(i)
        device = "cpu" if self.target.kind.name == "llvm" else self.target.kind.name
        inputs = [ms.runner.RunnerInput(built[i].artifact_path, device, cands[i].args_info) for i in todo]
        for i, fut in zip(todo, self.runner.run(inputs)):
            results[i] = fut.result()
        for b in built:  # the exported libraries are not needed once run
            if b.artifact_path:
                shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
        for c, r in zip(cands, results):
            secs = [float(s) for s in r.run_secs] if r.run_secs and not r.error_msg else [FAILED]
            if secs == [FAILED]:
                self.failed += 1
                LOG.warning("failed program (stored as run_secs [1e10]): %s",
                            (r.error_msg or "no result").strip().splitlines()[-1][:300])
            db.commit_tuning_record(ms.database.TuningRecord(c.sch.trace, workload, secs, self.target, c.args_info))
        self.measured += len(cands)
        self.seconds += time.time() - start
        return results


def _trace_key(trace) -> str:
    return str(trace)  # 0.1 ms per trace; the same text for a trace and its database round trip


@dataclass
class Budget:
    deadline: float | None = None

    def left(self) -> bool:
        return self.deadline is None or time.time() < self.deadline


def _search_context(task, target, strategy, seed, threads, db, workload, cost_model, trials, batch):
    ctx = ms.TuneContext(mod=task.mod, target=target, space_generator="post-order-apply",
                         search_strategy=strategy, task_name=task.name, rand_state=seed,
                         num_threads=threads, logger=LOG)
    ctx.pre_tuning(max_trials=trials, num_trials_per_iter=batch, design_spaces=ctx.generate_design_space(),
                   database=db, cost_model=cost_model)
    return ctx


def collect_task(task: nets.Task, d: Path, programs: int, measurer: Measurer, budget: Budget,
                 progress: Progress, random_fraction: float = 0.5, batch_size: int = 16,
                 seed: int = 0, population: int = 256, max_stale_batches: int = 3) -> dict:
    """Measure up to `programs` distinct programs of one task into its JSONDatabase `d` (resumable)."""
    d.mkdir(parents=True, exist_ok=True)
    for f in ("database_workload.json", "database_tuning_record.json"):
        if _repair_lines(d / f):
            LOG.warning("%s: dropped a line cut by an interrupted run", d / f)
    db = ms.database.JSONDatabase(work_dir=str(d))
    workload = db.commit_workload(task.mod)
    records = db.get_all_tuning_records()
    seen = {_trace_key(r.trace) for r in records}
    n_done = len(records)
    n_random = round(programs * random_fraction)
    threads = min(int(measurer.target.attrs.get("num-cores", 1)), os.cpu_count() or 1)
    stale = 0
    while n_done < programs and budget.left() and stale < max_stale_batches:
        evolutionary = n_done >= n_random
        want = (programs if evolutionary else n_random) - n_done
        if evolutionary:
            model = ms.cost_model.XGBModel(num_tuning_cores=threads)
            strategy = ms.search_strategy.EvolutionarySearch(population_size=population)
        else:
            model, strategy = None, ms.search_strategy.ReplayTrace()
        # seeded by progress, so a resumed run does not replay the same random choices
        ctx = _search_context(task, measurer.target, strategy, seed * 100003 + n_done + 1, threads, db,
                              workload, model, 4 * want + batch_size, batch_size)
        if model is not None and records:  # XGBoost starts from everything measured so far
            ok = [r for r in records if min(float(s) for s in r.run_secs) < FAILED / 10]
            model.update(ctx, [r.as_measure_candidate() for r in ok],
                         [ms.runner.RunnerResult([float(s) for s in r.run_secs], None) for r in ok])
        while n_done < (programs if evolutionary else n_random) and budget.left() and stale < max_stale_batches:
            cands = ctx.generate_measure_candidates()
            if not cands:
                break
            fresh, keys = [], set()
            for c in cands:
                k = _trace_key(c.sch.trace)
                if k not in seen and k not in keys:
                    fresh.append(c)
                    keys.add(k)
            fresh = fresh[: (programs if evolutionary else n_random) - n_done]
            stale = 0 if fresh else stale + 1  # a small design space runs out of new programs
            if not fresh:
                ctx.notify_runner_results([], [])
                continue
            results = measurer.measure(db, workload, fresh)
            seen |= keys
            n_done += len(fresh)
            ctx.notify_runner_results(fresh, results)
            if model is not None:
                model.update(ctx, fresh, results)
            progress.update(len(fresh), f"{task.name} {n_done}/{programs}")
        ctx.post_tuning()
        if not budget.left() or stale >= max_stale_batches:
            break
        records = db.get_all_tuning_records()
        if not evolutionary and n_done < n_random:  # replay-trace ran out of trials: search the rest
            n_random = n_done
    records = db.get_all_tuning_records()
    out = summarize(records)
    out["exhausted"] = stale >= max_stale_batches
    return out


# ---------------------------------------------------------------------------------------------
# Entry points


def _lock(out_dir: Path):
    """An exclusive lock on the dataset directory: two runs appending to one database would mix lines.
    The OS drops it when the process dies, even by kill -9."""
    f = open(out_dir / ".collect.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise CollectError(f"another collection is writing to {out_dir}; wait for it or stop it first") from None
    return f


def _unpack(out_dir: Path):
    """A shipped (packed) dataset goes back to stock plain files, which the collector appends to."""
    if is_packed(out_dir):
        stats = pack_dataset(out_dir, restore=True)
        print(f"[collect] {out_dir}: unpacked {stats['files']} .xz files to continue collecting "
              f"(`tcl pack {out_dir}` compresses them again)", file=sys.stderr)


def _setup_log(out_dir: Path) -> logging.Handler:
    handler = logging.FileHandler(out_dir / "collect-log.txt")  # not .log: tcl.records reads *.log as Ansor logs
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False  # the terminal shows the progress line; details go to the log file
    return handler


def collect(network_or_sweep: str | list[str], out_dir, programs_per_task: int, target=None,
            rpc: str | None = None, max_minutes: float | None = None, *, key: str | None = None,
            random_fraction: float = 0.5, batch_size: int = 16, repeat: int = 3, min_repeat_ms: int = 100,
            seed: int = 0, max_tasks: int | None = None, task_filter: str | None = None, held_out=nets.HELD_OUT,
            platform_info: dict | None = None, builder_workers: int | None = None,
            population: int = 256, progress_stream=sys.stderr) -> dict:
    """Collect `programs_per_task` measured programs for every task of the networks (or "sweep").

    network_or_sweep: a name from `networks.NETWORKS`, "sweep", or a list / comma-separated list.
    target: None (this host, all cores), a Target, a dict, or text like "llvm -mcpu=haswell -num-cores=1".
    rpc: "HOST:PORT" of a TVM RPC tracker, with `key`, to measure on the devices registered there.
    held_out: networks whose tasks are the test split (None: do not compute the split).
    Returns a summary: tasks, programs measured now, failures, seconds per program, stop reason.
    """
    names = network_or_sweep.split(",") if isinstance(network_or_sweep, str) else list(network_or_sweep)
    for n in names:
        if n not in nets.NETWORKS and n != nets.SWEEP:
            raise CollectError(f"unknown network {n!r}; known: {', '.join(sorted(nets.NETWORKS))}, {nets.SWEEP}")
    target = parse_target(target)
    tracker = _check_rpc(rpc, key)
    if tracker is None:
        target = local_device_target(target)
    check_target(target)
    if target.kind.name == "llvm":
        import_cpu_tensor_intrin()  # 1.6 s instead of 23-34 s for TuneContext's import
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = _lock(out_dir)
    _unpack(out_dir)
    handler = _setup_log(out_dir)
    try:
        return _collect(names, out_dir, programs_per_task, target, tracker, key, max_minutes, random_fraction,
                        batch_size, repeat, min_repeat_ms, seed, max_tasks, task_filter, held_out, platform_info,
                        builder_workers, population, progress_stream)
    finally:
        LOG.removeHandler(handler)
        handler.close()
        lock.close()


def _write_platform(out_dir: Path, target, tracker, key, platform_info) -> str | None:
    """platform.json for a new dataset; an existing one must be for the same target."""
    rpc_text = f"{tracker[0]}:{tracker[1]} key={key}" if tracker else None
    desc = platform_descriptor(target, host=platform_info, rpc=rpc_text)
    pf = out_dir / "platform.json"
    if pf.exists():
        old = json.loads(pf.read_text())
        if old.get("target") != desc["target"]:
            raise CollectError(f"{out_dir} holds data for target {old.get('target')}, not {desc['target']}; "
                               "use one directory per platform")
        return rpc_text
    if tracker and platform_info is None:
        LOG.warning("RPC: the device's hardware was not probed; run tcl/tvm/hardware.py on it and pass "
                    "--platform-info")
    _write_json(pf, desc)
    return rpc_text


def _check_rpc(rpc: str | None, key: str | None) -> tuple[str, int] | None:
    tracker = parse_rpc(rpc)
    if tracker is not None:
        if not key:
            raise CollectError("--rpc needs --key, the key the RPC servers registered with")
        check_tracker(*tracker, key)
    return tracker


def _make_measurer(target, tracker, key, repeat, min_repeat_ms, builder_workers) -> Measurer:
    runner = make_runner(repeat=repeat, min_repeat_ms=min_repeat_ms, tracker_host=tracker[0] if tracker else None,
                         tracker_port=tracker[1] if tracker else None, tracker_key=key)
    return Measurer(target, make_builder(max_workers=builder_workers), runner)


def _rates(measurer: Measurer, start: float) -> dict:
    n, elapsed = measurer.measured, time.time() - start
    return {"measured": n, "failed": measurer.failed, "seconds": round(elapsed, 1),
            "measure_seconds_per_program": round(measurer.seconds / n, 3) if n else None,  # build + run
            "seconds_per_program": round(elapsed / n, 3) if n else None}  # everything, search included


def _collect(names, out_dir, programs, target, tracker, key, max_minutes, random_fraction, batch_size,
             repeat, min_repeat_ms, seed, max_tasks, task_filter, held_out, platform_info, builder_workers, population,
             progress_stream) -> dict:
    start = time.time()
    budget = Budget(start + 60 * max_minutes if max_minutes else None)
    rpc_text = _write_platform(out_dir, target, tracker, key, platform_info)
    LOG.info("collect %s into %s: %d programs/task, target %s, rpc %s", names, out_dir, programs, target, rpc_text)

    ho = (held_out_hashes(target, out_dir, held_out), tuple(held_out)) if held_out else None
    per_network = []  # [(network, task), ...] per network
    for n in names:
        tasks = nets.tasks_for(n, target)
        LOG.info("%s: %d tasks", n, len(tasks))
        per_network.append([(n, t) for t in tasks if not task_filter or task_filter in t.name])
    # Round-robin over the networks: a collection cut short still covers every network.
    work = [x for row in itertools.zip_longest(*per_network) for x in row if x is not None]
    if max_tasks is not None:
        work = work[:max_tasks]

    todo, total = [], 0
    for n, t in work:
        d = task_dir(out_dir, t)
        d.mkdir(exist_ok=True)
        info = _update_task_info(d, t, n, ho)
        have = _count_lines(d / "database_tuning_record.json")
        if not info.get("exhausted") and have < programs:
            todo.append((n, t, d))
            total += programs - have
    measurer = _make_measurer(target, tracker, key, repeat, min_repeat_ms, builder_workers)
    progress = Progress(total, progress_stream)
    try:
        for i, (n, t, d) in enumerate(todo):
            if not budget.left():
                break
            LOG.info("task %d/%d %s (%s) -> %s", i + 1, len(todo), t.name, n, d.name)
            summary = collect_task(t, d, programs, measurer, budget, progress, random_fraction, batch_size,
                                   seed, population)
            exhausted = summary.pop("exhausted")
            _update_task_info(d, t, n, ho, summary=summary, exhausted=exhausted)
            LOG.info("task %s: %s%s", t.name, summary, " (design space exhausted)" if exhausted else "")
    finally:
        measurer.close()
        progress.close()
    stopped = "max_minutes" if not budget.left() else None
    result = {"out_dir": str(out_dir), "tasks": len(work), "tasks_worked_on": len(todo),
              **_rates(measurer, start), "stopped": stopped}
    LOG.info("done: %s", result)
    return result


def remeasure(src_dir, out_dir, target=None, rpc: str | None = None, max_minutes: float | None = None, *,
              key: str | None = None, batch_size: int = 16, repeat: int = 3, min_repeat_ms: int = 100,
              platform_info: dict | None = None,
              builder_workers: int | None = None, progress_stream=sys.stderr) -> dict:
    """Measure the programs of the dataset `src_dir` again on another target/device into `out_dir`.

    Same task directories, same traces in the same order (the programs are the same loop nests; only
    the code generation target and the machine change). Resumable like `collect`.
    """
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    target = parse_target(target)
    tracker = _check_rpc(rpc, key)
    if tracker is None:
        target = local_device_target(target)
    check_target(target)
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = _lock(out_dir)
    _unpack(out_dir)
    handler = _setup_log(out_dir)
    start = time.time()
    budget = Budget(start + 60 * max_minutes if max_minutes else None)
    measurer = None
    try:
        _write_platform(out_dir, target, tracker, key, platform_info)
        plan = []
        for s in sorted(p.parent for p in src_dir.glob("*/database_tuning_record.json*")):
            if (s / "database_tuning_record.json").exists():
                _repair_lines(s / "database_tuning_record.json")  # the source may still be being written
            d = out_dir / s.name
            d.mkdir(exist_ok=True)
            for f in ("database_workload.json", "database_tuning_record.json"):
                if _repair_lines(d / f):
                    LOG.warning("%s: dropped a line cut by an interrupted run", d / f)
            if (s / "task.json").exists():
                shutil.copy(s / "task.json", d / "task.json")
            src = records_in_file_order(s)
            have = _count_lines(d / "database_tuning_record.json")
            if src and have < len(src):
                plan.append((d, src, have))
        measurer = _make_measurer(target, tracker, key, repeat, min_repeat_ms, builder_workers)
        progress = Progress(sum(len(src) - have for _, src, have in plan), progress_stream)
        for d, src, have in plan:
            db = ms.database.JSONDatabase(work_dir=str(d))
            workload = db.commit_workload(src[0].workload.mod)
            for i in range(have, len(src), batch_size):
                if not budget.left():
                    break
                batch = [r.as_measure_candidate() for r in src[i:i + batch_size]]
                measurer.measure(db, workload, batch)
                progress.update(len(batch), d.name)
            info = json.loads((d / "task.json").read_text()) if (d / "task.json").exists() else {}
            info["summary"] = summarize(db.get_all_tuning_records())
            _write_json(d / "task.json", info)
        progress.close()
        result = {"out_dir": str(out_dir), "tasks_worked_on": len(plan), **_rates(measurer, start),
                  "stopped": "max_minutes" if not budget.left() else None}
        LOG.info("done: %s", result)
        return result
    finally:
        if measurer is not None:
            measurer.close()
        LOG.removeHandler(handler)
        handler.close()
        lock.close()


# ---------------------------------------------------------------------------------------------
# CLI glue: `tcl collect` is add_collect_arguments(subparser) + run_collect(args)


def add_collect_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--network", required=False, default=None,
                   help=f"network(s), comma separated: {', '.join(sorted(nets.NETWORKS))}, or {nets.SWEEP}")
    p.add_argument("--out", default="datasets/local", help="dataset directory (one per platform)")
    p.add_argument("--programs-per-task", type=int, default=200)
    p.add_argument("--target", default=None,
                   help="TVM target: JSON dict or 'llvm -mcpu=haswell -num-cores=1' (default: this CPU, all cores)")
    p.add_argument("--num-cores", type=int, default=None, help="cores the programs use (llvm)")
    p.add_argument("--mcpu", default=None, help="LLVM CPU name (llvm), e.g. haswell, x86-64")
    p.add_argument("--rpc", default=None, metavar="HOST:PORT", help="measure through this TVM RPC tracker")
    p.add_argument("--key", default=None, help="RPC device key (with --rpc)")
    p.add_argument("--platform-info", default=None, help="JSON from tcl/tvm/hardware.py run on the RPC device")
    p.add_argument("--max-minutes", type=float, default=None, help="stop (resumably) after this long")
    p.add_argument("--random-fraction", type=float, default=0.5, help="share of random (replay-trace) programs")
    p.add_argument("--batch-size", type=int, default=16, help="programs per measured batch")
    p.add_argument("--repeat", type=int, default=3, help="measurement repeats per program")
    p.add_argument("--min-repeat-ms", type=int, default=100, help="each repeat runs the program at least this long")
    p.add_argument("--max-tasks", type=int, default=None)
    p.add_argument("--task-filter", default=None, help="only tasks whose name contains this")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--held-out", default=",".join(nets.HELD_OUT),
                   help="networks whose tasks form the test split, comma separated, or 'none' (no split)")
    p.add_argument("--programs-from", default=None,
                   help="re-measure the programs of this dataset directory (another platform) instead of sampling")
    return p


def run_collect(args: argparse.Namespace) -> dict:
    custom = args.target or args.num_cores or args.mcpu
    target = parse_target(args.target, args.num_cores, args.mcpu) if custom else None
    info = json.loads(Path(args.platform_info).read_text()) if args.platform_info else None
    if args.programs_from:
        result = remeasure(args.programs_from, args.out, target, args.rpc, args.max_minutes, key=args.key,
                           batch_size=args.batch_size, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                           platform_info=info)
    else:
        if not args.network:
            raise CollectError("give --network (or --programs-from DIR)")
        result = collect(args.network, args.out, args.programs_per_task, target, args.rpc, args.max_minutes,
                         key=args.key, random_fraction=args.random_fraction, batch_size=args.batch_size,
                         repeat=args.repeat, min_repeat_ms=args.min_repeat_ms, seed=args.seed, max_tasks=args.max_tasks,
                         task_filter=args.task_filter, platform_info=info,
                         held_out=None if args.held_out == "none" else tuple(args.held_out.split(",")))
    print(json.dumps(result, indent=1))
    return result


def main(argv=None) -> int:
    p = add_collect_arguments(argparse.ArgumentParser(prog="python -m tcl.tvm.collect", description=__doc__,
                                                      formatter_class=argparse.RawDescriptionHelpFormatter))
    try:
        run_collect(p.parse_args(argv))
    except CollectError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
