"""Training from a fraction of the measurements: RDU against the baselines, and the sampler's speed.

1. Accuracy: for each platform (a dataset directory with platform.json, or each path given), for
   each method and sampling rate, run the sampling loop on the training tasks (latencies looked up
   in the dataset), train, and score pooled Top-1/Top-5 on the held-out tasks (task.json split, else
   --test-fraction of the tasks). Several seeds; mean and spread. Rate 1.0 = every training program.
2. Speed: the sampler's selection (kNN representativeness + greedy R+D+U) at 10k, 50k and 100k
   programs (tasks of --task-size programs, --dim-wide embeddings): C++ kernels vs the numpy reference.
3. With --warm-start, every run starts from a model of another platform (the one before it in the
   list, cyclically) trained on all of that platform's training programs with the same seed, and
   fine-tunes it: the sampler's round 0 uses that model's signals, and the 100% rows fine-tune it on
   every training program. This is the situation the sampler is for, adapting a cost model to new
   hardware. Each source model is trained by the first run that needs it and kept under
   build/sampling_sources/.
   --reference DETAILS sets RDU run by run against another invocation's runs too: its ratio to their
   100% runs (e.g. from scratch) and its difference from their sampled runs (e.g. another RDU form).
4. --methods oracle_top oracle_strata oracle_best (diagnostics, not samplers, never run unless
   named): picks made with the true latencies, trained like the sampler's last round; how good a
   model any 10% can give.
5. Every sampled run also records where its picks lie on each task's true latency order
   (pick_coverage: the largest gap between neighbouring picks in rank quantile, and how close the
   best pick is to the task's best), printed per method: what the oracles get right that a
   sampler may not.

Runs are (platform, method, rate, seed): 10% and 100% for every seed first, then the other rates
seed by seed (the longest runs first within each); --jobs N runs N at once, one spawned process
each. Every finished run is written at once and a rerun with the same settings skips the runs
already stored (--fresh starts over), so the grid (hours on two cores) can be stopped and resumed.
The speed part runs after the accuracy runs, alone, and is kept from an earlier invocation with
the same sizes.

Prints tables, writes bench/results/sampling.json ({platform: {method: {rate: mean top1}}}),
sampling_details.json (every run, spreads, RDU run by run against the others, speed) and
sampling.png (Top-1 vs rate).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

import tcl  # noqa: E402
from tcl.sampling import reference  # noqa: E402
from tcl.sampling.methods import REGISTRY, get_method, method_names  # noqa: E402
from tcl.sampling.sampler import (EMBEDDINGS, LookupOracle, SamplingConfig, run_sampling, sampling_pool,  # noqa: E402
                                  train_on_measured)
from tcl.sampling.strategies import Weights, normalize_per_group, per_task_budget, select  # noqa: E402
from tcl.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from tcl.program_data import ProgramData, split_tasks, task_key  # noqa: E402
from tcl.scoring import score_tasks  # noqa: E402
from tcl.train import train  # noqa: E402
from tcl.atomic import save_figure, write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402


_DATA: dict = {}  # per process: each platform's data is featurized once


def platform_data(path):
    if path not in _DATA:
        _DATA[path] = ProgramData(tcl.featurize(path))
    return _DATA[path]


SOURCE_DIR = ROOT / "build" / "sampling_sources"


def source_model_path(source: str, seed: int, args) -> Path:
    # the settings that change the source model are in its name, so other settings train their own
    return SOURCE_DIR / (f"{source}_s{seed}_e{args.epochs * args.rounds}_avg{args.average_last}"
                         f"_test{args.test_fraction}.pt")


def train_all(path, seed, args, init=None):
    """A model trained on every training program of `path` (the 100% rows), fine-tuning `init` if given."""
    data = platform_data(path)
    pool_ids, _ = split_tasks(data.tasks, args.test_fraction, 0)
    model, _ = train(data, pool_ids, (), epochs=args.epochs * args.rounds, seed=seed, threads=args.threads,
                     progress=False, average_last=args.average_last, init=init)
    return model


def source_model(path, seed, args):
    """--warm-start: the model of `path`'s platform that other platforms start from; trained by the
    first run that needs it and stored (a lock makes a second run that needs it wait, not retrain)."""
    import fcntl

    out = source_model_path(Path(path).name, seed, args)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.is_file():
            model = train_all(path, seed, args)
            tmp = out.with_suffix(".tmp")
            save_checkpoint(tmp, model, "mamba", {"source_for_warm_start": Path(path).name, "seed": seed})
            tmp.replace(out)
    return load_checkpoint(out)[0]


def run_one(path, method, rate, seed, args, source=None) -> dict:
    """One (platform, method, rate, seed): sample (or take every training program at rate 1.0),
    train (fine-tuning the model of the platform at `source`, if given), score pooled Top-1/Top-5
    on the held-out tasks. `seconds` leaves out training the source model."""
    data = platform_data(path)
    pool_ids, test_ids = split_tasks(data.tasks, args.test_fraction, 0)
    if not test_ids:
        raise SystemExit(f"{path}: no held-out tasks (give --test-fraction)")
    init = source_model(source, seed, args) if source else None
    t0 = time.perf_counter()
    cfg = SamplingConfig(method=method, fraction=rate, rounds=args.rounds, epochs=args.epochs,
                         min_steps=args.min_steps, seed=seed, threads=args.threads, embedding=args.embedding,
                         average_last=args.average_last, weights=rdu_weights(args), init_model=init)
    picks = None
    if rate >= 1.0:
        model = train_all(path, seed, args, init)
    elif method in ORACLES:
        model, picks = train_on_oracle_picks(data, pool_ids, method, cfg)
    else:
        result = run_sampling(data, pool_ids, cfg, LookupOracle(data.cost), progress=False)
        model, picks = result.model, result.selected
    scores = score_tasks(model, data, test_ids)
    pooled = scores["pooled"]
    coverage = {}
    if picks is not None:
        pool, group = sampling_pool(data, pool_ids)
        coverage = pick_coverage(data.cost[pool], group, np.isin(pool, picks))
    return {"platform": Path(path).name, "method": method, "rate": rate, "seed": seed, "top1": pooled["top1"],
            "top5": pooled["top5"], **task_means(scores["tasks"]), **coverage,
            "seconds": time.perf_counter() - t0}


# Diagnostics, not samplers: they pick with the latencies a sampler cannot know, to ask how good a
# model any 10% of the programs can give. oracle_top: each task's fastest programs;
# oracle_strata: evenly spaced along each task's latency order (its fastest included);
# oracle_best: random picks, but each task's fastest among them (the labels' reference is right).
ORACLES = ("oracle_top", "oracle_strata", "oracle_best")


def oracle_picks(cost, group, budget, kind: str, rng) -> np.ndarray:
    picks = []
    for g, b in enumerate(budget):
        if b == 0:
            continue
        cand = np.nonzero(group == g)[0]
        by_speed = cand[np.argsort(cost[cand], kind="stable")]
        if kind == "oracle_top":
            picks.append(by_speed[:b])
        elif kind == "oracle_strata":
            picks.append(by_speed[np.unique(np.linspace(0, len(cand) - 1, b).round().astype(np.int64))])
        else:
            rest = rng.choice(by_speed[1:], size=min(b - 1, len(cand) - 1), replace=False)
            picks.append(np.concatenate([by_speed[:1], rest]))
    return np.concatenate(picks).astype(np.int64)


def oracle_pool_picks(data, pool_ids, kind: str, fraction: float, seed: int) -> np.ndarray:
    """Program indices of `data`: `fraction` of each task of pool_ids, picked by `kind`."""
    pool, group = sampling_pool(data, pool_ids)
    budget = per_task_budget(group, fraction=fraction)
    return pool[oracle_picks(data.cost[pool], group, budget, kind, np.random.default_rng(seed))]


def train_on_oracle_picks(data, pool_ids, kind, cfg: SamplingConfig):
    """The sampler's last round (tcl.sampling.sampler.train_on_measured, same settings and seed)
    on picks made by `kind` with the true latencies."""
    picks = oracle_pool_picks(data, pool_ids, kind, cfg.fraction, cfg.seed)
    return train_on_measured(data, picks, data.cost[picks], cfg, cfg.rounds - 1, progress=False), picks


def pick_coverage(cost, group, picked) -> dict:
    """How a run's picks lie along each task's true latency order, the thing oracle_strata gets
    right: over the tasks with two or more programs, the mean of the largest gap between
    neighbouring picks in latency-rank quantile (the fastest program at 0 and the slowest at 1 count
    as ends; evenly spaced picks leave about 1 / picks, random ones wider gaps) and of
    best_found = the task's best latency / the best picked one (1 when its fastest is picked)."""
    gaps, found = [], []
    for g in np.unique(group):
        idx = np.nonzero(group == g)[0]
        if len(idx) < 2 or not picked[idx].any():
            continue
        order = idx[np.argsort(cost[idx], kind="stable")]
        ranks = np.nonzero(picked[order])[0]
        gaps.append(np.diff(np.concatenate([[0.0], ranks / (len(order) - 1), [1.0]])).max())
        found.append(cost[order[0]] / cost[order[ranks[0]]])
    return {"largest_rank_gap": float(np.mean(gaps)), "best_found": float(np.mean(found))}


def rdu_weights(args) -> Weights:
    return weights_of(vars(args))


def weights_of(settings: dict) -> Weights:
    """The sampler's Weights from the bench's settings (its arguments, or a stored run's)."""
    r, d, u = settings["rdu_weights"]
    return Weights(r=r, d=d, u=u, u_speed=settings["u_speed"], u_kind=settings["u_kind"],
                   r_kind=settings["r_kind"], score_axis=settings["score_axis"])


def task_means(per_task: dict) -> dict:
    """Top-1/Top-5 averaged over the held-out tasks with more than one program, each task once.
    The pooled score weighs tasks by occurrences x best latency, so two BERT-base matmuls carry most
    of it (pooled_shares) and one wrong first pick there moves a run by 0.3-0.6; the task mean asks
    the same question of all the held-out tasks with equal weight."""
    ranked = [t for t in per_task.values() if t["programs"] > 1]
    return {"task_top1": statistics.mean(t["top1"] for t in ranked),
            "task_top5": statistics.mean(t["top5"] for t in ranked)}


# settings a stored run must share to be reused
SAME_RUN = ("rounds", "epochs", "test_fraction", "average_last", "warm_start")
# ... and those only the sampled runs (rate < 1) must share (the 100% runs do not sample); besides
# these, a sampled run must share the embedding if its method reads one, and the weights its method
# reads (SamplingMethod.reads_embedding and weight_fields_read, tcl.sampling.methods)
SAME_SAMPLED_RUN = ("min_steps",)
# runs stored before a setting was added ran with this value of it
SETTINGS_BEFORE_THEY_EXISTED = {"average_last": 0.0, "u_speed": 0.0, "rdu_weights": [1.0, 1.0, 1.0],
                               "u_kind": "spread", "r_kind": "density", "warm_start": False,
                               "score_axis": 0.0}
# what a run measures; runs stored before the task mean existed lack it and are run again when asked for
RUN_FIELDS = ("top1", "top5", "task_top1", "task_top5")
# where the sampled runs' picks lie on the true latency order (pick_coverage); older runs lack it
COVERAGE_FIELDS = ("largest_rank_gap", "best_found")


def complete(run: dict) -> bool:
    return all(f in run for f in RUN_FIELDS)


def stored_runs(detail_path: Path, args) -> dict:
    """{(platform, method, rate, seed): run} of an earlier invocation with the same settings
    (method "all" at rate 1.0: every training program, the same for every method)."""
    if not detail_path.is_file():
        return {}
    old = json.loads(detail_path.read_text())
    settings = {**SETTINGS_BEFORE_THEY_EXISTED, **old.get("settings", {})}
    if any(settings.get(k) != getattr(args, k) for k in SAME_RUN):
        print(f"{detail_path} holds other settings; starting over")
        return {}
    same_sampled = all(settings.get(k) == getattr(args, k) for k in SAME_SAMPLED_RUN)
    then, now = weights_of(settings), rdu_weights(args)

    def same_picks(method) -> bool:
        """Whether a sampled run of `method` stored under `settings` picks as one run now would."""
        if method in ORACLES:  # they pick by the true latencies alone
            return True
        if method not in REGISTRY:  # a method this code no longer has: nothing to compare it with
            return False
        m = get_method(method)
        if m.reads_embedding and (settings.get("embedding") or m.embedding) != (args.embedding or m.embedding):
            return False  # no embedding given: each method's own
        return all(getattr(then, f) == getattr(now, f) for f in m.weight_fields_read)

    found = {}
    for platform, methods in old.get("accuracy", {}).items():
        for method, by_rate in methods.items():
            for rate, entry in by_rate.items():
                if float(rate) < 1.0 and not (same_sampled and same_picks(method)):
                    continue
                for r in entry["runs"]:
                    m = "all" if float(rate) >= 1.0 else method
                    found[(platform, m, float(rate), r["seed"])] = {
                        **r, "platform": platform, "method": m, "rate": float(rate)}
    return found


def reference_runs(detail_path: Path) -> tuple[dict, dict]:
    """The runs stored in another invocation's details file: ({(platform, seed): run} of its 100%
    runs, {(platform, "METHOD (reference)", rate, seed): run} of its sampled runs, which paired()
    then sets rdu against like any other method)."""
    if not detail_path.is_file():
        sys.exit(f"--reference: no such file {detail_path}")
    old = json.loads(detail_path.read_text()).get("accuracy", {})
    full, sampled = {}, {}
    for pl, methods in old.items():
        for method, by_rate in methods.items():
            for rate, entry in by_rate.items():
                for r in entry["runs"]:
                    if float(rate) >= 1.0:
                        full[(pl, r["seed"])] = r
                    else:
                        sampled[(pl, f"{method} (reference)", float(rate), r["seed"])] = r
    return full, sampled


def summarise(runs: dict, methods) -> dict:
    """{platform: {method: {rate: {top1, top1_std, top5, runs}}}} from {(platform, method, rate, seed): run}."""
    groups = defaultdict(list)
    for (platform, method, rate, _), r in sorted(runs.items()):
        groups[(platform, method, rate)].append(r)
    out: dict = {}
    for (platform, method, rate), rs in sorted(groups.items()):
        entry = {}
        for f in RUN_FIELDS:
            v = [r[f] for r in rs if f in r]  # older runs lack the task mean
            entry[f] = statistics.mean(v) if v else None
            if f.endswith("top1"):
                entry[f + "_std"] = statistics.pstdev(v) if v else None
        for f in COVERAGE_FIELDS:
            v = [r[f] for r in rs if f in r]
            if v:
                entry[f] = statistics.mean(v)
        entry["runs"] = [{k: r[k] for k in ("seed", *RUN_FIELDS, *COVERAGE_FIELDS, "seconds") if k in r} for r in rs]
        for m in (methods if method == "all" else [method]):  # 100% of the data is the same for every method
            out.setdefault(platform, {}).setdefault(m, {})[str(rate)] = entry
    return out


def paired(runs: dict, method: str = "rdu", metric: str = "top1", reference: dict | None = None) -> dict:
    """Per rate below 1.0, `method` against each other method and against all the data, run by run on
    the same (platform, seed): with seed spreads as wide as the gaps between the means, counting the
    pairs says more than comparing means. {rate: {other: {pairs, ahead, mean_diff, diff_stderr},
    "all": {pairs, mean_ratio, at_least_97pct}, "all_reference": the same against the 100% runs
    of `reference` ({(platform, seed): run}, another invocation's)}}."""
    out: dict = {}
    rates = sorted({rate for (_, m, rate, _) in runs if m == method and rate < 1.0})
    for rate in rates:
        mine = {(pl, seed): r[metric] for (pl, m, rt, seed), r in runs.items()
                if m == method and rt == rate and metric in r}
        by_other = defaultdict(list)
        for (pl, m, rt, seed), r in runs.items():
            if rt == rate and m != method and (pl, seed) in mine and metric in r:
                by_other[m].append(mine[(pl, seed)] - r[metric])
        entry = {m: {"pairs": len(d), "ahead": sum(x > 0 for x in d), "mean_diff": statistics.mean(d),
                     # standard error of the mean difference: a gap within ~2 of it is noise
                     "diff_stderr": statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else None}
                 for m, d in sorted(by_other.items())}
        full = {"all": {(pl, seed): r for (pl, m, rt, seed), r in runs.items() if m == "all"},
                "all_reference": reference or {}}
        for name, by_run in full.items():
            ratios = [mine[k] / r[metric] for k, r in by_run.items() if k in mine and metric in r]
            if ratios:
                entry[name] = {"pairs": len(ratios), "mean_ratio": statistics.mean(ratios),
                               "at_least_97pct": sum(x >= 0.97 for x in ratios)}
        out[str(rate)] = entry
    return out


def ratios_to_full(runs: dict, metric: str) -> dict:
    """{rate: {method: {pairs, mean_ratio, at_least_97pct}}}: every sampled method's Top-1 over the
    same (platform, seed)'s 100% run (paired()'s "all" entry, for each method in turn)."""
    out: dict = {}
    for m in sorted({m for (_, m, rate, _) in runs if rate < 1.0}):
        for rate, entry in paired(runs, m, metric).items():
            if "all" in entry:
                out.setdefault(rate, {})[m] = entry["all"]
    return out


def speed(sizes, task_size, dim) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for n in sizes:
        x = rng.normal(size=(n, dim)).astype(np.float32)
        group = (np.arange(n) // task_size).astype(np.int32)
        u, p = rng.random(n), rng.random(n)
        budget = per_task_budget(group, fraction=0.1)
        t0 = time.perf_counter()
        select("rdu", x, group, budget, u=u, p=p)  # the default weights
        cpp = time.perf_counter() - t0
        t0 = time.perf_counter()
        w = Weights()
        weights, un = (w.r, w.d, w.u), normalize_per_group(u + w.u_speed * p, group)
        coverage = w.r_kind == "coverage"
        r = (np.zeros(n) if coverage
             else normalize_per_group(1 / (1 + reference.knn_mean_distance(x, group, w.k)), group))
        reference.greedy_select(x, group, budget, r, un, None, weights, coverage_k=w.k if coverage else 0)
        ref = time.perf_counter() - t0
        out[str(n)] = {"cpp_seconds": cpp, "numpy_seconds": ref, "speedup": ref / cpp}
        print(f"  {n:>7} programs: C++ {cpp:7.2f} s   numpy {ref:8.2f} s   {ref / cpp:6.1f}x", flush=True)
    return out


def pooled_shares(data, test_ids, top: int = 3) -> list[dict]:
    """The held-out (task, network) pairs with the largest shares of the pooled Top-1's numerator
    (occurrences x best latency, tcl.metrics): how much a run's score hangs on its first pick there."""
    rows = []
    for t in test_ids:
        idx = data.programs_of([t])
        if not len(idx):  # every program failed: not in the pooled score
            continue
        best = float(data.cost[idx].min())
        for net, w in (data.tasks[t].networks or {"all": 1.0}).items():
            rows.append({"task": task_key(data.tasks[t]), "network": net, "programs": int(len(idx)),
                         "share": float(w) * best})
    total = sum(r["share"] for r in rows)
    for r in rows:
        r["share"] /= total
    return sorted(rows, key=lambda r: -r["share"])[:top]


METRIC_NAMES = {"top1": "pooled Top-1", "task_top1": "Top-1 averaged over the tasks"}


def print_table(results, metric: str = "top1"):
    """Mean Top-1 ± spread over seeds (number of seeds), a method per row, a rate per column."""
    for platform, methods in results.items():
        rates = sorted({r for by_rate in methods.values() for r in by_rate}, key=float)
        print(f"\n{platform}: {METRIC_NAMES[metric]} on the held-out tasks, mean ± spread (seeds)")
        print(f"{'method':<18}" + "".join(f"{r:>20}" for r in rates))
        for m, by_rate in methods.items():
            cells = [f"{by_rate[r][metric]:.3f} ± {by_rate[r][metric + '_std']:.3f} ({len(by_rate[r]['runs'])})"
                     if r in by_rate and by_rate[r][metric] is not None else "-" for r in rates]
            print(f"{m:<18}" + "".join(f"{c:>20}" for c in cells))


def print_paired(pairs, metric: str = "top1"):
    for rate, entry in pairs.items():
        print(f"\nrdu at rate {rate}, {METRIC_NAMES[metric]}, run by run on the same (platform, seed):")
        for m, e in entry.items():
            if m in ("all", "all_reference"):
                which = "all the data" if m == "all" else "all the data, --reference runs"
                print(f"  vs {which}: {e['mean_ratio']:.3f} of its Top-1 on average, >= 97% in "
                      f"{e['at_least_97pct']} of {e['pairs']}")
            else:
                se = f" ± {e['diff_stderr']:.3f}" if e.get("diff_stderr") is not None else ""
                print(f"  vs {m:<17} ahead in {e['ahead']} of {e['pairs']}, mean difference {e['mean_diff']:+.3f}{se}")


def print_coverage(results):
    """pick_coverage's means, for the sampled runs that recorded it."""
    rows = [(pl, m, rate, e) for pl, methods in results.items() for m, by_rate in methods.items()
            for rate, e in by_rate.items() if "largest_rank_gap" in e and float(rate) < 1.0]
    if rows:
        print("\nwhere the picks lie on each task's true latency order (mean over tasks, then runs): "
              "largest gap between neighbouring picks in rank quantile; best latency / best picked")
    for pl, m, rate, e in rows:
        n = sum("largest_rank_gap" in r for r in e["runs"])
        print(f"  {pl:<12} {m:<17} rate {rate:<5} gap {e['largest_rank_gap']:.3f}   best found "
              f"{e['best_found']:.3f}   ({n} runs)")


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(5 * len(results), 8), squeeze=False)
    for row, metric in enumerate(METRIC_NAMES):
        for ax, (platform, methods) in zip(axes[row], results.items()):
            for m, by_rate in methods.items():
                rates = sorted((r for r in by_rate if by_rate[r][metric] is not None), key=float)
                ax.errorbar([float(r) for r in rates], [by_rate[r][metric] for r in rates],
                            yerr=[by_rate[r][metric + "_std"] for r in rates], label=m, marker="o", capsize=2)
            ax.set_xscale("log")
            ax.set_xlabel("fraction of training programs measured")
            ax.set_ylabel(f"{METRIC_NAMES[metric]} on held-out tasks")
            ax.set_title(platform)
            ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def runs_to_do(platforms, args, runs: dict) -> list[tuple]:
    """(platform, method, rate, seed) of the grid not stored with every metric, or named by --rerun;
    the rates the question is about (10% against 100%) for every seed first, then seed-major, so a
    stopped grid has already answered it."""
    todo = [(name, "all" if rate >= 1.0 else m, rate, seed) for seed in args.seeds for rate in args.rates
            for name in platforms for m in (["all"] if rate >= 1.0 else args.methods)]
    return sorted((t for t in todo if t not in runs or not complete(runs[t]) or t[1] in args.rerun),
                  key=lambda t: (t[2] not in (0.1, 1.0), t[3], -t[2]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("paths", nargs="*", help="one dataset per platform (default: datasets/*/)")
    p.add_argument("--methods", nargs="+", default=list(method_names()), choices=[*method_names(), *ORACLES],
                   help="samplers to compare (default: all); the oracle_* diagnostics pick with the true latencies")
    p.add_argument("--rates", nargs="+", type=float, default=[0.05, 0.1, 0.2, 0.5, 1.0], help="shares of each task's programs measured")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="seeds of every method")
    p.add_argument("--rounds", type=int, default=3, help="picking rounds, each retraining on what is measured so far")
    p.add_argument("--epochs", type=int, default=20, help="training epochs per round")
    p.add_argument("--min-steps", type=int, default=200, help="optimizer steps per round at least")
    p.add_argument("--embedding", choices=EMBEDDINGS, default=None,
                   help="what R and D measure distances on, for every method (default: each method's own, "
                   "SamplingMethod.embedding in tcl.sampling.methods)")
    p.add_argument("--average-last", type=float, default=0.0,
                   help="every model (each round's, and the 100%% one) is the mean of its weights over this last "
                   "fraction of its epochs (0: the last epoch's)")
    p.add_argument("--u-speed", type=float, default=Weights().u_speed,
                   help="rdu's U = spread + this x predicted score (default %(default)s; stored rdu runs with "
                   "another value are run again)")
    p.add_argument("--rdu-weights", nargs=3, type=float, default=[Weights().r, Weights().d, Weights().u],
                   metavar=("R", "D", "U"), help="rdu's weights of R, D and U (default %(default)s; stored rdu "
                   "runs with others are run again)")
    p.add_argument("--u-kind", choices=["spread", "top"], default=Weights().u_kind,
                   help="rdu's U: the MC-dropout spread, or the share of MC samples that rank the program in "
                   "its task's top 10%% (default %(default)s)")
    p.add_argument("--r-kind", choices=["density", "coverage"], default=Weights().r_kind,
                   help="R of rdu and rd: kNN density, or the coverage (facility-location) gain updated after "
                   "every pick (default %(default)s)")
    p.add_argument("--score-axis", type=float, default=Weights().score_axis,
                   help="rdu: weight of the predicted-score rank as a coordinate of D's space (0: none)")
    p.add_argument("--warm-start", action="store_true",
                   help="every run fine-tunes a model of the previous platform in the list (cyclically), trained on "
                   "all its training programs with the same seed, instead of starting from scratch")
    p.add_argument("--reference", default=None, metavar="DETAILS",
                   help="another invocation's details JSON: rdu run by run against its runs too (its 100%% runs, "
                   "e.g. from scratch, and its sampled runs, e.g. another rdu form)")
    p.add_argument("--test-fraction", type=float, default=0.2, help="when the data has no split")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run")
    p.add_argument("--speed-sizes", nargs="*", type=int, default=[10_000, 50_000, 100_000], help="pool sizes at which the C++ picking is timed against the reference")
    p.add_argument("--task-size", type=int, default=2000, help="programs per task in the timed pools")
    p.add_argument("--dim", type=int, default=128, help="embedding width (the model's d_model)")
    p.add_argument("--jobs", type=int, default=1, help="runs at once, one process each")
    p.add_argument("--fresh", action="store_true", help="ignore the runs stored in the details file")
    p.add_argument("--rerun", nargs="+", default=[], metavar="METHOD",
                   help="run these methods again at the given rates and seeds even where stored (a "
                        "details file keeps one set of settings, so runs made under earlier code stay "
                        "until rerun)")
    p.add_argument("--report-only", action="store_true",
                   help="train nothing: summarise the stored runs (and measure the speed part)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "sampling.json"), help="the summary JSON (details and plot go beside it)")
    args = p.parse_args(argv)
    paths = args.paths or sorted(str(d) for d in (ROOT / "datasets").glob("*/") if (d / "platform.json").exists())
    if not paths:
        sys.exit("no datasets given and none under datasets/")

    out = Path(args.out)
    detail_path = out.with_name(out.stem + "_details.json")
    runs = {} if args.fresh else stored_runs(detail_path, args)
    names = {Path(path).name: path for path in paths}
    if args.warm_start and len(names) < 2:
        sys.exit("--warm-start needs two or more platforms (each starts from the one before it)")
    order = list(names)
    source_of = {name: order[i - 1] for i, name in enumerate(order)} if args.warm_start else {}
    todo = [] if args.report_only else runs_to_do(names, args, runs)
    print(f"accuracy: {len(todo)} runs to do ({sum(map(complete, runs.values()))} stored with every metric), "
          f"{args.jobs} at once")
    res = {"load_average_before": os.getloadavg()}
    stored_detail = json.loads(detail_path.read_text()) if detail_path.is_file() and not args.fresh else {}
    speed_settings = {"sizes": args.speed_sizes, "task_size": args.task_size, "dim": args.dim,
                      "weights": str(Weights())}  # the default weights are what is timed
    if stored_detail.get("speed") and stored_detail.get("speed_settings") == speed_settings:
        # measured before; kept in every write, so that a stopped run does not lose it
        res["speed"], res["speed_settings"] = stored_detail["speed"], speed_settings

    def write():
        res["accuracy"] = summarise(runs, args.methods)
        res["settings"] = {k: v for k, v in vars(args).items() if k not in ("out", "fresh", "jobs")}
        summary = {pl: {m: {r: v["top1"] for r, v in by_rate.items()} for m, by_rate in ms.items()}
                   for pl, ms in res["accuracy"].items()}
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text(out, json.dumps(summary, indent=1) + "\n")
        write_text(detail_path, json.dumps(res, indent=1) + "\n")
        return summary

    def record(r):
        runs[(r["platform"], r["method"], r["rate"], r["seed"])] = r
        print(f"  {r['platform']} {r['method']:>16} rate {r['rate']:<5} seed {r['seed']}: "
              f"top1 {r['top1']:.4f} top5 {r['top5']:.4f} ({r['seconds']:.0f} s)", flush=True)
        write()  # every finished run is kept at once

    def source(platform):
        return names[source_of[platform]] if args.warm_start else None

    if args.jobs > 1 and todo:
        # spawned, so each process sets its own torch threads; a process featurizes each platform once
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn")) as pool:
            futures = [pool.submit(run_one, names[pl], m, rate, seed, args, source(pl))
                       for pl, m, rate, seed in todo]
            for f in as_completed(futures):
                record(f.result())
    else:
        for pl, m, rate, seed in todo:
            record(run_one(names[pl], m, rate, seed, args, source(pl)))

    if "speed" not in res and args.speed_sizes:
        print("selection time (10% of each task, 1 call; nothing else running):")
        res["speed"], res["speed_settings"] = speed(args.speed_sizes, args.task_size, args.dim), speed_settings
    res["load_average_after"] = os.getloadavg()
    res["pooled_shares"] = {}
    print("held-out (task, network) pairs with the largest shares of pooled Top-1 (occurrences x best latency):")
    for name, path in names.items():
        data = platform_data(path)
        res["pooled_shares"][name] = pooled_shares(data, split_tasks(data.tasks, args.test_fraction, 0)[1])
        print(f"  {name}: " + ", ".join(f"{r['share']:.2f} {r['network']} ({r['programs']} programs)"
                                        for r in res["pooled_shares"][name]))
    reference, reference_sampled = reference_runs(Path(args.reference)) if args.reference else (None, {})
    res["rdu_paired"] = paired({**runs, **reference_sampled}, reference=reference)
    res["rdu_paired_task_top1"] = paired({**runs, **reference_sampled}, metric="task_top1", reference=reference)
    res["ratio_to_full"] = {metric: ratios_to_full(runs, metric) for metric in METRIC_NAMES}
    if args.warm_start:
        res["warm_start_sources"] = source_of
    write()
    for metric, key in (("top1", "rdu_paired"), ("task_top1", "rdu_paired_task_top1")):
        print_table(res["accuracy"], metric)
        print_paired(res[key], metric)
        for rate, by_method in res["ratio_to_full"][metric].items():
            print(f"\nrate {rate}, {METRIC_NAMES[metric]} over the same (platform, seed)'s 100% run:")
            for m, e in by_method.items():
                print(f"  {m:<17} {e['mean_ratio']:.3f} on average, >= 97% in {e['at_least_97pct']} of {e['pairs']}")
    print_coverage(res["accuracy"])
    if res["accuracy"]:
        plot(res["accuracy"], out.with_suffix(".png"))
    print(f"-> {out}, {detail_path}, {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
