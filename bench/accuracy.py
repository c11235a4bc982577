"""Cost-model accuracy side by side, per platform, on the same data and the same split.

Models: `tcl` (the Mamba cost model), `tlp` (TLP-style self-attention on the same sequences),
`xgb` (TVM's XGBModel on PerStoreFeature), `mlp` (TVM's MLPModel, TenSet-MLP, trained on all
training workloads at once). Training tasks = every task not in the held-out split (task.json
"split": "test", i.e. ResNet-50, MobileNetV2, BERT-base/tiny and what they share; else
--test-fraction of the tasks). All are scored by tcl.metrics on the held-out tasks.

Columns: size (MB, fp32 parameters; XGB: the saved booster), Top-1 / Top-5 pooled over the held-out
networks, the task mean (Top-1 averaged over held-out tasks of --min-programs programs), training
seconds, scoring µs per candidate on one thread (tcl/tlp: torch at batch 512; xgb/mlp: TVM feature
extraction + predict). Writes bench/results/accuracy.json
({platform: {model: {"top1", "top5", "task_mean", "size_mb", "network_top1", ...}}}) and
bench/results/accuracy.png (Top-1 per held-out network, drawn from that summary, so from every
platform run so far); each run's details and settings go to accuracy_details.json, written after
every seed. A seed whose run is stored there with the same settings and the same data is not trained
again, so seeds can be added by later invocations (or one cut short can go on).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

import tcl  # noqa: E402
from tcl.atomic import locked, save_figure, write_text  # noqa: E402
from tcl.cli.options import HelpFormatter, non_negative_number  # noqa: E402
from tcl.metrics import TASK_MEAN_MIN_PROGRAMS, evaluate_predictions, held_out_summary  # noqa: E402
from tcl.program_data import ProgramData, split_tasks, task_key  # noqa: E402
from tcl.scoring import predict  # noqa: E402
from tcl.train import train_validated  # noqa: E402
from tcl.train_config import LR_SCHEDULES, TrainConfig  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transfer import data_stamp  # noqa: E402

# what decides a run's result besides the model and the seed; a stored run is reused only when they match
RUN_SETTINGS = ("epochs", "val_fraction", "refit", "lr_schedule", "log_ratio_weight", "test_fraction",
                "min_programs")


def run_settings(args, dataset: Path, data, test_ids) -> dict:
    import hashlib

    held_out = hashlib.sha1("\n".join(sorted(task_key(data.tasks[i]) for i in test_ids)).encode()).hexdigest()
    return {**{k: getattr(args, k) for k in RUN_SETTINGS}, "data": data_stamp([dataset]), "held_out": held_out[:10]}


def stored_runs(detail_path: Path, platform: str, model: str, settings: dict) -> dict:
    """{seed: run} of this platform and model kept in the details file, made with these settings on
    the data as it is now: a later invocation adds seeds instead of training the same ones again."""
    if not detail_path.is_file():
        return {}
    entry = json.loads(detail_path.read_text())["platforms"].get(platform, {}).get(model, {})
    return {r["seed"]: r for r in entry.get("seeds", []) if r.get("settings") == settings}


def _score(data, test_ids, scores_by_program) -> dict:
    idx = data.programs_of(test_ids)
    keys = [task_key(t) for t in data.tasks]
    nets = {task_key(t): t.network_weights for t in data.tasks}
    return evaluate_predictions(data.cost[idx], scores_by_program[idx], data.task[idx], keys, nets)


def torch_model(arch, data, train_ids, test_ids, args) -> dict:
    import torch

    t0 = time.perf_counter()
    cfg = TrainConfig(epochs=args.epochs, val_fraction=args.val_fraction, refit=args.refit, lr_schedule=args.lr_schedule,
                      log_ratio_weight=args.log_ratio_weight, seed=args.seed, threads=args.threads)
    model, hist, _, _ = train_validated(data, train_ids, cfg, arch=arch, progress=False)
    seconds = time.perf_counter() - t0
    scores = np.zeros(len(data))
    idx = data.programs_of(test_ids)
    scores[idx] = predict(model, data, idx=idx)
    torch.set_num_threads(1)
    batch = idx[:512]
    t0 = time.perf_counter()
    for _ in range(3):
        predict(model, data, batch_size=512, idx=batch)
    us = (time.perf_counter() - t0) / 3 / len(batch) * 1e6
    return {"metrics": _score(data, test_ids, scores), "size_mb": model.size_mb(), "train_seconds": seconds,
            "us_per_candidate": us, "epochs": len(hist["loss"]), "best_epoch": hist["best_epoch"],
            "refit": hist["refit"]}


def tvm_model(kind, fs, data, train_ids, test_ids, args) -> dict:
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.baselines import fit_mlp, mlp_predict, task_records
    from tcl.tvm.builder import import_cpu_tensor_intrin
    from tcl.tvm.dataset import RecordReader

    import_cpu_tensor_intrin()
    reader = RecordReader(fs)
    # tasks whose every measurement failed have no programs to learn from or rank
    train_ids = [t for t in train_ids if len(data.programs_of([t]))]
    test_ids = [t for t in test_ids if len(data.programs_of([t]))]

    t0 = time.perf_counter()
    if kind == "xgb":
        # adaptive_training off: XGBModel refits on all data after every update, so the final model
        # has seen every training task (its refits are part of the training time, as in tuning).
        model = ms.cost_model.XGBModel(extractor=ms.feature_extractor.PerStoreFeature(), num_warmup_samples=0,
                                       adaptive_training=False, num_tuning_cores=args.threads)
        for t in train_ids:
            _, ctx, cands, results = task_records(reader, data, t)
            model.update(ctx, cands, results)
    else:
        model = fit_mlp(reader, data, train_ids, args.seed)
    seconds = time.perf_counter() - t0
    scores = np.zeros(len(data))
    n_scored, t_score = 0, 0.0
    for t in test_ids:
        idx, ctx, cands, _ = task_records(reader, data, t)
        t1 = time.perf_counter()
        scores[idx] = mlp_predict(model, ctx, cands) if kind == "mlp" else np.asarray(model.predict(ctx, cands))
        t_score += time.perf_counter() - t1
        n_scored += len(cands)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model")
        model.save(path)
        size = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file()) / 1e6
    return {"metrics": _score(data, test_ids, scores), "size_mb": size, "train_seconds": seconds,
            "us_per_candidate": t_score / max(n_scored, 1) * 1e6}


def plot(summary, path):
    """Top-1 per held-out network, one panel per platform, from the summary's `network_top1`
    (platforms whose models all lack it, i.e. stored before it was kept, are left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = {platform: {name: m["network_top1"] for name, m in models.items() if "network_top1" in m}
               for platform, models in summary.items()}
    results = {platform: models for platform, models in results.items() if models}
    if not results:
        print("no platform has per-network Top-1 in the summary: no plot drawn")
        return
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for ax, (platform, models) in zip(axes[0], results.items()):
        nets = sorted({n for m in models.values() for n in m})
        w = 0.8 / max(len(models), 1)
        for j, (name, m) in enumerate(models.items()):
            ax.bar(np.arange(len(nets)) + j * w, [m.get(n) or 0 for n in nets],
                   w, label=name)
        ax.set_xticks(np.arange(len(nets)) + 0.4 - w / 2, nets, rotation=20, fontsize=8)
        ax.set_ylabel("Top-1")
        ax.set_title(platform)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def write(out, detail_path, summary, details, args):
    """Merges this run's models into the files: results of other models (or of another run
    writing beside this one) are kept."""
    with locked(out):
        old = json.loads(out.read_text()) if out.is_file() else {}
        old_details = json.loads(detail_path.read_text())["platforms"] if detail_path.is_file() else {}
        for platform, models in summary.items():
            old.setdefault(platform, {}).update(models)
            for name, entry in details[platform].items():
                kept = other_seeds(old_details.get(platform, {}).get(name, {}), entry.get("seeds", []))
                old_details.setdefault(platform, {})[name] = {**entry, "seeds": entry.get("seeds", []) + kept}
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text(out, json.dumps(old, indent=1) + "\n")
        write_text(detail_path, json.dumps({"platforms": old_details, "settings": vars(args)}, indent=1,
                                          default=str) + "\n")
    return old


def other_seeds(stored: dict, runs: list) -> list:
    """The stored runs of a platform and model that an entry of `runs` should keep: other seeds made
    with the same settings (a run that trained only some seeds, or one beside it, drops none)."""
    settings = {r.get("settings") and json.dumps(r["settings"], sort_keys=True) for r in runs}
    seeds = {r["seed"] for r in runs}
    return [r for r in stored.get("seeds", []) if r["seed"] not in seeds and r.get("settings")
            and json.dumps(r["settings"], sort_keys=True) in settings]


def summarize_seeds(runs) -> dict:
    """Mean (and spread) over seeds of the pooled Top-1 / Top-5 and of the task mean."""
    out = {"size_mb": runs[0]["size_mb"]}
    for k in ("top1", "top5", "task_mean"):
        v = [r["held_out"][k] for r in runs if r["held_out"][k] is not None]  # None: no task has enough programs
        if not v:
            continue
        out[k] = float(np.mean(v))
        if len(v) > 1:
            out[f"{k}_std"] = float(np.std(v))
            out[f"{k}_seeds"] = v
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("paths", nargs="*", help="one dataset per platform (default: datasets/*/)")
    p.add_argument("--models", nargs="+", default=["tcl", "tlp", "xgb", "mlp"], help="cost models trained and scored")
    p.add_argument("--epochs", type=int, default=TrainConfig.epochs, help="tcl/tlp: epochs (default: %(default)s)")
    p.add_argument("--val-fraction", type=float, default=TrainConfig.val_fraction,
                   help="tcl/tlp: validate on this share of the training tasks and stop early (0: all train, fixed "
                        "epochs; default: %(default)s)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="when the data has no split")
    p.add_argument("--seeds", default="0", help="comma separated; Top-1/Top-5 are the mean over them")
    p.add_argument("--refit", action="store_true",
                   help="tcl/tlp: after early stopping, train again on every training task")
    p.add_argument("--lr-schedule", choices=LR_SCHEDULES, default=TrainConfig.lr_schedule,
                   help="tcl/tlp: constant learning rate, or a half cosine down to 0 over the epochs (default: %(default)s)")
    p.add_argument("--log-ratio-weight", type=non_negative_number, default=TrainConfig.log_ratio_weight,
                   help="tcl/tlp: weight of the log-ratio loss beside LambdaRank (default: %(default)s)")
    p.add_argument("--min-programs", type=int, default=TASK_MEAN_MIN_PROGRAMS,
                   help="tasks in the task mean have this many programs")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "accuracy.json"), help="the summary JSON (the plot goes beside it)")
    args = p.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",")]
    paths = args.paths or sorted(str(d) for d in (ROOT / "datasets").glob("*/") if (d / "platform.json").exists())
    if not paths:
        sys.exit("no datasets given and none under datasets/")

    # Results of models or platforms not run this time are kept, so one model can be re-run alone.
    out = Path(args.out)
    detail_path = out.with_name(out.stem + "_details.json")
    summary, details, merged = {}, {}, {}
    for path in paths:
        platform = Path(path).name
        fs = tcl.featurize(path)
        data = ProgramData(fs)
        train_ids, test_ids = split_tasks(data.tasks, args.test_fraction, seeds[0])
        print(f"{platform}: {len(data)} programs, {len(train_ids)} training / {len(test_ids)} held-out tasks")
        print(f"  {'model':<6}{'size MB':>9}{'Top-1':>8}{'Top-5':>8}{'task':>8}{'train s':>9}{'µs/cand':>9}")
        summary.setdefault(platform, {})
        details.setdefault(platform, {})
        for name in args.models:
            if name == "mlp" and len(train_ids) < 5:
                # MLPModel's validation split is 20% of the workloads: it fails below 5 of them
                print(f"  {name:<6} skipped: needs 5 or more training tasks, the data has {len(train_ids)}")
                continue
            settings = run_settings(args, Path(path), data, test_ids)
            stored = stored_runs(detail_path, platform, name, settings)
            runs = []
            for seed in seeds:
                if seed in stored:
                    runs.append(stored[seed])
                    how = "stored"
                else:
                    args.seed = seed
                    r = (torch_model("mamba" if name == "tcl" else "tlp", data, train_ids, test_ids, args)
                         if name in ("tcl", "tlp") else tvm_model(name, fs, data, train_ids, test_ids, args))
                    runs.append({**{k: v for k, v in r.items() if k != "metrics"}, "seed": seed,
                                 "settings": settings, "networks": r["metrics"]["networks"],
                                 "pooled": r["metrics"]["pooled"],
                                 "held_out": held_out_summary(r["metrics"], args.min_programs)})
                    how = "trained"
                r, held_out = runs[-1], runs[-1]["held_out"]
                print(f"  {name:<6}{r['size_mb']:>9.3f}{held_out['top1']:>8.4f}{held_out['top5']:>8.4f}"
                      f"{held_out['task_mean'] or float('nan'):>8.4f}"
                      f"{r['train_seconds']:>9.1f}{r['us_per_candidate']:>9.1f}  seed {seed} ({how})", flush=True)
                nets = {n: {k: float(np.mean([r["networks"][n][k] for r in runs])) for k in m}
                        for n, m in runs[0]["networks"].items()}
                summary[platform][name] = {**summarize_seeds(runs),
                                           "network_top1": {n: m["top1"] for n, m in nets.items()}}
                details[platform][name] = {**runs[0], "networks": nets, "seeds": runs}
                merged = write(out, detail_path, summary, details, args)  # after every seed
    plot(merged, out.with_suffix(".png"))
    print(f"-> {out}, {detail_path}, {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
