"""The paper's Table 2 grid for the Mamba cost model: n_layer x d_state, size, Top-1/Top-5, time.

Each configuration is trained (LambdaRank, early stopping on validation Top-1, as `tcl train`) on the
dataset's training tasks and scored on its held-out tasks (task.json split "test": ResNet-50,
MobileNetV2, BERT-base/tiny). d_model, expand (1) and d_conv (4) stay at the defaults, so the size
grows with the layers and the state. Several seeds; mean and spread.

On a GPU (--device cuda) the steps use mamba_ssm's fused scan when it is installed; training
seconds are only comparable within one run. Writes bench/results/ablation.json:
{"n_layer=L,d_state=S": {"size_mb", "top1", "top5", "top1_std", "train_seconds", "epochs", ...}}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import tcl  # noqa: E402
from tcl.train import ProgramData, hold_out, score_tasks, split_tasks, train  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", nargs="?", default=str(ROOT / "datasets" / "znver4-2c"), help="one platform's dataset")
    p.add_argument("--n-layer", default="1,2,3")
    p.add_argument("--d-state", default="8,16,32")
    p.add_argument("--seeds", default="0,1")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "ablation.json"))
    args = p.parse_args(argv)

    data = ProgramData(tcl.featurize(args.path))
    train_ids, test_ids = split_tasks(data.tasks, 0.2, 0)
    print(f"{Path(args.path).name}: {len(data)} programs, {len(train_ids)} training / {len(test_ids)} "
          f"held-out tasks, device {args.device}")
    print(f"{'n_layer':>7}{'d_state':>8}{'size MB':>9}{'Top-1':>8}{'±':>7}{'Top-5':>8}{'train s':>9}{'epochs':>7}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results = {}
    for n_layer in map(int, args.n_layer.split(",")):
        for d_state in map(int, args.d_state.split(",")):
            runs = []
            for seed in map(int, args.seeds.split(",")):
                fit_ids, val_ids = hold_out(data.tasks, train_ids, 0.2, seed + 1)
                t0 = time.perf_counter()
                model, hist = train(data, fit_ids, val_ids, model_config={"n_layer": n_layer, "d_state": d_state},
                                    epochs=args.epochs, seed=seed, threads=args.threads, progress=False,
                                    device=args.device)
                seconds = time.perf_counter() - t0
                pooled = score_tasks(model, data, test_ids)["pooled"]
                runs.append({"seed": seed, "top1": pooled["top1"], "top5": pooled["top5"],
                             "pairwise": pooled["pairwise"], "train_seconds": seconds,
                             "epochs": len(hist["loss"]), "best_epoch": hist["best_epoch"]})
            top1 = [r["top1"] for r in runs]
            row = {"n_layer": n_layer, "d_state": d_state, "size_mb": model.size_mb(),
                   "top1": statistics.mean(top1), "top1_std": statistics.pstdev(top1),
                   "top5": statistics.mean(r["top5"] for r in runs),
                   "train_seconds": statistics.mean(r["train_seconds"] for r in runs),
                   "epochs": statistics.mean(r["epochs"] for r in runs), "runs": runs}
            results[f"n_layer={n_layer},d_state={d_state}"] = row
            print(f"{n_layer:>7}{d_state:>8}{row['size_mb']:>9.3f}{row['top1']:>8.4f}{row['top1_std']:>7.4f}"
                  f"{row['top5']:>8.4f}{row['train_seconds']:>9.1f}{row['epochs']:>7.1f}", flush=True)
            # after every configuration: a run cut short keeps what it finished
            out.write_text(json.dumps({"dataset": Path(args.path).name, "programs": len(data),
                                       "device": args.device, "seeds": args.seeds, "results": results},
                                      indent=1) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
