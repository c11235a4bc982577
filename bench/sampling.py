"""Training from a fraction of the measurements: RDU against the baselines, and the sampler's speed.

1. Accuracy: for each platform (a dataset directory with platform.json, or each path given), for
   each method and sampling rate, run the sampling loop on the training tasks (latencies looked up
   in the dataset), train, and score pooled Top-1/Top-5 on the held-out tasks (task.json split, else
   --test-fraction of the tasks). Several seeds; mean and spread. Rate 1.0 = every training program.
2. Speed: the sampler's selection (kNN representativeness + greedy R+D+U) at 10k, 50k and 100k
   programs (tasks of --task-size programs, --dim-wide embeddings): C++ kernels vs the numpy reference.

Prints tables, writes bench/results/sampling.json ({platform: {method: {rate: mean top1}}}),
sampling_details.json (every run, spreads, speed) and sampling.png (Top-1 vs rate).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

import tcl  # noqa: E402
from tcl.sampling import reference  # noqa: E402
from tcl.sampling.sampler import LookupOracle, SamplingConfig, run_sampling  # noqa: E402
from tcl.sampling.strategies import METHODS, normalize_per_group, per_task_budget, select  # noqa: E402
from tcl.train import ProgramData, score_tasks, split_tasks, train  # noqa: E402


def accuracy(path, methods, rates, seeds, args) -> dict:
    data = ProgramData(tcl.featurize(path))
    pool_ids, test_ids = split_tasks(data.tasks, args.test_fraction, 0)
    if not test_ids:
        raise SystemExit(f"{path}: no held-out tasks (give --test-fraction)")
    out = defaultdict(dict)
    for rate in rates:
        for method in (["all"] if rate >= 1.0 else methods):
            runs = []
            for seed in seeds:
                t0 = time.perf_counter()
                if rate >= 1.0:
                    model, _ = train(data, pool_ids, (), epochs=args.epochs * args.rounds, seed=seed,
                                     threads=args.threads, progress=False)
                else:
                    cfg = SamplingConfig(method=method, fraction=rate, rounds=args.rounds, epochs=args.epochs,
                                         min_steps=args.min_steps, seed=seed, threads=args.threads,
                                         embedding=args.embedding)
                    model = run_sampling(data, pool_ids, cfg, LookupOracle(data.cost), progress=False).model
                pooled = score_tasks(model, data, test_ids)["pooled"]
                runs.append({"seed": seed, "top1": pooled["top1"], "top5": pooled["top5"],
                             "seconds": time.perf_counter() - t0})
                print(f"  {Path(path).name} {method:>16} rate {rate:<5} seed {seed}: "
                      f"top1 {pooled['top1']:.4f} top5 {pooled['top5']:.4f}", flush=True)
            top1 = [r["top1"] for r in runs]
            entry = {"top1": statistics.mean(top1), "top1_std": statistics.pstdev(top1),
                     "top5": statistics.mean(r["top5"] for r in runs), "runs": runs}
            for m in (methods if rate >= 1.0 else [method]):  # 100% of the data is the same for every method
                out[m][str(rate)] = entry
    return dict(out)


def speed(sizes, task_size, dim, methods=("rdu",)) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for n in sizes:
        x = rng.normal(size=(n, dim)).astype(np.float32)
        group = (np.arange(n) // task_size).astype(np.int32)
        u = rng.random(n)
        budget = per_task_budget(group, fraction=0.1)
        t0 = time.perf_counter()
        select("rdu", x, group, budget, u=u)
        cpp = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = normalize_per_group(1 / (1 + reference.knn_distance(x, group, 10)), group)
        reference.greedy_select(x, group, budget, r, normalize_per_group(u, group), None, (1, 1, 1))
        ref = time.perf_counter() - t0
        out[str(n)] = {"cpp_seconds": cpp, "numpy_seconds": ref, "speedup": ref / cpp}
        print(f"  {n:>7} programs: C++ {cpp:7.2f} s   numpy {ref:8.2f} s   {ref / cpp:6.1f}x", flush=True)
    return out


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4), squeeze=False)
    for ax, (platform, methods) in zip(axes[0], results.items()):
        for m, by_rate in methods.items():
            rates = sorted(by_rate, key=float)
            ax.errorbar([float(r) for r in rates], [by_rate[r]["top1"] for r in rates],
                        yerr=[by_rate[r]["top1_std"] for r in rates], label=m, marker="o", capsize=2)
        ax.set_xscale("log")
        ax.set_xlabel("fraction of training programs measured")
        ax.set_ylabel("pooled Top-1 on held-out tasks")
        ax.set_title(platform)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", help="one dataset per platform (default: datasets/*/)")
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    p.add_argument("--rates", nargs="+", type=float, default=[0.05, 0.1, 0.2, 0.5, 1.0])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=20, help="training epochs per round")
    p.add_argument("--min-steps", type=int, default=200, help="optimizer steps per round at least")
    p.add_argument("--embedding", choices=["model", "features"], default="model")
    p.add_argument("--test-fraction", type=float, default=0.2, help="when the data has no split")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--speed-sizes", nargs="*", type=int, default=[10_000, 50_000, 100_000])
    p.add_argument("--task-size", type=int, default=2000)
    p.add_argument("--dim", type=int, default=128, help="embedding width (the model's d_model)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "sampling.json"))
    args = p.parse_args(argv)
    paths = args.paths or sorted(str(d) for d in (ROOT / "datasets").glob("*/") if (d / "platform.json").exists())
    if not paths:
        sys.exit("no datasets given and none under datasets/")

    res = {"accuracy": {}, "load_average_before": os.getloadavg()}
    for path in paths:
        print(f"accuracy on {path}:")
        res["accuracy"][Path(path).name] = accuracy(path, args.methods, args.rates, args.seeds, args)
    if args.speed_sizes:
        print("selection time (10% of each task, 1 call):")
        res["speed"] = speed(args.speed_sizes, args.task_size, args.dim)
    res["load_average_after"] = os.getloadavg()
    res["settings"] = {k: v for k, v in vars(args).items() if k != "out"}
    # the summary the issue asks for: {platform: {method: {rate: mean top1}}}
    summary = {pl: {m: {r: v["top1"] for r, v in by_rate.items()} for m, by_rate in ms.items()}
               for pl, ms in res["accuracy"].items()}
    print(json.dumps(summary, indent=1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    detail_path = out.with_name(out.stem + "_details.json")
    detail_path.write_text(json.dumps(res, indent=1) + "\n")
    plot(res["accuracy"], out.with_suffix(".png"))
    print(f"-> {out}, {detail_path}, {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
