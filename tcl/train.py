"""Training a cost model (Mamba or the TLP baseline) with LambdaRank within each task.

One epoch: every training task's programs are shuffled and cut into groups of at most
`group_size`; the groups are shuffled and `batch_tasks` of them make a batch
(tcl.program_data.task_groups). The loss ranks the programs of each group (label = normalised
throughput, best of the task = 1), so the model only learns orders inside a task, which is what
the tuner asks of it. With validation tasks (held out of the training tasks by task), the model
scores them after each epoch; the state with the best validation Top-1 (pairwise accuracy breaks
ties) is kept and training stops after `patience` epochs without one.

Every setting and its default is a field of tcl.train_config.TrainConfig; the functions here take
one (`config`) and/or single fields as keyword arguments that override it.
"""

from __future__ import annotations

import copy
import math
import random
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from .architectures import build_model
from .averaging import LastEpochsAverage
from .checkpoint import save_checkpoint
from .continual.descriptor import platform_hardware
from .errors import FormatError
from .features import SPEC, FeatureSet, featurize
from .hardware import HARDWARE_DIM
from .model.losses import lambda_rank_loss, log_ratio_loss
from .program_data import ProgramData, batches, hold_out, split_tasks, task_groups, task_key
from .scoring import score_tasks
from .train_config import LR_SCHEDULES, TrainConfig

__all__ = ["epochs_for_steps", "fit", "lr_scheduler", "optimizer_step", "seed_everything", "steps_per_epoch",
           "train", "train_validated"]


def seed_everything(seed: int):
    """Seeds Python's, numpy's and torch's global generators (initial weights, dropout)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def optimizer_step(opt, loss, params, clip: float):
    """One update: backward, gradient-norm clipping, step."""
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, clip)
    opt.step()


def steps_per_epoch(data: ProgramData, task_ids, group_size: int, batch_tasks: int) -> int:
    """Optimizer steps in one epoch over these tasks (the number of groups does not depend on the shuffle)."""
    return -(-len(task_groups(data, task_ids, group_size, np.random.default_rng(0))) // batch_tasks)


def lr_scheduler(opt, kind: str, total_steps: int):
    """A scheduler to step after every optimizer step: "constant" keeps each group's learning rate;
    "cosine" takes it down a half cosine to 0 at total_steps."""
    if kind not in LR_SCHEDULES:
        raise ValueError(f"lr schedule {kind!r}: expected one of {LR_SCHEDULES}")
    if kind == "constant":
        return torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    total = max(total_steps, 1)
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5 * (1 + math.cos(math.pi * min(step, total) / total)))


def epochs_for_steps(data: ProgramData, task_ids, epochs: int, min_steps: int, group_size: int,
                     batch_tasks: int) -> int:
    """`epochs`, or more when that many epochs would make fewer than min_steps optimizer steps
    (small training sets, e.g. a sampler's few percent, have few batches per epoch)."""
    if not min_steps:
        return epochs
    per_epoch = steps_per_epoch(data, task_ids, group_size, batch_tasks)
    return max(epochs, -(-min_steps // max(per_epoch, 1)))


def _validate(model, data, val_ids, epoch, hist, best):
    """Scores the validation tasks; returns the new best (score, state) or None when not better."""
    pooled = score_tasks(model, data, val_ids)["pooled"]
    hist["val_top1"].append(pooled["top1"])
    hist["val_pairwise"].append(pooled["pairwise"])
    score = (pooled["top1"], pooled["pairwise"] or 0.0)
    if best is not None and score <= best[0]:
        return None
    hist["best_epoch"], hist["best_val_top1"] = epoch, pooled["top1"]
    return score, copy.deepcopy(model.state_dict())


def _fresh_model(arch: str, model_config: dict | None, data: ProgramData, train_ids) -> torch.nn.Module:
    """A new model of `arch`; one whose descriptor FiLM-s the body reads it relative to the mean
    descriptor of the training platforms, so that no platform is the origin of the others."""
    model = build_model(arch, **(model_config or {}))
    if getattr(model, "hardware_film", None) is not None:
        with torch.no_grad():
            model.hardware_ref.copy_(torch.as_tensor(platform_hardware(data, train_ids), dtype=torch.float32).mean(0))
    return model


def train(data: ProgramData, train_ids, val_ids=(), config: TrainConfig | None = None, *, arch: str = "mamba",
          model_config: dict | None = None, progress: bool = True, device: str = "cpu",
          init: torch.nn.Module | None = None, **settings):
    """Trains a new model on the programs of train_ids; returns (model on the CPU, history).

    config: the settings (TrainConfig() by default); `settings` are TrainConfig fields that
        override it (e.g. epochs=2).
    init: start from a copy of this trained model (fine-tuning, e.g. a model of another platform
        adapting to a new one) instead of a fresh model of `arch` / `model_config`; `init` itself
        is left unchanged.
    device: where the steps run ("cuda" uses mamba_ssm's fused scan when it is installed).
    Without validation tasks every epoch runs and the last state is kept (or the mean of the last
    `average_last` of them).
    history: {"loss": [per epoch], "val_top1": [...], "val_pairwise": [...], "epoch_seconds": [...],
              "best_epoch": int (1-based), "best_val_top1": float | None, "averaged_epochs": int}.
    """
    from tqdm import tqdm

    cfg = replace(config or TrainConfig(), **settings)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    model = copy.deepcopy(init) if init is not None else _fresh_model(arch, model_config, data, train_ids)
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    hist = {"loss": [], "val_top1": [], "val_pairwise": [], "epoch_seconds": [], "best_epoch": 0,
            "best_val_top1": None}
    best, waited = None, 0
    epochs = epochs_for_steps(data, train_ids, cfg.epochs, cfg.min_steps, cfg.group_size, cfg.batch_tasks)
    averaged = LastEpochsAverage(epochs, 0.0 if val_ids else cfg.average_last)
    sched = lr_scheduler(opt, cfg.lr_schedule, epochs * steps_per_epoch(data, train_ids, cfg.group_size, cfg.batch_tasks))
    bar = tqdm(range(1, epochs + 1), desc=f"train {arch}", unit="epoch", disable=not progress)
    for epoch in bar:
        t0 = time.perf_counter()
        model.train()
        groups = task_groups(data, train_ids, cfg.group_size, rng)
        if not groups:
            raise FormatError("no training task has two or more programs: nothing to rank")
        losses = []
        for idx, gid in batches(groups, cfg.batch_tasks):
            labels = torch.from_numpy(data.label[idx]).to(device)
            scores, gid = model(*(t.to(device) for t in data.inputs(idx))), gid.to(device)
            loss = lambda_rank_loss(scores, labels, gid)
            if cfg.log_ratio_weight:
                loss = loss + cfg.log_ratio_weight * log_ratio_loss(scores, labels, gid)
            optimizer_step(opt, loss, model.parameters(), cfg.clip)
            sched.step()
            losses.append(loss.item())
        hist["loss"].append(float(np.mean(losses)))
        if val_ids:
            better = _validate(model, data, val_ids, epoch, hist, best)
            best, waited = (better, 0) if better is not None else (best, waited + 1)
        else:
            hist["best_epoch"] = epoch
        averaged.after_epoch(epoch, model)
        hist["epoch_seconds"].append(time.perf_counter() - t0)
        bar.set_postfix(loss=f"{hist['loss'][-1]:.4f}",
                        val_top1=f"{hist['val_top1'][-1]:.4f}" if val_ids else "-")
        if val_ids and waited >= cfg.patience:
            break
    if best is not None:
        model.load_state_dict(best[1])
    averaged.finish(model)
    hist["averaged_epochs"] = averaged.count
    model.cpu().eval()
    return model, hist


def train_validated(data: ProgramData, train_ids, config: TrainConfig | None = None, **train_kw):
    """Early stopping on config.val_fraction of the training tasks (none when 0: every epoch runs
    on all training tasks); then, with config.refit, a second run on every training task for the
    best epoch count. train_kw: train()'s keyword arguments and TrainConfig fields.

    Returns (model, history of the validated run, tasks fitted, validation tasks)."""
    fields = {k: train_kw.pop(k) for k in list(train_kw) if k in TrainConfig.__dataclass_fields__}
    cfg = replace(config or TrainConfig(), **fields)
    fit_ids, val_ids = hold_out(data.tasks, train_ids, cfg.val_fraction, cfg.seed + 1)
    model, hist = train(data, fit_ids, val_ids, cfg, **train_kw)
    if cfg.refit and val_ids:
        model, _ = train(data, train_ids, (), replace(cfg, epochs=hist["best_epoch"]), **train_kw)
        fit_ids = list(train_ids)
    hist["refit"] = bool(cfg.refit and val_ids)
    return model, hist, fit_ids, val_ids


def fit(paths, out=None, config: TrainConfig | None = None, *, arch: str = "mamba", model_config=None,
        featureset: FeatureSet | None = None, **train_kw):
    """Featurize `paths`, split by task (config.test_fraction), train (train_validated), and save
    a checkpoint to `out`. train_kw: train()'s keyword arguments and TrainConfig fields.

    Returns (model, checkpoint dict without weights, ProgramData, test task ids).
    """
    fields = {k: train_kw.pop(k) for k in list(train_kw) if k in TrainConfig.__dataclass_fields__}
    cfg = replace(config or TrainConfig(), **fields)
    t0 = time.perf_counter()
    fs = featureset if featureset is not None else featurize(paths)
    data = ProgramData(fs)
    train_ids, test_ids = split_tasks(data.tasks, cfg.test_fraction, cfg.seed)
    model, hist, fit_ids, val_ids = train_validated(data, train_ids, cfg, arch=arch, model_config=model_config,
                                                    **train_kw)

    def keys(ids):
        return sorted({task_key(data.tasks[i]) for i in ids})

    meta = {
        "data": [str(p) for p in ([paths] if isinstance(paths, (str, Path)) else paths or [])],
        "programs": len(data), "train_tasks": keys(fit_ids), "val_tasks": keys(val_ids),
        "test_tasks": keys(test_ids), "hardware": platform_hardware(data, train_ids), "seed": cfg.seed,
        "test_fraction": cfg.test_fraction,
        "val_fraction": cfg.val_fraction, "train": asdict(cfg), "history": hist,
        "epochs": len(hist["loss"]), "best_epoch": hist["best_epoch"],
        "best_val_top1": hist["best_val_top1"], "refit": hist["refit"], "seconds": time.perf_counter() - t0,
        "size_mb": model.size_mb(), "torch_threads": torch.get_num_threads(),
    }
    if out is not None:
        save_checkpoint(out, model, arch, meta)
    return model, {"arch": arch, "config": model.cfg.to_dict(), "spec_version": SPEC.version,
                   "hardware_dim": HARDWARE_DIM, "meta": meta}, data, test_ids
