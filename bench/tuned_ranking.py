"""How models rank the programs that whole-network tuning runs measured.

Offline scores (accuracy, conv_layouts) are of datasets: random and evolutionary programs measured
on one core. A tuning run scores its own search's candidates, which run on the cores it tunes for,
under that hardware's descriptor. This scores checkpoints on the databases of tuning runs
(`tcl tune --out DIR` or a bench run directory, each with db/ and report.json), every task's
programs pooled over the runs given: under the descriptor of the hardware the runs tuned (this
host, with the cores of the runs' target; the runs must come from this host) and under each
--platform given, e.g. a dataset's one-core platform.json. Per run and task it also says where each
checkpoint puts that run's best program among the task's programs (`best_rank`): when one cost model's
run found a faster program than another's, this tells a ranking that scores it low from a search that
never reached it. Writes bench/results/tuned_ranking.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from tcl.atomic import write_json
from tcl.cli.options import HelpFormatter, json_object_file, named_checkpoint, positive
from tcl.metrics import TASK_MEAN_MIN_PROGRAMS, held_out_summary

ROOT = Path(__file__).resolve().parent.parent


def tuned_platform(runs: list[Path]) -> dict:
    """platform.json of the hardware the runs tuned: this host with their target's cores."""
    from tcl.tvm.hardware import platform_descriptor
    from tcl.tvm.targets import parse_target

    reports = [json.loads((r / "report.json").read_text()) for r in runs]
    if len({r["target"] for r in reports}) != 1:
        raise SystemExit("error: the runs tuned different targets; give runs of one target")
    platform = platform_descriptor(parse_target(reports[0]["target"]))
    other = sorted({r["platform"] for r in reports} - {platform["name"]})
    if other:
        raise SystemExit(f"error: runs of {', '.join(other)} cannot be scored on this host ({platform['name']})")
    return platform


def run_labels(runs: list[Path]) -> list[str]:
    """Each run's directory name, with as many of its parents as tell the runs apart (e.g. tcl/seed0,
    xgb/seed0)."""
    parts = [r.resolve().parts for r in runs]
    for depth in range(1, max(map(len, parts)) + 1):
        labels = ["/".join(p[-depth:]) for p in parts]
        if len(set(labels)) == len(labels):
            return labels
    raise SystemExit("error: a run is given twice")


def best_percentiles(score, cost, group, run, min_programs: int) -> dict:
    """{run: {group: share of the group's programs scored below that run's fastest program of it}}:
    1 when the model ranks that program first, 0 when last; groups with fewer than `min_programs`
    programs are left out."""
    out: dict = {}
    for g in np.unique(group):
        in_g = group == g
        if in_g.sum() < min_programs:
            continue
        for r in np.unique(run[in_g]):
            mine = np.flatnonzero(in_g & (run == r))
            best = mine[np.argmin(cost[mine])]
            out.setdefault(int(r), {})[g] = float((score[in_g] < score[best]).mean())
    return out


def featurize_runs(runs: list[Path], platform: dict):
    """The runs' programs featurized under `platform`, with each program's run (an index into `runs`)
    and task (its structural hash, the same in every run)."""
    from tcl.features import featurize

    with tempfile.TemporaryDirectory() as tmp:
        for i, r in enumerate(runs):
            shutil.copytree(r / "db", Path(tmp) / f"{i:02d}-{r.name}")
        (Path(tmp) / "platform.json").write_text(json.dumps(platform))
        fs = featurize([tmp])
        run_of_source = np.array([int(Path(src).relative_to(tmp).parts[0][:2]) for src in fs.sources])
    return fs, run_of_source[fs.source], np.array([fs.tasks[t].workload for t in fs.task])


def scores_under(checkpoints: dict, runs: list[Path], platform: dict, min_programs: int, threads: int) -> dict:
    """Each checkpoint's pooled Top-1 and task mean on the runs' programs, read under `platform`, and
    its `best_rank` of each run's best programs (featurized once for all checkpoints)."""
    import torch

    from tcl.checkpoint import load_checkpoint
    from tcl.evaluate import task_names
    from tcl.metrics import evaluate_predictions
    from tcl.program_data import ProgramData
    from tcl.scoring import predict

    torch.set_num_threads(threads)
    fs, run, group = featurize_runs(runs, platform)
    pd = ProgramData(fs)
    labels = run_labels(runs)
    names = task_names(pd.tasks)
    networks = {names[i]: t.network_weights for i, t in enumerate(pd.tasks)}
    cells = {}
    for name, ck in checkpoints.items():
        model, _ = load_checkpoint(ck)
        score = predict(model, pd)  # once, for both the Top-1 cells and best_rank
        ranks = best_percentiles(score, fs.cost, group, run, min_programs)
        top = evaluate_predictions(pd.cost, score, pd.task, names, networks)
        cells[name] = {**held_out_summary(top, min_programs),
                       "best_rank": {labels[r]: {"median": float(np.median(list(v.values()))), "tasks": v}
                                     for r, v in sorted(ranks.items())}}
    return cells


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="tuning run directories (db/ and report.json), of this host")
    p.add_argument("--checkpoint", type=named_checkpoint, action="append", default=[], metavar="NAME=PATH",
                   help="also score this checkpoint under NAME (the shipped model is always scored)")
    p.add_argument("--platform", type=json_object_file, action="append", default=[], metavar="JSON",
                   help="also score under this platform.json's descriptor")
    p.add_argument("--min-programs", type=positive, default=TASK_MEAN_MIN_PROGRAMS,
                   help="programs a task needs to count in the task mean")
    p.add_argument("--threads", type=positive, default=1, help="torch threads")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tuned_ranking.json",
                   help="the summary JSON")
    args = p.parse_args(argv)
    for r in args.runs:
        if not (r / "db").is_dir() or not (r / "report.json").is_file():
            p.error(f"{r}: not a tuning run directory (db/ and report.json)")

    from tcl.evaluate import default_model_path

    checkpoints = {"shipped": default_model_path(), **dict(args.checkpoint)}
    platforms = [tuned_platform(args.runs), *args.platform]
    result = {"runs": run_labels(args.runs), "min_programs": args.min_programs, "platforms": {}}
    for platform in platforms:
        cells = scores_under(checkpoints, args.runs, platform, args.min_programs, args.threads)
        result["platforms"][platform["name"]] = cells
        for name, s in cells.items():
            ranks = "  ".join(f"{run} {b['median']:.2f}" for run, b in s["best_rank"].items())
            print(f"{platform['name']:<24} {name:<12} pooled {s['top1']:.3f}  task mean {s['task_mean']:.3f} "
                  f"({s['tasks']} tasks)  best program's rank, median: {ranks}", file=sys.stderr)
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
