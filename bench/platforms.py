"""How much the shipped platforms differ, and how repeatable their measurements are.

For each pair of platforms (datasets that measured the same programs, e.g. with
`tcl collect --programs-from`), over the tasks with at least --min-programs programs measured on both:
- best_elsewhere: take on platform B the program that is fastest on platform A; the share of B's
  best throughput it reaches (1.0 = the same program wins on both). Median and min over tasks.
- spearman: Spearman correlation of the programs' latencies on A and on B, median and min over tasks.
Per platform: the spread of repeated measurements (median over tasks of the per-task median
coefficient of variation that `tcl collect` stored in task.json, and its max), and how the pooled
Top-1 on its held-out tasks weighs them: a task's share of the pool's denominator when every pick
is the best (occurrences in the networks x best latency; tcl.metrics), the three largest shares
and how many tasks carry 90% of it. A few heavy tasks make the pooled score move in steps.

Programs are matched by their trace (instructions + decisions), never by position.
Writes bench/results/platforms.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from tcl.metrics import spearman
from tcl.atomic import write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def latencies(dataset: Path) -> dict[str, dict[str, float]]:
    """{task directory name: {trace key: mean latency}} of a dataset's measured programs."""
    from tcl.records import read

    out: dict[str, dict[str, float]] = {}
    for rec in read(dataset).records:
        task = Path(rec.path).parent.name
        key = json.dumps(rec.trace_json, separators=(",", ":"))
        out.setdefault(task, {})[key] = rec.latency
    return out


def compare(lat_a: dict, lat_b: dict, min_programs: int) -> dict:
    best_elsewhere, rho = [], []
    for task in sorted(set(lat_a) & set(lat_b)):
        keys = sorted(set(lat_a[task]) & set(lat_b[task]))
        if len(keys) < min_programs:
            continue
        a = np.array([lat_a[task][k] for k in keys])
        b = np.array([lat_b[task][k] for k in keys])
        best_elsewhere.append(float(b.min() / b[np.argmin(a)]))
        rho.append(spearman(a, b))
    stat = lambda v: {"median": float(np.median(v)), "min": float(np.min(v))} if v else None  # noqa: E731
    return {"tasks": len(rho), "best_elsewhere": stat(best_elsewhere), "spearman": stat(rho)}


def repeat_spread(dataset: Path) -> dict:
    cvs = []
    for f in sorted(dataset.glob("*/task.json")):
        cv = json.loads(f.read_text()).get("summary", {}).get("cv_median")
        if cv is not None:
            cvs.append(cv)
    return {"tasks": len(cvs), "cv_median": float(np.median(cvs)) if cvs else None,
            "cv_max": float(np.max(cvs)) if cvs else None}


def held_out_weight(dataset: Path) -> dict:
    """Each held-out task's share of the pooled Top-1's weight (module docstring)."""
    import tcl
    from tcl.program_data import ProgramData, split_tasks, task_key

    data = ProgramData(tcl.featurize(dataset))
    _, test_ids = split_tasks(data.tasks)
    if not test_ids:
        return {"tasks": 0}
    best = np.full(len(data.tasks), np.inf)
    np.minimum.at(best, data.task, data.cost)
    weight = {task_key(data.tasks[i]): sum((data.tasks[i].networks or {"all": data.tasks[i].weight}).values()) * best[i]
              for i in test_ids if np.isfinite(best[i])}  # a task with every program failed weighs nothing
    shares = np.sort(np.array(list(weight.values())) / sum(weight.values()))[::-1]
    return {"tasks": len(shares), "largest_shares": [float(x) for x in shares[:3]],
            "tasks_for_90_percent": int(np.searchsorted(np.cumsum(shares), 0.9) + 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("paths", nargs="*", help="platform datasets (default: datasets/*/ with platform.json)")
    p.add_argument("--min-programs", type=int, default=10, help="tasks with fewer common programs are left out")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "platforms.json"), help="the summary JSON")
    args = p.parse_args(argv)
    paths = [Path(x) for x in args.paths] or sorted(d for d in (ROOT / "datasets").glob("*/") if (d / "platform.json").exists())
    lat = {d.name: latencies(d) for d in paths}
    result = {"platforms": {d.name: {"programs": sum(len(v) for v in lat[d.name].values()), "repeat_spread": repeat_spread(d),
                                     "held_out_weight": held_out_weight(d)}
                            for d in paths},
              "pairs": {}, "min_programs": args.min_programs}
    for a, b in itertools.permutations([d.name for d in paths], 2):
        r = compare(lat[a], lat[b], args.min_programs)
        result["pairs"][f"{a} -> {b}"] = r
        if not r["tasks"]:  # e.g. datasets of different hosts, collected independently
            print(f"{a} -> {b}: no task with {args.min_programs} or more programs measured on both")
            continue
        print(f"{a} -> {b}: {r['tasks']} tasks; A's fastest program reaches on B a median "
              f"{r['best_elsewhere']['median']:.2f} (min {r['best_elsewhere']['min']:.2f}) of B's best; "
              f"Spearman median {r['spearman']['median']:.2f} (min {r['spearman']['min']:.2f})")
    for name, v in result["platforms"].items():
        s = v["repeat_spread"]
        print(f"{name}: {v['programs']} programs; repeat CV median {s['cv_median']:.3f}, max {s['cv_max']:.3f}")
        w = v["held_out_weight"]
        if w["tasks"]:
            print(f"  pooled Top-1 of its {w['tasks']} held-out tasks: largest shares "
                  f"{', '.join(f'{x:.3f}' for x in w['largest_shares'])}; {w['tasks_for_90_percent']} tasks carry 90%")
    write_text(Path(args.out), json.dumps(result, indent=1) + "\n")
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
