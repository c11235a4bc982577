"""Search size at the quick start's budget: whole-network tuning sessions of --minutes (no export) for
each cost model and EvolutionarySearch size, one after the other on this machine.

Per run: programs measured, when every task had one, where the time went (search, build, measure),
candidates dropped for a slow build, and the estimated network latency (sum over tasks of weight x
best measured latency) at each whole minute; per variant the mean over seeds. This is what chose
`tcl.tvm.network_tuning_config.SEARCH` and `TCL_SEARCH`.

Runs are kept under --work (one `tcl tune` output per variant and seed) and reused when made with
the same settings on the same host. Run it with nothing else on the machine.
Writes bench/results/search_size.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np

from tcl.atomic import write_json
from tcl.cli.options import HelpFormatter
from tcl.tvm.network_tuning_config import CONV_LAYOUT, CONV_LAYOUTS

RESULT = Path(__file__).resolve().parent / "results" / "search_size.json"
VARIANTS = "tcl:128x2,tcl:256x2,tcl:64x2,tcl:256x4,tcl:256x2/32,xgb:256x2,xgb:128x2"


def parse_variant(text: str) -> dict:
    """'MODEL:POPxGENS[/BATCH][@LAYOUT]' -> cost model, population, generations, batch (default 16),
    convolution layout (default: tcl tune's)."""
    try:
        text, _, layout = text.partition("@")
        model, rest = text.split(":")
        search, _, batch = rest.partition("/")
        pop, gens = search.split("x")
        v = {"cost_model": model, "population_size": int(pop), "genetic_num_iters": int(gens),
             "trials_per_iter": int(batch or 16), "conv_layout": layout or CONV_LAYOUT}
    except ValueError:
        raise argparse.ArgumentTypeError(f"variant {text!r}: expected MODEL:POPxGENS[/BATCH][@LAYOUT], "
                                         "e.g. tcl:128x2/16@NHWC") from None
    if v["conv_layout"] not in CONV_LAYOUTS:
        raise argparse.ArgumentTypeError(f"variant {text!r}: layout {layout!r} is not one of "
                                         f"{', '.join(CONV_LAYOUTS)}")
    return v


def variant_name(v: dict) -> str:
    return (f"{v['cost_model']}:{v['population_size']}x{v['genetic_num_iters']}/{v['trials_per_iter']}"
            f"@{v['conv_layout']}")


def stored_settings(marker: Path) -> dict:
    """A stored run's settings; runs stored before the layout was a setting were tuned in NCHW."""
    return {"conv_layout": "NCHW", **json.loads(marker.read_text())}


def run_settings(v: dict, seed: int, minutes: float, network: str, model: str | None = None,
                 explore: float | None = None) -> dict:
    from tcl.runtime import model_sha256
    from tcl.tvm.hardware import detect_host, platform_name

    settings = {**v, "seed": seed, "minutes": minutes, "network": network, "host": platform_name(detect_host())}
    if v["cost_model"] == "tcl":
        settings["model_sha256"] = model_sha256(model)
        if explore is not None:
            settings["explore"] = explore
    return settings


def run_dir(v: dict, seed: int, work, model: str | None = None, explore: float | None = None) -> Path:
    """Where a run is kept: named after its variant and seed, and a TCL run of another model than the
    shipped one, or with another exploration weight than tcl tune's, after that too, so that it never
    replaces the default run."""
    from tcl.runtime import model_sha256

    name = f"{variant_name(v).replace(':', '-').replace('/', '-b').replace('@', '-')}-s{seed}"
    if v["cost_model"] == "tcl":
        if model is not None:
            name += f"-m{model_sha256(model)[:8]}"
        if explore is not None:
            name += f"-e{explore:g}"
    return Path(work) / name


def estimate_at(curve, seconds: float) -> float | None:
    """The estimated network latency (ms) at `seconds` of tuning; None before every task had a program."""
    before = [est for t, est in curve if t <= seconds]
    return round(before[-1] * 1e3, 2) if before else None


def run_one(v: dict, seed: int, args) -> dict:
    from tcl.tvm.network_import import from_builtin
    from tcl.tvm.network_tuning import tune_network

    model, explore = getattr(args, "model", None), getattr(args, "explore", None)
    out = run_dir(v, seed, args.work, model, explore)
    settings = run_settings(v, seed, args.minutes, args.network, model, explore)
    marker = out / "bench_settings.json"
    if marker.is_file() and stored_settings(marker) == settings and (out / "report.json").is_file():
        print(f"  reusing {out}", file=sys.stderr)
        report = json.loads((out / "report.json").read_text())
    else:
        if out.exists():  # other settings or unfinished: tune_network would resume from its database
            shutil.rmtree(out)
        network = from_builtin(args.network, conv_layout=v["conv_layout"])
        report = tune_network(network, out, minutes=args.minutes, cost_model=v["cost_model"], model_path=model,
                              explore=explore, seed=seed, trials_per_iter=v["trials_per_iter"], measure=False,
                              label=variant_name(v),
                              search={"population_size": v["population_size"],
                                      "genetic_num_iters": v["genetic_num_iters"]})
        write_json(marker, settings)
    every_task = next((e["seconds"] for e in report["events"] if e["estimate_s"] is not None), None)
    return {"seconds": round(report["seconds"], 1), "trials": report["trials"],
            "every_task_measured_s": None if every_task is None else round(every_task, 1),
            "time_split": report["time_split"], "builds_timed_out": report.get("builds_timed_out"),
            "estimated_ms": {str(m): estimate_at(report["curve"], m * 60)
                             for m in range(1, int(math.floor(args.minutes)) + 1)}}


def mean_of(runs: list[dict], key) -> float | None:
    values = [key(r) for r in runs]
    return None if any(x is None for x in values) else round(float(np.mean(values)), 2)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    p.add_argument("--network", default="resnet18", help="a built-in network (default: %(default)s)")
    p.add_argument("--minutes", type=float, default=6.0, help="tuning minutes per run (default: %(default)s, "
                   "the quick start's)")
    p.add_argument("--variants", default=VARIANTS, help="comma separated MODEL:POPULATIONxGENERATIONS[/BATCH][@LAYOUT] "
                   "(batch: programs per measured batch, default 16; layout of the convolutions, "
                   f"{' or '.join(CONV_LAYOUTS)}, default {CONV_LAYOUT}) (default: %(default)s)")
    p.add_argument("--seeds", default="0", help="comma separated seeds (default: %(default)s)")
    p.add_argument("--seeds-of", default="tcl:128x2,tcl:256x2",
                   help="variants that run at every seed of --seeds; the others at the first (default: %(default)s)")
    p.add_argument("--model", default=None, metavar="MODEL.onnx",
                   help="the exported model of the tcl variants (default: the shipped one)")
    p.add_argument("--explore", type=float, default=None, metavar="WEIGHT",
                   help="the exploration weight of the tcl variants (default: tcl tune's)")
    p.add_argument("--work", default=os.path.expanduser("~/.cache/tcl/bench-search-size"),
                   help="where runs are kept and reused (default: %(default)s)")
    p.add_argument("--out", default=str(RESULT), help="summary JSON (default: bench/results/search_size.json)")
    args = p.parse_args(argv)
    variants = [parse_variant(t) for t in args.variants.split(",") if t]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    every_seed = {variant_name(parse_variant(t)) for t in args.seeds_of.split(",") if t}
    results = {"settings": {"network": args.network, "minutes": args.minutes, "model": args.model,
                                "explore": args.explore}, "variants": {}}
    for v in variants:
        name = variant_name(v)
        runs = {}
        for seed in (seeds if name in every_seed else seeds[:1]):
            print(f"{name}, seed {seed}, {args.minutes:g} min", file=sys.stderr)
            runs[str(seed)] = run_one(v, seed, args)
        rs = list(runs.values())
        results["variants"][name] = {
            "runs": runs, "trials": mean_of(rs, lambda r: r["trials"]),
            "every_task_measured_s": mean_of(rs, lambda r: r["every_task_measured_s"]),
            "estimated_ms": {m: mean_of(rs, lambda r: r["estimated_ms"][m]) for m in rs[0]["estimated_ms"]}}
        write_json(args.out, results)
    for name, r in results["variants"].items():
        print(f"{name:<18} seeds {len(r['runs'])}  trials {r['trials']}  every task by {r['every_task_measured_s']} s  "
              f"estimated ms by minute {r['estimated_ms']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
