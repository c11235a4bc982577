"""End-to-end tuning with each cost model at equal trial budgets: TCL vs XGB vs MLP vs random.

For every case (a network's heaviest tasks), cost model and seed, `tcl.tvm.tune.tune` tunes each task
with stock `ms.tune_tir` for the largest budget; the best latency after N trials of a task is the
prefix of its measured curve, so the smaller budgets come from the same run. A case's latency at a
budget is the weighted sum over its tuned tasks (task weight = occurrences in the network) of each
task's best latency, i.e. the time those tasks take in one inference. Reported per case:
- best latency at each budget per cost model (mean over seeds),
- trials per task each cost model needs to reach XGB's final latency (mean over seeds of the first
  trial count in 1..max where the seed's curve is at or below the final latency of XGB's run with
  the same seed; null = some seed never did), and the same on the mean curves (the first trial
  where the mean over seeds is at or below the mean of XGB's finals: one stalled seed does not
  make it null),
- and the tuning wall time it took to get there.

Writes bench/results/tuning.json (`{case: {cost_model: {budget: best_latency_s}},
"trials_to_xgb_final": {case: {cost_model: trials}}, "trials_to_xgb_final_mean_curve": ...}`),
tuning_details.json (per-task curves, wall times, cost-model statistics) and tuning.png (latency vs
trials per case). Measure on a quiet machine: the runner times the programs on the same cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from tcl.atomic import save_figure, write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def weighted_curve(report: dict, trials: int) -> np.ndarray:
    """Weighted best latency of the case after n = 1..trials trials per task (inf until every task
    has a valid program)."""
    total = np.zeros(trials)
    for t in report["tasks"].values():
        c = np.asarray(t["best_vs_trials"], float)[:trials]
        c = np.concatenate([c, np.full(trials - len(c), c[-1] if len(c) else np.inf)])
        total += t["weight"] * c
    return total


def wall_curve(report: dict, trials: int) -> np.ndarray:
    """Tuning seconds spent when every task has had n trials (tasks are tuned one after another)."""
    total = np.zeros(trials)
    start = 0.0
    for t in report["tasks"].values():
        w = np.asarray(t["wall_s_at_trial"], float)[:trials]
        if not len(w):
            continue
        w = np.concatenate([w, np.full(trials - len(w), w[-1])])
        total += w - start
        start = w[-1]
    return total


def first_reaching(curve: np.ndarray, target: float) -> int | None:
    hit = np.flatnonzero(curve <= target * (1 + 1e-9))
    return int(hit[0]) + 1 if len(hit) else None


def seed_hits(runs: list, xgb_runs: list) -> list[int | None]:
    """Per seed, the first trial at or below the final latency of XGB's run with the same seed."""
    return [first_reaching(c, x[-1]) for c, x in zip(runs, xgb_runs)]


def trials_to_xgb_final(runs: list, xgb_runs: list) -> tuple[float | None, int | None]:
    """Trials per task to reach XGB's final latency: (mean of seed_hits, None if some seed never
    does; the first trial where the mean curve over seeds is at or below the mean of XGB's finals)."""
    hits = seed_hits(runs, xgb_runs)
    per_seed = float(np.mean(hits)) if None not in hits else None
    return per_seed, first_reaching(np.mean(runs, axis=0), float(np.mean([x[-1] for x in xgb_runs])))


def run_one(case, cost_model, seed, args) -> dict:
    from tcl.tvm.tune import tune

    with tempfile.TemporaryDirectory(prefix="tcl-bench-tune-") as tmp:
        return tune(tmp, network=case, trials=max(args.budgets), cost_model=cost_model, model_path=args.model,
                    max_tasks=args.max_tasks, trials_per_iter=args.trials_per_iter, seed=seed,
                    explore=args.explore)


# the settings a stored run must share to be reused (the budgets only through their maximum);
# the TCL model and its exploration weight matter to TCL's runs only
SAME_RUN = ("max_tasks", "trials_per_iter")
SAME_TCL_RUN = SAME_RUN + ("model", "model_sha256", "explore")


def stored_runs(out: Path, args) -> dict:
    """Runs of earlier invocations with the same settings, {(case, cost model, seed): run}, from the
    full results and the crash-recovery file, so that seeds accumulate across invocations and a run
    that stopped resumes where it was."""
    found = {}
    for path in (out.with_name(out.stem + "_details.json"), out.with_name("tuning_partial.json")):
        if not path.is_file():
            continue
        old = json.loads(path.read_text())
        st = old.get("settings", {})
        if max(st.get("budgets", [0])) != max(args.budgets):
            continue
        for case, models in old["runs"].items():
            for cm, runs in models.items():
                if any(st.get(k) != getattr(args, k) for k in (SAME_TCL_RUN if cm == "tcl" else SAME_RUN)):
                    continue
                for r in runs:
                    found[(case, cm, r["seed"])] = r
    return found


def plot(curves: dict, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 3.8), squeeze=False)
    for ax, (case, models) in zip(axes[0], curves.items()):
        for name, runs in models.items():
            c = np.mean(runs, axis=0) * 1e3
            ax.plot(np.arange(1, len(c) + 1), c, label=name)
        ax.set_xlabel("trials per task")
        ax.set_ylabel("weighted best latency (ms)")
        ax.set_yscale("log")
        ax.set_title(case)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--cases", default="resnet18,mobilenet_v2",
                   help="networks, comma separated (mobilenet_v2 and resnet50 are held out of the default model's training)")
    p.add_argument("--cost-models", default="tcl,xgb,mlp,random", help="cost models compared, comma separated")
    p.add_argument("--budgets", default="32,64,128", help="trials per task, comma separated")
    p.add_argument("--seeds", default="0", help="comma separated")
    p.add_argument("--max-tasks", type=int, default=1, help="heaviest tasks per network")
    p.add_argument("--trials-per-iter", type=int, default=16, help="programs measured per search batch")
    p.add_argument("--model", default=None, help="TCL ONNX model (default: the one shipped in the wheel)")
    p.add_argument("--explore", type=float, default=None,
                   help="TCL's exploration weight (default: tcl.tvm.search_cost_model.DEFAULT_EXPLORE)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "tuning.json"), help="the summary JSON (details and plot go beside it)")
    p.add_argument("--fresh", action="store_true",
                   help="tune every run again (default: reuse stored runs with the same settings)")
    args = p.parse_args(argv)
    args.budgets = sorted(int(b) for b in args.budgets.split(","))
    from tcl.runtime import model_sha256

    args.model_sha256 = model_sha256(args.model)
    if args.explore is None:
        from tcl.tvm.search_cost_model import DEFAULT_EXPLORE

        args.explore = DEFAULT_EXPLORE
    cases, models = args.cases.split(","), args.cost_models.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    if "xgb" not in models:
        sys.exit("--cost-models must include xgb (the reference the trials are counted against)")
    n = max(args.budgets)

    stored = {} if args.fresh else stored_runs(Path(args.out), args)
    curves, walls, details = {}, {}, {}
    for case in cases:
        curves[case], walls[case], details[case] = {}, {}, {}
        for cm in models:
            for seed in seeds:
                r = stored.get((case, cm, seed))
                if r is not None:
                    print(f"{case} / {cm} / seed {seed}: stored run reused", flush=True)
                else:
                    print(f"{case} / {cm} / seed {seed}: tuning {args.max_tasks} tasks x {n} trials", flush=True)
                    r = run_one(case, cm, seed, args)
                curves[case].setdefault(cm, []).append(weighted_curve(r, n))
                walls[case].setdefault(cm, []).append(wall_curve(r, n))
                details[case].setdefault(cm, []).append(
                    {"seed": seed, "seconds": r["seconds"], "tasks": r["tasks"],
                     "cost_model_stats": r.get("cost_model_stats")})
                print(f"  best {curves[case][cm][-1][-1] * 1e3:.4f} ms in {r['seconds']:.0f} s", flush=True)
                partial = Path(args.out).with_name("tuning_partial.json")  # a later crash keeps the runs so far
                write_text(partial, json.dumps({"runs": details, "settings": vars(args)}, indent=1, default=str) + "\n")

    summary = {case: {cm: {str(b): float(np.mean([c[b - 1] for c in runs])) for b in args.budgets}
                      for cm, runs in ms_.items()} for case, ms_ in curves.items()}
    reach, reach_mean, reach_s, reach_mean_s = {}, {}, {}, {}
    for case, ms_ in curves.items():
        reach[case], reach_mean[case], reach_s[case], reach_mean_s[case] = {}, {}, {}, {}
        for cm, runs in ms_.items():
            reach[case][cm], reach_mean[case][cm] = trials_to_xgb_final(runs, ms_["xgb"])
            m = reach_mean[case][cm]
            hits = seed_hits(runs, ms_["xgb"])
            reach_s[case][cm] = (float(np.mean([w[h - 1] for w, h in zip(walls[case][cm], hits)]))
                                 if None not in hits else None)
            # the mean curve's hit: the tuning seconds each seed had spent by that trial, averaged
            reach_mean_s[case][cm] = float(np.mean([w[m - 1] for w in walls[case][cm]])) if m else None
    summary["trials_to_xgb_final"] = reach
    summary["trials_to_xgb_final_mean_curve"] = reach_mean

    print(f"\n{'case':<14}{'cost model':<11}" + "".join(f"{'@' + str(b):>11}" for b in args.budgets)
          + f"{'trials to XGB final: per seed':>31}{'seconds':>9}{'mean curve':>12}{'seconds':>9}")
    for case in cases:
        for cm in models:
            row = "".join(f"{summary[case][cm][str(b)] * 1e3:>9.4f}ms" for b in args.budgets)
            t, m = reach[case][cm], reach_mean[case][cm]
            s, ms_s = reach_s[case][cm], reach_mean_s[case][cm]
            print(f"{case:<14}{cm:<11}{row}{t if t is not None else 'never':>31}"
                  f"{(f'{s:.0f}' if s is not None else '-'):>9}{m if m is not None else 'never':>12}"
                  f"{(f'{ms_s:.0f}' if ms_s is not None else '-'):>9}")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(summary, indent=1) + "\n")
    detail_path = out.with_name(out.stem + "_details.json")
    write_text(detail_path, json.dumps({"runs": details, "seconds_to_xgb_final": reach_s,
                                       "seconds_to_xgb_final_mean_curve": reach_mean_s,
                                       "settings": vars(args)}, indent=1, default=str) + "\n")
    plot(curves, out.with_suffix(".png"))
    out.with_name("tuning_partial.json").unlink(missing_ok=True)  # the full results supersede it
    print(f"-> {out}, {detail_path}, {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
