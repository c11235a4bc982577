"""Adapting to a host left out, from a fraction of its measurements (tcl.continual.adapt).

For each physical host in datasets/ (hosts are told apart as in bench/transfer.py), the knowledge
base (KB) is distilled from the other hosts' datasets one after another (`tcl distill`'s defaults,
seed 0, kept under --work). It then adapts to the left-out host's dataset (of its datasets, the one
with the most tasks, then the most cores and the widest vectors) from the programs of its training
tasks:
- `rdu`, `random`, `diversity`, `biased_diversity` at each --rates: the sampler picks that share of
  each task's programs in rounds, starting from the KB's signals, and the KB distils them;
- `full`: the KB distils every training program (rate 1.0);
- `zero_shot`: the KB as it is, under the new host's descriptor;
- `scratch`: a model trained from scratch (`tcl train`'s defaults) on every training program;
- with --log-ratio-weight W, every method's distillation adds the log-ratio term
  (tcl.model.losses.log_ratio_loss) with weight W, stored as the method `NAME+logratioW`;
- with --preserve keep, every method's distillation trains the whole KB (CKDConfig.preserve), stored
  as the method `NAME+keep`; the KB itself is distilled as by default either way;
- with --check-fraction F, every method's distillation holds back that share of the training tasks
  and keeps the epoch that ranks them best (CKDConfig.check_fraction), stored as `NAME+checkF`;
- zero-shot distils nothing and scratch trains without the KB, so neither is rerun for a variant
  that does not change it (stored_method);
- `oracle_top`, `oracle_strata`, `oracle_best` (diagnostics, run only when named): the same share
  picked with the true latencies (bench/sampling.py's oracles), then distilled the same way; they
  ask how good an adaptation any such share can give.
Latencies are looked up in the dataset. Each run is scored on the host's held-out tasks: pooled
Top-1/Top-5 (weighted as published) and the mean Top-1 over held-out tasks with at least
--min-programs programs. `seconds_measured` is the time the picked programs spend running under
the collector's protocol (--repeat runs of at least --min-repeat-ms each), from their latencies;
builds are not counted.

Every finished run is stored at once in adapt_details.json (ignored by git) and a rerun skips the
runs stored there, so the grid can be stopped and resumed and seeds added later. Rows whose runs
were made on another machine (no stored run here) are kept in the summary. Writes
bench/results/adapt.json: {"hosts": {host: {method: {rate: {"top1", "top5", "task_mean",
"seconds_measured", "seeds"}}}}, "paired": rdu against each method run by run, and its ratio to
full, per host and rate}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sampling import ORACLES, oracle_pool_picks  # noqa: E402
from transfer import data_stamp, hosts_of  # noqa: E402

from tcl.atomic import write_json  # noqa: E402
from tcl.continual.config import PRESERVE, CKDConfig  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402
from tcl.metrics import TASK_MEAN_MIN_PROGRAMS, held_out_summary  # noqa: E402

SAMPLERS = ("rdu", "random", "diversity", "biased_diversity")
WHOLE = {"full": 1.0, "zero_shot": 0.0, "scratch": 1.0}  # methods that take no rate, with the rate they report
METRICS = ("top1", "task_mean")


def native_dataset(datasets: list[Path]) -> Path:
    """Of one host's datasets, the one adapted to: the most measured tasks (the widest held-out set to
    score on), then the most cores and the widest vectors (the host as it is)."""
    def key(d):
        p = json.loads((d / "platform.json").read_text())
        tasks = sum(1 for t in d.iterdir() if (t / "task.json").is_file())
        return (-tasks, -(p.get("cores") or 0), -(p.get("vector_bits") or 0), d.name)
    return min(datasets, key=key)


_DATA: dict = {}  # per process: each dataset is featurized once


def dataset(path: Path):
    from tcl.features import featurize
    from tcl.program_data import ProgramData, split_tasks

    if path not in _DATA:
        data = ProgramData(featurize(str(path)))
        _DATA[path] = (data, *split_tasks(data.tasks))
    return _DATA[path]


def knowledge_base(sources: list[Path], work: Path, cfg) -> Path:
    """The KB distilled from `sources` in order with CKDConfig `cfg`, each platform kept as
    tcl.continual.adapt.preservation allows (reused when made from the same datasets, names and
    contents; a lock keeps parallel runs from making it twice)."""
    import fcntl

    from tcl.continual.adapt import preservation
    from tcl.continual.kb import save_kb
    from tcl.continual.learn import first_platform, learn_platform

    out = work / f"kb_{'+'.join(d.name for d in sources)}_{data_stamp(sources)}.pt"
    work.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_file():
            kb = ewc = None
            for d in sources:
                data, train_ids, _ = dataset(d)
                print(f"  distilling {d.name} into the KB", file=sys.stderr, flush=True)
                if kb is None:
                    kb, ewc, _ = first_platform(data, train_ids, cfg)
                else:
                    kb, ewc, _ = learn_platform(kb, ewc, data, train_ids, preservation(kb, ewc, data, train_ids, cfg))
            save_kb(out, kb, ewc, {"platforms": [str(d) for d in sources]})
    return out


def seconds_measured(costs, repeat: int, min_repeat_ms: float) -> float:
    return float(sum(repeat * max(min_repeat_ms / 1000, c) for c in costs))


def scores(model, data, test_ids, min_programs: int) -> dict:
    from tcl.scoring import score_tasks

    result = score_tasks(model, data, test_ids)
    s = held_out_summary(result, min_programs)
    # per held-out network: which network moves the pooled score from run to run
    return {**{k: s[k] for k in ("top1", "top5", "task_mean")},
            "network_top1": {n: m["top1"] for n, m in result["networks"].items()}}


def run_one(host: str, target: Path, kb_path: Path, method: str, rate: float, seed: int, args) -> dict:
    import numpy as np
    import torch

    from tcl.continual.adapt import adapt, as_knowledge_base, preservation
    from tcl.continual.kb import load_kb
    from tcl.continual.learn import learn_platform
    from tcl.sampling.sampler import LookupOracle, SamplingConfig
    from tcl.train import train

    torch.set_num_threads(args.threads)
    data, train_ids, test_ids = dataset(target)
    kb, ewc, ck = load_kb(kb_path)
    ckd = CKDConfig(seed=seed, threads=args.threads, log_ratio_weight=args.log_ratio_weight, preserve=args.preserve,
                    check_fraction=args.check_fraction)
    report: dict = {}
    kb, ewc = as_knowledge_base(kb, ck, ckd)
    t0 = time.perf_counter()
    pool = data.programs_of(train_ids)
    if method == "zero_shot":
        model, measured = kb, np.zeros(0)
    elif method == "scratch":
        model, _ = train(data, train_ids, (), seed=seed, threads=args.threads, progress=False,
                         log_ratio_weight=args.log_ratio_weight)
        measured = data.cost[pool]
    elif method == "full":
        model, _, _ = learn_platform(kb, ewc, data, train_ids, preservation(kb, ewc, data, train_ids, ckd), report)
        measured = data.cost[pool]
    elif method in ORACLES:
        picks = oracle_pool_picks(data, train_ids, method, rate, seed)
        measured = data.cost[picks]
        learned = data.measured(picks, measured)
        model, _, _ = learn_platform(kb, ewc, learned, sorted({int(t) for t in learned.task}),
                                     preservation(kb, ewc, data, train_ids, ckd), report)
    else:
        cfg = SamplingConfig(method=method, fraction=rate, seed=seed, threads=args.threads)
        res = adapt(kb, ewc, data, train_ids, LookupOracle(data.cost), cfg, ckd)
        model, measured, report = res.kb, res.costs, res.check
    return {"host": host, "method": stored_method(method, variant(args)), "rate": rate, "seed": seed,
            **scores(model, data, test_ids, args.min_programs), **report,
            "programs_measured": int(len(measured)),
            "seconds_measured": seconds_measured(measured, args.repeat, args.min_repeat_ms),
            "seconds": time.perf_counter() - t0}


def variant(args) -> str:
    """The suffix of the method names of runs whose distillation differs from CKDConfig's defaults: it adds
    the log-ratio term, trains the whole KB, or keeps the epoch that ranks held-back tasks best."""
    suffix = f"+logratio{args.log_ratio_weight:g}" if args.log_ratio_weight else ""
    suffix += "+keep" if args.preserve != CKDConfig.preserve else ""
    return suffix + (f"+check{args.check_fraction:g}" if args.check_fraction else "")


def stored_method(method: str, suffix: str) -> str:
    """The name a run of `method` under the variant `suffix` is stored as: without the parts of the
    suffix that do not change its run. Zero-shot distils nothing; scratch trains a new model, which
    only the log-ratio term changes."""
    if method == "zero_shot":
        return method
    if method == "scratch":
        return method + "".join(f"+{part}" for part in suffix.split("+") if part.startswith("logratio"))
    return method + suffix


def base_method(method: str) -> str:
    """A stored method name without its variant suffix."""
    return method.split("+")[0]


def run_key(host, method, rate, seed) -> str:
    return f"{host}|{method}|{rate}|{seed}"


def summarise(runs: dict) -> dict:
    groups: dict = {}
    for r in runs.values():
        groups.setdefault(r["host"], {}).setdefault(r["method"], {}).setdefault(str(r["rate"]), []).append(r)
    out: dict = {}
    for host, by_method in groups.items():
        for method, by_rate in by_method.items():
            for rate, rs in by_rate.items():
                e = {k: statistics.mean(r[k] for r in rs) for k in ("top1", "top5", "task_mean", "seconds_measured")}
                e["seeds"] = sorted(r["seed"] for r in rs)
                out.setdefault(host, {}).setdefault(method, {})[rate] = e
    return out


def paired(runs: dict) -> dict:
    """Per host and sampled rate: rdu minus each other method on the same seed (mean, standard error,
    pairs), and rdu's ratio to the same seed's full adaptation, by both measures. A variant's runs
    (`rdu+logratio1`, ...) are paired with the same variant's, keyed by rate and suffix ("0.1+logratio1"),
    and with plain rdu."""
    out: dict = {}
    by = {(r["host"], r["method"], str(r["rate"]), r["seed"]): r for r in runs.values()}
    for (host, method, rate, seed), r in by.items():
        if base_method(method) != "rdu":
            continue
        suffix = method.removeprefix("rdu")
        entry = out.setdefault(host, {}).setdefault(rate + suffix, {})
        others = [(m, by.get((host, stored_method(m, suffix), rate, seed))) for m in (*SAMPLERS, *ORACLES)
                  if m != "rdu"]
        others += [(m, by.get((host, stored_method(m, suffix), str(WHOLE[m]), seed))) for m in WHOLE]
        if suffix:  # against the same sampler distilled without the variant
            others.append(("rdu", by.get((host, "rdu", rate, seed))))
        for m, o in others:
            if o is None:
                continue
            for metric in METRICS:
                if r[metric] is not None and o[metric] is not None:
                    entry.setdefault(f"{metric}_minus_{m}", []).append(r[metric] - o[metric])
                    if m == "full":
                        entry.setdefault(f"{metric}_ratio_to_full", []).append(r[metric] / o[metric])
            if m == "full" and o["seconds_measured"]:
                entry.setdefault("seconds_ratio_to_full", []).append(r["seconds_measured"] / o["seconds_measured"])
    for host in out.values():
        for rate, entry in host.items():
            for k, v in list(entry.items()):
                entry[k] = {"mean": statistics.mean(v), "pairs": len(v),
                            "stderr": statistics.stdev(v) / len(v) ** 0.5 if len(v) > 1 else None}
    return out


def kept_elsewhere(out: dict, previous: dict, targets: set[str]) -> None:
    """Adds to `out` the previous summary's rows (host, method, rate) and paired entries (host, rate) that
    no stored run here recomputes (their runs were made on another machine, whose details file this one
    lacks), for the hosts still adapted to. A recomputed row or entry replaces the previous one whole."""
    for host, by_method in previous.get("hosts", {}).items():
        if host in targets:
            for method, by_rate in by_method.items():
                for rate, row in by_rate.items():
                    out["hosts"].setdefault(host, {}).setdefault(method, {}).setdefault(rate, row)
    for host, by_rate in previous.get("paired", {}).items():
        if host in targets:
            for rate, entry in by_rate.items():
                out["paired"].setdefault(host, {}).setdefault(rate, entry)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("datasets", nargs="*", type=Path, help="platform datasets (default: every datasets/*/)")
    p.add_argument("--hosts", nargs="*", default=None, metavar="DATASET",
                   help="adapt only to the hosts of these dataset names (default: every host)")
    p.add_argument("--methods", nargs="+", default=[*SAMPLERS, *WHOLE], choices=[*SAMPLERS, *WHOLE, *ORACLES],
                   help="what adapts (oracle_* are diagnostics that pick with the true latencies)")
    p.add_argument("--rates", nargs="+", type=float, default=[0.05, 0.1, 0.2], help="sampled rates")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4], help="seeds of every method")
    p.add_argument("--min-programs", type=int, default=TASK_MEAN_MIN_PROGRAMS,
                   help="tasks in the task mean have this many programs")
    p.add_argument("--repeat", type=int, default=3, help="measuring protocol: runs per program (tcl collect's)")
    p.add_argument("--min-repeat-ms", type=float, default=100, help="measuring protocol: each run at least this long")
    p.add_argument("--log-ratio-weight", type=float, default=0.0,
                   help="distillation (and scratch's training) adds the log-ratio term with this weight; the runs "
                        "are stored as the methods' variants, e.g. rdu+logratio1 (default: %(default)s)")
    p.add_argument("--preserve", choices=PRESERVE, default=CKDConfig.preserve,
                   help="how distillation keeps the KB's platforms (tcl distill --preserve); runs with keep are "
                        "stored as the methods' variants, e.g. rdu+keep (default: %(default)s)")
    p.add_argument("--check-fraction", type=float, default=CKDConfig.check_fraction,
                   help="distillation holds back this share of the training tasks and keeps the epoch that ranks "
                        "them best (CKDConfig.check_fraction); the runs are stored as the methods' variants, e.g. "
                        "rdu+check0.2 (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, one process each")
    p.add_argument("--work", type=Path, default=ROOT / "build" / "adapt_kb", help="where the KBs are kept")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "adapt.json",
                   help="the summary; every run is kept beside it in <name>_details.json")
    args = p.parse_args(argv)
    datasets = args.datasets or sorted(d for d in (ROOT / "datasets").iterdir() if (d / "platform.json").is_file())
    hosts = hosts_of(datasets)
    if len(hosts) < 2:
        sys.exit("bench/adapt.py needs datasets of two or more physical hosts")
    chosen = {h: own for h, own in hosts.items() if not args.hosts or any(d.name in args.hosts for d in own)}
    details = args.out.with_name(args.out.stem + "_details.json")
    runs = json.loads(details.read_text())["runs"] if details.is_file() else {}

    todo = []
    for host, own in chosen.items():
        target = native_dataset(own)
        kb = knowledge_base([d for d in datasets if d not in own], args.work,
                            CKDConfig(threads=max(args.threads * args.jobs, 1)))
        for seed in args.seeds:
            for m in args.methods:
                for rate in ([WHOLE[m]] if m in WHOLE else args.rates):
                    if run_key(target.name, stored_method(m, variant(args)), rate, seed) not in runs:
                        todo.append((target.name, target, kb, m, rate, seed))
    print(f"{len(todo)} runs to do, {len(runs)} stored, {args.jobs} at once", file=sys.stderr)

    def record(r):
        runs[run_key(r["host"], r["method"], r["rate"], r["seed"])] = r
        print(f"  {r['host']} {r['method']:>16} rate {r['rate']:<5} seed {r['seed']}: top1 {r['top1']:.3f} "
              f"task mean {r['task_mean']:.3f} measured {r['seconds_measured']:.0f} s ({r['seconds']:.0f} s)",
              file=sys.stderr, flush=True)
        write_json(details, {"runs": runs, "load_average": os.getloadavg()})

    if args.jobs > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn")) as pool:
            for f in as_completed([pool.submit(run_one, *t, args) for t in todo]):
                record(f.result())
    else:
        for t in todo:
            record(run_one(*t, args))
    # the protocol every stored run shares; which hosts, methods, rates and seeds ran is in "hosts"
    out = {"settings": {k: getattr(args, k) for k in ("min_programs", "repeat", "min_repeat_ms", "threads")},
           "hosts": summarise(runs), "paired": paired(runs)}
    kept_elsewhere(out, json.loads(args.out.read_text()) if args.out.is_file() else {},
                   {native_dataset(own).name for own in hosts.values()})
    write_json(args.out, out)
    for host, by_method in out["hosts"].items():
        for method, by_rate in by_method.items():
            for rate, e in by_rate.items():
                print(f"{host:24s} {method:>16} {rate:>5}: top1 {e['top1']:.3f} top5 {e['top5']:.3f} task mean "
                      f"{e['task_mean']:.3f} measured {e['seconds_measured']:.0f} s ({len(e['seeds'])} seeds)")
    print(json.dumps(out["paired"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
