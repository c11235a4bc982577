"""The options of `tcl collect` (no TVM import: `tcl collect --help` works without apache-tvm)."""
from __future__ import annotations

import argparse

from ..cli.options import fraction, json_object_file, names, non_negative, positive, positive_number
from .catalog import DATASET_CONV_LAYOUTS, HELD_OUT, NETWORK_NAMES, SWEEP
from .network_tuning_config import CONV_LAYOUTS

# The evolutionary search's size per task (TVM's population_size, genetic_num_iters).
POPULATION = 256
GENETIC_ITERS = 4


def add_collect_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--network", default=None,
                   help=f"network(s), comma separated: {', '.join(sorted(NETWORK_NAMES))}, or {SWEEP} "
                        "(required unless --programs-from is given)")
    p.add_argument("--out", default=None,
                   help="dataset directory, one per platform (default: datasets/<platform name>, the name "
                        "derived from the host and the target, e.g. datasets/zen1-epyc-2c)")
    p.add_argument("--programs-per-task", type=positive, default=200, help="programs measured per task (default 200)")
    p.add_argument("--target", default=None,
                   help="TVM target: JSON dict or 'llvm -mcpu=haswell -num-cores=1' (default: this CPU, all cores)")
    p.add_argument("--num-cores", type=positive, default=None, help="cores the programs use (llvm; default: all)")
    p.add_argument("--mcpu", default=None, help="LLVM CPU name (llvm), e.g. haswell, x86-64 (default: this CPU)")
    p.add_argument("--rpc", default=None, metavar="HOST:PORT",
                   help="measure through this TVM RPC tracker (default: on this machine)")
    p.add_argument("--key", default=None, help="RPC device key (required with --rpc)")
    p.add_argument("--platform-info", type=json_object_file, default=None, metavar="JSON",
                   help="JSON from `python tcl/tvm/hardware.py` run on the RPC device (default: this host's)")
    p.add_argument("--max-minutes", type=positive_number, default=None,
                   help="stop (resumably) after this long (default: run until done)")
    p.add_argument("--random-fraction", type=fraction, default=0.5,
                   help="share of random (replay-trace) programs per task; the rest come from evolutionary "
                        "search (default 0.5)")
    p.add_argument("--batch-size", type=positive, default=16, help="programs per measured batch (default 16)")
    p.add_argument("--population", type=positive, default=POPULATION,
                   help=f"population of the evolutionary search; smaller searches faster (default {POPULATION})")
    p.add_argument("--genetic-iters", type=positive, default=GENETIC_ITERS,
                   help="generations of the evolutionary search (TVM's default); fewer search faster "
                        f"(default {GENETIC_ITERS})")
    p.add_argument("--repeat", type=positive, default=3, help="measurement repeats per program (default 3)")
    p.add_argument("--min-repeat-ms", type=non_negative, default=100,
                   help="each repeat runs the program at least this long (default 100)")
    p.add_argument("--workers", type=positive, default=1,
                   help="tasks worked on at once, each in its own process: while one runs its programs the "
                        "others search and build; runs never overlap (default 1)")
    p.add_argument("--measure-cpus", default=None, metavar="IDS",
                   help="comma-separated CPU ids the programs run on; searching, building and the rest use the "
                        "other CPUs; give the target as many cores with --num-cores (default: no pinning)")
    p.add_argument("--conv-layouts", type=names, default=",".join(DATASET_CONV_LAYOUTS), metavar="LAYOUTS",
                   help="data layouts of the networks' 2-D convolutions, comma separated, from "
                        f"{', '.join(CONV_LAYOUTS)}; each layout's convolutions are tasks of their own "
                        f"(default {','.join(DATASET_CONV_LAYOUTS)})")
    p.add_argument("--as-tuned", action="store_true",
                   help="measure the programs as `tcl tune` does: the networks' weights prepacked (programs may "
                        "read them in a layout of their own) and each program timed from flushed caches, "
                        "--repeat and --min-repeat-ms aside; a platform of its own, named ...-as-tuned "
                        "(default: weights as the network has them, repeated calls on warm caches, as TVM times)")
    p.add_argument("--max-tasks", type=positive, default=None, help="work on at most this many tasks (default: all)")
    p.add_argument("--task-filter", default=None, help="only tasks whose name contains this (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the program sampling (default 0)")
    p.add_argument("--held-out", default=",".join(HELD_OUT),
                   help="networks whose tasks form the test split, comma separated, or 'none' (no split; "
                        f"default {','.join(HELD_OUT)})")
    p.add_argument("--programs-from", default=None, metavar="DIR",
                   help="re-measure the programs of this dataset (another platform) instead of sampling "
                        "(default: sample)")
    return p
