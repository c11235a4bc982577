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
import signal
import sys
import time
from pathlib import Path

import tvm

from . import networks as nets
from .builder import import_cpu_tensor_intrin
from .collect_options import GENETIC_ITERS, POPULATION, add_collect_arguments
from .collect_session import (
    check_conv_layouts,
    check_measure_cpus,
    check_settings,
    collection_rates,
    make_measurer,
    measurement,
    open_dataset,
    setup_log,
    write_platform,
)
from .console import native_output_to
from .hardware import platform_descriptor
from .measure import Budget, Progress, RunGate, collect_task
from .remeasure import remeasure, source_measurement  # noqa: F401 (remeasure: part of this module's API)
from .targets import (  # noqa: F401
    CollectError,
    check_target,
    check_tracker,
    local_device_target,
    parse_target,
)
from .task_dirs import (  # noqa: F401
    count_lines,
    held_out_hashes,
    task_dir,
    task_split,
    update_task_info,
)

LOG = logging.getLogger("tcl.collect")


def collect(network_or_sweep: str | list[str], out_dir, programs_per_task: int, target=None,
            rpc: str | None = None, max_minutes: float | None = None, *, key: str | None = None,
            random_fraction: float = 0.5, batch_size: int = 16, repeat: int = 3, min_repeat_ms: int = 100,
            seed: int = 0, max_tasks: int | None = None, task_filter: str | None = None, held_out=nets.HELD_OUT,
            platform_info: dict | None = None, builder_workers: int | None = None,
            population: int = POPULATION, workers: int = 1, measure_cpus: list[int] | None = None,
            genetic_iters: int = GENETIC_ITERS, conv_layouts=nets.DATASET_CONV_LAYOUTS, as_tuned: bool = False,
            progress_stream=sys.stderr) -> dict:
    """Collect `programs_per_task` measured programs for every task of the networks (or "sweep").

    network_or_sweep: a name from `networks.NETWORKS`, "sweep", or a list / comma-separated list.
    target: None (this host, all cores), a Target, a dict, or text like "llvm -mcpu=haswell -num-cores=1".
    rpc: "HOST:PORT" of a TVM RPC tracker, with `key`, to measure on the devices registered there.
    held_out: networks whose tasks are the test split (None: do not compute the split).
    workers: tasks worked on at once, each in its own process; while one runs its programs the others
    search and build, and runs never overlap. measure_cpus: CPUs the programs run on (searching and
    building use the others); None: no pinning. population, genetic_iters: the evolutionary search's
    size (TVM's population_size and genetic_num_iters). conv_layouts: the data layouts of the networks'
    2-D convolutions (each layout's convolutions are tasks of their own). as_tuned: measure as `tcl tune`
    does (collect_session.measurement): the tasks with their weights prepacked, each program timed from
    flushed caches; such a dataset is a platform of its own.
    Returns a summary: tasks, programs measured now, failures, seconds per program, stop reason.
    """
    names = network_or_sweep.split(",") if isinstance(network_or_sweep, str) else list(network_or_sweep)
    for n in names:
        if n not in nets.NETWORKS and n != nets.SWEEP:
            raise CollectError(f"unknown network {n!r}; known: {', '.join(sorted(nets.NETWORKS))}, {nets.SWEEP}")
    check_settings(programs_per_task=programs_per_task, batch_size=batch_size, repeat=repeat,
                   min_repeat_ms=min_repeat_ms, random_fraction=random_fraction, max_minutes=max_minutes,
                   max_tasks=max_tasks, workers=workers, population=population, genetic_iters=genetic_iters)
    check_measure_cpus(measure_cpus)
    check_conv_layouts(conv_layouts)
    out_dir = Path(out_dir)
    lock, target, tracker = open_dataset(out_dir, target, rpc, key)
    handler = setup_log(out_dir)
    try:
        return _collect(names, out_dir, programs_per_task, target, tracker, key, max_minutes, random_fraction,
                        batch_size, repeat, min_repeat_ms, seed, max_tasks, task_filter, held_out, platform_info,
                        builder_workers, population, workers, measure_cpus, genetic_iters, tuple(conv_layouts),
                        measurement(as_tuned), progress_stream)
    finally:
        LOG.removeHandler(handler)
        handler.close()
        lock.close()


def _collect(names, out_dir, programs, target, tracker, key, max_minutes, random_fraction, batch_size,
             repeat, min_repeat_ms, seed, max_tasks, task_filter, held_out, platform_info, builder_workers, population,
             workers, measure_cpus, genetic_iters, conv_layouts, measured, progress_stream) -> dict:
    start = time.time()
    budget = Budget(start + 60 * max_minutes if max_minutes else None)
    rpc_text = write_platform(out_dir, target, tracker, key, platform_info, measured)
    prepack = bool(measured and measured["prepack_weights"])
    LOG.info("collect %s into %s: %d programs/task, target %s, rpc %s, convolutions in %s, measured %s", names,
             out_dir, programs, target, rpc_text, "/".join(conv_layouts), measured or "on warm caches")

    # TVM's C++ warnings (task extraction, and the workers' searches, which inherit this stderr) go to
    # a file; the terminal keeps the progress line
    with native_output_to(Path(out_dir) / "tvm-stderr.txt") as terminal:
        per_network = []  # [(network, task), ...] per network
        ho = (held_out_hashes(target, out_dir, held_out, conv_layouts, prepack), tuple(held_out)) if held_out else None
        for n in names:
            tasks = nets.tasks_for(n, target, conv_layouts=conv_layouts, prepack_weights=prepack)
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
            info = update_task_info(d, t, n, ho)
            have = count_lines(d / "database_tuning_record.json")
            if not info.get("exhausted") and have < programs:
                todo.append((n, t, d))
                total += programs - have
        progress = Progress(total, terminal if progress_stream is sys.stderr else progress_stream)
        job = dict(out_dir=str(out_dir), programs=programs, target=str(target), tracker=tracker, key=key,
                   repeat=repeat, min_repeat_ms=min_repeat_ms, builder_workers=builder_workers,
                   measure_cpus=measure_cpus, random_fraction=random_fraction, batch_size=batch_size, seed=seed,
                   population=population, genetic_iters=genetic_iters, deadline=budget.deadline, held_out=ho,
                   measured=measured)
        try:
            if workers <= 1 or len(todo) <= 1:
                stats = _work_on(job, todo, progress)
            else:
                stats = _work_in_processes(job, todo, workers, progress)
        finally:
            progress.close()
    stopped = "max_minutes" if not budget.left() else None
    result = {"out_dir": str(out_dir), "tasks": len(work), "tasks_worked_on": len(todo),
              **collection_rates(stats, start),
              "stopped": stopped}
    LOG.info("done: %s", result)
    return result


def _work_on(job: dict, todo: list, progress, gate=None) -> dict:
    """Collect the tasks `todo` [(network, task, directory)] one after another; returns the counts."""
    target = parse_target(job["target"])
    tracker = tuple(job["tracker"]) if job["tracker"] else None
    cpus = os.sched_getaffinity(0)  # make_measurer may move this process off the measurement CPUs
    measurer = make_measurer(target, tracker, job["key"], job["repeat"], job["min_repeat_ms"],
                             job["builder_workers"], job["measure_cpus"], gate, job["measured"])
    budget = Budget(job["deadline"])
    try:
        for i, (n, t, d) in enumerate(todo):
            if not budget.left():
                break
            LOG.info("task %d/%d %s (%s) -> %s", i + 1, len(todo), t.name, n, d.name)
            summary = collect_task(t, d, job["programs"], measurer, budget, progress, job["random_fraction"],
                                   job["batch_size"], job["seed"], job["population"],
                                   genetic_iters=job["genetic_iters"])
            exhausted = summary.pop("exhausted")
            update_task_info(d, t, n, job["held_out"], summary=summary, exhausted=exhausted)
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


def _exit_with(parent_pid: int, every_s: float = 2.0) -> None:
    """Ends this process once `parent_pid` is no longer its parent (the collector was killed
    without a chance to stop its workers), instead of searching on for nobody."""
    import threading

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(every_s)
        os._exit(3)

    threading.Thread(target=watch, daemon=True, name="exit-with-collector").start()


def _worker_main(job: dict, shard: list, queue, gate, parent_pid: int) -> None:
    """One collecting process: rebuilds its tasks from their TIR text and works on them."""
    _exit_with(parent_pid)
    handler = setup_log(Path(job["out_dir"]))
    try:
        import_cpu_tensor_intrin()
        todo = [(n, nets.Task(name, tvm.ir.load_json(mod), weight, flops, networks), Path(d))
                for n, name, mod, weight, flops, networks, d in shard]
        queue.put(("done", _work_on(job, todo, _QueueProgress(queue), gate)))
    except BaseException as e:
        LOG.exception("collecting process failed")
        queue.put(("error", f"{type(e).__name__}: {e}"))
    finally:
        LOG.removeHandler(handler)
        handler.close()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _work_in_processes(job: dict, todo: list, workers: int, progress: Progress) -> dict:
    """Work on `todo` in `workers` processes: each searches and builds its own tasks while the others'
    programs run; a shared RunGate lets one process at a time run programs. All entries of one task
    directory go to the same process (two networks may share a task)."""
    import multiprocessing

    by_dir: dict[Path, list] = {}
    for n, t, d in todo:
        by_dir.setdefault(d, []).append((n, t.name, tvm.ir.save_json(t.mod), t.weight, t.flops, t.networks, str(d)))
    shards: list[list] = [[] for _ in range(workers)]
    for i, entries in enumerate(by_dir.values()):  # round-robin keeps each shard breadth-first
        shards[i % workers].extend(entries)
    ctx = multiprocessing.get_context("spawn")
    queue, gate = ctx.Queue(), RunGate.for_processes(ctx)
    procs = [ctx.Process(target=_worker_main, args=(job, shard, queue, gate, os.getpid()), daemon=True)
             for shard in shards if shard]
    for p in procs:
        p.start()
    stats, errors, done = {"measured": 0, "failed": 0, "seconds": 0.0}, [], 0
    # SIGTERM (kill, a job scheduler) ends the collector like Ctrl-C: through `finally`, which stops
    # the workers; every record written so far stays
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    interrupted = True
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
        interrupted = False
    finally:
        signal.signal(signal.SIGTERM, previous)
        for p in procs:
            if interrupted:
                p.terminate()
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    if errors:
        raise CollectError("collecting failed in a worker process: " + "; ".join(errors))
    return stats


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
    info = args.platform_info
    measured = measurement(args.as_tuned)
    if args.programs_from:
        measured = source_measurement(args.programs_from)
        if args.as_tuned and not measured:
            raise CollectError(f"--as-tuned: the programs of {args.programs_from} were measured on warm caches, "
                               "for tasks without prepacked weights; re-measure them without --as-tuned")
    if args.out is None:
        args.out = str(Path("datasets") / platform_descriptor(parse_target(target), host=info,
                                                              measurement=measured)["name"])
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
                         population=args.population, genetic_iters=args.genetic_iters,
                         measure_cpus=_cpu_list(args.measure_cpus), conv_layouts=tuple(args.conv_layouts),
                         as_tuned=args.as_tuned,
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
    except KeyboardInterrupt:
        print("interrupted; run the same command again to continue", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
