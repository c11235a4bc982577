"""Which parts of CKD keep the old platform and learn the new one: one platform pair, compress variants.

The first platform's KB is trained once; the active column (progress) is trained once per column
start (from the KB, or fresh as in Progress & Compress); then compress runs once per variant.
A variant is a set of CKDConfig fields, `field=value` joined by commas (e.g.
`keep_old=3,column_from_kb=false,compress_epochs=40`); variants are separated by `;`.
Reported: pooled held-out Top-1 on both platforms after compress, forgetting on the first (its
Top-1 before minus after), the new platform's held-out Top-1 after each compress epoch (before any
averaging) and on its training tasks, and how differently the
new KB ranks the new held-out programs under the new and the old descriptor (median Spearman), and
how closely, under the old descriptor, it keeps the incoming KB's ranking on the new platform's
training and held-out tasks.
With --kb the KB is a stored one (e.g. after two platforms, from `tcl distill`), so the
variants can be compared on a third platform; the first dataset is then only scored.
Writes bench/results/ckd_variants.json. bench/continual.py runs the full method comparison; this
script is for choosing CKD's settings.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent

import tcl  # noqa: E402
from tcl.atomic import atomic_path, write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402
from tcl.continual import (  # noqa: E402
    ActiveColumn,
    CKDConfig,
    compress,
    first_platform,
    load_kb,
    platform_hardware,
    progress,
    save_kb,
)
from tcl.metrics import spearman  # noqa: E402
from tcl.program_data import ProgramData, split_tasks  # noqa: E402
from tcl.scoring import score_tasks  # noqa: E402

DEFAULT_VARIANTS = "keep_old=0;keep_old=1,hardware_lr=1;keep_old=1"


def parse_variant(text: str) -> dict:
    """'keep_old=3,column_from_kb=false' -> {'keep_old': 3.0, 'column_from_kb': False} (typed as CKDConfig)."""
    types = {f.name: f.type for f in dataclasses.fields(CKDConfig)}
    out = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in types:
            raise SystemExit(f"unknown CKDConfig field {key!r}; fields: {', '.join(types)}")
        kind = types[key] if isinstance(types[key], str) else types[key].__name__
        if kind == "bool":
            out[key] = value.strip().lower() in ("1", "true", "yes")
        elif kind.startswith("int"):  # int, or int | None
            out[key] = int(value)
        elif kind == "str":
            out[key] = value.strip()
        else:
            out[key] = float(value)
    return out


def median_task_spearman(a: np.ndarray, b: np.ndarray, task: np.ndarray) -> float:
    """Median over tasks (of more than two programs) of the Spearman correlation of a and b."""
    return float(np.median([spearman(a[task == t], b[task == t]) for t in np.unique(task) if (task == t).sum() > 2]))


@torch.no_grad()
def descriptor_spearman(model, data: ProgramData, task_ids, old_hardware) -> float:
    """Median over these tasks of the Spearman correlation between the model's scores of the
    tasks' programs under their own descriptor and under the old platform's: near 1 means the
    model ranks them alike for both platforms."""
    idx = data.programs_of(task_ids)
    seq, lengths, workload, hardware = data.inputs(idx)
    own = model(seq, lengths, workload, hardware).numpy()
    old = model(seq, lengths, workload, torch.tensor(old_hardware).expand(len(idx), -1)).numpy()
    return median_task_spearman(own, old, data.task[idx])


@torch.no_grad()
def old_descriptor_agreement(new_kb, kb, data: ProgramData, task_ids, old_hardware) -> float:
    """Median over these tasks of the Spearman correlation between the new KB's and the incoming
    KB's scores of the tasks' programs, both under the old platform's descriptor: what the
    old-hardware term asks for (1 = the old ranking kept). On the new platform's training tasks
    compress sees these programs; on its held-out tasks it does not."""
    idx = data.programs_of(task_ids)
    seq, lengths, workload, _ = data.inputs(idx)
    hw = torch.tensor(old_hardware).expand(len(idx), -1)
    return median_task_spearman(new_kb(seq, lengths, workload, hw).numpy(), kb(seq, lengths, workload, hw).numpy(),
                                data.task[idx])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("old", nargs="?", default=str(ROOT / "datasets" / "znver4-2c"), help="first platform")
    p.add_argument("new", nargs="?", default=str(ROOT / "datasets" / "haswell-1c"), help="second platform")
    p.add_argument("--variants", default=DEFAULT_VARIANTS,
                   help="';'-separated variants, each comma-separated CKDConfig field=value")
    p.add_argument("--base", default="", help="comma-separated CKDConfig field=value for the first KB, the column and "
                   "every variant (e.g. hardware_adapter_rank=4)")
    p.add_argument("--kb", help="start from this knowledge base (e.g. `tcl distill`'s after two platforms) instead of "
                   "training one on the first platform, which is then only scored (the platform the KB learned last)")
    p.add_argument("--seed", type=int, default=0, help="seed of every variant")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "ckd_variants.json"), help="the summary JSON")
    p.add_argument("--cache", help="directory keeping the first KB and the columns between runs (keyed by the two datasets "
                        "and the seed only: empty it after changing how they train)")
    args = p.parse_args(argv)
    variants = [parse_variant(v) for v in args.variants.split(";")]
    torch.set_num_threads(args.threads)
    datas = [ProgramData(tcl.featurize(x)) for x in (args.old, args.new)]
    splits = [split_tasks(d.tasks, 0.2, args.seed) for d in datas]

    def top1(model, k, part=1):  # part 1: held-out tasks, 0: training tasks
        return score_tasks(model, datas[k], splits[k][part])["pooled"]["top1"]

    cfg = CKDConfig(seed=args.seed, threads=args.threads, **parse_variant(args.base))
    start = f"{Path(args.kb).stem}-" if args.kb else ""
    cache = Path(args.cache) / f"{start}{Path(args.old).name}-{Path(args.new).name}-s{args.seed}" if args.cache else None
    if args.kb:
        kb, ewc, _ = load_kb(args.kb)
    elif cache and (cache / "kb.pt").exists():
        kb, ewc, _ = load_kb(cache / "kb.pt")
    else:
        kb, ewc, _ = first_platform(datas[0], splits[0][0], cfg)
        if cache:
            cache.mkdir(parents=True, exist_ok=True)
            save_kb(cache / "kb.pt", kb, ewc, {})
    old_hw = platform_hardware(datas[0], splits[0][0])[0]
    before = top1(kb, 0)
    result = {"old": Path(args.old).name, "new": Path(args.new).name, "kb": args.kb, "seed": args.seed,
              "base": parse_variant(args.base),
              "kb_top1_old": before, "kb_top1_new_zero_shot": top1(kb, 1), "columns": {}, "variants": []}
    print(f"KB: Top-1 {before:.4f} on {result['old']}, {result['kb_top1_new_zero_shot']:.4f} on {result['new']} (zero-shot)")
    columns = {}
    for v in variants:
        c = replace(cfg, **v)
        column = "kb" if c.column_from_kb else "fresh"
        if column not in columns:
            t0 = time.perf_counter()
            stored = cache / f"column-{column}.pt" if cache else None
            if stored and stored.exists():
                columns[column] = ActiveColumn(kb, c.alpha_init, c.column_from_kb)
                columns[column].load_state_dict(torch.load(stored, weights_only=True))
                columns[column].eval()
            else:
                columns[column] = progress(kb, datas[1], splits[1][0], c)
                if stored:
                    with atomic_path(stored) as tmp:  # a killed run leaves no half-written cache entry
                        torch.save(columns[column].state_dict(), tmp)
            result["columns"][column] = {"top1_new": top1(columns[column], 1), "seconds": time.perf_counter() - t0}
            print(f"column from {column}: Top-1 {result['columns'][column]['top1_new']:.4f} on {result['new']}", flush=True)
        t0 = time.perf_counter()
        per_epoch = []
        new_kb = compress(kb, columns[column], copy.deepcopy(ewc), datas[1], splits[1][0], c,
                          on_epoch=lambda epoch, student: per_epoch.append(top1(student, 1)))
        row = {"variant": v, "top1_old": top1(new_kb, 0), "top1_new": top1(new_kb, 1), "top1_new_per_epoch": per_epoch,
               "seconds": time.perf_counter() - t0, "top1_new_train": top1(new_kb, 1, part=0),
               "descriptor_spearman": descriptor_spearman(new_kb, datas[1], splits[1][1], old_hw),
               "old_agreement_train": old_descriptor_agreement(new_kb, kb, datas[1], splits[1][0], old_hw),
               "old_agreement_test": old_descriptor_agreement(new_kb, kb, datas[1], splits[1][1], old_hw)}
        row["forgetting"] = before - row["top1_old"]
        row["average"] = (row["top1_old"] + row["top1_new"]) / 2
        result["variants"].append(row)
        print(f"{v}: Top-1 {row['top1_old']:.4f} old, {row['top1_new']:.4f} new "
              f"({row['top1_new_train']:.4f} on its training tasks), average {row['average']:.4f}, "
              f"forgetting {row['forgetting']:+.4f}, descriptor Spearman {row['descriptor_spearman']:.3f}, "
              f"old-descriptor agreement {row['old_agreement_train']:.3f} training / {row['old_agreement_test']:.3f} "
              "held-out tasks", flush=True)
        write_text(Path(args.out), json.dumps(result, indent=1) + "\n")  # after each variant
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
