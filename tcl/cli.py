"""The `tcl` command. Each subcommand is a thin call into the modules; heavy dependencies (torch,
tvm) are imported only by the subcommands that need them, so `tcl --help` stays fast."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import defaultdict
from pathlib import Path

from .atomic import check_writable, write_json
from .errors import FormatError, MissingDependencyError, escape_controls


def _int_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more, got {value}")
        return value

    return parse


_positive, _non_negative = _int_at_least(1), _int_at_least(0)
# Subcommands whose --out is one file: checked before any work, so a bad path fails at once.
_FILE_OUTPUTS = ("featurize", "train", "sample", "distill", "export")


def _featurize(args):
    from .features import featurize

    fs = featurize(args.paths, errors=args.errors, threads=args.threads)
    fs.save(args.out)
    s = fs.summary()
    print(f"{s['programs']} programs, {s['tasks']} tasks, {s['failed']} failed measurements, "
          f"{s['skipped']} skipped lines, {s['truncated']} longer than L={fs.seq.shape[1]} "
          f"({fs.seconds:.2f} s) -> {args.out}")
    _report_passed_over(fs)


def _report_passed_over(fs):
    """On stderr: the malformed lines skipped (first messages) and the files passed over."""
    for e in fs.errors:
        print(f"  skipped: {escape_controls(e)}", file=sys.stderr)
    if fs.skipped > len(fs.errors):
        print(f"  ... {fs.skipped - len(fs.errors)} more malformed lines skipped", file=sys.stderr)
    for n in fs.notes:
        print(f"  note: {escape_controls(n)}", file=sys.stderr)


def dataset_info(paths, fs=None) -> dict:
    """Programs, tasks, networks and failures per platform of the datasets under `paths` (`fs`:
    their FeatureSet, when featurized already)."""
    from .features import featurize

    fs = featurize(paths) if fs is None else fs
    per = defaultdict(lambda: {"programs": 0, "tasks": 0, "failed": 0, "networks": set()})
    counts = [0] * len(fs.tasks)
    for t in fs.task:
        counts[t] += 1
    for i, t in enumerate(fs.tasks):
        name = (t.platform or {}).get("name") or t.target
        p = per[name]
        p["programs"] += counts[i]
        p["tasks"] += 1
        p["failed"] += t.failed
        p["networks"].update(t.networks)
    return {k: {**v, "networks": sorted(v["networks"])} for k, v in per.items()}


def _info(args):
    from .features import featurize

    # A summary: a malformed line (e.g. the half-written last line a killed collector leaves) is
    # counted and reported, not fatal.
    fs = featurize(args.paths, errors="skip")
    info = dataset_info(args.paths, fs)
    if fs.skipped:
        print(f"tcl info: {fs.skipped} malformed line{'s' * (fs.skipped != 1)} skipped", file=sys.stderr)
    _report_passed_over(fs)
    if args.json:
        print(json.dumps(info, indent=2))
        return
    print(f"{'platform':<40} {'programs':>9} {'tasks':>6} {'failed':>7}  networks")
    for name, v in info.items():
        nets = ", ".join(v["networks"]) or "-"
        print(f"{name[:40]:<40} {v['programs']:>9} {v['tasks']:>6} {v['failed']:>7}  {nets}")


def _pack(args):
    from .packing import pack_dataset

    for path in args.paths:
        st = pack_dataset(path, restore=args.restore)
        print(f"{path}: {'restored' if args.restore else 'packed'} {st['files']} files, "
              f"{st['bytes_before'] / 1e6:.1f} MB -> {st['bytes_after'] / 1e6:.1f} MB")


def _train(args):
    from .evaluate import evaluate
    from .train import fit

    cfg = {"d_model": args.d_model, "n_layer": args.n_layer, "d_state": args.d_state} \
        if args.arch == "mamba" else {"d_model": args.d_model}
    _, ck, data, test_ids = fit(
        args.paths, args.out, arch=args.arch, model_config=cfg, test_fraction=args.test_fraction,
        val_fraction=args.val_fraction, seed=args.seed, refit=args.refit, epochs=args.epochs, lr=args.lr,
        batch_tasks=args.batch_tasks, group_size=args.group_size, patience=args.patience,
        threads=args.threads, progress=not args.quiet)
    m = ck["meta"]
    val = "-" if m["best_val_top1"] is None else f"{m['best_val_top1']:.4f}"
    print(f"{args.arch}: {m['programs']} programs; tasks {len(m['train_tasks'])} train, "
          f"{len(m['val_tasks'])} val, {len(m['test_tasks'])} test; {m['epochs']} epochs "
          f"(best {m['best_epoch']}, val top1 {val}{', refit on all training tasks' if m['refit'] else ''}); "
          f"{m['seconds']:.1f} s; "
          f"{m['size_mb']:.3f} MB -> {args.out}")
    if test_ids:
        p = evaluate(args.out, data)["pooled"]  # the tasks the checkpoint did not see
        print(f"held-out tasks: top1 {p['top1']:.4f}, top5 {p['top5']:.4f}, "
              f"pairwise {p['pairwise']:.4f}")


def _eval(args):
    from .evaluate import default_model_path, evaluate, format_table

    result = evaluate(args.model or default_model_path(), args.paths, all_tasks=args.all,
                      threads=args.threads)
    print(json.dumps(result, indent=1) if args.json else format_table(result))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tcl",
        description="TCL: fast, portable cost models for tensor-program tuning in Apache TVM.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    f = sub.add_parser(
        "featurize",
        help="turn Ansor logs / MetaSchedule databases into model-ready arrays (.npz)",
        description="Featurize Ansor/TenSet measure-record logs and MetaSchedule JSONDatabase "
        "directories (any mix; directories are searched recursively) into an .npz with seq "
        "[N, L, D], length, task, label, cost, workload and the task table.",
    )
    f.add_argument("paths", nargs="+", help="log files and/or database directories")
    f.add_argument("--out", required=True, help="output .npz file")
    f.add_argument("--errors", choices=["raise", "skip"], default="raise",
                   help="stop at the first malformed line (default) or skip and count it")
    f.add_argument("--threads", type=_positive, default=None, help="parser threads (default: all cores)")
    f.set_defaults(run=_featurize)

    i = sub.add_parser(
        "info",
        help="programs, tasks, networks and failures per platform of a dataset",
        description="Summarise datasets (e.g. datasets/<platform>/): programs, tasks, networks "
        "and failed measurements per platform.",
    )
    i.add_argument("paths", nargs="+", help="dataset directories, databases or log files")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(run=_info)

    k = sub.add_parser(
        "pack",
        help="xz-compress a dataset's MetaSchedule databases in place (or --restore them)",
        description="Compress every database_workload.json / database_tuning_record.json under the "
        "paths to .xz in place (tcl reads them as they are; ~10x smaller for shipping). --restore "
        "writes the stock plain files back, which TVM's JSONDatabase reads; `tcl collect` restores "
        "a packed dataset by itself before it continues.",
    )
    k.add_argument("paths", nargs="+", help="dataset directories")
    k.add_argument("--restore", action="store_true", help="decompress back to stock JSONDatabase files")
    k.set_defaults(run=_pack)

    t = sub.add_parser(
        "train",
        help="train a cost model (Mamba, or the TLP baseline) on datasets",
        description="Train a cost model with LambdaRank within each task on Ansor logs and/or "
        "MetaSchedule databases. Tasks split 'test' in task.json are held out (else "
        "--test-fraction of them, by seed). By default every other task trains for --epochs and the "
        "last state is saved: on znver4-2c the held-out Top-1 swings between epochs early on and "
        "settles after ~15, so early stopping on a few validation tasks stopped too soon. With "
        "--val-fraction F, F of the training tasks validate each epoch instead (early stopping "
        "after --patience; the best state is saved, or with --refit a model trained again on all "
        "training tasks for that many epochs).",
    )
    t.add_argument("paths", nargs="+", help="log files and/or database directories")
    t.add_argument("--out", required=True, help="checkpoint file to write (e.g. model.pt)")
    t.add_argument("--arch", choices=["mamba", "tlp"], default="mamba",
                   help="model (default mamba)")
    t.add_argument("--epochs", type=_positive, default=40, help="epochs (at most, with validation; default 40)")
    t.add_argument("--lr", type=float, default=7e-4, help="Adam learning rate (default 7e-4)")
    t.add_argument("--batch-tasks", type=_positive, default=8,
                   help="task groups per batch (default 8)")
    t.add_argument("--group-size", type=_positive, default=32,
                   help="programs per task group, ranked together (default 32)")
    t.add_argument("--patience", type=_positive, default=10,
                   help="stop after this many epochs without a better validation Top-1 "
                   "(default 10)")
    t.add_argument("--test-fraction", type=float, default=0.0,
                   help="hold out this fraction of tasks when no task.json has a split")
    t.add_argument("--val-fraction", type=float, default=0.0,
                   help="fraction of training tasks used for validation and early stopping (default 0: none)")
    t.add_argument("--refit", action="store_true",
                   help="after early stopping, train again on all training tasks (validation tasks "
                   "included) for the best epoch count")
    t.add_argument("--seed", type=int, default=0, help="seed of splits, init and shuffling")
    t.add_argument("--threads", type=_positive, default=None,
                   help="torch threads (default: torch's); 1 on a machine others share")
    t.add_argument("--d-model", type=_positive, default=None,
                   help="model width (default: 128 for mamba, 256 for tlp)")
    t.add_argument("--n-layer", type=_positive, default=None, help="Mamba layers (default 1)")
    t.add_argument("--d-state", type=_positive, default=None, help="Mamba state size (default 8)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(run=_train)

    e = sub.add_parser(
        "eval",
        help="Top-1/Top-5 and pairwise accuracy of a cost model on datasets",
        description="Score a trained model on the held-out tasks of datasets (split 'test' in "
        "task.json, else the tasks the model did not train on): Top-k per task, per network "
        "(weighted by task occurrences) and pooled over the networks the TLP way.",
    )
    e.add_argument("paths", nargs="+", help="log files and/or database directories")
    e.add_argument("--model", default=None,
                   help="checkpoint from `tcl train` (default: the model shipped with tcl)")
    e.add_argument("--all", action="store_true", help="score every task, not only held-out ones")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.add_argument("--threads", type=_positive, default=None, help="torch threads (default: torch's)")
    e.set_defaults(run=_eval)

    s = sub.add_parser(
        "sample",
        help="pick the programs worth measuring (RDU active learning) and train on them",
        description="Rounds of pick -> measure -> retrain until the budget is spent. Picks combine "
        "Representativeness, Diversity (C++ kernels) and the model's MC-dropout Uncertainty, per "
        "task. --measure lookup reads latencies the data already has (experiments); --measure tvm "
        "builds and runs each pick on --target (or through --rpc) into --measure-out.",
    )
    s.add_argument("paths", nargs="+", help="datasets whose programs form the pool")
    s.add_argument("--out", required=True, help="JSON file: the picks (source, line, latency) and rounds")
    s.add_argument("--method", default="rdu",
                   choices=["rdu", "rd", "diversity", "biased_diversity", "uncertainty", "random"])
    budget = s.add_mutually_exclusive_group()
    budget.add_argument("--fraction", type=float, default=None, help="of each task's programs (default 0.1)")
    budget.add_argument("--count", type=_positive, default=None, help="programs in total, split over tasks")
    s.add_argument("--rounds", type=_positive, default=3, help="the budget is spent over this many rounds")
    s.add_argument("--epochs", type=_positive, default=20, help="training epochs per round")
    s.add_argument("--average-last", type=float, default=0.0,
                   help="each round's model is the mean of its weights over this last fraction of the "
                   "epochs (default 0: the last epoch's weights; 0.5 was worse at 10%%, see the README)")
    s.add_argument("--embedding", choices=["model", "features", "both"], default=None,
                   help="what R and D measure distances on: the model's pooled encoder output, the pooled "
                   "feature rows, or both side by side (default: features for rdu, model for the other "
                   "methods; see the README)")
    s.add_argument("--u-kind", choices=["spread", "top"], default=None,
                   help="rdu's Uncertainty: the spread of the MC-dropout scores (plus their mean, with the "
                   "default u_speed 1), or the share of MC-dropout "
                   "samples that put the program in its task's top 10%% (default: Weights in "
                   "tcl/sampling/strategies.py; see the README)")
    s.add_argument("--r-kind", choices=["density", "coverage"], default=None,
                   help="rdu's and rd's Representativeness: kNN density, or the coverage gain on the kNN graph, "
                   "updated after every pick (default: Weights in tcl/sampling/strategies.py; see the README)")
    s.add_argument("--score-axis", type=float, default=None,
                   help="rdu: weight of the predicted-score rank as one more coordinate of the space D measures "
                   "distances in, so that picks spread over each task's predicted speed (0: none; default: "
                   "Weights in tcl/sampling/strategies.py; see the README)")
    s.add_argument("--measure", choices=["lookup", "tvm"], default="lookup")
    s.add_argument("--measure-out", default="datasets/sampled", help="where --measure tvm writes")
    s.add_argument("--target", default=None, help="TVM target for --measure tvm (default: this CPU)")
    s.add_argument("--rpc", default=None, metavar="HOST:PORT", help="TVM RPC tracker for --measure tvm")
    s.add_argument("--key", default=None, help="RPC device key")
    s.add_argument("--test-fraction", type=float, default=0.0,
                   help="tasks held out of the pool (and scored, with --measure lookup)")
    s.add_argument("--model-out", default=None, help="save the final model here (tcl eval reads it)")
    s.add_argument("--init", default=None, metavar="MODEL.pt",
                   help="start from this trained model (e.g. one of another platform): round 0 uses its "
                   "signals and every round fine-tunes it (default: from scratch; see the README)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--threads", type=_positive, default=None, help="torch and kernel threads")
    s.add_argument("--quiet", action="store_true", help="no progress bars")
    s.set_defaults(run=_sample)

    d = sub.add_parser(
        "distill",
        help="continual distillation: teach a knowledge-base model a new platform, keep the old ones",
        description="Without --kb: train the first knowledge base (KB) on --data and store its "
        "EWC state. With --kb: progress (an active column learns --data with the KB frozen, "
        "reading its hidden states) then compress (the KB learns from the column through a gate, "
        "plus the labels; by default only the parts that read the hardware descriptor learn (FiLM, "
        "adapters, projection), so the "
        "earlier platforms' scores stay exactly as they were: see --preserve). Only the KB, its "
        "state and the new platform's data are read; the KB does not grow. Repeat platform after "
        "platform, each with a hardware descriptor (platform.json) of its own.",
    )
    d.add_argument("--kb", default=None, help="the knowledge base so far (omit for the first platform)")
    d.add_argument("--data", nargs="+", required=True, help="the new platform's dataset")
    d.add_argument("--out", required=True, help="the new knowledge base (.pt)")
    d.add_argument("--test-fraction", type=float, default=0.0, help="when the data has no split")
    d.add_argument("--sample", type=float, default=None, metavar="FRACTION",
                   help="learn only from the programs the RDU sampler picks, this fraction of each "
                   "training task's (e.g. 0.1); latencies are looked up in --data")
    d.add_argument("--progress-epochs", type=_positive, default=20)
    d.add_argument("--compress-epochs", type=_positive, default=20)
    d.add_argument("--min-steps", type=_non_negative, default=200,
                   help="at least this many optimizer steps per phase (more epochs on small data)")
    d.add_argument("--ewc-lambda", type=float, default=0.0,
                   help="with --preserve keep: online-EWC strength (default off: it made the KB forget "
                        "more, see tcl.ckd)")
    d.add_argument("--gamma", type=float, default=0.99, help="online-EWC decay")
    d.add_argument("--preserve", choices=("exact", "keep"), default="exact",
                   help="how the earlier platforms are kept: exact (default) trains only the parameters "
                        "that read the hardware descriptor, projected so that every earlier platform's "
                        "scores stay exactly as they were (the new descriptor must differ from the earlier "
                        "ones); keep trains the whole KB, held by --keep-old and --ewc-lambda")
    d.add_argument("--keep-old", type=float, default=1.0, metavar="MU",
                   help="with --preserve keep: weight of keeping the KB's rankings under earlier platforms' "
                        "hardware (0: off)")
    d.add_argument("--keep-old-mix", action="store_true",
                   help="keep those rankings also on mixtures of two tasks' programs (measured: README)")
    d.add_argument("--hardware-lr", type=float, default=10.0, metavar="X",
                   help="learning-rate multiplier of the descriptor-reading parameters while compressing")
    d.add_argument("--no-film", action="store_true",
                   help="first platform: no FiLM layers (the KB then reads the descriptor only through "
                        "its projection; ablation)")
    d.add_argument("--no-film-steps", action="store_true",
                   help="first platform: FiLM of the pooled embedding only, not of every step (ablation)")
    d.add_argument("--adapter-rank", type=_non_negative, default=4, metavar="R",
                   help="first platform: rank of the KB's descriptor adapters, which give each later platform "
                        "its own low-rank change of the encoder, Mamba in_proj and head (default 4; 0: none)")
    d.add_argument("--no-gate", action="store_true", help="ungated distillation (ablation)")
    d.add_argument("--fresh-column", action="store_true",
                   help="start the active column from scratch instead of from the KB (ablation)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--threads", type=_positive, default=None)
    d.set_defaults(run=_distill)

    x = sub.add_parser(
        "export",
        help="a trained cost model to ONNX for scoring without torch (tcl.runtime)",
        description="Export a checkpoint from `tcl train` to ONNX with a dynamic batch and sequence "
        "length (sequences padded at the end, 2 to seq_len steps), the feature spec version, the "
        "model config and the platform in its metadata, and no stack-trace metadata.",
    )
    x.add_argument("model", help="checkpoint from `tcl train`")
    x.add_argument("--out", required=True, help="output .onnx file")
    x.add_argument("--platform", default=None,
                   help="platform.json of the hardware the model scores for (default: none; the "
                   "hardware vector is then all zeros unless given at scoring time)")
    x.set_defaults(run=_export)

    u = sub.add_parser(
        "tune",
        help="tune a network's heaviest tasks (or a workload) with TCL or TVM's cost models (needs apache-tvm)",
        description="Extract a network's tasks (or one workload), tune the heaviest with MetaSchedule's "
        "evolutionary search guided by the chosen cost model, compile and time the network against "
        "the untuned build and PyTorch eager. --compare runs other cost models with the same budget "
        "and prints them side by side. Writes report.json and report.png per cost model under --out.",
    )
    what = u.add_mutually_exclusive_group(required=True)
    what.add_argument("--network", help="resnet18, resnet50, mobilenet_v2, vgg11, vit_tiny, bert_tiny, bert_base, dcgan")
    what.add_argument("--workload", help="e.g. matmul:128,128,128 (a ms.testing.te_workload function and its args)")
    u.add_argument("--trials", type=_positive, default=64, help="measured programs per task")
    u.add_argument("--max-tasks", type=_non_negative, default=4, help="tune this many of the heaviest tasks (0: all)")
    u.add_argument("--cost-model", choices=["tcl", "xgb", "mlp", "random"], default="tcl")
    u.add_argument("--compare", nargs="*", default=[], choices=["tcl", "xgb", "mlp", "random"],
                   help="also tune with these cost models (same tasks, same budget)")
    u.add_argument("--model", default=None, help="TCL ONNX model (default: the one shipped with tcl)")
    u.add_argument("--explore", type=float, default=None,
                   help="weight of TCL's exploration bonus (its ridge's predictive spread: favours candidates "
                   "unlike the ones measured so far); 0 ranks by predicted speed alone (default: 0.5)")
    u.add_argument("--mlp-data", default=None,
                   help="dataset the mlp cost model (TVM's MLPModel) is pretrained on, as TenSet-MLP is; "
                   "cached under ~/.cache/tcl (default: datasets/znver4-2c of a source checkout)")
    u.add_argument("--target", default=None, help="TVM target (default: this CPU, all cores)")
    u.add_argument("--rpc", default=None, metavar="HOST:PORT", help="measure through this TVM RPC tracker")
    u.add_argument("--key", default=None, help="RPC device key")
    u.add_argument("--out", default="tune-out", help="output directory")
    u.add_argument("--seed", type=int, default=0)
    u.add_argument("--no-end-to-end", action="store_true", help="skip compiling and timing the whole network")
    u.set_defaults(run=_tune)

    c = sub.add_parser(
        "collect",
        help="measure programs of networks' tuning tasks with TVM into a dataset (needs apache-tvm)",
        description="Extract the tuning tasks of networks (or the operator sweep), sample programs "
        "(random + evolutionary), measure them with TVM's LocalRunner or through an RPC tracker, "
        "and store one stock MetaSchedule JSONDatabase per task plus platform.json. Resumable: "
        "run the same command again to continue.",
    )
    from .tvm.collect_options import add_collect_arguments  # no TVM import: --help is fast without it

    add_collect_arguments(c)
    c.set_defaults(run=_collect)
    return p


def _sample(args):
    from .features import featurize
    from .sampling.sampler import LookupOracle, SamplingConfig, run_sampling
    from .sampling.strategies import Weights
    from .train import ProgramData, load_checkpoint, save_checkpoint, score_tasks, split_tasks

    init, arch = None, "mamba"
    if args.init:
        init, ck = load_checkpoint(args.init)
        arch = ck["arch"]
    fs = featurize(args.paths)
    data = ProgramData(fs)
    pool_ids, test_ids = split_tasks(data.tasks, args.test_fraction, args.seed)
    fraction = args.fraction if args.fraction is not None or args.count is not None else 0.1
    kinds = {k: v for k, v in (("u_kind", args.u_kind), ("r_kind", args.r_kind), ("score_axis", args.score_axis))
             if v is not None}
    weights = dataclasses.replace(Weights(), **kinds)
    cfg = SamplingConfig(method=args.method, fraction=fraction, count=args.count, rounds=args.rounds,
                         epochs=args.epochs, embedding=args.embedding, seed=args.seed, threads=args.threads,
                         average_last=args.average_last, weights=weights, arch=arch, init_model=init)
    if args.measure == "tvm":
        from .tvm.oracle import TVMOracle

        oracle = TVMOracle(fs, args.measure_out, args.target, args.rpc, args.key)
    else:
        oracle = LookupOracle(data.cost)
    try:
        res = run_sampling(data, pool_ids, cfg, oracle, progress=not args.quiet)
    finally:
        if hasattr(oracle, "close"):
            oracle.close()
    pool = len(data.programs_of(pool_ids))
    out = {"method": args.method, "pool": pool, "measured": int(len(res.selected)), "rounds": res.rounds,
           "picks": [{"source": fs.sources[fs.source[i]], "line": int(fs.line[i]), "seconds": float(c)}
                     for i, c in zip(res.selected, res.costs)]}
    msg = f"measured {len(res.selected)} of {pool} programs ({len(res.selected) / max(pool, 1):.1%})"
    if test_ids and args.measure == "lookup":
        out["test"] = score_tasks(res.model, data, test_ids)["pooled"]
        msg += f"; held-out Top-1 {out['test']['top1']:.4f}, Top-5 {out['test']['top5']:.4f}"
    write_json(args.out, out)
    if args.model_out:
        save_checkpoint(args.model_out, res.model, cfg.arch, {"sampling": {k: v for k, v in out.items() if k != "picks"},
                                                               "data": [str(p) for p in args.paths]})
    print(f"{msg} -> {args.out}")


def _distill(args):
    from dataclasses import asdict

    from .ckd import CKDConfig, first_platform, learn_platform, load_kb, sampled_subset, save_kb
    from .features import featurize
    from .train import ProgramData, score_tasks, split_tasks

    cfg = CKDConfig(progress_epochs=args.progress_epochs, compress_epochs=args.compress_epochs,
                    min_steps=args.min_steps, ewc_lambda=args.ewc_lambda, gamma=args.gamma, gated=not args.no_gate,
                    preserve=args.preserve, keep_old=args.keep_old, keep_old_mix=args.keep_old_mix,
                    hardware_lr=args.hardware_lr, hardware_film=not args.no_film,
                    hardware_film_steps=not args.no_film_steps, hardware_adapter_rank=args.adapter_rank,
                    column_from_kb=not args.fresh_column,
                    seed=args.seed, threads=args.threads)
    data = ProgramData(featurize(args.data))
    train_ids, test_ids = split_tasks(data.tasks, args.test_fraction, args.seed)
    learn, learn_ids = data, train_ids
    if args.sample is not None:
        if not 0 < args.sample <= 1:
            raise FormatError(f"--sample takes a fraction in (0, 1], not {args.sample}")
        learn, learn_ids, _ = sampled_subset(data, train_ids, args.sample, args.seed, args.threads, progress_bar=True)
    if args.kb is None:
        kb, ewc, seconds = first_platform(learn, learn_ids, cfg)
        history = []
    else:
        old, ewc, ck = load_kb(args.kb)
        try:
            kb, ewc, seconds = learn_platform(old, ewc, learn, learn_ids, cfg)
        except ValueError as e:  # a descriptor exact preservation cannot learn under
            raise FormatError(f"{' '.join(args.data)}: {e}") from None
        history = ck.get("meta", {}).get("platforms", [])
    entry = {"data": [str(p) for p in args.data], "seconds": seconds, "config": asdict(cfg),
             "programs_learned": len(learn.programs_of(learn_ids)), "sample": args.sample}
    if test_ids:
        entry["test"] = score_tasks(kb, data, test_ids)["pooled"]
    save_kb(args.out, kb, ewc, {"platforms": history + [entry]})
    msg = f"knowledge base after {ewc.platforms} platform(s), {kb.size_mb():.3f} MB, {seconds:.1f} s"
    if test_ids:
        msg += f"; held-out Top-1 {entry['test']['top1']:.4f}"
    print(f"{msg} -> {args.out}")


def _export(args):
    from .export import export_onnx
    from .train import load_checkpoint

    model, ck = load_checkpoint(args.model)
    platform = None
    if args.platform:  # checked as the dataset readers check it
        from .inputcheck import check_platform, decode_json
        from .records import read_bytes

        platform = check_platform(args.platform, decode_json(read_bytes(args.platform), args.platform))
    export_onnx(model, args.out, platform=platform, extra={"arch": ck["arch"], "trained": ck.get("meta", {}).get("data")})
    print(f"{args.model} ({ck['arch']}, {model.size_mb():.3f} MB) -> {args.out} "
          f"({Path(args.out).stat().st_size / 1e6:.3f} MB)")


def _tune(args):
    from .tvm.tune import tune

    rows = []
    for kind in [args.cost_model] + [k for k in args.compare if k != args.cost_model]:
        r = tune(Path(args.out) / kind, network=args.network, workload=args.workload, trials=args.trials,
                 cost_model=kind, model_path=args.model, target=args.target, rpc=args.rpc, key=args.key,
                 max_tasks=args.max_tasks or None, seed=args.seed, measure_end_to_end=not args.no_end_to_end, mlp_data=args.mlp_data,
                 explore=args.explore)
        rows.append((kind, r))
    print(f"{'cost model':<11}{'tuning s':>9}{'weighted best ms':>18}{'network ms':>12}{'untuned ms':>12}{'PyTorch ms':>12}")
    def ms_(v):
        return f"{v * 1e3:12.2f}" if v is not None else f"{'-':>12}"

    for kind, r in rows:
        e2e = r.get("end_to_end", {})
        print(f"{kind:<11}{r['seconds']:>9.0f}{r['weighted_best_s'] * 1e3:>18.3f}{ms_(e2e.get('tuned_s'))}"
              f"{ms_(e2e.get('untuned_s'))}{ms_(e2e.get('pytorch_eager_s'))}")
    print(f"reports: {Path(args.out)}/<cost model>/report.json")


def _collect(args):
    try:
        from .tvm.collect import CollectError, run_collect
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in ("tvm", "tvm_ffi", "torch", "psutil", "cloudpickle", "xgboost"):
            raise MissingDependencyError(e.name.split(".")[0], "tvm", "tcl collect") from None
        raise

    try:
        run_collect(args)
    except CollectError as e:
        raise FormatError(str(e)) from None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    try:
        if args.command in _FILE_OUTPUTS and getattr(args, "out", None) is not None:
            check_writable(args.out)
        args.run(args)
    except (FormatError, MissingDependencyError, OSError) as e:  # OSError: unreadable paths
        print(f"tcl {args.command}: error: {escape_controls(str(e))}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
