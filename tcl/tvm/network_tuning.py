"""Tune a whole network within one budget and hand back the compiled result.

All tasks of the network are tuned in one MetaSchedule session (`ms.tune.tune_tasks`, as
`tune_relax` does): one cost model serves every task, one budget in trials and/or wall-clock
minutes is shared by the tasks (tcl.tvm.task_scheduler), every measurement goes to a stock
JSONDatabase. Running again on the same output directory resumes: the database's records seed
the search and are fed to the cost model first. The tuned network is then compiled with the tuned
programs (compile_network), exported as a shared library, loaded back from that file and timed end to end
against the untuned build and the framework the network came from, with the same threads.
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path

import numpy as np
import tvm
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from ..atomic import atomic_path, save_figure, write_json
from .builder import default_target, import_cpu_tensor_intrin, make_builder, make_runner
from .console import native_output_to, quiet_tvm_console, quiet_warnings
from .network_import import Network
from .network_tuning_config import (BUILD_TIMEOUT_SEC, CACHE_FLUSH, PREPACK_WEIGHTS,
                                    TRIALS_PER_ITER, default_search)
from .networks import extract_tasks, fused_module
from .task_scheduler import DeadlineScheduler, TuningProgress
from .tune import make_cost_model, tuned_platform

LIBRARY = "network.so"
NO_TRIAL_LIMIT = 1 << 30  # MetaSchedule needs a trial budget; with --minutes alone this one never binds


def _resume(db, contexts, model) -> tuple[list[float], int]:
    """Best seconds per task already in the database and its record count; the records are fed to
    the cost model as if measured now."""
    best, count = [math.inf] * len(contexts), 0
    for i, ctx in enumerate(contexts):
        if not db.has_workload(ctx.mod):
            continue
        records = db.get_top_k(db.commit_workload(ctx.mod), NO_TRIAL_LIMIT)
        if not records:
            continue
        secs = [float(np.median([float(s) for s in r.run_secs])) for r in records]
        best[i] = min(secs)
        count += len(records)
        results = [ms.runner.RunnerResult(run_secs=list(r.run_secs), error_msg=None) for r in records]
        model.update(ctx, [r.as_measure_candidate() for r in records], results)
    return best, count


def _say(stream, text: str) -> None:
    import sys

    print(text, file=stream or sys.stderr, flush=True)


def time_calls(fn, repeats: int = 20, max_seconds: float = 20.0) -> dict:
    """Seconds of `fn()` after one warm-up call: median, min and max of up to `repeats` calls (fewer
    when they would take over max_seconds, at least 3)."""
    fn()
    times = []
    t_end = time.perf_counter() + max_seconds
    while len(times) < repeats and (len(times) < 3 or time.perf_counter() < t_end):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return call_stats(times)


def call_stats(times: list[float]) -> dict:
    """Median, min and max of timed calls, in seconds, and how many there were."""
    return {"median_s": float(np.median(times)), "min_s": float(min(times)), "max_s": float(max(times)),
            "repeats": len(times)}


def tuned_module(network: Network, database, target, prepack_weights: bool = PREPACK_WEIGHTS) -> tvm.IRModule:
    """The network's fused module with the database's programs for its fused functions (the others as
    legalized). With `prepack_weights` (as tuned), the weight-layout conversions the tuned programs ask
    for are split off and folded into the constants: done here once, not at every inference."""
    from tvm import relax

    mod = fused_module(network.mod, target, prepack_weights)
    with quiet_warnings(), target, database, tvm.transform.PassContext(opt_level=3):
        passes = [relax.transform.MetaScheduleApplyDatabase()]  # needs the target in context
        if prepack_weights:
            passes += [relax.transform.SplitLayoutRewritePreproc(), relax.transform.FoldConstant()]
        return tvm.transform.Sequential(passes)(mod)


def compile_network(network: Network, database, target, prepack_weights: bool = PREPACK_WEIGHTS):
    """The VM executable of tuned_module."""
    from tvm import relax
    from tvm.relax.backend.cpu_generic import pipeline  # relax.pipeline's dispatch to it is broken here

    mod = tuned_module(network, database, target, prepack_weights)
    lower = tvm.transform.Sequential([*pipeline.dataflow_lower_passes(target), *pipeline.finalize_passes(target)])
    with quiet_warnings(), target, tvm.transform.PassContext(opt_level=3):
        return relax.build(mod, target=target, relax_pipeline=lower)


def load_library(path):
    """(VirtualMachine, device) of an exported network library on this machine's CPU."""
    from tvm import relax

    dev = tvm.cpu()
    return relax.VirtualMachine(tvm.runtime.load_module(str(path)), dev), dev


def outputs(value) -> list[np.ndarray]:
    """The network's outputs as numpy arrays, flattened (Relax returns a tensor or nested tuples)."""
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [a for v in value for a in outputs(v)]


def run_library(vm, dev, inputs):
    """A function that runs one inference of the loaded network on `inputs`, and its outputs."""
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    return lambda: vm["main"](*args)


def kernel_seconds(library, inputs, repeats: int = 20) -> dict[str, float]:
    """Seconds per inference spent in each kernel of an exported network (the VM's builtins left out),
    timed around every call while the whole network runs: a kernel can be slower there than when it
    was measured alone, e.g. when its weights are no longer in cache."""
    vm, dev = load_library(library)
    run = run_library(vm, dev, inputs)
    run()  # warm-up, outside the timing
    total: dict[str, float] = {}
    started: dict[str, float] = {}

    def instrument(func, name, before_run, ret_value, *args):
        if name.startswith("vm.builtin."):
            return
        if before_run:
            started[name] = time.perf_counter()
        else:
            total[name] = total.get(name, 0.0) + time.perf_counter() - started[name]

    vm.set_instrument(instrument)
    for _ in range(repeats):
        run()
    return {name: seconds / repeats for name, seconds in total.items()}


def export(network: Network, database, target, path, prepack_weights: bool = PREPACK_WEIGHTS) -> Path:
    exe = compile_network(network, database, target, prepack_weights)
    path = Path(path)
    with atomic_path(path) as tmp:
        exe.export_library(str(tmp))
    return path


def end_to_end(network: Network, library: Path, target, threads: int,
               prepack_weights: bool = PREPACK_WEIGHTS) -> dict:
    """Times the exported library (loaded back from its file), the untuned build and the network's
    own framework, batch as given, one call at a time; checks the tuned outputs against the untuned."""
    vm, dev = load_library(library)
    tuned = run_library(vm, dev, network.inputs)
    out = {"tuned": time_calls(tuned)}
    untuned_exe = compile_network(network, ms.database.MemoryDatabase(), target, prepack_weights)
    untuned_vm = tvm.relax.VirtualMachine(untuned_exe, dev)
    untuned = run_library(untuned_vm, dev, network.inputs)
    out["untuned"] = time_calls(untuned, repeats=5)
    a, b = outputs(tuned()), outputs(untuned())
    out["max_abs_diff_vs_untuned"] = float(max(np.max(np.abs(x - y)) if x.size else 0.0 for x, y in zip(a, b)))
    out["max_abs_output"] = float(max(np.max(np.abs(y)) if y.size else 0.0 for y in b))
    if network.reference is not None:
        label, make = network.reference
        with quiet_warnings():
            out["reference"] = {"label": label, "threads": threads, **time_calls(make(threads))}
    return out


def tune_network(network: Network, out_dir, minutes: float | None = None, trials: int | None = None,
                 cost_model: str = "tcl", model_path=None, target=None, rpc: str | None = None,
                 key: str | None = None, trials_per_iter: int = TRIALS_PER_ITER, seed: int = 0, mlp_data=None,
                 explore: float | None = None, search: dict | None = None, measure: bool = True, stream=None,
                 label: str | None = None, platform_info: dict | None = None,
                 prepack_weights: bool = PREPACK_WEIGHTS, cache_flush: bool = CACHE_FLUSH,
                 build_timeout_sec: float = BUILD_TIMEOUT_SEC) -> dict:
    """Tunes every task of `network` within the budget (minutes and/or trials, at least one), writes
    out_dir/{db, logs, network.so, report.json} and returns the report. `search`: keyword arguments
    of MetaSchedule's EvolutionarySearch (population_size, genetic_num_iters, ...); default: the cost
    model's own (network_tuning_config.default_search).
    platform_info: an RPC device's hardware (tcl.tvm.tune.tuned_platform). prepack_weights: the tuned
    programs may choose their weights' layout (networks.fused_module). cache_flush: the runner times
    each program from flushed caches (builder.make_runner). build_timeout_sec: a candidate whose build
    takes longer is recorded as failed."""
    from .collect_session import check_rpc
    from .targets import parse_target

    if minutes is None and trials is None:
        raise ValueError("give a budget: minutes, trials or both")
    if minutes is not None and not minutes > 0:
        raise ValueError(f"minutes must be > 0, got {minutes}")
    if trials is not None and trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    target = parse_target(target) if target is not None else default_target()
    threads = int(target.attrs.get("num-cores", 1))
    search = default_search(cost_model) if search is None else search
    tracker = check_rpc(rpc, key)
    import_cpu_tensor_intrin()
    out_dir = Path(out_dir)
    (out_dir / "db").mkdir(parents=True, exist_ok=True)
    with quiet_warnings():
        extracted = extract_tasks(network.mod, target, prepack_weights)
    if not extracted:
        raise ValueError(f"{network.name}: no tunable tasks (nothing MetaSchedule can schedule)")
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)  # console level of its loggers
    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        extracted, str(out_dir), strategy=ms.search_strategy.EvolutionarySearch(**search),
        num_threads=threads, seed=seed)
    quiet_tvm_console()
    db = ms.database.JSONDatabase(work_dir=str(out_dir / "db"))
    platform = tuned_platform(target, tracker, platform_info)
    model = make_cost_model(cost_model, model_path, mlp_data, explore, platform)
    prior_best, prior_records = _resume(db, contexts, model)
    budget = " and ".join(([f"{minutes:g} min"] if minutes else []) + ([f"{trials} trials"] if trials else []))
    _say(stream, f"{network.name}: {len(contexts)} tasks; tuning with {cost_model} for {budget}"
         + (f", resuming from {prior_records} measured programs" if prior_records else ""))
    builder = make_builder(max_workers=threads, timeout_sec=build_timeout_sec)
    runner = TimedRunner(make_runner(tracker_host=tracker[0] if tracker else None,
                                     tracker_port=tracker[1] if tracker else None, tracker_key=key,
                                     cache_flush=cache_flush))
    try:
        with quiet_warnings(), native_output_to(out_dir / "logs" / "stderr.log") as real_stderr:
            start = time.perf_counter()
            progress = TuningProgress(weights, [c.task_name for c in contexts], start, minutes, trials, prior_best,
                                      stream=stream or real_stderr, label=label or cost_model)
            scheduler = DeadlineScheduler(progress, start + minutes * 60 if minutes else None, seed=seed)
            ms.tune.tune_tasks(tasks=contexts, task_weights=weights, work_dir=str(out_dir),
                               max_trials_global=trials or NO_TRIAL_LIMIT, num_trials_per_iter=trials_per_iter,
                               builder=builder, runner=runner, database=db, cost_model=model,
                               measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), progress],
                               task_scheduler=scheduler)
            seconds = time.perf_counter() - start
            progress.show(final=True)
    finally:
        if hasattr(builder, "shutdown"):
            builder.shutdown()
    estimate, with_result = progress.estimate()
    report = {
        "network": network.name, "cost_model": cost_model, "target": str(target), "threads": threads,
        "prepack_weights": prepack_weights, "cache_flush": cache_flush,
        "platform": platform and platform["name"],
        "budget": {"minutes": minutes, "trials": trials}, "search": search, "seconds": seconds,
        "trials": progress.trials,
        "resumed_records": prior_records,
        "tasks": [{"name": c.task_name, "weight": float(w), "best_s": b if math.isfinite(b) else None,
                   "batches": len(h)} for c, w, b, h in zip(contexts, weights, progress.best, progress.history)],
        "estimated_s": estimate if with_result == len(contexts) else None,
        "curve": [[e["seconds"], e["estimate_s"]] for e in progress.events if e["estimate_s"] is not None],
        "events": progress.events,
    }
    report["time_split"] = time_split(seconds, builder.seconds, runner.seconds + scheduler.join_seconds)
    report["build_timeout_s"], report["builds_timed_out"] = build_timeout_sec, builder.timed_out
    if hasattr(model, "stats"):
        report["cost_model_stats"] = model.stats
    if measure:
        _say(stream, f"{network.name}: compiling, exporting and timing end to end")
        with quiet_warnings(), native_output_to(out_dir / "logs" / "stderr.log"):
            library = export(network, db, target, out_dir / LIBRARY, prepack_weights)
            report["library"] = str(library)
            report["end_to_end"] = end_to_end(network, library, target, threads, prepack_weights)
    write_json(out_dir / "report.json", report)
    return report


@derived_object
class TimedRunner(ms.runner.PyRunner):
    """A runner that counts the seconds spent in its inner runner's run(): LocalRunner runs the
    programs there; an RPC runner's runs are waited for when the scheduler joins them."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.seconds = inner, 0.0

    def run(self, runner_inputs):
        start = time.perf_counter()
        try:
            return self.inner.run(runner_inputs)
        finally:
            self.seconds += time.perf_counter() - start


def time_split(seconds: float, build_s: float, measure_s: float) -> dict:
    """Where a session's wall time went: building; measuring (waiting for the runs, with the cost
    model's update and the database writes that follow each batch); and the rest, which is the
    search (generating and scoring candidates, the cost model's predictions included)."""
    return {"search_s": round(max(seconds - build_s - measure_s, 0.0), 1), "build_s": round(build_s, 1),
            "measure_s": round(measure_s, 1)}


def log_latency_axis(ax) -> None:
    """A log y axis labelled in plain numbers (40, not 4x10^1)."""
    from matplotlib.ticker import FuncFormatter

    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)


def plot(reports: dict[str, dict], path) -> None:
    """Estimated network latency vs tuning wall time, one step curve per cost model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    for kind, r in reports.items():
        curve = np.array(r["curve"], float).reshape(-1, 2)
        if len(curve):
            ax.step(curve[:, 0] / 60, curve[:, 1] * 1e3, where="post", label=kind)
    if not ax.lines:
        ax.text(0.5, 0.5, "no estimate: some task has no measured program yet", ha="center",
                transform=ax.transAxes)
    ax.set_xlabel("tuning wall time (min)")
    ax.set_ylabel("estimated network latency (ms)")
    name = next(iter(reports.values()))["network"] if reports else ""
    ax.set_title(f"{name}: sum over tasks of weight x best measured latency")
    if ax.lines:
        log_latency_axis(ax)
        ax.legend(title="cost model")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def snippet(library, inputs: list[np.ndarray]) -> str:
    """Python that loads the exported library and runs it on inputs of the tuned shapes."""
    args = ", ".join(f"tvm.runtime.tensor(np.zeros({tuple(x.shape)}, {str(x.dtype)!r}))" for x in inputs)
    return ("import numpy as np, tvm\n"
            "from tvm import relax\n"
            f"vm = relax.VirtualMachine(tvm.runtime.load_module({os.fspath(library)!r}), tvm.cpu())\n"
            f"out = vm[\"main\"]({args})  # a tensor, or a tuple of them: .numpy() each")
