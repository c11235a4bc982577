"""Learning platform after platform: continual distillation against the baselines.

Platforms are datasets (default: datasets/*/ with platform.json), learned in the order given (and
the reverse order with --both-orders). After each stage every method's model is scored (pooled
Top-1 on each platform's held-out tasks), giving a matrix R[stage][platform]. Reported per method:
average Top-1 after the last stage, forgetting (mean over earlier platforms of best-ever Top-1
minus final Top-1), model size, training seconds.

Methods: ckd (tcl.ckd with its defaults: progress + gated compress into the descriptor-reading
parameters, projected so that earlier platforms' scores do not change; --preserve keep: the whole
KB learns, held by the old-hardware ranking term and online EWC at --ckd-ewc-lambda, off by
default), distill (the gated distillation from the column into the whole KB alone: nothing keeps
the old platforms),
ewc (fine-tuning with online EWC, no column), finetune (plain sequential fine-tuning), separate
(a new model per platform; size grows), joint (all platforms' data at once: a shared backbone with
one head per platform, the MTL-TLP-style upper bound that needs every dataset together). Not run by
default: joint_kb (one model for all platforms, the hardware descriptor its only way to tell them
apart, trained on all data at once: the most a single KB of this size can hold).

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
import torch.nn as nn

ROOT = Path(__file__).resolve().parent.parent

import tcl  # noqa: E402
from tcl.atomic import save_figure, write_text  # noqa: E402
from tcl.ckd import (  # noqa: E402
    CKDConfig,
    OnlineEWC,
    _batches,
    first_platform,
    learn_platform,
    sampled_subset,
)
from tcl.model.losses import lambda_rank_loss  # noqa: E402
from tcl.train import (  # noqa: E402
    LastEpochsAverage,
    ProgramData,
    _groups,
    _seed_everything,
    build_model,
    epochs_for_steps,
    optimizer_step,
    score_tasks,
    split_tasks,
    train,
)

METHODS = ("ckd", "distill", "ewc", "finetune", "separate", "joint")
EXTRA_METHODS = ("joint_kb",)  # not run by default
JOINT = ("joint", "joint_kb")  # trained on every platform at once: no stages, no forgetting


def top1(model, data, test_ids) -> float:
    return score_tasks(model, data, test_ids)["pooled"]["top1"]


def finetune(model, data, ids, cfg: CKDConfig, ewc: OnlineEWC | None):
    """Continues training `model` on new data (LambdaRank), optionally with the EWC penalty."""
    model = copy.deepcopy(model)
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed)
    model.train()
    epochs = epochs_for_steps(data, ids, cfg.progress_epochs + cfg.compress_epochs, 2 * cfg.min_steps,
                              cfg.group_size, cfg.batch_tasks)
    average = LastEpochsAverage(epochs, cfg.average_last)
    for epoch in range(1, epochs + 1):
        for idx, gid in _batches(data, ids, cfg, rng):
            loss = lambda_rank_loss(model(*data.inputs(idx)), torch.from_numpy(data.label[idx]), gid)
            if ewc is not None:
                loss = loss + ewc.penalty(model, cfg.ewc_lambda)
            optimizer_step(opt, loss, model.parameters(), cfg.clip)
        average.after_epoch(epoch, model)
    average.finish(model)
    model.eval()
    return model


class Platforms(nn.Module):
    """One model for every platform (the KB's architecture: the hardware descriptor is its only
    way to tell them apart); `platform` is ignored."""

    def __init__(self, model_config: dict | None):
        super().__init__()
        self.body = build_model("mamba", **(model_config or {}))
        self.platform = 0

    def forward(self, *inputs):
        return self.body(*inputs)

    def size_mb(self) -> float:
        return self.body.size_mb()


class MultiHead(nn.Module):
    """A shared MambaCostModel body with one head per platform (MTL baseline)."""

    def __init__(self, n_platforms: int, model_config: dict | None):
        super().__init__()
        self.body = build_model("mamba", **(model_config or {}))
        self.heads = nn.ModuleList(copy.deepcopy(self.body.decoder) for _ in range(n_platforms))
        self.platform = 0

    def forward(self, seq, lengths, workload=None, hardware=None):
        b = self.body
        parts = [b.embedding(seq, lengths)]
        if b.workload_proj is not None:
            parts.append(b.workload_proj(workload))
        if b.hardware_proj is not None:
            parts.append(b.hardware_proj(hardware))
        return self.heads[self.platform](torch.cat(parts, -1)).squeeze(-1)

    def size_mb(self) -> float:
        return sum(p.numel() for n, p in self.named_parameters() if not n.startswith("body.decoder")) * 4 / 1e6


def joint(datas, train_ids, cfg: CKDConfig, model_config, shared_head: bool = False):
    """All platforms' data at once; a head per platform, or (shared_head) one model for all, the
    most a single KB can hold."""
    _seed_everything(cfg.seed)
    model = Platforms(model_config) if shared_head else MultiHead(len(datas), model_config)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed)
    model.train()
    epochs = cfg.progress_epochs + cfg.compress_epochs
    average = LastEpochsAverage(epochs, cfg.average_last)
    for epoch in range(1, epochs + 1):
        batches = []
        for k, (d, ids) in enumerate(zip(datas, train_ids)):
            groups = _groups(d, ids, cfg.group_size, rng)
            batches += [(k, groups[a:a + cfg.batch_tasks]) for a in range(0, len(groups), cfg.batch_tasks)]
        rng.shuffle(batches)
        for k, chunk in batches:
            model.platform = k
            idx = np.concatenate(chunk)
            gid = torch.from_numpy(np.repeat(np.arange(len(chunk)), [len(g) for g in chunk]))
            loss = lambda_rank_loss(model(*datas[k].inputs(idx)), torch.from_numpy(datas[k].label[idx]), gid)
            optimizer_step(opt, loss, model.parameters(), cfg.clip)
        average.after_epoch(epoch, model)
    average.finish(model)
    model.eval()
    return model


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
                        kb = finetune(kb, datas[i], splits[i][0], replace(cfg, ewc_lambda=ewc_lambda), ewc)
                        ewc.consolidate(kb, datas[i], splits[i][0], cfg)
                    elif method == "finetune":
                        kb = finetune(kb, datas[i], splits[i][0], cfg, None)
                    elif method == "separate":
                        kb, _ = train(datas[i], splits[i][0], (), epochs=cfg.progress_epochs + cfg.compress_epochs,
                                      model_config=model_config, seed=cfg.seed, threads=cfg.threads, progress=False,
                                      min_steps=2 * cfg.min_steps, average_last=cfg.average_last)
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
        scratch, _ = train(data, train_ids, (), epochs=cfg.progress_epochs + cfg.compress_epochs,
                           model_config=model_config, seed=cfg.seed, threads=cfg.threads, progress=False,
                           min_steps=2 * cfg.min_steps)
        bar = top1(scratch, data, test_ids)
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
    cfg = CKDConfig(progress_epochs=args.progress_epochs, compress_epochs=args.compress_epochs,
                    min_steps=args.min_steps, preserve=args.preserve, ewc_lambda=args.ckd_ewc_lambda,
                    keep_old=args.keep_old, keep_old_mix=args.keep_old_mix, hardware_lr=args.hardware_lr,
                    hardware_film=args.hardware_film, hardware_film_steps=args.hardware_film_steps,
                    hardware_adapter_rank=args.hardware_adapter_rank, projected_lr=args.projected_lr,
                    average_last=args.average_last, seed=args.seed, threads=args.threads)
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
    res, first = run_order(names, datas, splits, cfg, model_config, args.methods, args.ewc_lambda)
    fractions = [float(f) for f in args.fractions.split(",") if f.strip()]
    start = None
    if fractions and first is not None:
        print(f"cross-platform start, {names[0]} -> {names[1]}:", flush=True)
        known = {name: res[m]["matrix"][1][1] for name, m in (("scratch", "separate"), ("ckd", "ckd")) if m in res}
        start = cross_platform_start(first, datas[1], splits[1], fractions, cfg, model_config, known,
                                     tag=f"[{names[0]} -> {names[1]}] ")
    return order, key, res, start


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="*", help="one dataset per platform, in learning order (default: datasets/*/)")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS + EXTRA_METHODS,
                   help="joint_kb (not run by default): one model for all platforms trained on all data")
    p.add_argument("--both-orders", action="store_true", help="also learn the platforms in reverse order")
    p.add_argument("--progress-epochs", type=int, default=20)
    p.add_argument("--compress-epochs", type=int, default=20)
    p.add_argument("--min-steps", type=int, default=200)
    p.add_argument("--ewc-lambda", type=float, default=100.0, help="strength of the ewc baseline's penalty")
    p.add_argument("--preserve", choices=("exact", "keep"), default=CKDConfig.preserve,
                   help="ckd: how compress keeps the earlier platforms (tcl.ckd.CKDConfig.preserve)")
    p.add_argument("--ckd-ewc-lambda", type=float, default=CKDConfig.ewc_lambda, help="ckd's EWC strength")
    p.add_argument("--keep-old", type=float, default=CKDConfig.keep_old, help="ckd: weight of the old-hardware ranking term")
    p.add_argument("--keep-old-mix", action=argparse.BooleanOptionalAction, default=CKDConfig.keep_old_mix,
                   help="ckd: the old-hardware term also on mixtures of two tasks' programs")
    p.add_argument("--hardware-lr", type=float, default=CKDConfig.hardware_lr,
                   help="ckd: learning-rate multiplier of the hardware projection in compress")
    p.add_argument("--hardware-film", action=argparse.BooleanOptionalAction, default=CKDConfig.hardware_film,
                   help="the first KB (every sequential method's start) gets a FiLM layer (tcl.ckd)")
    p.add_argument("--hardware-film-steps", action=argparse.BooleanOptionalAction,
                   default=CKDConfig.hardware_film_steps,
                   help="... that also FiLMs every step's encoder output, not only the pooled embedding")
    p.add_argument("--projected-lr", action=argparse.BooleanOptionalAction, default=CKDConfig.projected_lr,
                   help="ckd exact: scale the learning rate by how much the projection shrinks the new descriptor")
    p.add_argument("--hardware-adapter-rank", type=int, default=CKDConfig.hardware_adapter_rank,
                   help="... and descriptor adapters of this rank (0: none; tcl.model.cost_model.DescriptorAdapter)")
    p.add_argument("--average-last", type=float, default=CKDConfig.average_last,
                   help="every model (the first KB, each stage's, joint's, separate's) ends as the mean of its weights "
                        "after each of this last fraction of its epochs")
    p.add_argument("--fractions", default="0.05,0.1,0.2,0.5,1.0",
                   help="cross-platform start: RDU sample sizes of the second platform ('' to skip)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="when the data has no split")
    p.add_argument("--d-model", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads per order")
    p.add_argument("--jobs", type=int, default=1, help="orders learned at once, one process each (with --both-orders)")
    p.add_argument("--out", help="default: bench/results/continual.json (continual_seeds.json with --mean-of)")
    p.add_argument("--mean-of", nargs="+", metavar="RESULT_JSON",
                   help="train nothing: summarise runs with different --seed (their --out files) as the mean "
                        "and standard error per order and method, and each method against joint seed by seed; "
                        "writes --out")
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
