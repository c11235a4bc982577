"""`tcl tune`, `tcl adapt` and `tcl collect`: the subcommands that need apache-tvm (imported only when they run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import FormatError, MissingDependencyError
from ..tvm.catalog import NETWORK_NAMES
from ..tvm.network_tuning_config import CACHE_FLUSH, CONV_LAYOUT, CONV_LAYOUTS, DEFAULT_MINUTES, PREPACK_WEIGHTS
from .options import add_field, add_seed, config_from_args, fraction, json_object_file, names, positive, with_default

COST_MODELS = ("tcl", "xgb", "mlp", "random")


def network_name(text: str) -> str:
    """An argparse type: one built-in network."""
    if text not in NETWORK_NAMES:
        raise argparse.ArgumentTypeError(f"unknown network {text!r}; choose from {', '.join(NETWORK_NAMES)}")
    return text


def minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of minutes, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def _ms(t: dict | None) -> str:
    if not t:
        return ""
    return f"{t['median_s'] * 1e3:.2f} [{t['min_s'] * 1e3:.2f}, {t['max_s'] * 1e3:.2f}] of {t['repeats']}"


def print_summary(reports: dict, out: Path, network) -> None:
    """The table after tuning: what each number is, the spread of the timings, where the results are."""
    from ..tvm.network_tuning import snippet

    first = next(iter(reports.values()))
    print(f"\n{first['network']}: {len(first['tasks'])} tasks, target {first['target']}")
    print(f"{'':<26}{'tuning':>8}{'trials':>8}{'estimated ms':>14}   measured ms: median [min, max] of n")
    for kind, r in reports.items():
        est = f"{r['estimated_s'] * 1e3:.2f}" if r["estimated_s"] is not None else "-"
        e2e = r.get("end_to_end", {})
        print(f"{'tuned with ' + kind:<26}{r['seconds'] / 60:>7.1f}m{r['trials']:>8}{est:>14}   {_ms(e2e.get('tuned'))}")
    for kind, r in reports.items():
        if r.get("time_split") and r["seconds"] > 0:
            dropped = r.get("builds_timed_out", 0)
            print(f"tuning time with {kind}: " + ", ".join(f"{k.removesuffix('_s')} {v / r['seconds']:.0%}"
                                                         for k, v in r["time_split"].items())
                  + (f" ({dropped} candidates dropped: build over {r['build_timeout_s']:g} s)" if dropped else ""))
    e2e = first.get("end_to_end")
    if not e2e:
        return
    print(f"{'untuned build':<56}   {_ms(e2e['untuned'])}")
    ref = e2e.get("reference")
    if ref:
        label = f"{ref['label']} ({ref['threads']} threads)"
        print(f"{label:<56}   {_ms(ref)}")
    print("estimated: sum over the tasks of weight x best measured task latency; measured: the exported "
          "library end to end, one call at a time, after one warm-up call")
    main = first["end_to_end"]["tuned"]["median_s"]
    line = f"{next(iter(reports))}-tuned network: {e2e['untuned']['median_s'] / main:.1f}x faster than the untuned build"
    if ref:
        ratio = ref["median_s"] / main
        line += (f", {ratio:.2f}x faster than {ref['label']}" if ratio >= 1
                 else f", {1 / ratio:.2f}x slower than {ref['label']}")
    print(line + f" (outputs match the untuned build to {e2e['max_abs_diff_vs_untuned']:.2g})")
    print(f"compiled library: {first['library']}\ntuning database: {Path(first['library']).parent / 'db'} (MetaSchedule "
          f"JSONDatabase; run the same command again to resume)\nreports: {out / 'report.json'}, {out / 'report.png'}")
    print("run it:\n    " + snippet(first["library"], network.inputs).replace("\n", "\n    "))


def _network(args):
    from ..tvm import network_import as ni

    if args.onnx:
        return ni.from_onnx(args.onnx, ni.parse_shapes(args.input_shape) if args.input_shape else None,
                            conv_layout=args.conv_layout)
    return ni.from_builtin(args.network, conv_layout=args.conv_layout)


def run_tune(args):
    from ..atomic import write_json

    kinds = [args.cost_model] + [k for k in args.compare if k != args.cost_model]
    out = Path(args.out)
    if args.workload:
        from ..tvm.tune import tune

        for kind in kinds:
            r = tune(out / kind, workload=args.workload, trials=args.trials or DEFAULT_WORKLOAD_TRIALS,
                     cost_model=kind, model_path=args.model, target=args.target, rpc=args.rpc, key=args.key,
                     seed=args.seed, mlp_data=args.mlp_data, explore=args.explore, platform_info=args.platform_info)
            print(f"{args.workload}: tuned with {kind} in {r['seconds']:.0f} s, best {r['weighted_best_s'] * 1e3:.4f} ms "
                  f"(report: {out / kind / 'report.json'})")
        return
    from ..tvm.network_tuning import plot, tune_network

    budget = args.minutes if args.minutes is not None or args.trials else DEFAULT_MINUTES
    try:
        network = _network(args)
    except ValueError as e:
        raise FormatError(str(e)) from None
    reports = {}
    for kind in kinds:
        reports[kind] = tune_network(network, out / kind, minutes=budget, trials=args.trials, cost_model=kind,
                                     model_path=args.model, target=args.target, rpc=args.rpc, key=args.key,
                                     seed=args.seed, mlp_data=args.mlp_data, explore=args.explore,
                                     measure=not args.no_end_to_end, platform_info=args.platform_info,
                                     prepack_weights=args.prepack_weights, cache_flush=args.cache_flush)
    write_json(out / "report.json", {"network": network.name, "runs": reports})
    plot(reports, out / "report.png")
    print_summary(reports, out, network)


def _needs_tvm(e: ModuleNotFoundError, command: str):
    """A clear error naming the extra to install when TVM (or what it needs) is missing."""
    if e.name and e.name.split(".")[0] in ("tvm", "tvm_ffi", "torch", "psutil", "cloudpickle", "xgboost"):
        raise MissingDependencyError(e.name.split(".")[0], "tvm", command) from None
    raise e


def run_adapt(args):
    try:
        from ..tvm.adapt import adapt_host
        from ..tvm.targets import CollectError
    except ModuleNotFoundError as e:
        _needs_tvm(e, "tcl adapt")
    from ..tvm.adapt_config import AdaptConfig

    if args.fraction is not None and not args.fraction > 0:
        raise FormatError(f"--fraction must be more than 0, got {args.fraction}")
    unknown = [n for n in args.network or [] if n not in NETWORK_NAMES]
    if unknown:
        raise FormatError(f"unknown network {unknown[0]!r}; choose from {', '.join(NETWORK_NAMES)}")
    what = args.network or [args.workload]
    try:
        r = adapt_host(what, args.out, config_from_args(AdaptConfig, args), model_path=args.model,
                       target=args.target, rpc=args.rpc, key=args.key, platform_info=args.platform_info)
    except CollectError as e:
        raise FormatError(str(e)) from None
    out = Path(args.out)
    print(f"{r['platform']}: measured {r['measured']} of {r['pool']} candidate programs of {r['tasks']} tasks "
          f"({r['failed']} failed, {r['reused']} already measured) in {r['measure_seconds'] / 60:.1f} min of "
          f"building and running; {r['seconds']['total'] / 60:.1f} min in all")
    print(f"adapted model: {out / 'model.onnx'} (checkpoint {out / 'model.pt'}); measurements: {out} "
          "(one MetaSchedule JSONDatabase per task)")
    tune = f"--network {args.network[0]}" if args.network else f"--workload {args.workload}"
    print(f"tune with it:\n    tcl tune {tune} --model {out / 'model.onnx'}")


def run_collect(args):
    try:
        from ..tvm.collect import CollectError
        from ..tvm.collect import run_collect as collect
    except ModuleNotFoundError as e:
        _needs_tvm(e, "tcl collect")
    try:
        collect(args)
    except CollectError as e:
        raise FormatError(str(e)) from None


DEFAULT_WORKLOAD_TRIALS = 64


def add_tune(sub):
    u = sub.add_parser(
        "tune", help="tune a whole network (built-in or ONNX) within a time budget and export it (needs apache-tvm)",
        description="Tune every task of a network in one MetaSchedule session, guided by TCL's cost model (or "
        "TVM's), within one budget in minutes and/or trials that MetaSchedule's task scheduler shares "
        "among the tasks; then compile the network, export it as a shared library, and time it end to end "
        "against the untuned build and PyTorch eager (onnxruntime for an ONNX file) with the same threads. "
        "Writes under --out: <cost model>/{network.so, db/, logs/, report.json}, report.json and report.png. "
        "Run it again with the same --out to resume from its tuning database. --workload tunes one "
        "operator instead.")
    what = u.add_mutually_exclusive_group(required=True)
    what.add_argument("--network", type=network_name, help=f"a built-in network: {', '.join(NETWORK_NAMES)} "
                      "(this, --onnx or --workload is required)")
    what.add_argument("--onnx", metavar="MODEL.onnx", help="an ONNX model, with --input-shape for symbolic dimensions "
                      "(this, --network or --workload is required)")
    what.add_argument("--workload", help="one operator, e.g. matmul:128,128,128 (a ms.testing.te_workload function "
                      "and its arguments; this, --network or --onnx is required)")
    u.add_argument("--input-shape", metavar="NAME:D1,D2,...",
                   help=with_default("static shapes of the ONNX model's inputs, ';' between inputs", "the file's own"))
    u.add_argument("--minutes", type=minutes, default=None,
                   help=with_default("tuning budget in wall-clock minutes, shared by all tasks",
                                     f"{DEFAULT_MINUTES:g} when --trials is not given either"))
    u.add_argument("--trials", type=positive, default=None,
                   help=with_default("budget in measured programs, shared by all tasks (per task with --workload)",
                                     f"none; {DEFAULT_WORKLOAD_TRIALS} with --workload"))
    u.add_argument("--cost-model", choices=COST_MODELS, default=COST_MODELS[0], help=with_default("the cost model"))
    u.add_argument("--compare", nargs="*", default=[], choices=COST_MODELS, metavar="COST_MODEL",
                   help=with_default("also tune with these cost models, each with the same budget", "none"))
    u.add_argument("--model", default=None, metavar="MODEL.onnx",
                   help=with_default("TCL ONNX model (`tcl export`)", "the one shipped with tcl"))
    u.add_argument("--explore", type=float, default=None,
                   help=with_default("weight of TCL's exploration bonus (its ridge's predictive spread: favours "
                                     "candidates unlike the ones measured so far); 0 ranks by predicted speed alone",
                                     "the TCL cost model's own, see docs/tuning.md"))
    u.add_argument("--mlp-data", default=None, metavar="DATA",
                   help=with_default("dataset the mlp cost model (TVM's MLPModel) is pretrained on, as TenSet-MLP "
                                     "is; cached under ~/.cache/tcl", "datasets/znver4-2c of a source checkout"))
    u.add_argument("--target", default=None, help=with_default("TVM target", "this CPU, all cores"))
    u.add_argument("--rpc", default=None, metavar="HOST:PORT",
                   help=with_default("measure through this TVM RPC tracker", "on this machine"))
    u.add_argument("--key", default=None, help=with_default("RPC device key (with --rpc)", "none"))
    u.add_argument("--platform-info", type=json_object_file, default=None, metavar="JSON",
                   help=with_default("with --rpc: the device's hardware as `python tcl/tvm/hardware.py` prints it "
                                     "there; TCL's model reads its descriptor",
                                     "this host's; with --rpc, the platform the model was exported with"))
    u.add_argument("--out", default="tune-out", help=with_default("output directory"))
    add_seed(u, "the search")
    u.add_argument("--conv-layout", choices=CONV_LAYOUTS, default=CONV_LAYOUT,
                   help=with_default("data layout the network's 2-D convolutions are tuned and compiled in (NHWC "
                                     "vectorises over channels; NCHW is the layout PyTorch and ONNX give)"))
    u.add_argument("--prepack-weights", action=argparse.BooleanOptionalAction, default=PREPACK_WEIGHTS,
                   help=with_default("each tuned program may read the weights in a blocked layout of its own, "
                                     "converted once at compile time; --no-prepack-weights keeps the network's "
                                     "layout", "on" if PREPACK_WEIGHTS else "off"))
    u.add_argument("--cache-flush", action=argparse.BooleanOptionalAction, default=CACHE_FLUSH,
                   help=with_default("time each measured program from flushed caches, as it runs inside the network; "
                                     "--no-cache-flush times repeated calls on warm caches (TVM's default)",
                                     "on" if CACHE_FLUSH else "off"))
    u.add_argument("--no-end-to-end", action="store_true",
                   help="stop after tuning: no export, no end-to-end timing (default: exported and timed)")
    u.set_defaults(run=run_tune)


def add_adapt(sub):
    from ..tvm.adapt_config import AdaptConfig  # no TVM import: --help is fast without it

    a = sub.add_parser(
        "adapt", help="adapt the cost model to this machine (or an RPC device) from a few measurements (needs "
        "apache-tvm)",
        description="For the tasks of the networks: generate candidate programs without measuring them "
        "(replay-trace and evolutionary search scored by the starting model under this hardware's "
        "descriptor), let the RDU sampler pick in rounds which to measure, starting from the model's scores "
        "and uncertainty, build and run those with TVM, and teach the model what they show by continual "
        "distillation (no earlier data, no growth). Writes the adapted model (model.pt, model.onnx for "
        "`tcl tune --model`), the measurements (one MetaSchedule JSONDatabase per task) and report.json "
        "into --out. Resumable: run the same command again. How and why: docs/continual.md.")
    what = a.add_mutually_exclusive_group(required=True)
    what.add_argument("--network", type=names, metavar="NAME[,NAME...]",
                      help=f"built-in network(s) whose tasks to adapt to: {', '.join(NETWORK_NAMES)} "
                      "(this or --workload is required)")
    what.add_argument("--workload", help="one operator instead, e.g. matmul:128,128,128, as tcl tune --workload "
                      "(this or --network is required)")
    a.add_argument("--out", required=True, help="output directory (one per platform)")
    a.add_argument("--model", default=None, metavar="MODEL.pt",
                   help=with_default("the model to start from: a tcl train checkpoint or a tcl distill knowledge base",
                                     "the shipped model"))
    budget = a.add_mutually_exclusive_group()
    add_field(budget, "--fraction", AdaptConfig, "fraction", "measure this share of each task's candidates",
              type=fraction)
    add_field(budget, "--count", AdaptConfig, "count", "measure this many programs in total, split over the "
              "tasks (instead of --fraction)", "none", type=positive)
    add_field(a, "--minutes", AdaptConfig, "minutes", "stop measuring after this long from the start and learn "
              "from what is measured", "no limit", type=minutes)
    add_field(a, "--pool-size", AdaptConfig, "pool_size", "candidate programs generated per task", type=positive)
    add_field(a, "--random-fraction", AdaptConfig, "random_fraction", "share of each pool from replay-trace; the "
              "rest from evolutionary search scored by the model", type=fraction)
    add_field(a, "--population", AdaptConfig, "population", "population of that evolutionary search",
              type=positive)
    add_field(a, "--rounds", AdaptConfig, "rounds", "the measuring budget is spent over this many rounds",
              type=positive)
    add_field(a, "--repeat", AdaptConfig, "repeat", "runs per measured program", type=positive)
    add_field(a, "--min-repeat-ms", AdaptConfig, "min_repeat_ms", "each run lasts at least this long",
              type=positive)
    a.add_argument("--target", default=None, help=with_default("TVM target", "this CPU, all cores"))
    a.add_argument("--rpc", default=None, metavar="HOST:PORT",
                   help=with_default("measure through this TVM RPC tracker", "on this machine"))
    a.add_argument("--key", default=None, help=with_default("RPC device key (with --rpc)", "none"))
    a.add_argument("--platform-info", type=json_object_file, default=None, metavar="JSON",
                   help=with_default("the RPC device's hardware, from `python tcl/tvm/hardware.py` run there",
                                     "this host's"))
    add_field(a, "--seed", AdaptConfig, "seed", "seed of the pools, the picks and the training", type=int)
    add_field(a, "--threads", AdaptConfig, "threads", "torch threads", "torch's own choice", type=positive)
    a.set_defaults(run=run_adapt)


def add_collect(sub):
    c = sub.add_parser(
        "collect", help="measure programs of networks' tuning tasks with TVM into a dataset (needs apache-tvm)",
        description="Extract the tuning tasks of networks (or the operator sweep), sample programs "
        "(random + evolutionary), measure them with TVM's LocalRunner or through an RPC tracker, "
        "and store one stock MetaSchedule JSONDatabase per task plus platform.json. Resumable: "
        "run the same command again to continue.")
    from ..tvm.collect_options import add_collect_arguments  # no TVM import: --help is fast without it

    add_collect_arguments(c)
    c.set_defaults(run=run_collect)


def add_parsers(sub):
    add_tune(sub)
    add_adapt(sub)
    add_collect(sub)
