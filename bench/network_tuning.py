"""Whole-network tuning against a wall-clock budget: TCL vs TVM's XGBModel (and MLPModel, random).

For every network, cost model and seed, `tcl.tvm.network_tuning.tune_network` tunes all tasks of
the network for --minutes of wall-clock time (the largest budget) on this machine. Its curve is the
estimated network latency (sum over tasks of weight x best measured latency) against tuning wall
time, so the smaller budgets come from the same run. At each budget of --budgets the network is
compiled from the database records measured by then and timed end to end (the library of the
largest budget is the exported one); PyTorch eager is timed beside it with the same threads. As in
`tcl tune`, the runner times each program from flushed caches; a kind named with +warm (e.g.
tcl+warm) times repeated calls on warm caches instead.

Runs are kept under --work (one directory per network, cost model and seed, each a `tcl tune`
output) and reused when run again with the same settings on the same host, so a long benchmark can
be spread over several sittings; a run left unfinished, or made with other settings, starts again
from nothing. Run it with nothing else on the machine.

Writes bench/results/network_tuning.json: per network, its settings, the curves and end-to-end
seconds of every run (networks of an earlier summary of this host that a run does not tune are
kept), and
- time_ratio_to_xgb_final: XGB's wall time to reach its final estimated latency / TCL's wall time to
  reach that latency (paired by seed, geometric mean; null when a TCL run never reached it),
- side_by_side: the largest budget's libraries of every run and PyTorch eager timed in turn in one
  process after all runs (one call of each per round), so that the machine's drift between runs
  does not decide the ratios below,
- latency_ratio_equal_time: XGB's end-to-end seconds / TCL's at the largest budget, side by side
  (paired by seed, geometric mean),
- vs_pytorch: PyTorch eager seconds / TCL-tuned seconds at the largest budget, side by side
  (geometric mean),
- warm: the three ratios between the runs of kinds tcl+warm and xgb+warm (the runner timing
  repeated calls on warm caches, TVM's default, instead of flushing them) where both were run,
- breakdown: where the time goes, task by task (seed 0): each cost model's best latency per conv or
  matmul task as measured alone, and its kernel's time per call inside the exported network, beside
  PyTorch eager's time per call of the same op (torch.profiler, same threads), and every other task
  and op summed,
and bench/results/network_tuning.png (estimated latency vs wall time, every run).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from tcl.atomic import save_figure, write_json
from tcl.cli.options import HelpFormatter
from tcl.tvm.network_tuning import log_latency_axis
from tcl.tvm.network_tuning_config import CACHE_FLUSH, PREPACK_WEIGHTS, TRIALS_PER_ITER, default_search

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / "bench" / "results" / "network_tuning.json"


def first_time_at_or_below(curve, level: float) -> float | None:
    """Wall seconds at which a curve [[seconds, estimate], ...] first reaches `level` (None: never)."""
    for seconds, estimate in curve:
        if estimate <= level * (1 + 1e-12):
            return float(seconds)
    return None


def geomean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.exp(np.mean(np.log(values)))) if values else None


def database_prefix(db_dir: Path, count: int):
    """A MemoryDatabase holding the first `count` records of a tuning database, in measuring order."""
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.dataset import records_in_file_order

    mem = ms.database.MemoryDatabase()
    for rec in records_in_file_order(db_dir)[:count]:
        mem.commit_workload(rec.workload.mod)
        mem.commit_tuning_record(rec)
    return mem


def records_by(events: list[dict], seconds: float) -> int:
    """How many programs had been measured `seconds` into the run (events: TuningProgress.events)."""
    return int(sum(e["size"] for e in events if e["seconds"] <= seconds))


def search_setting(text: str) -> tuple[str, dict]:
    """`MODEL:KEY=VALUE,...` -> (model, EvolutionarySearch keyword arguments)."""
    kind, sep, pairs = text.partition(":")
    try:
        if not sep or not kind:
            raise ValueError
        kv = dict(pair.split("=", 1) for pair in pairs.split(","))
        return kind, {k: int(v) if v.lstrip("-").isdigit() else float(v) for k, v in kv.items()}
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MODEL:KEY=VALUE,..., e.g. xgb:population_size=256, got {text!r}")


def bench_target(args):
    from tcl.tvm.builder import default_target
    from tcl.tvm.targets import parse_target

    return parse_target(args.target) if args.target else default_target()


WARM = "+warm"  # a cost model's runs with the runner timing repeated calls on warm caches, e.g. tcl+warm


def cost_model_of(kind: str) -> tuple[str, bool]:
    """A run kind of --cost-models -> (the cost model, whether the runner flushes the caches)."""
    return kind.removesuffix(WARM), CACHE_FLUSH and not kind.endswith(WARM)


def search_of(kind: str, args) -> dict:
    """The EvolutionarySearch settings of a run kind: --search's, else its cost model's default."""
    return args.search.get(kind, default_search(cost_model_of(kind)[0]))


def run_settings(network, kind: str, args) -> dict:
    """What a stored run must have been made with to be reused."""
    import tvm_ffi

    from tcl.runtime import model_sha256
    from tcl.tvm.hardware import detect_host, platform_name

    settings = {"minutes": args.minutes, "budgets": args.budgets, "target": args.target,
                "host": platform_name(detect_host()), "trials_per_iter": args.trials_per_iter,
                "search": search_of(kind, args),
                "network": str(tvm_ffi.structural_hash(network.mod)),  # the module as imported and tuned
                "prepack_weights": PREPACK_WEIGHTS}
    cost_model, flush = cost_model_of(kind)
    if cost_model == "tcl":  # a run of another shipped model is not reused
        settings["model_sha256"] = model_sha256()
    settings["cache_flush"] = flush
    return settings


def stored_settings(run: dict) -> dict:
    """A stored run's settings; runs stored before the runner could flush the caches did not."""
    return {"cache_flush": False, **run["settings"]}


def run_dir(work: Path, network_name: str, kind: str, seed) -> Path:
    """Where one run is kept: its `tcl tune` output, with the largest budget's library."""
    return work / network_name / kind / f"seed{seed}"


def run_one(network, kind: str, seed: int, args, work: Path) -> dict:
    """One tuning run of an imported built-in network at the largest budget (reused if already done
    with these settings), with the end-to-end seconds at each budget."""
    from tcl.tvm.network_tuning import compile_network, end_to_end, run_library, time_calls, tune_network

    network_name = network.name
    out = run_dir(work, network_name, kind, seed)
    settings = run_settings(network, kind, args)
    done = out / "bench_run.json"
    if done.exists():
        run = json.loads(done.read_text())
        if stored_settings(run) == settings:
            print(f"  reusing {done}", file=sys.stderr)
            return run
    if out.exists():  # an interrupted run or other settings: tune_network would resume from its database
        shutil.rmtree(out)
    report = tune_network(network, out, minutes=args.minutes, cost_model=cost_model_of(kind)[0], target=args.target,
                          seed=seed, trials_per_iter=args.trials_per_iter, search=settings["search"], measure=False,
                          label=f"{network_name} {kind} s{seed}", cache_flush=settings["cache_flush"])
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tcl.tvm.network_tuning import LIBRARY, export

    target = bench_target(args)
    e2e = {}
    for budget in args.budgets:
        if budget == max(args.budgets):
            library = export(network, ms.database.JSONDatabase(work_dir=str(out / "db")), target, out / LIBRARY)
            full = end_to_end(network, library, target, report["threads"])
            e2e[str(budget)] = full["tuned"]
        else:
            db = database_prefix(out / "db", records_by(report["events"], budget * 60))
            vm = tvm.relax.VirtualMachine(compile_network(network, db, target), tvm.cpu())
            e2e[str(budget)] = time_calls(run_library(vm, tvm.cpu(), network.inputs))
    run = {"settings": settings, "seconds": report["seconds"], "trials": report["trials"], "curve": report["curve"],
           "tasks": report["tasks"], "time_split": report["time_split"],
           "end_to_end": e2e, "untuned": full["untuned"], "pytorch_eager": full.get("reference"),
           "max_abs_diff_vs_untuned": full["max_abs_diff_vs_untuned"]}
    write_json(done, run)
    return run


MATMUL_TASK = ("conv", "matmul", "dense")  # task names whose first two operands are data and weights
MATMUL_OP = ("conv", "linear", "matmul", "addmm", "bmm")  # PyTorch ops of that kind


def task_operands(network, target) -> dict[str, dict]:
    """Per tuning task: its first two operands' shapes (data and weights of a conv or matmul) and its
    floating-point operations."""
    from tcl.tvm.networks import _flops, extract_tasks

    out = {}
    for task in extract_tasks(network.mod, target, PREPACK_WEIGHTS):
        mod = task.dispatched[0]
        func = mod[mod.get_global_vars()[0]]
        buffers = [p if hasattr(p, "shape") else func.buffer_map[p] for p in func.params[:2]]  # TIRx: params are buffers
        shapes = [[int(d) for d in buf.shape] for buf in buffers]
        out[task.task_name] = {"operands": shapes, "flops": _flops(mod)}
    return out


def pytorch_op_seconds(module, x: tuple, threads: int, iterations: int = 20) -> dict:
    """PyTorch eager's top-level ops on inputs `x`, keyed by (op, first two input shapes): (seconds per
    call, calls per inference), from torch.profiler over `iterations` inferences."""
    import torch

    module = module.eval()
    torch.set_num_threads(threads)
    with torch.no_grad():
        for _ in range(3):
            module(*x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
            for _ in range(iterations):
                module(*x)
    total, calls = {}, {}
    for e in prof.events():
        if e.cpu_parent is None:  # top level: its children's time is inside it
            key = (e.name, tuple(tuple(s) for s in e.input_shapes[:2]))
            total[key] = total.get(key, 0.0) + e.cpu_time_total * 1e-6
            calls[key] = calls.get(key, 0) + 1
    return {k: (total[k] / calls[k], calls[k] / iterations) for k in total}


def matching_op(operands: list, op_seconds: dict):
    """The PyTorch conv/linear/matmul op whose data and weight shapes are the task's (a 2-D weight
    may be stored transposed on one side; a convolution tuned in NHWC has NHWC data and OHWI weights,
    PyTorch's are NCHW and OIHW), or None."""
    if len(operands) < 2:
        return None
    data, weight = tuple(operands[0]), tuple(operands[1])
    pairs = {(data, w) for w in ({weight, weight[::-1]} if len(weight) == 2 else {weight})}
    if len(data) == len(weight) == 4:
        pairs.add(tuple(tuple(s[i] for i in (0, 3, 1, 2)) for s in (data, weight)))
    for name, shapes in op_seconds:
        if any(k in name for k in MATMUL_OP) and len(shapes) == 2 and tuple(shapes) in pairs:
            return name, shapes
    return None


def task_kernel_seconds(library: Path, inputs) -> dict[str, float]:
    """Seconds per inference of each task's kernel inside the exported network, keyed by task name
    (a kernel whose weights were prepacked is named after its task with a `_prepacked` suffix)."""
    from tcl.tvm.network_tuning import kernel_seconds

    out: dict[str, float] = {}
    for name, seconds in kernel_seconds(library, inputs).items():
        task = name.removesuffix("_prepacked")
        out[task] = out.get(task, 0.0) + seconds
    return out


def breakdown_kinds(runs: dict) -> list[str]:
    """The run kinds of TCL and XGBModel (with flushed or warm caches) that have a seed 0 run."""
    return [k for k in runs if cost_model_of(k)[0] in ("tcl", "xgb") and "0" in runs[k]]


def breakdown(tasks: dict, runs: dict, op_seconds: dict, in_network: dict | None = None) -> dict:
    """Where the time goes, task by task: each cost model's best latency per task (seed 0), measured
    alone, and its kernel's time per call inside the whole network (`in_network`: {cost model:
    task_kernel_seconds}), beside PyTorch eager's time per call of the same conv or matmul; the other
    tasks and ops summed."""
    models = breakdown_kinds(runs)
    best = {k: {t["name"]: t["best_s"] for t in runs[k]["0"]["tasks"]} for k in models}
    in_network = in_network or {}
    rows, other = [], {k: 0.0 for k in models}
    matched = set()
    for name, info in tasks.items():
        weight = next(t["weight"] for t in runs[models[0]]["0"]["tasks"] if t["name"] == name)
        op = matching_op(info["operands"], op_seconds) if any(k in name for k in MATMUL_TASK) else None
        if op is None:
            for k in models:  # None once a task has no measured program
                other[k] = None if other[k] is None or best[k][name] is None else other[k] + weight * best[k][name]
            continue
        matched.add(op)
        rows.append({"task": name, "weight": weight, "gflop": info["flops"] * 1e-9, "pytorch_op": op[0],
                     "pytorch_s": op_seconds[op][0], **{f"{k}_s": best[k][name] for k in models},
                     **{f"{k}_in_network_s": kernels.get(name, 0.0) / weight for k, kernels in in_network.items()}})
    other["pytorch"] = sum(s * n for op, (s, n) in op_seconds.items() if op not in matched)
    rows_named = {r["task"] for r in rows}
    other_in_network = {k: sum(s for name, s in kernels.items() if name not in rows_named)
                        for k, kernels in in_network.items()}
    return {"tasks": sorted(rows, key=lambda r: -r["weight"] * r["pytorch_s"]), "other_s": other,
            "other_in_network_s": other_in_network,
            "in_network_s": {k: sum(kernels.values()) for k, kernels in in_network.items()},
            "pytorch_profiled_s": sum(s * n for s, n in op_seconds.values())}


def print_breakdown(b: dict) -> None:
    """Per task: each cost model's best latency alone / its kernel's inside the network, ms per call."""
    models = [k for k in b["other_s"] if k != "pytorch"]
    ms = lambda v: f"{(v if v is not None else float('nan')) * 1e3:.3f}"  # noqa: E731
    cell = lambda alone, inside: f"{ms(alone) + ' / ' + ms(inside):>15s}"  # noqa: E731
    print(f"  {'task':44s} {'weight':>6s} {'GFLOP':>6s} " + " ".join(f"{k + ' alone / in net':>15s}" for k in models)
          + f" {'PyTorch ms':>10s}  PyTorch op")
    for r in b["tasks"]:
        print(f"  {r['task'][:44]:44s} {r['weight']:6g} {r['gflop']:6.3f} "
              + " ".join(cell(r[k + "_s"], r.get(k + "_in_network_s")) for k in models)
              + f" {r['pytorch_s'] * 1e3:10.3f}  {r['pytorch_op']}")
    print(f"  {'every other task / op, summed':58s} "
          + " ".join(cell(b["other_s"][k], b.get("other_in_network_s", {}).get(k)) for k in models)
          + f" {b['other_s']['pytorch'] * 1e3:10.3f}")
    if b.get("in_network_s"):
        print("  every kernel inside the network, ms per inference: "
              + ", ".join(f"{k} {v * 1e3:.2f}" for k, v in b["in_network_s"].items()))


def side_by_side(libraries: dict[str, Path], network, threads: int, rounds: int = 20) -> dict[str, dict]:
    """The exported libraries of one network ({name: path}) and the network's own framework
    ("reference") timed in turn, one call of each per round in one process, so that the machine's
    drift between tuning runs hits them alike: median, min and max seconds per name."""
    from tcl.tvm.network_tuning import call_stats, load_library, run_library

    calls = {}
    for name, library in libraries.items():
        vm, dev = load_library(library)
        calls[name] = run_library(vm, dev, network.inputs)
    if network.reference is not None:
        calls["reference"] = network.reference[1](threads)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        call()  # warm-up
    for _ in range(rounds):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    return {name: call_stats(t) for name, t in times.items()}


def summarize(network_runs: dict, side: dict | None = None) -> dict:
    """The three ratios of one network from its runs {cost_model: {seed: run}}. `side`: the
    side_by_side times of the largest budget's libraries, keyed "cost_model/seed" (and "reference"),
    used for the ratios at the largest budget where given; else each run's own end-to-end timing."""
    tcl, xgb = network_runs.get("tcl", {}), network_runs.get("xgb", {})
    side = side or {}
    largest = {kind: {seed: side[f"{kind}/{seed}"]["median_s"] if f"{kind}/{seed}" in side
                      else run["end_to_end"][max(run["end_to_end"], key=float)]["median_s"]
                      for seed, run in runs.items()} for kind, runs in network_runs.items()}
    pytorch = {seed: side["reference"]["median_s"] if "reference" in side
               else (run.get("pytorch_eager") or {}).get("median_s") for seed, run in tcl.items()}
    time_ratios, latency_ratios = [], []
    for seed in sorted(set(tcl) & set(xgb)):
        xc, tc = xgb[seed]["curve"], tcl[seed]["curve"]
        if xc and tc:
            final = xc[-1][1]
            t_xgb, t_tcl = first_time_at_or_below(xc, final), first_time_at_or_below(tc, final)
            time_ratios.append(t_xgb / t_tcl if t_tcl else None)
        latency_ratios.append(largest["xgb"][seed] / largest["tcl"][seed])
    out = {"time_ratio_to_xgb_final": None if None in time_ratios else geomean(time_ratios),
           "time_ratio_to_xgb_final_by_seed": time_ratios,
           "latency_ratio_equal_time": geomean(latency_ratios), "latency_ratio_equal_time_by_seed": latency_ratios,
           "vs_pytorch": geomean([pytorch[seed] / largest["tcl"][seed] for seed in tcl if pytorch[seed]])}
    out["end_to_end_s"] = {kind: {budget: geomean([r["end_to_end"][budget]["median_s"] for r in runs.values()])
                                  for budget in next(iter(runs.values()))["end_to_end"]}
                           for kind, runs in network_runs.items()}
    out["untuned_s"] = geomean([r["untuned"]["median_s"] for runs in network_runs.values() for r in runs.values()])
    out["pytorch_eager_s"] = geomean([r["pytorch_eager"]["median_s"] for runs in network_runs.values()
                                      for r in runs.values() if r.get("pytorch_eager")])
    return out


def summarize_warm(network_runs: dict, side: dict) -> dict | None:
    """summarize's ratios between the runs of tcl+warm and xgb+warm (None unless both were run)."""
    warm = {k.removesuffix(WARM): v for k, v in network_runs.items() if k.endswith(WARM)}
    if not {"tcl", "xgb"} <= set(warm):
        return None
    return summarize(warm, {k.replace(WARM + "/", "/"): v for k, v in side.items() if WARM in k or k == "reference"})


def kept_networks(previous: dict, host: str, running: list[str]) -> dict:
    """The previous summary's networks that this run does not tune, when it was made on this host,
    each with the settings it was run with."""
    if previous.get("host") != host:
        return {}
    return {name: {"settings": previous["settings"], **entry} for name, entry in previous.get("networks", {}).items()
            if name not in running}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nets = list(results["networks"])
    fig, axes = plt.subplots(1, len(nets), figsize=(5.5 * len(nets), 4), squeeze=False)
    colors = {"tcl": "C0", "xgb": "C1", "mlp": "C2", "random": "C7"}
    for ax, name in zip(axes[0], nets):
        for kind, runs in results["networks"][name]["runs"].items():
            for i, run in enumerate(runs.values()):
                c = np.array(run["curve"], float).reshape(-1, 2)
                if len(c):
                    ax.step(c[:, 0] / 60, c[:, 1] * 1e3, where="post", color=colors.get(kind), alpha=0.8,
                            label=kind if i == 0 else None)
        ax.set_title(name)
        ax.set_xlabel("tuning wall time (min)")
        ax.set_ylabel("estimated network latency (ms)")
        log_latency_axis(ax)
        ax.legend(title="cost model")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    p.add_argument("--networks", default="resnet18,mobilenet_v2", help="comma separated (default: %(default)s)")
    p.add_argument("--minutes", type=float, default=24.0, help="largest budget: tuning minutes per run (default: %(default)s)")
    p.add_argument("--budgets", default=None,
                   help="budgets in minutes at which the network is timed end to end (default: 1/4, 1/2 and all of --minutes)")
    p.add_argument("--seeds", type=int, default=3, help="seeds of TCL and XGB (default: %(default)s)")
    p.add_argument("--one-seed", default="mlp,random", help="cost models run at seed 0 only (default: %(default)s)")
    p.add_argument("--cost-models", default="tcl,xgb",
                   help=f"cost models run at every seed; a model named with {WARM} (e.g. tcl{WARM}) is run with the "
                        "runner timing repeated calls on warm caches, not flushing them (default: %(default)s)")
    p.add_argument("--target", default=None, help="TVM target (default: this CPU, all cores)")
    p.add_argument("--trials-per-iter", type=int, default=TRIALS_PER_ITER,
                   help="programs per measured batch (default: %(default)s, as tcl tune)")
    p.add_argument("--search", action="append", default=[], type=search_setting, metavar="MODEL:KEY=VALUE,...",
                   help="EvolutionarySearch settings of one cost model's runs, e.g. "
                        "xgb:population_size=512,genetic_num_iters=4 (TVM's default; default: as tcl tune)")
    p.add_argument("--work", default=os.path.expanduser("~/.cache/tcl/bench-network-tuning"),
                   help="where runs are kept and reused (default: %(default)s)")
    p.add_argument("--out", default=str(RESULT), help="summary JSON (default: bench/results/network_tuning.json)")
    args = p.parse_args(argv)
    args.budgets = sorted({float(b) for b in args.budgets.split(",")}) if args.budgets else \
        [args.minutes / 4, args.minutes / 2, args.minutes]
    args.search = dict(args.search)
    if max(args.budgets) != args.minutes:
        p.error("the largest of --budgets must equal --minutes")
    plan = [(k, s) for k in args.cost_models.split(",") if k for s in range(args.seeds)] + \
        [(k, 0) for k in args.one_seed.split(",") if k]
    work = Path(args.work)
    results = {"settings": {"minutes": args.minutes, "budgets": args.budgets, "seeds": args.seeds,
                            "target": args.target, "trials_per_iter": args.trials_per_iter,
                            "search": {k: search_of(k, args) for k, _ in plan}},
               "networks": {}}
    names = [n for n in args.networks.split(",") if n]
    from tcl.tvm.hardware import detect_host, platform_name

    host = platform_name(detect_host())
    previous = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
    results["networks"].update(kept_networks(previous, host, names))
    for name in names:
        from tcl.tvm.network_import import from_builtin

        network = from_builtin(name)
        runs: dict[str, dict[str, dict]] = {}
        for kind, seed in plan:
            print(f"{name}: {kind}, seed {seed}, {args.minutes:g} min", file=sys.stderr)
            runs.setdefault(kind, {})[str(seed)] = run_one(network, kind, seed, args, work)
        from tcl.tvm.network_tuning import LIBRARY

        target = bench_target(args)
        threads = int(target.attrs.get("num-cores", 1))
        side = side_by_side({f"{kind}/{seed}": run_dir(work, name, kind, seed) / LIBRARY
                             for kind, seeds in runs.items() for seed in seeds}, network, threads)
        results["networks"][name] = {"settings": results["settings"], "runs": runs, "side_by_side": side,
                                     **summarize(runs, side)}
        if (warm := summarize_warm(runs, side)) is not None:
            results["networks"][name]["warm"] = warm
        if "0" in runs.get("tcl", {}):
            import torch

            from tcl.tvm.networks import NETWORKS

            make, inputs = NETWORKS[name]
            torch.manual_seed(0)
            ops = pytorch_op_seconds(make(), inputs(1), threads)
            libraries = {k: run_dir(work, name, k, 0) / LIBRARY for k in breakdown_kinds(runs)}
            in_network = {k: task_kernel_seconds(lib, network.inputs) for k, lib in libraries.items() if lib.is_file()}
            results["networks"][name]["breakdown"] = breakdown(task_operands(network, target), runs, ops, in_network)
        results["host"] = host
        write_json(Path(args.out), results)
        plot(results, Path(args.out).with_suffix(".png"))
    for name, r in results["networks"].items():
        print(f"{name}: time_ratio_to_xgb_final {r['time_ratio_to_xgb_final']}, latency_ratio_equal_time "
              f"{r['latency_ratio_equal_time']}, vs_pytorch {r['vs_pytorch']}")
        print("  side by side, ms per call (median [min, max]): " + ", ".join(
            f"{k} {v['median_s'] * 1e3:.2f} [{v['min_s'] * 1e3:.2f}, {v['max_s'] * 1e3:.2f}]"
            for k, v in r["side_by_side"].items()))
        if "breakdown" in r:
            print_breakdown(r["breakdown"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
