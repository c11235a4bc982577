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
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from . import networks as nets
from .collect_options import add_collect_arguments
from .builder import import_cpu_tensor_intrin, make_builder, make_runner
from .measure import Budget, Measurer, Progress, _repair_lines, collect_task, pin_to_cpus, summarize
from .targets import (CollectError, check_target, check_tracker, local_device_target, parse_rpc,  # noqa: F401
                      parse_target)
from .dataset import records_in_file_order
from ..packing import DatasetBusy, dataset_lock, is_packed, pack_dataset
from .hardware import platform_descriptor, platform_name, same_host

LOG = logging.getLogger("tcl.collect")


# ---------------------------------------------------------------------------------------------
# Task directories


def _write_json(path: Path, obj) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)  # atomic: a kill never leaves half a file


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


# ---------------------------------------------------------------------------------------------
# Entry points


def check_settings(**settings) -> None:
    """Refuse settings that cannot work before any set-up: counts must be positive, the random share
    a fraction. None means "not given" and is accepted."""
    for name, value in settings.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if name == "random_fraction":
            if not 0.0 <= value <= 1.0:
                raise CollectError(f"{flag} must be between 0 and 1, not {value}")
        elif name == "min_repeat_ms":
            if value < 0:
                raise CollectError(f"{flag} must be 0 or more, not {value}")
        elif not value > 0:
            raise CollectError(f"{flag} must be positive, not {value}")


def check_measure_cpus(cpus) -> None:
    if cpus is None:
        return
    allowed = os.sched_getaffinity(0)
    if not cpus or not set(cpus) <= allowed:
        raise CollectError(f"--measure-cpus {cpus} must name CPUs this process may use: {sorted(allowed)}")
    if not allowed - set(cpus):
        raise CollectError(f"--measure-cpus {cpus} leaves no CPU for searching and building")


def _lock(out_dir) -> "object":
    """Create the dataset directory and take its lock (tcl.packing.dataset_lock) as a CollectError."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        return dataset_lock(out_dir)
    except DatasetBusy as e:
        raise CollectError(str(e)) from None
    except OSError as e:
        raise CollectError(f"cannot write to {out_dir}: {e.strerror}") from None


def _unpack(out_dir: Path):
    """A shipped (packed) dataset goes back to stock plain files, which the collector appends to."""
    if is_packed(out_dir):
        stats = pack_dataset(out_dir, restore=True, lock=False)  # the caller holds the lock
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
            population: int = 256, workers: int = 1, measure_cpus: list[int] | None = None,
            progress_stream=sys.stderr) -> dict:
    """Collect `programs_per_task` measured programs for every task of the networks (or "sweep").

    network_or_sweep: a name from `networks.NETWORKS`, "sweep", or a list / comma-separated list.
    target: None (this host, all cores), a Target, a dict, or text like "llvm -mcpu=haswell -num-cores=1".
    rpc: "HOST:PORT" of a TVM RPC tracker, with `key`, to measure on the devices registered there.
    held_out: networks whose tasks are the test split (None: do not compute the split).
    workers: tasks worked on at once, each in its own process; while one runs its programs the others
    search and build, and runs never overlap. measure_cpus: CPUs the programs run on (searching and
    building use the others); None: no pinning.
    Returns a summary: tasks, programs measured now, failures, seconds per program, stop reason.
    """
    names = network_or_sweep.split(",") if isinstance(network_or_sweep, str) else list(network_or_sweep)
    for n in names:
        if n not in nets.NETWORKS and n != nets.SWEEP:
            raise CollectError(f"unknown network {n!r}; known: {', '.join(sorted(nets.NETWORKS))}, {nets.SWEEP}")
    check_settings(programs_per_task=programs_per_task, batch_size=batch_size, repeat=repeat,
                   min_repeat_ms=min_repeat_ms, random_fraction=random_fraction, max_minutes=max_minutes,
                   max_tasks=max_tasks, workers=workers)
    check_measure_cpus(measure_cpus)
    out_dir = Path(out_dir)
    lock = _lock(out_dir)  # first: a second collector learns at once, not after the set-up below
    try:
        target = parse_target(target)
        tracker = _check_rpc(rpc, key)
        if tracker is None:
            target = local_device_target(target)
        check_target(target)
        if target.kind.name == "llvm":
            import_cpu_tensor_intrin()  # 1.6 s instead of 23-34 s for TuneContext's import
        _unpack(out_dir)
    except BaseException:
        lock.close()
        raise
    handler = _setup_log(out_dir)
    try:
        return _collect(names, out_dir, programs_per_task, target, tracker, key, max_minutes, random_fraction,
                        batch_size, repeat, min_repeat_ms, seed, max_tasks, task_filter, held_out, platform_info,
                        builder_workers, population, workers, measure_cpus, progress_stream)
    finally:
        LOG.removeHandler(handler)
        handler.close()
        lock.close()


def _write_platform(out_dir: Path, target, tracker, key, platform_info) -> str | None:
    """platform.json for a new dataset; an existing one must be of the same physical host and target."""
    rpc_text = f"{tracker[0]}:{tracker[1]} key={key}" if tracker else None
    desc = platform_descriptor(target, host=platform_info, rpc=rpc_text)
    pf = out_dir / "platform.json"
    if pf.exists():
        check_same_platform(json.loads(pf.read_text()), desc, out_dir)
        return rpc_text
    if tracker and platform_info is None:
        LOG.warning("RPC: the device's hardware was not probed; run tcl/tvm/hardware.py on it and pass "
                    "--platform-info")
    _write_json(pf, desc)
    return rpc_text


def check_same_platform(old: dict, new: dict, out_dir) -> None:
    """Refuse to add measurements of another host or another target to a dataset."""
    def who(d):
        return d.get("name") or platform_name(d)

    if old.get("target") != new["target"]:
        raise CollectError(f"{out_dir} holds data of platform {who(old)} (target {old.get('target')}), not "
                           f"{who(new)} (target {new['target']}); use one directory per platform")
    differ = same_host(old, new)
    if differ:
        fields = ", ".join(f"{k} {old[k]!r} here vs {new[k]!r} now" for k in differ)
        raise CollectError(f"{out_dir} holds data measured on another host ({who(old)}: {fields}); this host "
                           f"is {who(new)}: collect into its own directory, e.g. datasets/{who(new)}")


def _check_rpc(rpc: str | None, key: str | None) -> tuple[str, int] | None:
    tracker = parse_rpc(rpc)
    if tracker is not None:
        if not key:
            raise CollectError("--rpc needs --key, the key the RPC servers registered with")
        check_tracker(*tracker, key)
    return tracker


def _make_measurer(target, tracker, key, repeat, min_repeat_ms, builder_workers, measure_cpus=None,
                   run_lock=None) -> Measurer:
    """A builder and a runner; with measure_cpus, this process and its builders move to the other CPUs
    and the runner's worker to measure_cpus."""
    initializer = None
    if measure_cpus:
        others = set(os.sched_getaffinity(0)) - set(measure_cpus)
        if not others:
            raise CollectError(f"--measure-cpus {sorted(measure_cpus)} leaves no CPU for searching and building")
        os.sched_setaffinity(0, others)
        initializer = pin_to_cpus(measure_cpus)
        builder_workers = builder_workers or len(others)
    runner = make_runner(repeat=repeat, min_repeat_ms=min_repeat_ms, tracker_host=tracker[0] if tracker else None,
                         tracker_port=tracker[1] if tracker else None, tracker_key=key, initializer=initializer)
    return Measurer(target, make_builder(max_workers=builder_workers), runner, run_lock=run_lock)


def _rates(stats: dict, start: float) -> dict:
    """Counts and speeds of a collection from its measurer counts {"measured", "failed", "seconds"}."""
    n, elapsed = stats["measured"], time.time() - start
    return {"measured": n, "failed": stats["failed"], "seconds": round(elapsed, 1),
            "measure_seconds_per_program": round(stats["seconds"] / n, 3) if n else None,  # build + run
            "seconds_per_program": round(elapsed / n, 3) if n else None,  # everything, search included
            "programs_per_hour": round(3600 * n / elapsed) if n else 0}


def _collect(names, out_dir, programs, target, tracker, key, max_minutes, random_fraction, batch_size,
             repeat, min_repeat_ms, seed, max_tasks, task_filter, held_out, platform_info, builder_workers, population,
             workers, measure_cpus, progress_stream) -> dict:
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
    progress = Progress(total, progress_stream)
    job = dict(out_dir=str(out_dir), programs=programs, target=str(target), tracker=tracker, key=key,
               repeat=repeat, min_repeat_ms=min_repeat_ms, builder_workers=builder_workers,
               measure_cpus=measure_cpus, random_fraction=random_fraction, batch_size=batch_size, seed=seed,
               population=population, deadline=budget.deadline, held_out=ho)
    try:
        if workers <= 1 or len(todo) <= 1:
            stats = _work_on(job, todo, progress)
        else:
            stats = _work_in_processes(job, todo, workers, progress)
    finally:
        progress.close()
    stopped = "max_minutes" if not budget.left() else None
    result = {"out_dir": str(out_dir), "tasks": len(work), "tasks_worked_on": len(todo), **_rates(stats, start),
              "stopped": stopped}
    LOG.info("done: %s", result)
    return result


def _work_on(job: dict, todo: list, progress, run_lock=None) -> dict:
    """Collect the tasks `todo` [(network, task, directory)] one after another; returns the counts."""
    target = parse_target(job["target"])
    tracker = tuple(job["tracker"]) if job["tracker"] else None
    cpus = os.sched_getaffinity(0)  # _make_measurer may move this process off the measurement CPUs
    measurer = _make_measurer(target, tracker, job["key"], job["repeat"], job["min_repeat_ms"],
                              job["builder_workers"], job["measure_cpus"], run_lock)
    budget = Budget(job["deadline"])
    try:
        for i, (n, t, d) in enumerate(todo):
            if not budget.left():
                break
            LOG.info("task %d/%d %s (%s) -> %s", i + 1, len(todo), t.name, n, d.name)
            summary = collect_task(t, d, job["programs"], measurer, budget, progress, job["random_fraction"],
                                   job["batch_size"], job["seed"], job["population"])
            exhausted = summary.pop("exhausted")
            _update_task_info(d, t, n, job["held_out"], summary=summary, exhausted=exhausted)
            LOG.info("task %s: %s%s", t.name, summary, " (design space exhausted)" if exhausted else "")
    finally:
        measurer.close()
        os.sched_setaffinity(0, cpus)
    return measurer.counts()


class _QueueProgress:
    """Progress of a worker process, sent to the parent's progress line."""

    def __init__(self, queue):
        self.queue = queue

    def update(self, n: int, what: str = "") -> None:
        self.queue.put(("progress", n, what))


def _worker_main(job: dict, shard: list, queue, run_lock) -> None:
    """One collecting process: rebuilds its tasks from their TIR text and works on them."""
    handler = _setup_log(Path(job["out_dir"]))
    try:
        import_cpu_tensor_intrin()
        todo = [(n, nets.Task(name, tvm.ir.load_json(mod), weight, flops, networks), Path(d))
                for n, name, mod, weight, flops, networks, d in shard]
        queue.put(("done", _work_on(job, todo, _QueueProgress(queue), run_lock)))
    except BaseException as e:
        LOG.exception("collecting process failed")
        queue.put(("error", f"{type(e).__name__}: {e}"))
    finally:
        LOG.removeHandler(handler)
        handler.close()


def _work_in_processes(job: dict, todo: list, workers: int, progress: Progress) -> dict:
    """Work on `todo` in `workers` processes: each searches and builds its own tasks while the others'
    programs run; a shared lock lets one process at a time run programs. All entries of one task
    directory go to the same process (two networks may share a task)."""
    import multiprocessing

    by_dir: dict[Path, list] = {}
    for n, t, d in todo:
        by_dir.setdefault(d, []).append((n, t.name, tvm.ir.save_json(t.mod), t.weight, t.flops, t.networks, str(d)))
    shards: list[list] = [[] for _ in range(workers)]
    for i, entries in enumerate(by_dir.values()):  # round-robin keeps each shard breadth-first
        shards[i % workers].extend(entries)
    ctx = multiprocessing.get_context("spawn")
    queue, run_lock = ctx.Queue(), ctx.Lock()
    procs = [ctx.Process(target=_worker_main, args=(job, shard, queue, run_lock), daemon=True)
             for shard in shards if shard]
    for p in procs:
        p.start()
    stats, errors, done = {"measured": 0, "failed": 0, "seconds": 0.0}, [], 0
    try:
        while done < len(procs):
            try:
                kind, *payload = queue.get(timeout=5)
            except Exception:  # queue.Empty: check that the workers are alive
                if not any(p.is_alive() for p in procs):
                    errors.append("a collecting process died without a report (see collect-log.txt)")
                    break
                continue
            if kind == "progress":
                progress.update(*payload)
            else:
                done += 1
                if kind == "done":
                    stats = {k: stats[k] + payload[0][k] for k in stats}
                else:
                    errors.append(payload[0])
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
    if errors:
        raise CollectError("collecting failed in a worker process: " + "; ".join(errors))
    return stats


def remeasure(src_dir, out_dir, target=None, rpc: str | None = None, max_minutes: float | None = None, *,
              key: str | None = None, batch_size: int = 16, repeat: int = 3, min_repeat_ms: int = 100,
              platform_info: dict | None = None,
              builder_workers: int | None = None, progress_stream=sys.stderr) -> dict:
    """Measure the programs of the dataset `src_dir` again on another target/device into `out_dir`.

    Same task directories, same traces in the same order (the programs are the same loop nests; only
    the code generation target and the machine change). Resumable like `collect`.
    """
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    if not src_dir.is_dir():
        raise CollectError(f"{src_dir}: not a dataset directory")
    check_settings(batch_size=batch_size, repeat=repeat, min_repeat_ms=min_repeat_ms, max_minutes=max_minutes)
    lock = _lock(out_dir)
    try:
        target = parse_target(target)
        tracker = _check_rpc(rpc, key)
        if tracker is None:
            target = local_device_target(target)
        check_target(target)
        _unpack(out_dir)
    except BaseException:
        lock.close()
        raise
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
        result = {"out_dir": str(out_dir), "tasks_worked_on": len(plan), **_rates(measurer.counts(), start),
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


def _cpu_list(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise CollectError(f"--measure-cpus wants comma-separated CPU ids, not {text!r}") from None


def run_collect(args: argparse.Namespace) -> dict:
    custom = args.target or args.num_cores or args.mcpu
    target = parse_target(args.target, args.num_cores, args.mcpu) if custom else None
    info = json.loads(Path(args.platform_info).read_text()) if args.platform_info else None
    if args.out is None:
        args.out = str(Path("datasets") / platform_descriptor(parse_target(target), host=info)["name"])
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
                         task_filter=args.task_filter, platform_info=info, workers=args.workers,
                         measure_cpus=_cpu_list(args.measure_cpus),
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
