"""The `tcl` command. Each subcommand is a thin call into the modules; heavy dependencies (torch,
tvm) are imported only by the subcommands that need them, so `tcl --help` stays fast."""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict

from .errors import FormatError, MissingDependencyError


def _featurize(args):
    from .features import featurize

    fs = featurize(args.paths, errors=args.errors, threads=args.threads)
    fs.save(args.out)
    s = fs.summary()
    print(f"{s['programs']} programs, {s['tasks']} tasks, {s['failed']} failed measurements, "
          f"{s['skipped']} skipped lines, {s['truncated']} longer than L={fs.seq.shape[1]} "
          f"({fs.seconds:.2f} s) -> {args.out}")
    for e in fs.errors:
        print(f"  skipped: {e}", file=sys.stderr)


def dataset_info(paths) -> dict:
    """Programs, tasks, networks and failures per platform of the datasets under `paths`."""
    from .features import featurize

    fs = featurize(paths)
    per = defaultdict(lambda: {"programs": 0, "tasks": 0, "failed": 0, "networks": set()})
    counts = [0] * len(fs.tasks)
    for t in fs.task:
        counts[t] += 1
    for i, t in enumerate(fs.tasks):
        name = (t.platform or {}).get("name") or t.target
        p = per[name]
        p["programs"] += counts[i]
        p["tasks"] += 1
        p["failed"] += t.failed
        p["networks"].update(t.networks)
    return {k: {**v, "networks": sorted(v["networks"])} for k, v in per.items()}


def _info(args):
    info = dataset_info(args.paths)
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"{'platform':<40} {'programs':>9} {'tasks':>6} {'failed':>7}  networks")
    for name, v in info.items():
        nets = ", ".join(v["networks"]) or "-"
        print(f"{name[:40]:<40} {v['programs']:>9} {v['tasks']:>6} {v['failed']:>7}  {nets}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tcl",
        description="TCL: fast, portable cost models for tensor-program tuning in Apache TVM.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    f = sub.add_parser(
        "featurize",
        help="turn Ansor logs / MetaSchedule databases into model-ready arrays (.npz)",
        description="Featurize Ansor/TenSet measure-record logs and MetaSchedule JSONDatabase "
        "directories (any mix; directories are searched recursively) into an .npz with seq "
        "[N, L, D], length, task, label, cost, workload and the task table.",
    )
    f.add_argument("paths", nargs="+", help="log files and/or database directories")
    f.add_argument("--out", required=True, help="output .npz file")
    f.add_argument("--errors", choices=["raise", "skip"], default="raise",
                   help="stop at the first malformed line (default) or skip and count it")
    f.add_argument("--threads", type=int, default=None, help="parser threads (default: all cores)")
    f.set_defaults(run=_featurize)

    i = sub.add_parser(
        "info",
        help="programs, tasks, networks and failures per platform of a dataset",
        description="Summarise datasets (e.g. datasets/<platform>/): programs, tasks, networks "
        "and failed measurements per platform.",
    )
    i.add_argument("paths", nargs="+", help="dataset directories, databases or log files")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(run=_info)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    except (FormatError, MissingDependencyError, FileNotFoundError) as e:
        print(f"tcl {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
