"""Measuring one task's programs into its JSONDatabase: sampling (replay-trace, then evolutionary
search guided by XGBoost), building and running, and the bookkeeping around it (progress, time budget,
repairing a line cut by a kill).

Measurement can be pinned to its own CPUs (`measure_cpus`) while searching and building use the
others, and several collecting processes can share those CPUs through a `RunGate`, which lets only one
of them run programs at a time: runs never overlap, so latencies are those of a quiet CPU. Between
runs the measurement CPUs build too (`Measurer.measure_builder`): a build there waits until no run
waits or runs, and a run waits for at most the one build under way; a build that outlasts
`SHARED_BUILD_TIMEOUT_SEC` there is stopped and built again on the other CPUs, so that one slow
compile cannot hold every process's runs up for the whole build timeout.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import logging
import os
import shutil
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tvm.s_tir import meta_schedule as ms
from tvm.target import Target

from . import networks as nets
from .builder import timed_out
from .collect_options import GENETIC_ITERS, POPULATION

FAILED = 1e10  # what MetaSchedule stores as run_secs for a failed build or run
SHARED_BUILD_TIMEOUT_SEC = 10.0  # the measurement CPUs' build timeout: many times a typical build
LOG = logging.getLogger("tcl.collect")


def repair_lines(path: Path) -> int:
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


def summarize(records) -> dict:
    """Counts and the spread of repeated measurements (coefficient of variation) of a task's records."""
    ok = [[float(s) for s in r.run_secs] for r in records if min(float(s) for s in r.run_secs) < FAILED / 10]
    cvs = [statistics.pstdev(s) / statistics.mean(s) for s in ok if len(s) > 1]
    return {"programs": len(ok), "failures": len(records) - len(ok),
            "cv_median": round(statistics.median(cvs), 5) if cvs else None,
            "best_secs": min(statistics.mean(s) for s in ok) if ok else None}




class Progress:
    """One status line on stderr: programs done, rate, ETA (a line every 30 s when not a terminal)."""

    def __init__(self, total: int, stream=sys.stderr, label: str = "collect", unit: str = "programs"):
        self.total, self.done, self.stream, self.label, self.unit = total, 0, stream, label, unit
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
        line = f"[{self.label}] {self.done}/{self.total} {self.unit}  {rate * 60:.1f}/min  ETA {eta_s}  {what}"
        print(("\r" + line[:150].ljust(150)) if self.tty else line, end="" if self.tty else "\n",
              file=self.stream, flush=True)

    def say(self, text: str) -> None:
        """A line of its own between the status lines."""
        print(("\n" if self.tty and self.done else "") + f"[{self.label}] {text}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=self.stream)


def run_seconds(result) -> list[float]:
    """A runner result's seconds per run, or [FAILED] for a failed build or run (as stored)."""
    return [float(s) for s in result.run_secs] if result.run_secs and not result.error_msg else [FAILED]


def open_task_database(d: Path, mod):
    """(JSONDatabase, Workload) of one task's directory, lines cut by an interrupted run dropped."""
    for f in ("database_workload.json", "database_tuning_record.json"):
        if repair_lines(d / f):
            LOG.warning("%s: dropped a line cut by an interrupted run", d / f)
    db = ms.database.JSONDatabase(work_dir=str(d))
    return db, db.commit_workload(mod)


def pin_to_cpus(cpus) -> functools.partial:
    """A picklable initializer for a runner's worker process that pins it to `cpus`."""
    return functools.partial(os.sched_setaffinity, 0, sorted(cpus))


class RunGate:
    """The measurement CPUs shared by collecting processes: runs take them one at a time and first;
    a build takes them only while no run waits or runs."""

    def __init__(self, lock, waiting):
        self.lock, self.waiting = lock, waiting  # a Lock and a shared int: runs waiting for the lock

    @classmethod
    def for_processes(cls, ctx) -> RunGate:
        """A gate that can be passed to processes of the multiprocessing context `ctx`."""
        return cls(ctx.Lock(), ctx.Value("i", 0))

    @contextlib.contextmanager
    def run(self):
        with self.waiting.get_lock():
            self.waiting.value += 1
        self.lock.acquire()
        with self.waiting.get_lock():
            self.waiting.value -= 1
        try:
            yield
        finally:
            self.lock.release()

    def try_build(self) -> bool:
        """Take the CPUs for one build if no run waits; the caller calls release() after it."""
        return self.waiting.value == 0 and self.lock.acquire(block=False)

    def release(self) -> None:
        self.lock.release()


@dataclass
class Measurer:
    """Builds and runs candidates, appends their records to a task's database."""

    target: Target
    builder: ms.builder.Builder
    runner: ms.runner.Runner
    gate: RunGate | None = None  # shared by collecting processes; None: this process alone runs programs
    measure_builder: ms.builder.Builder | None = None  # a builder on the measurement CPUs, used between runs
    measured: int = 0
    failed: int = 0
    seconds: float = 0.0

    def counts(self) -> dict:
        return {"measured": self.measured, "failed": self.failed, "seconds": self.seconds}

    def close(self) -> None:
        """Stop the builder's and the runner's worker processes."""
        for b in (self.builder, self.measure_builder):
            if hasattr(b, "shutdown"):
                b.shutdown()
        if getattr(self.runner, "pool", None) is not None:  # LocalRunner, RPCRunner
            self.runner.pool.shutdown()

    def build(self, inputs: list) -> list:
        """Build `inputs` on `builder` (as many programs at a time as it has workers) and, between runs,
        on `measure_builder`, each taking the next programs as it frees up; results in input order."""
        if self.measure_builder is None:
            return self.builder.build(inputs)
        results: list = [None] * len(inputs)
        left = list(range(len(inputs)))[::-1]  # pop() takes them in order
        taken = threading.Lock()

        def take(n: int) -> list[int]:
            with taken:
                return [left.pop() for _ in range(min(n, len(left)))]

        def on_own_cpus(n: int) -> None:
            while batch := take(n):
                for i, r in zip(batch, self.builder.build([inputs[i] for i in batch])):
                    results[i] = r

        too_slow: list[int] = []  # stopped on the measurement CPUs: built again on our own

        def on_measure_cpus() -> None:
            while left:
                if self.gate is not None and not self.gate.try_build():
                    time.sleep(0.02)  # a run waits or runs
                    continue
                try:
                    for i in take(1):
                        results[i] = self.measure_builder.build([inputs[i]])[0]
                        if timed_out(results[i]):
                            too_slow.append(i)
                finally:
                    if self.gate is not None:
                        self.gate.release()

        with concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="build") as pool:
            jobs = [pool.submit(on_measure_cpus),
                    pool.submit(on_own_cpus, max(1, getattr(self.builder, "max_workers", 1)))]
            for job in jobs:
                job.result()  # a builder's exception reaches the caller
        if too_slow:
            for i, r in zip(too_slow, self.builder.build([inputs[i] for i in too_slow])):
                results[i] = r
        return results

    def measure(self, db, workload, cands) -> list:
        start = time.time()
        built = self.build([ms.builder.BuilderInput(c.sch.mod, self.target) for c in cands])
        results: list = [None] * len(cands)
        todo = []
        for i, (c, b) in enumerate(zip(cands, built)):
            if b.error_msg:
                results[i] = ms.runner.RunnerResult(None, "build: " + b.error_msg)
            else:
                todo.append(i)
        device = "cpu" if self.target.kind.name == "llvm" else self.target.kind.name
        inputs = [ms.runner.RunnerInput(built[i].artifact_path, device, cands[i].args_info) for i in todo]
        with self.gate.run() if self.gate is not None else contextlib.nullcontext():
            for i, fut in zip(todo, self.runner.run(inputs)):
                results[i] = fut.result()
        for b in built:  # the exported libraries are not needed once run
            if b.artifact_path:
                shutil.rmtree(os.path.dirname(b.artifact_path), ignore_errors=True)
        for c, r in zip(cands, results):
            secs = run_seconds(r)
            if secs == [FAILED]:
                self.failed += 1
                LOG.warning("failed program (stored as run_secs [1e10]): %s",
                            (r.error_msg or "no result").strip().splitlines()[-1][:300])
            db.commit_tuning_record(ms.database.TuningRecord(c.sch.trace, workload, secs, self.target, c.args_info))
        self.measured += len(cands)
        self.seconds += time.time() - start
        return results


def _trace_key(trace) -> str:
    return str(trace)  # cheap, and the same text for a trace and its database round trip


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
                 seed: int = 0, population: int = POPULATION, max_stale_batches: int = 3,
                 genetic_iters: int = GENETIC_ITERS) -> dict:
    """Measure up to `programs` distinct programs of one task into its JSONDatabase `d` (resumable)."""
    d.mkdir(parents=True, exist_ok=True)
    db, workload = open_task_database(d, task.mod)
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
            strategy = ms.search_strategy.EvolutionarySearch(population_size=population, genetic_num_iters=genetic_iters)
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
