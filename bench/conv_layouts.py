"""How a model ranks the networks' convolution tasks in each data layout.

`tcl tune` compiles 2-D convolutions in NHWC (tcl.tvm.network_tuning_config.CONV_LAYOUT); the
datasets began with the NCHW tasks PyTorch gives, and `tcl collect` measures both. For each network
with convolutions, the tasks whose structural hash depends on the layout (the convolutions and what
is fused with them) are scored layout by layout, apart for the training split and the held-out one
(task.json's split): how many have measured programs, the mean Top-1 over those with at least
--min-programs programs, and their pooled Top-1 (occurrences x best latency, as `tcl eval`). The
NHWC rows are the tasks a tuning run scores.
Writes bench/results/conv_layouts.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tcl.atomic import write_json
from tcl.cli.options import HelpFormatter, named_checkpoint, positive
from tcl.metrics import TASK_MEAN_MIN_PROGRAMS, evaluate_predictions, held_out_summary

ROOT = Path(__file__).resolve().parent.parent
CONV_NETWORKS = ("resnet18", "vgg11", "resnext50", "convnext_tiny", "vit_tiny", "resnet50", "mobilenet_v2")


def layout_tasks(networks, target) -> dict[str, dict[str, set[str]]]:
    """{network: {layout: structural hashes of the tasks only that layout has}}."""
    from tcl.tvm import networks as nets
    from tcl.tvm.network_tuning_config import CONV_LAYOUTS

    out = {}
    for n in networks:
        per = {layout: {t.shash for t in nets.network_tasks(n, target, conv_layout=layout)} for layout in CONV_LAYOUTS}
        shared = set.intersection(*per.values())
        out[n] = {layout: hashes - shared for layout, hashes in per.items()}
    return out


def subset_scores(pd, score, names, ids, networks, min_programs) -> dict:
    """Pooled Top-1 / Top-5 and the task mean of the tasks `ids`, each weighed by its occurrences in
    `networks`."""
    idx = pd.programs_of(ids)
    weights = {names[i]: {n: w for n, w in pd.tasks[i].networks.items() if n in networks} or {"all": 1.0}
               for i in ids}
    s = held_out_summary(evaluate_predictions(pd.cost[idx], score[idx], pd.task[idx], names, weights), min_programs)
    return {**s, "tasks_with_programs": len(ids)}


def dataset_programs(dataset: Path):
    """The dataset's programs, featurized once for every model scored."""
    from tcl.features import featurize
    from tcl.program_data import ProgramData

    return ProgramData(featurize([str(dataset)]))


def layout_scores(checkpoint, pd, hashes: dict, min_programs: int) -> dict:
    from tcl.checkpoint import load_checkpoint
    from tcl.evaluate import task_names
    from tcl.scoring import predict

    model, _ = load_checkpoint(checkpoint)
    score = predict(model, pd)
    names = task_names(pd.tasks)
    out = {}
    for split in ("train", "test"):  # the model may have trained on the first, never on the second
        for layout in next(iter(hashes.values())):
            ids_of = {n: [i for i, t in enumerate(pd.tasks) if t.split == split and t.workload in hashes[n][layout]]
                      for n in hashes}
            ids_of = {n: ids for n, ids in ids_of.items() if ids}
            rows = {n: subset_scores(pd, score, names, ids, [n], min_programs) for n, ids in ids_of.items()}
            union = sorted({i for ids in ids_of.values() for i in ids})
            if union:
                rows["all"] = subset_scores(pd, score, names, union, list(ids_of), min_programs)
            out.setdefault(split, {})[layout] = rows
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("dataset", nargs="?", default=str(ROOT / "datasets" / "intel-f6m167-xeon-1c"),
                   help="a dataset collected in both layouts (default: datasets/intel-f6m167-xeon-1c)")
    p.add_argument("--checkpoint", type=named_checkpoint, action="append", default=[], metavar="NAME=PATH",
                   help="also score this checkpoint under NAME (the shipped model is always scored)")
    p.add_argument("--networks", default=",".join(CONV_NETWORKS), help="networks with 2-D convolutions")
    p.add_argument("--min-programs", type=positive, default=TASK_MEAN_MIN_PROGRAMS,
                   help="programs a task needs to count in the task mean")
    p.add_argument("--threads", type=positive, default=1, help="torch threads")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "conv_layouts.json"), help="the summary JSON")
    args = p.parse_args(argv)

    import torch

    from tcl.evaluate import default_model_path
    from tcl.tvm.targets import default_target

    models = {"shipped": default_model_path(), **dict(args.checkpoint)}
    dataset = Path(args.dataset)
    hashes = layout_tasks(args.networks.split(","), default_target(1))
    torch.set_num_threads(args.threads)
    pd = dataset_programs(dataset)
    result = {"dataset": dataset.name, "min_programs": args.min_programs, "models": {}}
    for name, ck in models.items():
        result["models"][name] = layout_scores(ck, pd, hashes, args.min_programs)
        for split, layouts in result["models"][name].items():
            for layout, rows in layouts.items():
                for net, s in rows.items():
                    mean = "-" if s["task_mean"] is None else f"{s['task_mean']:.3f}"
                    print(f"{name:>10} {split:>5} {layout} {net:<14} pooled {s['top1']:.3f}  task mean {mean} "
                          f"({s['tasks']} of {s['tasks_with_programs']} tasks)", file=sys.stderr)
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
