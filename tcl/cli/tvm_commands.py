"""`tcl tune` and `tcl collect`: the subcommands that need apache-tvm (imported only when they run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import FormatError, MissingDependencyError
from ..tvm.catalog import NETWORK_NAMES
from .options import add_seed, names, non_negative, positive, with_default

COST_MODELS = ("tcl", "xgb", "mlp", "random")


def network_list(text: str) -> list[str]:
    """An argparse type: one built-in network or a comma-separated list of them."""
    out = names(text)
    unknown = [n for n in out if n not in NETWORK_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown network(s) {', '.join(unknown)}; choose from {', '.join(NETWORK_NAMES)}")
    return out


def _print_table(rows):
    def ms(v):
        return f"{v * 1e3:12.2f}" if v is not None else f"{'-':>12}"

    print(f"{'network':<17}{'cost model':<11}{'tuning s':>9}{'weighted best ms':>18}{'network ms':>12}"
          f"{'untuned ms':>12}{'PyTorch ms':>12}")
    for what, kind, r in rows:
        e2e = r.get("end_to_end", {})
        print(f"{what[:16]:<17}{kind:<11}{r['seconds']:>9.0f}{r['weighted_best_s'] * 1e3:>18.3f}"
              f"{ms(e2e.get('tuned_s'))}{ms(e2e.get('untuned_s'))}{ms(e2e.get('pytorch_eager_s'))}")


def run_tune(args):
    from ..tvm.tune import tune

    kinds = [args.cost_model] + [k for k in args.compare if k != args.cost_model]
    targets = [(n, None) for n in args.network] if args.network else [(None, args.workload)]
    rows = []
    for network, workload in targets:
        base = Path(args.out) / network if len(targets) > 1 else Path(args.out)
        for kind in kinds:
            r = tune(base / kind, network=network, workload=workload, trials=args.trials, cost_model=kind,
                     model_path=args.model, target=args.target, rpc=args.rpc, key=args.key,
                     max_tasks=args.max_tasks or None, seed=args.seed, measure_end_to_end=not args.no_end_to_end,
                     mlp_data=args.mlp_data, explore=args.explore)
            rows.append((network or workload, kind, r))
    _print_table(rows)
    where = "<network>/<cost model>" if len(targets) > 1 else "<cost model>"
    print(f"reports: {Path(args.out)}/{where}/report.json")


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


def add_tune(sub):
    u = sub.add_parser(
        "tune", help="tune networks' heaviest tasks (or a workload) with TCL or TVM's cost models (needs apache-tvm)",
        description="Extract a network's tasks (or one workload), tune the heaviest with MetaSchedule's "
        "evolutionary search guided by the chosen cost model, compile and time the network against "
        "the untuned build and PyTorch eager. --compare runs other cost models with the same budget "
        "and prints them side by side. Writes report.json and report.png per cost model under --out "
        "(per network and cost model when several networks are given).")
    what = u.add_mutually_exclusive_group(required=True)
    what.add_argument("--network", type=network_list,
                      help=f"network(s), comma separated: {', '.join(NETWORK_NAMES)} (this or --workload is required)")
    what.add_argument("--workload", help="e.g. matmul:128,128,128, a ms.testing.te_workload function and its args "
                      "(this or --network is required)")
    u.add_argument("--trials", type=positive, default=64, help=with_default("measured programs per task"))
    u.add_argument("--max-tasks", type=non_negative, default=4,
                   help=with_default("tune this many of the heaviest tasks (0: all)"))
    u.add_argument("--cost-model", choices=COST_MODELS, default=COST_MODELS[0], help=with_default("the cost model"))
    u.add_argument("--compare", nargs="*", default=[], choices=COST_MODELS, metavar="COST_MODEL",
                   help=with_default("also tune with these cost models (same tasks, same budget)", "none"))
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
    u.add_argument("--out", default="tune-out", help=with_default("output directory"))
    add_seed(u, "the search")
    u.add_argument("--no-end-to-end", action="store_true",
                   help="skip compiling and timing the whole network (default: timed)")
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
