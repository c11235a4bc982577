"""What TCL's in-loop correction learns from one tuning run, tried on the programs another run measured.

Inside the search (tcl.tvm.search_cost_model) the exported model's scores are corrected per task by
a ridge regression on what the run has measured. A tuning run measures the region its own ranking
led it to; the programs another run of the same network found (another cost model's, another
seed's) tell whether the correction also ranks programs outside that region. For each ordered pair
of runs (A -> B), every task's correction is fitted on all of A's measurements of it, as at the end
of run A, and ranks B's programs of that task, without the exploration bonus. Per task: Top-1 (B's
fastest latency / the latency of the program ranked first) and Top-16 (the same for the fastest of
the 16 ranked first: one batch), for the model's scores alone and corrected; the tables give the
mean over the tasks both runs measured at least --min-programs programs of; --without-tile-sizes
says what the tile sizes in the correction's inputs are worth.

--after N,...: how far to trust the correction early in a run. The correction is fitted on only the
first N programs run A measured of a task (in the order measured) and blended with the model's scores
at each weight of --weights and at the search's own, N / ramp (CostModel's `ramp`), ranking B's
programs.

The runs must come from this host (read under its descriptor with the runs' cores, as they were
tuned). Writes bench/results/correction_replay.json.
"""

from __future__ import annotations

import argparse
import sys
from itertools import permutations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tuned_ranking import featurize_runs, run_labels, tuned_platform  # noqa: E402

from tcl.atomic import write_json  # noqa: E402
from tcl.cli.options import HelpFormatter, positive  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BATCH = 16  # programs per measured batch in tcl tune (tcl.tvm.network_tuning_config.TRIALS_PER_ITER)
WEIGHTS = "0,0.25,0.5,0.75,1"


def top_k(score: np.ndarray, cost: np.ndarray, k: int) -> float:
    """The fastest latency / that of the fastest among the k programs scored highest (1 = found it)."""
    return float(cost.min() / cost[np.argsort(-score, kind="stable")[:k]].min())


def replay(model, score, x, cost, run, task, a: int, b: int, min_programs: int, first: int | None = None) -> dict:
    """{task: {"model": [top1, top16], "corrected": [top1, top16]}} for the correction fitted on run a's
    programs (its first `first` of the task, if given; tasks with fewer are left out) and tried on run b's."""
    model.tasks.clear()
    out = {}
    for t in np.unique(task):
        mine, theirs = np.flatnonzero((task == t) & (run == a)), np.flatnonzero((task == t) & (run == b))
        if len(mine) < max(min_programs, first or 0) or len(theirs) < min_programs:
            continue
        mine = mine[:first]
        model.observe(t, x[mine], cost[mine])
        corrected = model.ranking(t, score[theirs], x[theirs], explore=0.0)
        out[str(t)] = {name: [top_k(s, cost[theirs], 1), top_k(s, cost[theirs], BATCH)]
                       for name, s in (("model", score[theirs]), ("corrected", corrected))}
    return out


def ramp_grid(model, score, x, cost, run, task, after: list[int], weights: list[float], min_programs: int) -> dict:
    """{N: {"cases": (pair, task) cases, "weights": {w: [top1, top16]}}}: the correction fitted on the first
    N programs of a task, blended at weight w (each of `weights` and the search's own, N / ramp), means
    over every ordered pair of runs and its tasks."""
    ramp, out = model.ramp, {}
    try:
        for n in after:
            cells, search_weight = {}, min(1.0, n / ramp)
            for w in sorted({*weights, search_weight}):
                model.ramp = n / w if w else np.inf  # the search's weight is min(1, N / ramp)
                cases = [v["corrected"] for a, b in permutations(range(run.max() + 1), 2)
                         for v in replay(model, score, x, cost, run, task, a, b, min_programs, first=n).values()]
                cells[str(w)] = [round(float(np.mean([c[i] for c in cases])), 3) if cases else None for i in range(2)]
            out[str(n)] = {"cases": len(cases), "search_weight": search_weight, "weights": cells}
            print(f"after {n}: {len(cases)} cases  Top-1 / Top-{BATCH} by weight (the search's {search_weight}): "
                  + ", ".join(f"{w}: {c[0]} / {c[1]}" for w, c in cells.items()), file=sys.stderr)
    finally:
        model.ramp = ramp
    return out


def _weights(text: str) -> list[float]:
    weights = [float(w) for w in text.split(",")]
    if not all(0 <= w <= 1 for w in weights):
        raise argparse.ArgumentTypeError(f"weights are between 0 and 1, not {text}")
    return weights


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="two or more tuning run directories (db/ and report.json) "
                   "of one network, of this host")
    p.add_argument("--model", type=Path, default=None, metavar="MODEL.onnx",
                   help="the exported model (default: the shipped one)")
    p.add_argument("--without-tile-sizes", action="store_true",
                   help="the correction without the tile sizes (tcl.tile_decisions), to see what they bring")
    p.add_argument("--min-programs", type=positive, default=16,
                   help="programs each run of a pair must have measured of a task for it to count "
                        "(the correction starts at 16)")
    p.add_argument("--after", type=lambda v: [positive(n) for n in v.split(",")], default=None, metavar="N,...",
                   help="also fit the correction on only the first N programs of each task and blend it at "
                        "each of --weights and at the search's own weight (how soon to trust it)")
    p.add_argument("--weights", type=_weights, default=WEIGHTS,
                   metavar="W,...", help="the correction's weights in the blend, for --after")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "correction_replay.json",
                   help="the summary JSON")
    args = p.parse_args(argv)
    if len(args.runs) < 2:
        p.error("give at least two runs")
    for r in args.runs:
        if not (r / "db").is_dir() or not (r / "report.json").is_file():
            p.error(f"{r}: not a tuning run directory (db/ and report.json)")

    from tcl.runtime import default_onnx_path, model_sha256
    from tcl.tvm.search_cost_model import CostModel

    platform = tuned_platform(args.runs)
    fs, run, task = featurize_runs(args.runs, platform)
    model = CostModel(args.model or default_onnx_path(), platform=platform, tile_sizes=not args.without_tile_sizes)
    score, x = model.program_features(fs.seq, fs.length, fs.workload)
    labels = run_labels(args.runs)
    result = {"runs": labels, "platform": platform["name"], "model_sha256": model_sha256(model.scorer.path),
              "tile_sizes": model.tile_sizes, "min_programs": args.min_programs, "pairs": {}}
    for a, b in permutations(range(len(args.runs)), 2):
        tasks = replay(model, score, x, fs.cost, run, task, a, b, args.min_programs)
        mean = {name: [round(float(np.mean([v[name][i] for v in tasks.values()])), 3) if tasks else None
                       for i in range(2)] for name in ("model", "corrected")}
        result["pairs"][f"{labels[a]} -> {labels[b]}"] = {"tasks": len(tasks), "top1_top16": mean,
                                                          "per_task": tasks}
        print(f"{labels[a]} -> {labels[b]}: {len(tasks)} tasks  Top-1 / Top-{BATCH}, model "
              f"{mean['model'][0]} / {mean['model'][1]}, corrected {mean['corrected'][0]} / {mean['corrected'][1]}",
              file=sys.stderr)
    if args.after:
        result["ramp"] = model.ramp
        result["after"] = ramp_grid(model, score, x, fs.cost, run, task, args.after, args.weights, args.min_programs)
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
