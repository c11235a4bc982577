"""Collection throughput, and whether faster collection keeps the labels.

Same host, same tasks, one run after the other with nothing else running:
1. before: `tcl collect` as it ran before the pipelined settings (one process, nothing pinned);
2. after: the pipelined settings (--workers, --measure-cpus: programs run on one CPU, searching and
   building on the others, builds there too between runs, runs never overlap);
both collect the same --tasks tasks to --programs programs each into fresh directories.
3. rank repeatability: the programs of the "after" run are measured again later (`tcl collect
   --programs-from`, one process, nothing pinned) and compared task by task: Spearman correlation of
   the two latencies, and the coefficient of variation of each program's repeats.
`--check DATASET` does step 3 alone on a sample of an existing dataset (e.g. one collected while
other work ran beside it).

Writes bench/results/collect.json: programs_per_hour_before, programs_per_hour, speedup,
rank_repeatability {median_spearman, min_spearman, tasks, programs, median_cv}, and `speedups`, one
entry per run with the same settings (the earlier ones kept from the file).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tcl.atomic import write_json  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402
from tcl.metrics import spearman  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def programs_by_task(dataset: Path) -> dict[str, dict[str, list[float]]]:
    """{task directory: {trace key: run_secs}} of a dataset's measured programs (failures left out)."""
    from tcl.records import read

    out: dict[str, dict[str, list[float]]] = {}
    for rec in read(dataset).records:
        key = json.dumps(rec.trace_json, separators=(",", ":"))
        out.setdefault(Path(rec.path).parent.name, {})[key] = [float(s) for s in rec.run_secs]
    return out


def repeatability(first: Path, again: Path, min_programs: int = 4) -> dict:
    """Per-task Spearman of mean latencies measured twice, and the median CV of the repeats."""
    a, b = programs_by_task(first), programs_by_task(again)
    rhos, n = [], 0
    for task in sorted(set(a) & set(b)):
        keys = sorted(set(a[task]) & set(b[task]))
        if len(keys) < min_programs:
            continue
        la = [statistics.mean(a[task][k]) for k in keys]
        lb = [statistics.mean(b[task][k]) for k in keys]
        rhos.append(spearman(la, lb))
        n += len(keys)
    cvs = [statistics.pstdev(s) / statistics.mean(s) for t in (a, b) for p in t.values() for s in p.values()
           if len(s) > 1]
    return {"tasks": len(rhos), "programs": n,
            "median_spearman": round(float(np.median(rhos)), 4) if rhos else None,
            "min_spearman": round(float(np.min(rhos)), 4) if rhos else None,
            "median_cv": round(float(np.median(cvs)), 4) if cvs else None}


def sample(dataset: Path, out: Path, programs: int, per_task: int) -> Path:
    """A copy of `dataset` with the first `per_task` records of its tasks, up to `programs` in all."""
    from tcl.records import RECORD_FILE, WORKLOAD_FILE, _find, read_bytes

    out.mkdir(parents=True)
    shutil.copy(dataset / "platform.json", out / "platform.json")
    total = 0
    for d in sorted(p for p in dataset.iterdir() if p.is_dir()):
        rec = _find(d, RECORD_FILE)
        if rec is None or total >= programs:
            continue
        lines = [l for l in read_bytes(rec).decode().splitlines(keepends=True) if l.strip()][:per_task]
        if len(lines) < 4:
            continue
        (out / d.name).mkdir()
        (out / d.name / RECORD_FILE).write_text("".join(lines))
        (out / d.name / WORKLOAD_FILE).write_bytes(read_bytes(_find(d, WORKLOAD_FILE)))
        if (d / "task.json").exists():
            shutil.copy(d / "task.json", out / d.name / "task.json")
        total += len(lines)
    return out


def remeasure_quietly(src: Path, out: Path, num_cores: int) -> dict:
    from tcl.tvm.builder import default_target
    from tcl.tvm.collect import remeasure

    return remeasure(src, out, default_target(num_cores), progress_stream=io.StringIO())


def speedup_entry(summary: dict) -> dict:
    """One run's throughput, as the summary's `speedups` list keeps it."""
    return {"before": summary["programs_per_hour_before"], "after": summary["programs_per_hour"],
            "speedup": summary["speedup"], "failed": summary["runs"]["after"]["failed"]}


def earlier_speedups(old: dict, settings: dict) -> list:
    """The previous summary's runs, when it was made with the same settings."""
    if not old.get("speedup") or any(old.get(k) != v for k, v in settings.items()):
        return []
    return old.get("speedups") or [speedup_entry(old)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--network", default="resnet18", help="network whose tasks are collected (default resnet18)")
    p.add_argument("--tasks", type=int, default=10, help="tasks collected by each run (default 10)")
    p.add_argument("--programs", type=int, default=32, help="programs per task (default 32)")
    p.add_argument("--workers", type=int, default=2, help="--workers of the pipelined run (default 2)")
    p.add_argument("--population", type=int, default=None,
                   help="evolutionary-search population of the pipelined run (default: tcl collect's)")
    p.add_argument("--genetic-iters", type=int, default=None,
                   help="evolutionary-search generations of the pipelined run (default: tcl collect's)")
    p.add_argument("--min-repeat-ms", type=int, default=None,
                   help="--min-repeat-ms of the pipelined run (default: tcl collect's)")
    p.add_argument("--check", default=None, metavar="DATASET",
                   help="only measure a sample of this dataset again and report its repeatability")
    p.add_argument("--check-programs", type=int, default=320, help="programs in the --check sample (default 320)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "collect.json"), help="the summary JSON")
    args = p.parse_args()

    from tcl.tvm.builder import default_target
    from tcl.tvm.collect import collect

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("bench/collect.py needs at least two CPUs (one measures, the others search and build)")
    old = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    work = Path(tempfile.mkdtemp(prefix="tcl-bench-collect-"))
    try:
        if args.check:
            src = Path(args.check)
            plat = json.loads((src / "platform.json").read_text())
            s = sample(src, work / "sample", args.check_programs, per_task=16)
            t0 = time.time()
            remeasure_quietly(s, work / "again", int(plat.get("cores") or 1))
            rep = repeatability(s, work / "again")
            rep["seconds"] = round(time.time() - t0, 1)
            print(f"{src.name}: {rep}")
            old.setdefault("dataset_checks", {})[src.name] = rep
            write_json(args.out, old)
            return
        target = default_target(1)  # one core: the pipelined run measures on one CPU
        common = dict(held_out=None, max_tasks=args.tasks, progress_stream=sys.stderr)
        runs = {}
        pipelined = {"workers": args.workers, "measure_cpus": [cpus[-1]]}
        pipelined.update({k: v for k, v in (("population", args.population), ("genetic_iters", args.genetic_iters),
                                            ("min_repeat_ms", args.min_repeat_ms)) if v is not None})
        for name, extra in [("before", {}), ("after", pipelined)]:
            print(f"[{name}] collecting {args.tasks} tasks x {args.programs} programs ...", file=sys.stderr)
            runs[name] = collect(args.network, work / name, args.programs, target, **common, **extra)
            print(f"[{name}] {runs[name]}", file=sys.stderr)
        print("[repeat] measuring the pipelined run's programs again ...", file=sys.stderr)
        t0 = time.time()
        remeasure_quietly(work / "after", work / "again", 1)
        rep = repeatability(work / "after", work / "again")
        rep["seconds"] = round(time.time() - t0, 1)
        before, after = runs["before"]["programs_per_hour"], runs["after"]["programs_per_hour"]
        speedup = round(after / before, 2) if before else None
        settings = {"network": args.network, "tasks": args.tasks, "programs_per_task": args.programs,
                    "after_settings": pipelined}
        result = {
            "host": platform.node(), "cpus": cpus, **settings,
            "programs_per_hour_before": before, "programs_per_hour": after,
            "speedup": speedup, "rank_repeatability": rep, "runs": runs,
            "dataset_checks": old.get("dataset_checks", {}),
        }
        # every run with these settings, this one last: how much the speedup moves between runs
        result["speedups"] = earlier_speedups(old, settings) + [speedup_entry(result)]
        write_json(args.out, result)
        print(f"programs per hour: before {before}, after {after} ({result['speedup']}x); repeatability {rep}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
