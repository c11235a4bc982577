"""`tcl distill`: teach a knowledge-base model a new platform and keep the earlier ones
(tcl.continual). Its options are CKDConfig's fields, defaults included; bench/continual.py reads
the same options (add_ckd_options)."""

from __future__ import annotations

from ..continual.config import PRESERVE, CKDConfig
from ..errors import FormatError
from ..train_config import TrainConfig
from .options import (add_field, add_inputs, add_output, add_quiet, config_from_args, fraction, non_negative,
                      non_negative_number, positive)

# (flag, CKDConfig field, help, argparse keywords) in --help order
CKD_OPTIONS = (
    ("--preserve", "preserve",
     ("how the earlier platforms are kept: exact trains only the parameters that read the hardware descriptor, "
      "projected so that every earlier platform's scores stay exactly as they were (the new descriptor must "
      "differ from the earlier ones); keep trains the whole KB, held by --keep-old and --ewc-lambda"),
     {"choices": PRESERVE}),
    ("--progress-epochs", "progress_epochs", "epochs of the active column on the new platform", {"type": positive}),
    ("--compress-epochs", "compress_epochs", "epochs of the KB learning from the column", {"type": positive}),
    ("--min-steps", "min_steps", "at least this many optimizer steps per phase (more epochs on small data)",
     {"type": non_negative}),
    ("--lr", "lr", "Adam learning rate", {"type": float}),
    ("--beta", "beta", "compress: weight of the label ranking loss beside distillation", {"type": float}),
    ("--log-ratio-weight", "log_ratio_weight", "weight of a loss beside each LambdaRank label term that fits score "
     "differences to log-throughput differences within a task (0: LambdaRank alone)", {"type": non_negative_number}),
    ("--gate", "gated", "compress: weigh distillation per program by how well the column ranks it", {}),
    ("--column-from-kb", "column_from_kb", "the active column starts as a copy of the KB (off: from scratch)", {}),
    ("--alpha-init", "alpha_init", "initial gate of the column's lateral adaptors", {"type": float}),
    ("--hardware-lr", "hardware_lr", "compress: learning-rate multiplier of the descriptor-reading parameters",
     {"type": float, "metavar": "X"}),
    ("--projected-lr", "projected_lr", "exact: scale that rate by how much the projection shrinks the new descriptor",
     {}),
    ("--keep-old", "keep_old", "keep: weight of keeping the KB's rankings under the earlier descriptors (0: off)",
     {"type": float, "metavar": "MU"}),
    ("--keep-old-mix", "keep_old_mix", "keep: that term also on mixtures of two tasks' programs", {}),
    ("--ewc-lambda", "ewc_lambda", "keep: online-EWC strength (0: off)", {"type": float}),
    ("--gamma", "gamma", "online-EWC decay of the earlier platforms' Fisher", {"type": float}),
    ("--film", "hardware_film", "first platform: FiLM layers that read the descriptor (off: only its projection does)",
     {}),
    ("--film-steps", "hardware_film_steps",
     "first platform: FiLM of every step's encoder output, not only of the pooled embedding", {}),
    ("--adapter-rank", "hardware_adapter_rank",
     ("first platform: rank of the descriptor adapters, each later platform's own low-rank change of the encoder, "
      "Mamba in_proj and head (0: none)"),
     {"type": non_negative, "metavar": "R"}),
    ("--average-last", "average_last",
     "each KB is the mean of its weights over this last fraction of the epochs (0: the last epoch's)",
     {"type": fraction}),
    ("--check-fraction", "check_fraction",
     ("hold back this share of the new platform's tasks from training and keep the compress epoch (0: the KB as "
      "it came) that ranks them best (0: off, the last epoch)"), {"type": fraction}),
    ("--batch-tasks", "batch_tasks", "task groups per batch", {"type": positive}),
    ("--group-size", "group_size", "programs of one task ranked together, at most", {"type": positive}),
    ("--clip", "clip", "gradient-norm clipping", {"type": float}),
    ("--seed", "seed", "seed of the split, the sample and the training", {"type": int}),
    ("--threads", "threads", "torch threads; 1 on a machine others share", {"type": positive}),
)


def add_ckd_options(parser, skip=()):
    """CKDConfig's fields as options (those in `skip` left to the caller)."""
    group = parser.add_argument_group("continual distillation (CKDConfig)")
    for flag, field, help, kw in CKD_OPTIONS:
        if field not in skip:
            add_field(group, flag, CKDConfig, field, help, "torch's own choice" if field == "threads" else None, **kw)


def ckd_config(args) -> CKDConfig:
    return config_from_args(CKDConfig, args)


def _learn(args, cfg, learn, learn_ids):
    """(KB, EWC state, seconds, earlier platforms' records) after learning this platform."""
    from ..continual.kb import load_kb
    from ..continual.learn import first_platform, learn_platform

    if args.kb is None:
        kb, ewc, seconds = first_platform(learn, learn_ids, cfg)
        return kb, ewc, seconds, []
    old, ewc, ck = load_kb(args.kb)
    try:
        kb, ewc, seconds = learn_platform(old, ewc, learn, learn_ids, cfg)
    except ValueError as e:  # a descriptor exact preservation cannot learn under
        raise FormatError(f"{' '.join(args.paths)}: {e}") from None
    return kb, ewc, seconds, ck.get("meta", {}).get("platforms", [])


def run_distill(args):
    from dataclasses import asdict

    from ..continual.kb import save_kb
    from ..continual.learn import sampled_subset
    from ..features import featurize
    from ..program_data import ProgramData, split_tasks
    from ..scoring import score_tasks

    if args.sample is not None and not 0 < args.sample <= 1:
        raise FormatError(f"--sample takes a fraction in (0, 1], not {args.sample}")
    cfg = ckd_config(args)
    data = ProgramData(featurize(args.paths))
    train_ids, test_ids = split_tasks(data.tasks, args.test_fraction, cfg.seed)
    learn, learn_ids = data, train_ids
    if args.sample is not None:
        learn, learn_ids, _ = sampled_subset(data, train_ids, args.sample, cfg.seed, cfg.threads,
                                             progress_bar=not args.quiet)
    kb, ewc, seconds, history = _learn(args, cfg, learn, learn_ids)
    entry = {"data": [str(p) for p in args.paths], "seconds": seconds, "config": asdict(cfg),
             "programs_learned": len(learn.programs_of(learn_ids)), "sample": args.sample}
    if test_ids:
        entry["test"] = score_tasks(kb, data, test_ids)["pooled"]
    save_kb(args.out, kb, ewc, {"platforms": history + [entry]})
    msg = f"knowledge base after {ewc.platforms} platform(s), {kb.size_mb():.3f} MB, {seconds:.1f} s"
    if test_ids:
        msg += f"; held-out Top-1 {entry['test']['top1']:.4f}"
    print(f"{msg} -> {args.out}")


def add_distill(sub):
    d = sub.add_parser(
        "distill", help="continual distillation: teach a knowledge-base model a new platform, keep the old ones",
        description="Without --model: train the first knowledge base (KB) on DATA and store its state. "
        "With --model KB.pt: progress (an active column learns DATA with the KB frozen, reading its "
        "hidden states) then compress (the KB learns from the column through a gate, plus the labels; "
        "by default only the parts that read the hardware descriptor learn, so the earlier platforms' "
        "scores stay exactly as they were: see --preserve). Only the KB, its state and the new "
        "platform's data are read; the KB does not grow. Repeat platform after platform, each with a "
        "hardware descriptor (platform.json) of its own. How and why: docs/continual.md.")
    add_inputs(d, "the new platform's dataset(s)")
    add_output(d, "the new knowledge base (.pt) to write")
    d.add_argument("--model", dest="kb", default=None, metavar="KB.pt",
                   help="the knowledge base so far, from `tcl distill` (default: none, DATA is the first platform)")
    d.add_argument("--sample", type=float, default=None, metavar="FRACTION",
                   help="learn only from the programs the RDU sampler picks, this fraction of each training task's "
                   "(e.g. 0.1); latencies are looked up in DATA (default: learn from every program)")
    add_field(d, "--test-fraction", TrainConfig, "test_fraction", "tasks held out and scored when no task.json "
              "has a split", type=fraction)
    add_quiet(d)
    add_ckd_options(d)
    d.set_defaults(run=run_distill, out_is_file=True)


def add_parsers(sub):
    add_distill(sub)
