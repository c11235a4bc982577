"""Rounds of pick -> measure -> retrain until the measuring budget is spent.

The pool is every candidate program of the tasks being sampled (their features are known before
anything is measured). Round 0 has no model: picks are made on the pooled feature rows by the
method's `round0` stand-in (rd for the methods that need the model's scores; random and diversity
as themselves), unless a trained model to start from is given (`init_model`, e.g. one trained on
another platform: the situation of adapting a cost model to new hardware); then round 0 uses that
model's signals, and every round fine-tunes it rather than training from scratch.
Every later round trains a cost model on what has been measured so far and uses it for the three
signals:

- embeddings for R and D: the model's pooled encoder output (`embedding="model"`), the pooled
  feature rows (`embedding="features"`), or both side by side, each scaled to unit RMS spread
  within the task (`embedding="both"`); by default (`embedding=None`) each method's measured
  better one (its SamplingMethod.embedding, tcl.sampling.methods): the feature rows for rdu,
  whose U already brings the model's view, so its three signals look at two views; the model's
  output for the baselines, whose D alone is better in the model's space;
- U: the spread of MC-dropout scores, plus `Weights.u_speed` x their mean (or, with
  `Weights.u_kind="top"`, the share of MC-dropout samples that put the program among its task's
  top `top_fraction`). MC-dropout is used rather than an ensemble because the dropout sits in the
  model's head only, so n samples cost one body pass plus n tiny head passes, where an ensemble of
  n would multiply the training time (the expensive part on 2 cores) by n;
- p (biased_diversity, and rdu's U when u_speed > 0): the mean MC score.

Labels are recomputed from the measured programs only (best measured latency of the task /
latency), so nothing unmeasured leaks into training. "Measuring" is pluggable: `LookupOracle`
reads latencies an existing dataset already holds (experiments); a TVM-backed oracle measures for
real on a new platform.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .methods import get_method
from .strategies import Weights, per_task_budget, select, top_probability, unit_rms_per_group


class LookupOracle:
    """Measures by looking up the latency a dataset already holds for each program."""

    def __init__(self, cost: np.ndarray):
        self.cost = np.asarray(cost, np.float64)
        self.calls = 0

    def measure(self, idx: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.cost[idx]


@dataclass
class SamplingConfig:
    method: str = "rdu"  # a name in tcl.sampling.methods.REGISTRY
    fraction: float | None = 0.1  # of each task's pool
    count: int | None = None  # or programs in total (overrides fraction)
    rounds: int = 3  # the budget is spent evenly over this many rounds
    weights: Weights = field(default_factory=Weights)
    embedding: str | None = None  # one of EMBEDDINGS, or None: the method's own (SamplingMethod.embedding)
    mc_samples: int = 16
    epochs: int = 20  # training epochs per round ...
    min_steps: int = 200  # ... but at least this many optimizer steps (small rounds have few batches)
    average_last: float = 0.0  # > 0: each round's model is its mean weights over this last fraction of epochs
    seed: int = 0
    threads: int | None = None
    arch: str = "mamba"
    model_config: dict | None = None
    init_model: object | None = None  # a trained model to start from (round 0's signals, each round's start)


@dataclass
class SamplingResult:
    selected: np.ndarray  # program indices in the order they were measured
    costs: np.ndarray  # their measured latencies
    model: object  # the last model, trained on all measured programs
    rounds: list[dict]  # per round: picks, seconds spent selecting / training


EMBEDDINGS = ("model", "features", "both")


def feature_embedding(data, idx) -> np.ndarray:
    """Pooled feature rows of programs idx: mean of the valid rows, plus the workload descriptor."""
    seq, length = data.seq[idx], data.length[idx]
    mask = (np.arange(seq.shape[1])[None, :] < length[:, None])[..., None]
    pooled = (seq * mask).sum(1) / np.maximum(length, 1)[:, None]
    return np.concatenate([pooled, data.workload[idx]], axis=1).astype(np.float32)


def distance_rows(embedding: str, model_embedding, data, pool, group) -> np.ndarray:
    """The rows R and D measure distances between, for `embedding` (one of EMBEDDINGS)."""
    if embedding == "model":
        return model_embedding
    features = feature_embedding(data, pool)
    if embedding == "features":
        return features
    return np.concatenate([unit_rms_per_group(model_embedding, group), unit_rms_per_group(features, group)], 1)


def model_signals(model, data, idx, mc_samples: int, batch: int = 256, seed: int | None = None):
    """(embedding, MC-dropout score samples [mc_samples, N]) of programs idx from a trained model;
    with `seed`, the dropout masks do not depend on what the process drew before (a rerun picks the
    same programs, which is what lets `tcl adapt` resume without measuring anything twice)."""
    import torch

    if seed is not None:
        torch.manual_seed(seed)

    emb, samples = [], []
    with torch.no_grad():
        for a in range(0, len(idx), batch):
            x = data.inputs(idx[a:a + batch])
            emb.append(model.embedding(x[0], x[1], x[3]).numpy())
            samples.append(model.mc_scores(*x, n=mc_samples).numpy())
    return np.concatenate(emb), np.concatenate(samples, axis=1)


def sampling_pool(data, task_ids) -> tuple[np.ndarray, np.ndarray]:
    """(every program of `task_ids`, its task numbered 0.. in sorted task-id order): the groups
    budgets and normalisation are per."""
    pool = data.programs_of(task_ids)
    return pool, np.searchsorted(np.asarray(sorted(task_ids)), data.task[pool]).astype(np.int32)


def train_on_measured(data, idx, costs, config: SamplingConfig, round_index: int, progress: bool = True):
    """A round's model: trained on the programs idx with their measured latencies (labels from
    those alone), fine-tuning config.init_model if given."""
    from ..train import train

    sub = data.measured(idx, costs)
    model, _ = train(sub, sorted({int(t) for t in sub.task}), (), arch=config.arch, model_config=config.model_config,
                     epochs=config.epochs, seed=config.seed + round_index, threads=config.threads,
                     progress=progress, min_steps=config.min_steps, average_last=config.average_last,
                     init=config.init_model)
    return model


def run_sampling(data, task_ids, config: SamplingConfig, oracle, progress: bool = True) -> SamplingResult:
    """Samples the programs of `task_ids` (tasks of `data`, a tcl.train.ProgramData)."""
    rng = np.random.default_rng(config.seed)
    pool, group = sampling_pool(data, task_ids)
    total = per_task_budget(group, None if config.count is not None else config.fraction, config.count)
    selected = np.zeros(len(pool), bool)
    picked_order: list[np.ndarray] = []
    costs = np.full(len(pool), np.nan)
    model, rounds = config.init_model, []
    method = get_method(config.method)
    embedding = config.embedding or method.embedding
    if embedding not in EMBEDDINGS:
        raise ValueError(f"embedding must be one of {', '.join(EMBEDDINGS)}, not {embedding!r}")
    n_rounds = max(1, config.rounds)
    for r in range(n_rounds):
        t0 = time.perf_counter()
        # spend the budget evenly: after round r, (r+1)/n_rounds of each task's total
        want = np.ceil(total * (r + 1) / n_rounds).astype(np.int64)
        have = np.bincount(group[selected], minlength=len(total))
        budget = np.maximum(want - have, 0)
        if model is None or not method.uses_model:
            x = feature_embedding(data, pool)
            picks = select(method.round0, x, group, budget, selected, weights=config.weights, rng=rng,
                           threads=config.threads or 0)
        else:
            emb, samples = model_signals(model, data, pool, config.mc_samples, seed=config.seed * 1000 + r)
            x = distance_rows(embedding, emb, data, pool, group)
            top = config.weights.u_kind == "top"
            q = top_probability(samples, group, config.weights.top_fraction) if top else None
            picks = select(method, x, group, budget, selected, u=samples.std(0), p=samples.mean(0),
                           q=q, weights=config.weights, rng=rng, threads=config.threads or 0)
        t_select = time.perf_counter() - t0
        costs[picks] = oracle.measure(pool[picks])
        selected[picks] = True
        picked_order.append(picks)
        t1 = time.perf_counter()
        model = train_on_measured(data, pool[selected], costs[selected], config, r, progress)
        rounds.append({"round": r, "picked": int(len(picks)), "measured": int(selected.sum()),
                       "select_seconds": t_select, "train_seconds": time.perf_counter() - t1})
    order = np.concatenate(picked_order) if picked_order else np.zeros(0, np.int64)
    return SamplingResult(selected=pool[order], costs=costs[order], model=model, rounds=rounds)
