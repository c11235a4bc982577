"""Learning platform after platform: continual distillation against the baselines.

Platforms are datasets (default: datasets/*/ with platform.json), learned in the order given (and
the reverse order with --both-orders). After each stage every method's model is scored (pooled
Top-1 on each platform's held-out tasks), giving a matrix R[stage][platform]. Reported per method:
average Top-1 after the last stage, forgetting (mean over earlier platforms of best-ever Top-1
minus final Top-1), model size, training seconds.

Methods (tcl.continual; their settings are CKDConfig's, options as `tcl distill`'s): ckd (CKD with
its defaults: progress + gated compress into the descriptor-reading parameters, projected so that
earlier platforms' scores do not change; --preserve keep: the whole KB learns, held by the
old-hardware ranking term and online EWC at --ewc-lambda, off by default), distill (the gated
distillation from the column into the whole KB alone: nothing keeps the old platforms), ewc
(fine-tuning with online EWC at --ewc-baseline-lambda, no column), finetune (plain sequential
fine-tuning), separate (a new model per platform; size grows), joint (all platforms' data at once:
a shared backbone with one head per platform, the MTL-TLP-style upper bound that needs every
dataset together). Not run by default: joint_kb (one model for all platforms, the hardware
descriptor its only way to tell them apart, trained on all data at once: the most a single KB of
this size can hold).

Cross-platform start (--fractions): the first platform's KB learns the second from RDU samples of
5%..100% of its training programs; against a model trained from scratch on all of them (and the
sampler's own model, from scratch on the same sample).

Writes bench/results/continual.json ({order: {method: {"avg_top1", "forgetting", "size_mb"}}}),
continual_details.json (the matrices, the cross-platform start, the settings) and continual.png.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent

import tcl  # noqa: E402
from tcl.atomic import save_figure, write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402
from tcl.cli.distill import add_ckd_options, ckd_config  # noqa: E402
from tcl.continual import (  # noqa: E402
    CKDConfig,
    finetune,
    first_platform,
    joint,
    learn_platform,
    sampled_subset,
    separate,
)
from tcl.program_data import ProgramData, split_tasks  # noqa: E402
from tcl.scoring import score_tasks  # noqa: E402

METHODS = ("ckd", "distill", "ewc", "finetune", "separate", "joint")
EXTRA_METHODS = ("joint_kb",)  # not run by default
JOINT = ("joint", "joint_kb")  # trained on every platform at once: no stages, no forgetting
# The ewc baseline's penalty: strong, as fine-tuning with EWC is meant to be (CKD's own EWC is off,
# CKDConfig.ewc_lambda).
EWC_BASELINE_LAMBDA = 100.0


def top1(model, data, test_ids) -> float:
    return score_tasks(model, data, test_ids)["pooled"]["top1"]


def run_order(names, datas, splits, cfg: CKDConfig, model_config, methods, ewc_lambda: float) -> dict:
    n = len(datas)
    out = {}
    t0 = time.perf_counter()
    # every sequential method starts from the same first-platform KB (trained once, copied)
    first = first_platform(datas[0], splits[0][0], cfg, model_config) if set(methods) - set(JOINT) else None
    first_seconds = time.perf_counter() - t0
    for method in methods:
        t0 = time.perf_counter()
        matrix = np.full((n, n), np.nan)
        size = 0.0
        if method in JOINT:
            model = joint(datas, [s[0] for s in splits], cfg, model_config, shared_head=method == "joint_kb")
            for j in range(n):
                model.platform = j
                matrix[n - 1, j] = top1(model, datas[j], splits[j][1])
            size = model.size_mb()
        else:
            models = []
            kb, ewc, _ = copy.deepcopy(first)
            t0 -= first_seconds  # its training time counts for every method that starts from it
            for i in range(n):
                if i > 0:
                    if method == "ckd":
                        kb, ewc, _ = learn_platform(kb, ewc, datas[i], splits[i][0], cfg)
                    elif method == "distill":  # distillation from the column alone
                        kb, ewc, _ = learn_platform(kb, ewc, datas[i], splits[i][0],
                                                    replace(cfg, preserve="keep", ewc_lambda=0.0, keep_old=0.0))
                    elif method == "ewc":
                        kb = finetune(kb, datas[i], splits[i][0], cfg, ewc, ewc_lambda)
                        ewc.consolidate(kb, datas[i], splits[i][0], cfg)
                    elif method == "finetune":
                        kb = finetune(kb, datas[i], splits[i][0], cfg)
                    elif method == "separate":
                        kb = separate(datas[i], splits[i][0], cfg, model_config)
                models.append(kb)
                for j in range(i + 1):
                    # separate: each platform is scored with its own model
                    m = models[j] if method == "separate" else kb
                    matrix[i, j] = top1(m, datas[j], splits[j][1])
            size = sum(m.size_mb() for m in models) if method == "separate" else kb.size_mb()
        final = matrix[n - 1]
        best = np.nanmax(matrix, axis=0)
        forgetting = float(np.mean(best[:-1] - final[:-1])) if n > 1 and method not in JOINT else 0.0
        out[method] = {"avg_top1": float(np.mean(final)), "forgetting": forgetting, "size_mb": size,
                       "seconds": time.perf_counter() - t0, "matrix": matrix.tolist(), "platforms": names}
        print(f"  [{' -> '.join(names)}] {method:<9} avg Top-1 {out[method]['avg_top1']:.4f}  forgetting {forgetting:+.4f}  "
              f"size {size:.3f} MB  {out[method]['seconds']:.0f} s", flush=True)
    return out, first


def cross_platform_start(first, data, split, fractions, cfg: CKDConfig, model_config, known: dict,
                         tag: str = "") -> dict:
    """How much of a new platform's data CKD needs: the first platform's KB learns the new one from
    RDU samples of growing size; the bar is a model trained from scratch on all of the new
    platform's training programs. Also the sampler's own model (from scratch on the same sample).

    known: Top-1 on the new platform already measured by run_order with the same settings
    ("scratch": the separate model, "ckd": CKD on all programs); those runs are not repeated."""
    train_ids, test_ids = split
    t0 = time.perf_counter()
    if "scratch" in known:
        bar = known["scratch"]
    else:
        bar = top1(separate(data, train_ids, cfg, model_config), data, test_ids)
    n_all = len(data.programs_of(train_ids))
    rows = [{"fraction": 1.0, "method": "scratch", "programs": n_all, "top1": bar, "seconds": time.perf_counter() - t0}]
    print(f"  {tag}scratch on all {n_all} training programs: Top-1 {bar:.4f}", flush=True)
    for f in fractions:
        t0 = time.perf_counter()
        if f >= 1 and "ckd" in known:
            rows.append({"fraction": 1.0, "method": "ckd", "programs": n_all, "top1": known["ckd"], "seconds": None})
            print(f"  {tag}ckd {known['ckd']:.4f}  (100%, {n_all} programs)", flush=True)
            continue
        if f < 1:
            sub, ids, sampler_model = sampled_subset(data, train_ids, f, cfg.seed, cfg.threads)
        else:
            sub, ids, sampler_model = data, train_ids, None
        n = len(sub.programs_of(ids))
        if sampler_model is not None:
            rows.append({"fraction": f, "method": "scratch_on_sample", "programs": n,
                         "top1": top1(sampler_model, data, test_ids), "seconds": time.perf_counter() - t0})
        kb, ewc, _ = copy.deepcopy(first)
        kb, _, seconds = learn_platform(kb, ewc, sub, ids, cfg)
        rows.append({"fraction": f, "method": "ckd", "programs": n, "top1": top1(kb, data, test_ids), "seconds": seconds})
        print(f"  {tag}" + "  ".join(f"{r['method']} {r['top1']:.4f}" for r in rows if r["fraction"] == f)
              + f"  ({f:.0%}, {n} programs)", flush=True)
    reach = [r["fraction"] for r in rows if r["method"] == "ckd" and r["top1"] >= bar]
    return {"scratch_all_top1": bar, "rows": rows, "ckd_fraction_to_match": min(reach) if reach else None}


def learn_order(paths, order, args):
    """One order of platforms: every method's matrix, then the cross-platform start on its second
    platform. Returns (order, its name, the per-method results, the start or None)."""
    cfg = ckd_config(args)
    torch.set_num_threads(args.threads)
    model_config = {"d_model": args.d_model} if args.d_model else None
    paths = [paths[i] for i in order]
    datas = [ProgramData(tcl.featurize(x)) for x in paths]
    splits = [split_tasks(d.tasks, args.test_fraction, args.seed) for d in datas]
    names = [Path(x).name for x in paths]
    for name, (_, test_ids) in zip(names, splits):
        if not test_ids:
            sys.exit(f"{name}: no held-out tasks to score (its task.json has no test split; give --test-fraction)")
    key = " -> ".join(names)
    print(f"order {key}:", flush=True)
    res, first = run_order(names, datas, splits, cfg, model_config, args.methods, args.ewc_baseline_lambda)
    fractions = [float(f) for f in args.fractions.split(",") if f.strip()]
    start = None
    if fractions and first is not None:
        print(f"cross-platform start, {names[0]} -> {names[1]}:", flush=True)
        known = {name: res[m]["matrix"][1][1] for name, m in (("scratch", "separate"), ("ckd", "ckd")) if m in res}
        start = cross_platform_start(first, datas[1], splits[1], fractions, cfg, model_config, known,
                                     tag=f"[{names[0]} -> {names[1]}] ")
    return order, key, res, start


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("paths", nargs="*", help="one dataset per platform, in learning order (default: datasets/*/)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS + EXTRA_METHODS,
                   help="joint_kb (not run by default): one model for all platforms trained on all data")
    p.add_argument("--both-orders", action="store_true", help="also learn the platforms in reverse order")
    p.add_argument("--ewc-baseline-lambda", type=float, default=EWC_BASELINE_LAMBDA,
                   help="strength of the ewc baseline's penalty (default: %(default)s)")
    p.add_argument("--fractions", default="0.05,0.1,0.2,0.5,1.0",
                   help="cross-platform start: RDU sample sizes of the second platform ('' to skip)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="when the data has no split")
    p.add_argument("--d-model", type=int, default=None, help="model width (default: the architecture's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per order (default: %(default)s)")
    p.add_argument("--jobs", type=int, default=1, help="orders learned at once, one process each (with --both-orders)")
    p.add_argument("--out", help="the summary JSON (default: bench/results/continual.json; continual_seeds.json with --mean-of)")
    p.add_argument("--mean-of", nargs="+", metavar="RESULT_JSON",
                   help="train nothing: summarise runs with different --seed (their --out files) as the mean "
                        "and standard error per order and method, and each method against joint seed by seed; "
                        "writes --out")
    add_ckd_options(p, skip=("threads",))
    args = p.parse_args(argv)
    if args.mean_of:
        return mean_over_seeds(args.mean_of, args.out or ROOT / "bench" / "results" / "continual_seeds.json")
    args.out = args.out or str(ROOT / "bench" / "results" / "continual.json")
    paths = args.paths or sorted(str(d) for d in (ROOT / "datasets").glob("*/") if (d / "platform.json").exists())
    if len(paths) < 2:
        sys.exit("give two or more platforms' datasets")
    orders = [list(range(len(paths)))] + ([list(reversed(range(len(paths))))] if args.both_orders else [])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    detail_path = out.with_name(out.stem + "_details.json")
    # Methods (and orders) not run this time keep their stored results; each method's row
    # records the settings of the run that made it.
    stored = json.loads(detail_path.read_text()) if detail_path.is_file() else {}
    details, starts = stored.get("orders", {}), stored.get("cross_platform_start", {})
    method_settings = stored.get("method_settings", {})
    for m in args.methods:
        method_settings[m] = {**vars(args), "methods": None}

    def record(result):
        _, key, res, start = result
        details.setdefault(key, {}).update(res)
        if start is not None:
            starts[key] = start
        summary = {k: {m: {f: r[f] for f in ("avg_top1", "forgetting", "size_mb")} for m, r in v.items()}
                   for k, v in details.items()}
        # written after every order, so a long run keeps what it finished
        write_text(out, json.dumps(summary, indent=1) + "\n")
        write_text(detail_path, json.dumps({"orders": details, "cross_platform_start": starts,
                                           "method_settings": method_settings}, indent=1) + "\n")
        plot(details, starts, out.with_suffix(".png"))

    if args.jobs > 1 and len(orders) > 1:
        # one process per order (each with --threads threads); spawned, so each loads its own data
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(min(args.jobs, len(orders)), mp_context=mp.get_context("spawn")) as pool:
            for f in as_completed([pool.submit(learn_order, paths, order, args) for order in orders]):
                record(f.result())
    else:
        for order in orders:
            record(learn_order(paths, order, args))
    print(f"-> {out}")


def mean_over_seeds(paths, out) -> dict:
    """Mean and standard error over seed runs (one result file each) of every order and method's
    average Top-1 and forgetting, and of its average minus joint's in the same seed (paired: both
    come from the same seed's data order and initial weights); the same per platform, from the
    final row of each run's matrix (its _details.json), and the paired difference pooled over
    both orders."""
    runs = [json.loads(Path(x).read_text()) for x in paths]
    details = []
    for x in map(Path, paths):
        d = x.with_name(x.stem + "_details.json")
        details.append(json.loads(d.read_text())["orders"] if d.exists() else {})

    def stats(values):
        v = np.asarray(values, float)
        err = float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else None
        return {"mean": float(v.mean()), "stderr": err, "n": len(v)}

    def final_rows(order, m):
        """{platform: [Top-1 after the last stage, per run that has it]} of one order and method."""
        rows = {}
        for d in details:
            res = d.get(order, {}).get(m)
            if res:
                for name, top1 in zip(res["platforms"], res["matrix"][-1]):
                    rows.setdefault(name, []).append(top1)
        return rows

    summary, pooled = {}, {}
    for order in dict.fromkeys(k for r in runs for k in r):
        methods = dict.fromkeys(m for r in runs for m in r.get(order, {}))
        summary[order] = {}
        for m in methods:
            rows = [r[order] for r in runs if m in r.get(order, {})]
            entry = {f: stats([row[m][f] for row in rows]) for f in ("avg_top1", "forgetting")}
            paired = [row[m]["avg_top1"] - row["joint"]["avg_top1"] for row in rows if "joint" in row]
            if m != "joint" and paired:
                entry["minus_joint"] = stats(paired)
                pooled.setdefault(m, []).extend(paired)
            cells = "  ".join(f"{f} {e['mean']:.4f}" + (f" +- {e['stderr']:.4f}" if e["stderr"] is not None else "")
                              + f" (n {e['n']})" for f, e in entry.items())
            print(f"[{order}] {m:<9} {cells}")
            finals = final_rows(order, m)
            if finals:
                entry["final_top1"] = {name: stats(v) for name, v in finals.items()}
                print(" " * (len(order) + 3) + "final row: " + "  ".join(
                    f"{name} {e['mean']:.4f}" for name, e in entry["final_top1"].items()))
            summary[order][m] = entry
    both = {m: stats(v) for m, v in pooled.items()}
    for m, e in both.items():
        print(f"[both orders] {m:<9} minus_joint {e['mean']:+.4f}" + (f" +- {e['stderr']:.4f}" if e["stderr"] else "")
              + f" (n {e['n']})")
    write_text(Path(out), json.dumps({"runs": list(map(str, paths)), "orders": summary,
                                     "minus_joint_both_orders": both}, indent=1) + "\n")
    print(f"-> {out}")
    return summary


def plot(details, starts, path):
    """One row per order: each method's matrix, then the cross-platform start."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = max(len(res) for res in details.values()) + bool(starts)
    fig, axes = plt.subplots(len(details), cols, figsize=(2.6 * cols, 2.8 * len(details)), squeeze=False)
    for row, (order, res) in zip(axes, details.items()):
        for ax in row:
            ax.axis("off")
        for ax, (m, r) in zip(row, res.items()):
            ax.axis("on")
            mat = np.array(r["matrix"], dtype=float)
            ax.imshow(np.nan_to_num(mat, nan=0.0), vmin=0, vmax=1, cmap="viridis")
            for (i, j), v in np.ndenumerate(mat):
                if not np.isnan(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w")
            ax.set_xticks(range(len(r["platforms"])), r["platforms"], fontsize=6, rotation=20)
            ax.set_yticks(range(len(r["platforms"])), [f"stage {k + 1}" for k in range(len(r["platforms"]))], fontsize=6)
            ax.set_title(f"{m}: avg {r['avg_top1']:.3f}", fontsize=8)
        if order in starts:
            ax = row[-1]
            ax.axis("on")
            st = starts[order]
            for method in ("ckd", "scratch_on_sample"):
                pts = sorted((q["fraction"], q["top1"]) for q in st["rows"] if q["method"] == method)
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=method)
            ax.axhline(st["scratch_all_top1"], color="gray", ls="--", label="scratch, all")
            ax.set_xscale("log")
            ax.set_xlabel("share of new platform measured", fontsize=7)
            ax.set_ylabel("Top-1 on new platform", fontsize=7)
            ax.set_title("cross-platform start", fontsize=8)
            ax.legend(fontsize=6)
        row[0].set_ylabel(order, fontsize=7)
    fig.suptitle("pooled held-out Top-1 after each stage (rows) on each platform (columns)", fontsize=9)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


if __name__ == "__main__":
    main()
