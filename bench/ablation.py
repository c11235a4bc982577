"""The paper's Table 2 grid for the Mamba cost model: n_layer x d_state, size, Top-1/Top-5, time.

Each configuration is trained the way bench/accuracy.py trains its `tcl` row (LambdaRank on every
training task for a fixed --epochs; --val-fraction F validates and stops early instead) and scored
on the held-out tasks (task.json split "test": ResNet-50, MobileNetV2, BERT-base/tiny). d_model,
expand (1) and d_conv (4) stay at the defaults, so the size grows with the layers and the state.

Runs are (configuration, seed) pairs, seed-major so that every configuration has one seed before
any has two; --jobs N trains N at once, one spawned process each with --threads threads (training
seconds are then only comparable within one run). Every finished run is written at once and a rerun
skips the runs already stored (--fresh starts over), so a long grid can be stopped and resumed.

On a GPU (--device cuda) the steps use mamba_ssm's fused scan when it is installed.
Writes bench/results/ablation.json: {"results": {"n_layer=L,d_state=S": {"size_mb", "top1",
"top1_std", "top5", "train_seconds", "epochs", "runs": [per seed]}}, "dataset", "settings"}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from tcl.atomic import write_text
from tcl.cli.options import HelpFormatter
from tcl.train_config import TrainConfig

ROOT = Path(__file__).resolve().parent.parent


def key(n_layer: int, d_state: int) -> str:
    return f"n_layer={n_layer},d_state={d_state}"


def train_one(path: str, n_layer: int, d_state: int, seed: int, args) -> dict:
    """One configuration, one seed: trained, scored on the held-out tasks, timed."""
    import tcl
    from tcl.program_data import ProgramData, split_tasks
    from tcl.scoring import score_tasks
    from tcl.train import train_validated

    data = ProgramData(tcl.featurize(path))
    train_ids, test_ids = split_tasks(data.tasks, 0.2, 0)
    t0 = time.perf_counter()
    cfg = TrainConfig(epochs=args.epochs, val_fraction=args.val_fraction, seed=seed, threads=args.threads)
    model, hist, _, _ = train_validated(data, train_ids, cfg, model_config={"n_layer": n_layer, "d_state": d_state},
                                        progress=False, device=args.device)
    seconds = time.perf_counter() - t0
    pooled = score_tasks(model, data, test_ids)["pooled"]
    return {"n_layer": n_layer, "d_state": d_state, "seed": seed, "size_mb": model.size_mb(),
            "top1": pooled["top1"], "top5": pooled["top5"], "pairwise": pooled["pairwise"],
            "train_seconds": seconds, "epochs": len(hist["loss"]), "best_epoch": hist["best_epoch"]}


def grid_order(runs: dict) -> list[str]:
    """The configurations of {key: runs} by n_layer, then d_state."""
    return sorted(runs, key=lambda k: (runs[k][0]["n_layer"], runs[k][0]["d_state"]))


def summarise(runs: list[dict]) -> dict:
    top1 = [r["top1"] for r in runs]
    return {"n_layer": runs[0]["n_layer"], "d_state": runs[0]["d_state"], "size_mb": runs[0]["size_mb"],
            "seeds": len(runs), "top1": statistics.mean(top1), "top1_std": statistics.pstdev(top1),
            "top5": statistics.mean(r["top5"] for r in runs),
            "pairwise": statistics.mean(r["pairwise"] for r in runs),
            "train_seconds": statistics.mean(r["train_seconds"] for r in runs),
            "epochs": statistics.mean(r["epochs"] for r in runs),
            "runs": sorted(runs, key=lambda r: r["seed"])}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("path", nargs="?", default=str(ROOT / "datasets" / "znver4-2c"), help="one platform's dataset")
    p.add_argument("--n-layer", default="1,2,3", help="comma-separated layer counts")
    p.add_argument("--d-state", default="8,16,32", help="comma-separated state sizes")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    p.add_argument("--epochs", type=int, default=TrainConfig.epochs,
                   help="as bench/accuracy.py and `tcl train` (default: %(default)s)")
    p.add_argument("--val-fraction", type=float, default=TrainConfig.val_fraction,
                   help="validate on this share of the training tasks and stop early (0: fixed epochs; default: %(default)s)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per run")
    p.add_argument("--jobs", type=int, default=1, help="runs trained at once, one process each")
    p.add_argument("--fresh", action="store_true", help="ignore the runs already stored in --out")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "ablation.json"), help="the summary JSON")
    args = p.parse_args(argv)

    out = Path(args.out)
    settings = {"dataset": Path(args.path).name, "epochs": args.epochs, "val_fraction": args.val_fraction,
                "device": args.device, "threads": args.threads, "jobs": args.jobs}
    runs: dict[str, list[dict]] = {}
    if out.exists() and not args.fresh:
        stored = json.loads(out.read_text())
        if stored.get("settings", {}).get("dataset") == settings["dataset"] and all(
                stored["settings"].get(k) == settings[k] for k in ("epochs", "val_fraction", "device")):
            runs = {k: v["runs"] for k, v in stored["results"].items()}
        else:
            print(f"{out} holds other settings ({stored.get('settings')}); starting over")
    done = {(r["n_layer"], r["d_state"], r["seed"]) for rs in runs.values() for r in rs}
    grid = [(n, s) for n in map(int, args.n_layer.split(",")) for s in map(int, args.d_state.split(","))]
    todo = [(n, s, seed) for seed in map(int, args.seeds.split(",")) for n, s in grid if (n, s, seed) not in done]
    print(f"{settings['dataset']}: {len(grid)} configurations, {len(todo)} runs to train "
          f"({len(done)} stored), {args.jobs} at once, device {args.device}")
    print(f"{'n_layer':>7}{'d_state':>8}{'seed':>5}{'size MB':>9}{'Top-1':>8}{'Top-5':>8}{'train s':>9}")

    def record(r):
        runs.setdefault(key(r["n_layer"], r["d_state"]), []).append(r)
        print(f"{r['n_layer']:>7}{r['d_state']:>8}{r['seed']:>5}{r['size_mb']:>9.3f}{r['top1']:>8.4f}"
              f"{r['top5']:>8.4f}{r['train_seconds']:>9.1f}", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text(out, json.dumps({"dataset": settings["dataset"], "settings": settings,
                                   "results": {k: summarise(runs[k]) for k in grid_order(runs)}}, indent=1) + "\n")

    if args.jobs > 1:
        # spawned, so each process loads its own data and sets its own torch threads
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn")) as pool:
            futures = [pool.submit(train_one, args.path, n, s, seed, args) for n, s, seed in todo]
            for f in as_completed(futures):
                record(f.result())
    else:
        for n, s, seed in todo:
            record(train_one(args.path, n, s, seed, args))

    print(f"\n{'n_layer':>7}{'d_state':>8}{'seeds':>6}{'size MB':>9}{'Top-1':>8}{'±':>7}{'Top-5':>8}{'train s':>9}")
    for k in grid_order(runs):
        row = summarise(runs[k])
        print(f"{row['n_layer']:>7}{row['d_state']:>8}{row['seeds']:>6}{row['size_mb']:>9.3f}{row['top1']:>8.4f}"
              f"{row['top1_std']:>7.4f}{row['top5']:>8.4f}{row['train_seconds']:>9.1f}")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
