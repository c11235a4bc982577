"""How the cost model ranks on each platform, and what it is worth on a physical host it never saw.

Models, each scored on every platform's held-out tasks (task.json "split": "test") under that
platform's own hardware descriptor:
- `shipped`: the default model in the wheel (trained on every platform in datasets/, see
  docs/training.md);
- `every platform`: trained on every dataset (`tcl train`'s defaults, --seeds), as the shipped model is;
- `without HOST`: the same on every dataset except those of one physical host, i.e. zero-shot
  transfer to that host. Hosts are told apart by platform.json's vendor and CPU identity, so target
  settings of one host leave together;
  each trained once per --recipes entry: `head` (the descriptor joins at the head, `tcl train`'s
  default) and/or `film` (`tcl train --hardware-film`: it also scales and shifts the body), or
  none of them (`--recipes none`);
- any checkpoint given with `--checkpoint NAME=PATH` (e.g. an earlier default model).

Columns: pooled Top-1 / Top-5 (tcl.metrics, weighted as published) and the mean Top-1 over the
held-out tasks with at least --min-programs programs (a task of few programs is ranked right by
luck). Writes bench/results/transfer.json {platform: {model: {"top1", "top5", "task_mean", ...}}},
keeping the rows of models a run does not score;
trained checkpoints are kept under --work and reused for the same datasets (names and contents),
seed, epochs and log-ratio weight.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from tcl.atomic import write_json  # noqa: E402
from tcl.cli.options import HelpFormatter, named_checkpoint, non_negative_number  # noqa: E402
from tcl.metrics import TASK_MEAN_MIN_PROGRAMS, held_out_summary  # noqa: E402
from tcl.train_config import TrainConfig  # noqa: E402


def hosts_of(datasets: list[Path]) -> dict[str, list[Path]]:
    """The datasets grouped by the physical host they were measured on: two are of one host when every
    identity field both platform.json files record agrees (older files record fewer fields). A host's
    key names it by the identity fields all of its datasets record."""
    from tcl.tvm.hardware import same_host

    groups: list[list[dict]] = []
    for d in datasets:
        p = {**json.loads((d / "platform.json").read_text()), "_path": d}
        group = next((g for g in groups if not any(same_host(q, p) for q in g)), None)
        if group is None:
            groups.append([p])
        else:
            group.append(p)
    out = {}
    for g in groups:
        shared = [k for k in ("vendor", "cpu_family", "cpu_model_number", "cpu_model")
                  if all(q.get(k) is not None for q in g)]
        key = " ".join(str(g[0][k]) for k in shared) or g[0]["_path"].name
        out[key] = [q["_path"] for q in g]
    return out


def scores(checkpoint, dataset: Path, min_programs: int, threads: int) -> dict:
    from tcl.evaluate import evaluate

    return held_out_summary(evaluate(checkpoint, [str(dataset)], threads=threads), min_programs)


def data_stamp(datasets: list[Path]) -> str:
    """A short digest of what the datasets hold (each tuning-record file's path and size), so that a
    checkpoint kept for datasets of these names is not reused after they gained measurements."""
    import hashlib

    h = hashlib.sha1()
    for d in datasets:
        for f in sorted(d.glob("*/database_tuning_record.json*")):
            h.update(f"{f.relative_to(d.parent)} {f.stat().st_size}\n".encode())
    return h.hexdigest()[:10]


RECIPES = ("head", "film")  # film: tcl.architectures.HARDWARE_FILM, as `tcl train --hardware-film`


def trained(datasets: list[Path], seed: int, epochs: int, work: Path, threads: int, recipe: str = "head",
            log_ratio_weight: float = TrainConfig.log_ratio_weight) -> Path:
    """A checkpoint of `tcl train DATASETS --seed S --epochs E --log-ratio-weight W` (with
    --hardware-film for the film recipe), reused when already made."""
    from tcl.architectures import HARDWARE_FILM
    from tcl.train import fit

    tag = ("" if recipe == "head" else f"_{recipe}") + (f"_lr{log_ratio_weight:g}" if log_ratio_weight else "")
    out = work / f"{'+'.join(d.name for d in datasets)}_{data_stamp(datasets)}_e{epochs}_s{seed}{tag}.pt"
    if out.exists():
        print(f"  reusing {out}", file=sys.stderr)
        return out
    work.mkdir(parents=True, exist_ok=True)
    fit([str(d) for d in datasets], str(out),
        TrainConfig(epochs=epochs, seed=seed, threads=threads, log_ratio_weight=log_ratio_weight),
        model_config=HARDWARE_FILM if recipe == "film" else {}, progress=True)
    return out


def recipe_list(text: str) -> list[str]:
    if text == "none":
        return []
    names = [r for r in text.split(",") if r]
    if not names or any(r not in RECIPES for r in names):
        raise argparse.ArgumentTypeError(f"expected 'none' or a comma-separated list of {sorted(RECIPES)}, "
                                         f"got {text!r}")
    return names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("datasets", nargs="*", type=Path, help="platform datasets (default: every datasets/*/)")
    p.add_argument("--checkpoint", type=named_checkpoint, action="append", default=[], metavar="NAME=PATH",
                   help="also score this checkpoint under NAME")
    p.add_argument("--seeds", default="0", help="seeds of the trained models, comma separated")
    p.add_argument("--recipes", type=recipe_list, default=["head"], help=f"training recipes, of {sorted(RECIPES)}, or 'none' to train nothing and score only "
                        "the shipped model and the --checkpoint ones")
    p.add_argument("--leave-out", action=argparse.BooleanOptionalAction, default=True,
                   help="also train each recipe once per host without that host's datasets (zero-shot there)")
    p.add_argument("--epochs", type=int, default=TrainConfig.epochs, help="training epochs")
    p.add_argument("--log-ratio-weight", type=non_negative_number, default=TrainConfig.log_ratio_weight,
                   help="weight of the log-ratio loss beside LambdaRank in the trained models (default: %(default)s)")
    p.add_argument("--min-programs", type=int, default=TASK_MEAN_MIN_PROGRAMS,
                   help="tasks in the task mean have this many programs")
    p.add_argument("--threads", type=int, default=2, help="torch threads")
    p.add_argument("--work", type=Path, default=Path.home() / ".cache" / "tcl" / "bench-transfer",
                   help="where trained checkpoints are kept and reused")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "transfer.json", help="the summary JSON")
    args = p.parse_args(argv)
    datasets = args.datasets or sorted(d for d in (ROOT / "datasets").iterdir() if (d / "platform.json").is_file())
    seeds = [int(s) for s in args.seeds.split(",") if s]
    hosts = hosts_of(datasets)

    from tcl.evaluate import default_model_path

    models: dict[str, list[Path]] = {"shipped": [default_model_path()]}
    models.update({name: [path] for name, path in args.checkpoint})
    w = args.log_ratio_weight
    for recipe in args.recipes:
        what = ([] if args.recipes == ["head"] else [recipe]) + ([f"log-ratio {w:g}"] if w else [])
        tag = f" ({', '.join(what)})" if what else ""
        models[f"every platform{tag}"] = [trained(datasets, s, args.epochs, args.work, args.threads, recipe, w)
                                          for s in seeds]
        for own in hosts.values() if args.leave_out and len(hosts) > 1 else ():
            rest = [d for d in datasets if d not in own]
            models[f"without {'+'.join(d.name for d in own)}{tag}"] = [
                trained(rest, s, args.epochs, args.work, args.threads, recipe, w) for s in seeds]

    # rows of models this run does not score are kept from the summary already there
    results: dict = json.loads(args.out.read_text())["platforms"] if args.out.is_file() else {}
    for d in datasets:
        for name, checkpoints in models.items():
            runs = [scores(c, d, args.min_programs, args.threads) for c in checkpoints]
            mean = {k: sum(r[k] for r in runs) / len(runs) if all(r[k] is not None for r in runs) else None
                    for k in ("top1", "top5", "task_mean")}
            results.setdefault(d.name, {})[name] = {**mean, "tasks": runs[0]["tasks"], "seeds": len(runs),
                                                    "per_seed_top1": [r["top1"] for r in runs]}
            m = results[d.name][name]
            print(f"{d.name:24s} {name:40s} top1 {m['top1']:.3f} top5 {m['top5']:.3f} "
                  f"task mean {m['task_mean']:.3f} ({m['tasks']} tasks)")
    write_json(args.out, {"settings": {"seeds": seeds, "epochs": args.epochs, "recipes": args.recipes,
                                       "min_programs": args.min_programs,
                                       "hosts": {h: [d.name for d in own] for h, own in hosts.items()}},
                          "platforms": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
