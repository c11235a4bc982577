"""`tcl sample`: pick the programs worth measuring (RDU active learning), measure them, train on them.

The sampling options are the fields of tcl.sampling.sampler.SamplingConfig and of its Weights,
defaults included; the method names come from tcl.sampling.methods."""

from __future__ import annotations

import argparse
import dataclasses

from ..atomic import write_json
from ..sampling.methods import get_method, method_names
from ..sampling.sampler import SamplingConfig
from ..sampling.strategies import Weights
from ..train_config import TrainConfig
from .options import (add_field, add_inputs, add_output, add_quiet, config_from_args, fraction, non_negative, positive,
                      with_default)


def _config(args, arch: str, init) -> SamplingConfig:
    weights = dataclasses.replace(Weights(), u_kind=args.u_kind, r_kind=args.r_kind, score_axis=args.score_axis)
    return config_from_args(SamplingConfig, args, weights=weights, arch=arch, init_model=init)


def _oracle(args, fs, data):
    if args.measure == "tvm":
        from ..tvm.oracle import TVMOracle

        return TVMOracle(fs, args.measure_out, args.target, args.rpc, args.key)
    from ..sampling.sampler import LookupOracle

    return LookupOracle(data.cost)


def run_sample(args):
    from ..checkpoint import load_checkpoint, save_checkpoint
    from ..features import featurize
    from ..program_data import ProgramData, split_tasks
    from ..sampling.sampler import run_sampling
    from ..scoring import score_tasks

    init, arch = None, "mamba"
    if args.init:
        init, ck = load_checkpoint(args.init)
        arch = ck["arch"]
    fs = featurize(args.paths)
    data = ProgramData(fs)
    pool_ids, test_ids = split_tasks(data.tasks, args.test_fraction, args.seed)
    cfg = _config(args, arch, init)
    oracle = _oracle(args, fs, data)
    try:
        res = run_sampling(data, pool_ids, cfg, oracle, progress=not args.quiet)
    finally:
        if hasattr(oracle, "close"):
            oracle.close()
    pool = len(data.programs_of(pool_ids))
    out = {"method": args.method, "pool": pool, "measured": len(res.selected), "rounds": res.rounds,
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


def _add_picking(s):
    add_field(s, "--method", SamplingConfig, "method", "how programs are picked", choices=method_names())
    budget = s.add_mutually_exclusive_group()
    add_field(budget, "--fraction", SamplingConfig, "fraction", "budget: this fraction of each task's programs",
              type=float)
    add_field(budget, "--count", SamplingConfig, "count", "budget: programs in total, split over the tasks "
              "(instead of --fraction)", "none", type=positive)
    add_field(s, "--rounds", SamplingConfig, "rounds", "the budget is spent over this many rounds", type=positive)
    own = ", ".join(f"{name}: {get_method(name).embedding}" for name in method_names())
    add_field(s, "--embedding", SamplingConfig, "embedding", "what R and D measure distances on: the model's pooled "
              "encoder output, the pooled feature rows, or both side by side", f"the method's own; {own}",
              choices=["model", "features", "both"])
    w = Weights()
    s.add_argument("--u-kind", choices=["spread", "top"], default=w.u_kind,
                   help=with_default("rdu's Uncertainty: the spread of the MC-dropout scores (plus their mean), or "
                                     "the share of MC-dropout samples that put the program in its task's top"))
    s.add_argument("--r-kind", choices=["density", "coverage"], default=w.r_kind,
                   help=with_default("Representativeness: kNN density, or the coverage gain on the kNN graph, "
                                     "updated after every pick"))
    s.add_argument("--score-axis", type=float, default=w.score_axis,
                   help=with_default("rdu: weight of the predicted-score rank as one more coordinate of the space "
                                     "D measures distances in (0: none)"))


def _add_training(s):
    add_field(s, "--epochs", SamplingConfig, "epochs", "training epochs per round", type=positive)
    add_field(s, "--min-steps", SamplingConfig, "min_steps", "... but at least this many optimizer steps per round",
              type=non_negative)
    add_field(s, "--average-last", SamplingConfig, "average_last", "each round's model is the mean of its weights "
              "over this last fraction of the epochs (0: the last epoch's)", type=fraction)
    s.add_argument("--model", dest="init", default=None, metavar="MODEL.pt",
                   help=with_default("start from this trained model (e.g. one of another platform): round 0 uses "
                                     "its signals and every round fine-tunes it", "from scratch"))
    s.add_argument("--init", dest="init", help=argparse.SUPPRESS)  # the earlier spelling of --model
    s.add_argument("--model-out", default=None, metavar="MODEL.pt",
                   help=with_default("save the final model here (tcl eval reads it)", "not saved"))


def _add_measuring(s):
    s.add_argument("--measure", choices=["lookup", "tvm"], default="lookup",
                   help=with_default("lookup: read the latencies the data already has (experiments); tvm: build "
                                     "and run each pick"))
    s.add_argument("--measure-out", default="datasets/sampled", help=with_default("where --measure tvm writes"))
    s.add_argument("--target", default=None, help=with_default("TVM target for --measure tvm", "this CPU"))
    s.add_argument("--rpc", default=None, metavar="HOST:PORT",
                   help=with_default("TVM RPC tracker for --measure tvm", "measure on this machine"))
    s.add_argument("--key", default=None, help=with_default("RPC device key (with --rpc)", "none"))


def add_sample(sub):
    s = sub.add_parser(
        "sample", help="pick the programs worth measuring (RDU active learning) and train on them",
        description="Rounds of pick -> measure -> retrain until the budget is spent. Picks combine "
        "Representativeness, Diversity (C++ kernels) and the model's MC-dropout Uncertainty, per "
        "task. --measure lookup reads latencies the data already has (experiments); --measure tvm "
        "builds and runs each pick on --target (or through --rpc) into --measure-out. Why the "
        "defaults: docs/sampling.md.")
    add_inputs(s, "datasets whose programs form the pool")
    add_output(s, "JSON file to write: the picks (source, line, latency) and the rounds")
    _add_picking(s)
    _add_training(s)
    _add_measuring(s)
    add_field(s, "--test-fraction", TrainConfig, "test_fraction", "tasks held out of the pool when no task.json "
              "has a split (scored with --measure lookup)", type=fraction)
    add_field(s, "--seed", SamplingConfig, "seed", "seed of the split, the picks and the training", type=int)
    add_field(s, "--threads", SamplingConfig, "threads", "torch and kernel threads", "torch's own choice",
              type=positive)
    add_quiet(s)
    s.set_defaults(run=run_sample, out_is_file=True)


def add_parsers(sub):
    add_sample(sub)
