"""`tcl train`, `tcl eval`, `tcl export`: a cost model from datasets, its scores, its ONNX file.

`tcl train`'s training options are the fields of tcl.train_config.TrainConfig, defaults included."""

from __future__ import annotations

import json
from pathlib import Path

from ..train_config import LR_SCHEDULES, TrainConfig
from .options import (
    add_field,
    add_inputs,
    add_json,
    add_output,
    add_quiet,
    add_threads,
    config_from_args,
    fraction,
    non_negative,
    non_negative_number,
    positive,
    with_default,
)

ARCH_NAMES = ("mamba", "tlp")  # tcl.architectures.ARCHS, named here so that --help needs no torch


def run_train(args):
    from ..architectures import HARDWARE_FILM
    from ..evaluate import evaluate
    from ..train import fit

    if args.hardware_film and args.arch != "mamba":
        raise SystemExit("tcl train: --hardware-film is an option of the mamba architecture, not of tlp")
    model_config = {"d_model": args.d_model}
    if args.arch == "mamba":
        model_config.update(n_layer=args.n_layer, d_state=args.d_state)
        if args.hardware_film:
            model_config.update(HARDWARE_FILM)
    _, ck, data, test_ids = fit(args.paths, args.out, config_from_args(TrainConfig, args), arch=args.arch,
                                model_config=model_config, progress=not args.quiet)
    m = ck["meta"]
    val = "-" if m["best_val_top1"] is None else f"{m['best_val_top1']:.4f}"
    print(f"{args.arch}: {m['programs']} programs; tasks {len(m['train_tasks'])} train, "
          f"{len(m['val_tasks'])} val, {len(m['test_tasks'])} test; {m['epochs']} epochs "
          f"(best {m['best_epoch']}, val top1 {val}{', refit on all training tasks' if m['refit'] else ''}); "
          f"{m['seconds']:.1f} s; {m['size_mb']:.3f} MB -> {args.out}")
    if test_ids:
        p = evaluate(args.out, data)["pooled"]  # the tasks the checkpoint did not see
        print(f"held-out tasks: top1 {p['top1']:.4f}, top5 {p['top5']:.4f}, pairwise {p['pairwise']:.4f}")


def run_eval(args):
    from ..evaluate import default_model_path, evaluate, format_table

    result = evaluate(args.model or default_model_path(), args.paths, all_tasks=args.all, threads=args.threads)
    print(json.dumps(result, indent=1) if args.json else format_table(result))


def run_export(args):
    from ..checkpoint import load_checkpoint
    from ..export import export_onnx

    model, ck = load_checkpoint(args.model)
    platform = None
    if args.platform:  # checked as the dataset readers check it
        from ..inputcheck import check_platform, decode_json
        from ..records import read_bytes

        platform = check_platform(args.platform, decode_json(read_bytes(args.platform), args.platform))
    export_onnx(model, args.out, platform=platform, extra={"arch": ck["arch"], "trained": ck.get("meta", {}).get("data")})
    print(f"{args.model} ({ck['arch']}, {model.size_mb():.3f} MB) -> {args.out} "
          f"({Path(args.out).stat().st_size / 1e6:.3f} MB)")


def add_train_options(t):
    """TrainConfig's fields as options."""
    add_field(t, "--epochs", TrainConfig, "epochs", "training epochs (at most, with --val-fraction)", type=positive)
    add_field(t, "--lr", TrainConfig, "lr", "Adam learning rate", type=float)
    add_field(t, "--lr-schedule", TrainConfig, "lr_schedule", "constant, or a half cosine down to 0 at the last step",
              choices=LR_SCHEDULES)
    add_field(t, "--log-ratio-weight", TrainConfig, "log_ratio_weight", "weight of a loss beside LambdaRank that "
              "fits score differences to log-throughput differences within a task (0: LambdaRank alone)",
              type=non_negative_number)
    add_field(t, "--weight-decay", TrainConfig, "weight_decay", "Adam weight decay", type=float)
    add_field(t, "--clip", TrainConfig, "clip", "gradient-norm clipping", type=float)
    add_field(t, "--batch-tasks", TrainConfig, "batch_tasks", "task groups per batch", type=positive)
    add_field(t, "--group-size", TrainConfig, "group_size", "programs of one task ranked together, at most",
              type=positive)
    add_field(t, "--min-steps", TrainConfig, "min_steps", "run more epochs when --epochs would make fewer optimizer "
              "steps than this (small datasets)", type=non_negative)
    add_field(t, "--average-last", TrainConfig, "average_last", "without validation: the saved model is the mean of "
              "its weights over this last fraction of the epochs (0: the last epoch's)", type=fraction)
    add_field(t, "--test-fraction", TrainConfig, "test_fraction", "hold out this fraction of the tasks when no "
              "task.json has a split", type=fraction)
    add_field(t, "--val-fraction", TrainConfig, "val_fraction", "validate on this fraction of the training tasks "
              "each epoch and keep the best state (0: no validation, every epoch runs)", type=fraction)
    add_field(t, "--patience", TrainConfig, "patience", "with --val-fraction: stop after this many epochs without "
              "a better validation Top-1", type=positive)
    add_field(t, "--refit", TrainConfig, "refit", "with --val-fraction: train again on all training tasks "
              "(validation tasks included) for the best epoch count")
    add_field(t, "--seed", TrainConfig, "seed", "seed of the splits, the initial weights and the shuffling", type=int)
    add_field(t, "--threads", TrainConfig, "threads", "torch threads; 1 on a machine others share",
              "torch's own choice", type=positive)


def add_train(sub):
    t = sub.add_parser(
        "train", help="train a cost model (Mamba, or the TLP baseline) on datasets",
        description="Train a cost model with LambdaRank within each task on Ansor logs and/or "
        "MetaSchedule databases. Tasks split 'test' in task.json are held out (else "
        "--test-fraction of them, by seed). By default every other task trains for --epochs and the "
        "last state is saved; with --val-fraction F, F of the training tasks validate each epoch "
        "instead (early stopping after --patience; the best state is saved, or with --refit a model "
        "trained again on all training tasks for that many epochs). Why: docs/training.md.")
    add_inputs(t)
    add_output(t, "the checkpoint file to write (e.g. model.pt)")
    t.add_argument("--arch", choices=ARCH_NAMES, default=ARCH_NAMES[0],
                   help=with_default("mamba: the cost model; tlp: the TLP-style baseline"))
    add_train_options(t)
    size = "the architecture's, see docs/training.md"
    t.add_argument("--d-model", type=positive, default=None, help=with_default("model width", size))
    t.add_argument("--n-layer", type=positive, default=None, help=with_default("mamba: layers", size))
    t.add_argument("--d-state", type=positive, default=None, help=with_default("mamba: state size", size))
    t.add_argument("--hardware-film", action="store_true",
                   help="mamba: the hardware descriptor also scales and shifts every step and the pooled embedding "
                   "(FiLM), not only joins at the head (default: off; docs/training.md)")
    add_quiet(t)
    t.set_defaults(run=run_train, out_is_file=True)


def add_eval(sub):
    e = sub.add_parser(
        "eval", help="Top-1/Top-5 and pairwise accuracy of a cost model on datasets",
        description="Score a trained model on the held-out tasks of datasets (split 'test' in "
        "task.json, else the tasks the model did not train on): Top-k per task, per network "
        "(weighted by task occurrences) and pooled over the networks the TLP way.")
    add_inputs(e)
    e.add_argument("--model", default=None, metavar="MODEL.pt",
                   help=with_default("checkpoint from `tcl train` or `tcl distill`", "the model shipped with tcl"))
    e.add_argument("--all", action="store_true", help="score every task (default: the held-out ones)")
    add_json(e)
    add_threads(e)
    e.set_defaults(run=run_eval)


def add_export(sub):
    x = sub.add_parser(
        "export", help="a trained cost model to ONNX for scoring without torch (tcl.runtime)",
        description="Export a checkpoint from `tcl train` or `tcl distill` to ONNX with a dynamic batch "
        "and sequence length (sequences padded at the end, 2 to seq_len steps), the feature spec "
        "version, the model config and the platform in its metadata, and no stack-trace metadata.")
    x.add_argument("model", metavar="MODEL.pt", help="checkpoint from `tcl train` or `tcl distill`")
    add_output(x, "the .onnx file to write")
    x.add_argument("--platform", default=None, metavar="PLATFORM.json",
                   help=with_default("platform.json of the hardware the model scores for", "none: the hardware "
                                     "vector is all zeros unless given at scoring time"))
    x.set_defaults(run=run_export, out_is_file=True)


def add_parsers(sub):
    add_train(sub)
    add_eval(sub)
    add_export(sub)
