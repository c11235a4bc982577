"""Sharing one tuning budget, in trials and in wall-clock time, among all tasks of a network.

`TuningProgress` is a MetaSchedule measure callback: it records every measured batch (when, which
task, best latency so far) and shows one progress line. `DeadlineScheduler` is a MetaSchedule
task scheduler that picks tasks the way MetaSchedule's gradient-based scheduler does: one batch
of every task first, then the task whose weighted latency is expected to drop most (a blend of
its recent improvement per batch and its best latency over the batches spent on it). The first
round goes heaviest first (weight x FLOPs), and on a resumed database the tasks it has no program
of go first, so a short budget leaves only light tasks untuned. It waits for each batch's
measurement before the next search and build (on a small machine they would disturb it) and ends
the session once the deadline passes; nothing measured is lost. The trial budget is
MetaSchedule's own `max_trials_global`.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms


def _fmt_minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def format_latency(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-6:.3g} us"


@derived_object
class TuningProgress(ms.measure_callback.PyMeasureCallback):
    """Records each measured batch and prints one progress line (rewritten in place on a terminal,
    every `every_s` seconds otherwise)."""

    def __init__(self, weights: list[float], names: list[str], start: float, minutes: float | None = None,
                 trials: int | None = None, prior_best: list[float] | None = None, stream=None,
                 every_s: float = 30.0, label: str = "tune"):
        super().__init__()
        self.weights, self.names = list(weights), list(names)
        self.start, self.minutes, self.trials_budget = start, minutes, trials
        # best seconds per task, inf until it has a valid program (a resumed database's best first)
        self.best = list(prior_best) if prior_best is not None else [math.inf] * len(weights)
        self.history: list[list[float]] = [[] for _ in weights]  # best after each batch of the task
        self.failed_batches = [0] * len(weights)
        self.trials = 0
        self.events: list[dict] = []  # one per batch: seconds, task, size, estimate
        self.stream = stream if stream is not None else sys.stderr
        self.every_s, self.label = every_s, label
        self._last_print, self._last_line = -math.inf, ""

    def estimate(self) -> tuple[float, int]:
        """(sum of weight x best latency over the tasks that have one, how many tasks have one)."""
        have = [(w, b) for w, b in zip(self.weights, self.best) if math.isfinite(b)]
        return float(sum(w * b for w, b in have)), len(have)

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        secs = [float(np.median([float(s) for s in r.run_secs])) for b, r in zip(builder_results, runner_results)
                if b.error_msg is None and r.error_msg is None and r.run_secs]
        if secs:
            self.best[task_id] = min(self.best[task_id], min(secs))
        else:
            self.failed_batches[task_id] += 1
        self.history[task_id].append(self.best[task_id])
        self.trials += len(runner_results)
        est, touched = self.estimate()
        now = time.perf_counter() - self.start
        self.events.append({"seconds": now, "task": int(task_id), "size": len(runner_results),
                            "estimate_s": est if touched == len(self.weights) else None, "tasks_with_result": touched})
        self.show()

    def line(self) -> str:
        now = time.perf_counter() - self.start
        est, touched = self.estimate()
        parts = [f"[{self.label}] {_fmt_minutes(now)}" + (f"/{_fmt_minutes(self.minutes * 60)}" if self.minutes else ""),
                 f"trials {self.trials}" + (f"/{self.trials_budget}" if self.trials_budget else ""),
                 f"tasks {touched}/{len(self.weights)}"]
        if touched:
            parts.append(f"estimated {format_latency(est)}" + ("" if touched == len(self.weights) else " (tasks with a result)"))
        return "  ".join(parts)

    def show(self, final: bool = False) -> None:
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        now = time.perf_counter()
        if tty:
            self.stream.write("\r" + self.line().ljust(100) + ("\n" if final else ""))
            self.stream.flush()
        else:
            line = self.line()
            if (final and line != self._last_line) or now - self._last_print >= self.every_s:
                self.stream.write(line + "\n")
                self.stream.flush()
                self._last_print, self._last_line = now, line


@derived_object
class DeadlineScheduler(ms.task_scheduler.PyTaskScheduler):
    """Gradient-style task selection (see the module doc) that returns no task after `deadline`
    (a time.perf_counter() value; None: no deadline)."""

    def __init__(self, progress: TuningProgress, deadline: float | None = None, alpha: float = 0.2,
                 window: int = 3, seed: int = 0):
        super().__init__()
        self.progress, self.deadline = progress, deadline
        self.alpha, self.window = alpha, window
        self.rng = np.random.default_rng(seed)
        self.rounds = 0
        self.first_round: list[int] = []
        self.join_seconds = 0.0  # waiting for runs and their callbacks (cost model update, database)

    def _priority(self, i: int) -> float:
        hist = self.progress.history[i]
        weight = self.progress.weights[i]
        if not hist or not math.isfinite(hist[-1]):
            # nothing valid yet: first in line, unless two batches already failed entirely
            return math.inf if self.progress.failed_batches[i] < 2 else 0.0
        n, best = len(hist), hist[-1]
        recent = (hist[-1 - self.window] - best) / self.window if n > self.window and math.isfinite(hist[-1 - self.window]) else 0.0
        return weight * (self.alpha * recent + (1 - self.alpha) * best / n)

    def next_task_id(self) -> int:
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return -1  # MetaSchedule joins what is still running, then ends
        scheduler = self._outer()
        records = scheduler.tasks_
        n = len(records)
        start = time.perf_counter()
        for i in range(n):
            # one batch at a time: the next search and build must not run beside a measurement
            if not records[i].is_terminated and records[i].runner_futures is not None:
                self.join_running_task(i)
        self.join_seconds += time.perf_counter() - start
        if self.rounds < n:  # one batch of every task first, heaviest first (weight x FLOPs)
            if self.rounds == 0:
                # tasks a resumed database already has a program of come last
                self.first_round = sorted(range(n), key=lambda i: (math.isfinite(self.progress.best[i]),
                                                                   -records[i].task_weight * records[i].flop))
            self.rounds += 1
            return self.first_round[self.rounds - 1]
        alive = [i for i in range(n) if not records[i].is_terminated]
        if not alive:
            return -1
        prio = np.array([self._priority(i) for i in alive])
        top = np.flatnonzero(prio == prio.max())
        return alive[int(top[0] if len(top) == 1 else self.rng.choice(top))]
