"""`tcl tune` and `tcl collect`: the subcommands that need apache-tvm (imported only when they run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import FormatError, MissingDependencyError
from ..tvm.catalog import NETWORK_NAMES
from .options import add_seed, json_object_file, positive, with_default

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
        return ni.from_onnx(args.onnx, ni.parse_shapes(args.input_shape) if args.input_shape else None)
    return ni.from_builtin(args.network)


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
                                     measure=not args.no_end_to_end, platform_info=args.platform_info)
    write_json(out / "report.json", {"network": network.name, "runs": reports})
    plot(reports, out / "report.png")
    print_summary(reports, out, network)


def run_collect(args):
    try:
        from ..tvm.collect import CollectError
        from ..tvm.collect import run_collect as collect
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("tvm", "tvm_ffi", "torch", "psutil", "cloudpickle", "xgboost"):
            raise MissingDependencyError(e.name.split(".")[0], "tvm", "tcl collect") from None
        raise
    try:
        collect(args)
    except CollectError as e:
        raise FormatError(str(e)) from None


DEFAULT_MINUTES = 6.0  # tuning budget of `tcl tune` when neither --minutes nor --trials is given
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
    u.add_argument("--no-end-to-end", action="store_true",
                   help="stop after tuning: no export, no end-to-end timing (default: exported and timed)")
    u.set_defaults(run=run_tune)


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
    add_collect(sub)
