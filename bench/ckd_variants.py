"""Which parts of CKD keep the old platform and learn the new one: one platform pair, compress variants.

The first platform's KB is trained once; the active column (progress) is trained once per column
start (from the KB, or fresh as in Progress & Compress); then compress runs once per variant of
(keep_old mu, EWC lambda, column start). Reported: pooled held-out Top-1 on both platforms after
compress, and forgetting on the first (its Top-1 before minus after). Writes
bench/results/ckd_variants.json. bench/continual.py runs the full method comparison; this script
is for choosing CKD's settings.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent

import tcl  # noqa: E402
from tcl.ckd import CKDConfig, compress, first_platform, progress  # noqa: E402
from tcl.train import ProgramData, score_tasks, split_tasks  # noqa: E402

DEFAULT_VARIANTS = "kb:0:0,kb:1:0,kb:3:0,kb:10:0,kb:3:1,kb:3:10,kb:3:100,fresh:0:100"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old", nargs="?", default=str(ROOT / "datasets" / "znver4-2c"), help="first platform")
    p.add_argument("new", nargs="?", default=str(ROOT / "datasets" / "haswell-1c"), help="second platform")
    p.add_argument("--variants", default=DEFAULT_VARIANTS,
                   help="comma-separated COLUMN:MU:LAMBDA (COLUMN kb or fresh; MU keep_old; LAMBDA ewc_lambda)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "ckd_variants.json"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    datas = [ProgramData(tcl.featurize(x)) for x in (args.old, args.new)]
    splits = [split_tasks(d.tasks, 0.2, args.seed) for d in datas]

    def top1(model, k):
        return score_tasks(model, datas[k], splits[k][1])["pooled"]["top1"]

    cfg = CKDConfig(seed=args.seed, threads=args.threads)
    kb, ewc, _ = first_platform(datas[0], splits[0][0], cfg)
    before = top1(kb, 0)
    result = {"old": Path(args.old).name, "new": Path(args.new).name, "seed": args.seed,
              "kb_top1_old": before, "kb_top1_new_zero_shot": top1(kb, 1), "columns": {}, "variants": []}
    print(f"KB: Top-1 {before:.4f} on {result['old']}, {result['kb_top1_new_zero_shot']:.4f} on {result['new']} (zero-shot)")
    columns = {}
    for v in args.variants.split(","):
        column, mu, lam = v.split(":")
        if column not in columns:
            t0 = time.perf_counter()
            columns[column] = progress(kb, datas[1], splits[1][0], replace(cfg, column_from_kb=column == "kb"))
            result["columns"][column] = {"top1_new": top1(columns[column], 1), "seconds": time.perf_counter() - t0}
            print(f"column from {column}: Top-1 {result['columns'][column]['top1_new']:.4f} on {result['new']}", flush=True)
        t0 = time.perf_counter()
        c = replace(cfg, keep_old=float(mu), ewc_lambda=float(lam), column_from_kb=column == "kb")
        new_kb = compress(kb, columns[column], copy.deepcopy(ewc), datas[1], splits[1][0], c)
        row = {"column": column, "keep_old": float(mu), "ewc_lambda": float(lam), "top1_old": top1(new_kb, 0),
               "top1_new": top1(new_kb, 1), "seconds": time.perf_counter() - t0}
        row["forgetting"] = before - row["top1_old"]
        row["average"] = (row["top1_old"] + row["top1_new"]) / 2
        result["variants"].append(row)
        print(f"column {column:<5} mu {mu:>4} lambda {lam:>4}: Top-1 {row['top1_old']:.4f} old, {row['top1_new']:.4f} new, "
              f"average {row['average']:.4f}, forgetting {row['forgetting']:+.4f}", flush=True)
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")  # after each variant
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
