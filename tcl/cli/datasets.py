"""`tcl featurize`, `tcl info`, `tcl pack`: datasets in, arrays, summaries or packed files out."""

from __future__ import annotations

import json
import sys
from collections import defaultdict

from ..errors import escape_controls
from .options import add_inputs, add_json, add_output, add_threads, with_default


def dataset_info(paths, fs=None) -> dict:
    """Programs, tasks, networks and failures per platform of the datasets under `paths` (`fs`:
    their FeatureSet, when featurized already)."""
    from ..features import featurize
    from ..hardware import platform_name

    fs = featurize(paths) if fs is None else fs
    per = defaultdict(lambda: {"programs": 0, "tasks": 0, "failed": 0, "networks": set()})
    counts = [0] * len(fs.tasks)
    for t in fs.task:
        counts[t] += 1
    for i, t in enumerate(fs.tasks):
        name = platform_name(t, paths)
        p = per[name]
        p["programs"] += counts[i]
        p["tasks"] += 1
        p["failed"] += t.failed
        p["networks"].update(t.networks)
    return {k: {**v, "networks": sorted(v["networks"])} for k, v in per.items()}


def report_passed_over(fs):
    """On stderr: the malformed lines skipped (first messages) and the files passed over."""
    for e in fs.errors:
        print(f"  skipped: {escape_controls(e)}", file=sys.stderr)
    if fs.skipped > len(fs.errors):
        print(f"  ... {fs.skipped - len(fs.errors)} more malformed lines skipped", file=sys.stderr)
    for n in fs.notes:
        print(f"  note: {escape_controls(n)}", file=sys.stderr)


def run_featurize(args):
    from ..features import featurize

    fs = featurize(args.paths, errors=args.errors, threads=args.threads)
    fs.save(args.out)
    s = fs.summary()
    print(f"{s['programs']} programs, {s['tasks']} tasks, {s['failed']} failed measurements, "
          f"{s['skipped']} skipped lines, {s['truncated']} longer than L={fs.seq.shape[1]} "
          f"({fs.seconds:.2f} s) -> {args.out}")
    report_passed_over(fs)


def run_info(args):
    from ..features import featurize

    # A summary: a malformed line (e.g. the half-written last line a killed collector leaves) is
    # counted and reported, not fatal.
    fs = featurize(args.paths, errors="skip")
    info = dataset_info(args.paths, fs)
    if fs.skipped:
        print(f"tcl info: {fs.skipped} malformed line{'s' * (fs.skipped != 1)} skipped", file=sys.stderr)
    report_passed_over(fs)
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"{'platform':<40} {'programs':>9} {'tasks':>6} {'failed':>7}  networks")
    for name, v in info.items():
        nets = ", ".join(v["networks"]) or "-"
        print(f"{name[:40]:<40} {v['programs']:>9} {v['tasks']:>6} {v['failed']:>7}  {nets}")


def run_pack(args):
    from ..packing import pack_dataset

    for path in args.paths:
        st = pack_dataset(path, restore=args.restore)
        print(f"{path}: {'restored' if args.restore else 'packed'} {st['files']} files, "
              f"{st['bytes_before'] / 1e6:.1f} MB -> {st['bytes_after'] / 1e6:.1f} MB")


def add_featurize(sub):
    f = sub.add_parser(
        "featurize", help="turn Ansor logs / MetaSchedule databases into model-ready arrays (.npz)",
        description="Featurize Ansor/TenSet measure-record logs and MetaSchedule JSONDatabase "
        "directories (any mix; directories are searched recursively) into an .npz with seq "
        "[N, L, D], length, task, label, cost, workload and the task table.")
    add_inputs(f)
    add_output(f, "the .npz file to write")
    f.add_argument("--errors", choices=["raise", "skip"], default="raise",
                   help=with_default("raise: stop at the first malformed line; skip: skip and count it"))
    add_threads(f, "parser threads")
    f.set_defaults(run=run_featurize, out_is_file=True)


def add_info(sub):
    i = sub.add_parser(
        "info", help="programs, tasks, networks and failures per platform of a dataset",
        description="Summarise datasets (e.g. datasets/<platform>/): programs, tasks, networks "
        "and failed measurements per platform. Malformed lines are counted, not fatal.")
    add_inputs(i)
    add_json(i)
    i.set_defaults(run=run_info)


def add_pack(sub):
    k = sub.add_parser(
        "pack", help="xz-compress a dataset's MetaSchedule databases in place (or --restore them)",
        description="Compress every database_workload.json / database_tuning_record.json under the "
        "paths to .xz in place (tcl reads them as they are; far smaller for shipping). --restore "
        "writes the stock plain files back, which TVM's JSONDatabase reads; `tcl collect` restores "
        "a packed dataset by itself before it continues.")
    add_inputs(k, "dataset directories")
    k.add_argument("--restore", action="store_true",
                   help="decompress back to stock JSONDatabase files (default: compress)")
    k.set_defaults(run=run_pack)


def add_parsers(sub):
    add_featurize(sub)
    add_info(sub)
    add_pack(sub)
