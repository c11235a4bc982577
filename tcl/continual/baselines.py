"""The continual-learning baselines CKD is compared with (bench/continual.py).

finetune: the KB keeps training on each new platform (LambdaRank), optionally with online EWC;
separate: a new model per platform (the size grows with the platforms); joint: every platform's
data at once, either a shared body with one head per platform (MultiHead, the MTL-style upper
bound) or one model for all (SharedModel, the descriptor its only way to tell platforms apart).
Each trains for CKDConfig.single_model_epochs, as long as CKD's two phases together.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn as nn

from ..architectures import build_model
from ..averaging import LastEpochsAverage
from ..model.losses import lambda_rank_loss
from ..program_data import ProgramData, batches, task_groups
from ..train import epochs_for_steps, optimizer_step, seed_everything, train
from .config import CKDConfig
from .ewc import OnlineEWC

__all__ = ["MultiHead", "SharedModel", "finetune", "joint", "separate"]


def finetune(model, data: ProgramData, ids, cfg: CKDConfig, ewc: OnlineEWC | None = None, ewc_lambda: float = 0.0):
    """A copy of `model` trained further on new data (LambdaRank), with the EWC penalty at
    ewc_lambda when `ewc` is given."""
    model = copy.deepcopy(model)
    for p in model.parameters():
        p.requires_grad_(True)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed)
    model.train()
    epochs = epochs_for_steps(data, ids, cfg.single_model_epochs, 2 * cfg.min_steps, cfg.group_size, cfg.batch_tasks)
    average = LastEpochsAverage(epochs, cfg.average_last)
    for epoch in range(1, epochs + 1):
        for idx, gid in batches(task_groups(data, ids, cfg.group_size, rng), cfg.batch_tasks):
            loss = lambda_rank_loss(model(*data.inputs(idx)), torch.from_numpy(data.label[idx]), gid)
            if ewc is not None:
                loss = loss + ewc.penalty(model, ewc_lambda)
            optimizer_step(opt, loss, model.parameters(), cfg.clip)
        average.after_epoch(epoch, model)
    average.finish(model)
    model.eval()
    return model


def separate(data: ProgramData, ids, cfg: CKDConfig, model_config: dict | None = None):
    """A new model trained on this platform alone (as the first KB is, without its FiLM layers)."""
    model, _ = train(data, ids, (), cfg.train_config(), model_config=model_config, progress=False)
    return model


class SharedModel(nn.Module):
    """One model for every platform (the KB's architecture: the hardware descriptor is its only
    way to tell them apart); `platform` is ignored."""

    def __init__(self, model_config: dict | None):
        super().__init__()
        self.body = build_model("mamba", **(model_config or {}))
        self.platform = 0

    def forward(self, *inputs):
        return self.body(*inputs)

    def size_mb(self) -> float:
        return self.body.size_mb()


class MultiHead(nn.Module):
    """A shared MambaCostModel body with one head per platform; `platform` selects the head."""

    def __init__(self, n_platforms: int, model_config: dict | None):
        super().__init__()
        self.body = build_model("mamba", **(model_config or {}))
        self.heads = nn.ModuleList(copy.deepcopy(self.body.decoder) for _ in range(n_platforms))
        self.platform = 0

    def forward(self, seq, lengths, workload=None, hardware=None):
        b = self.body
        parts = [b.embedding(seq, lengths)]
        if b.workload_proj is not None:
            parts.append(b.workload_proj(workload))
        if b.hardware_proj is not None:
            parts.append(b.hardware_proj(hardware))
        return self.heads[self.platform](torch.cat(parts, -1)).squeeze(-1)

    def size_mb(self) -> float:
        return sum(p.numel() for n, p in self.named_parameters() if not n.startswith("body.decoder")) * 4 / 1e6


def joint(datas: list[ProgramData], train_ids, cfg: CKDConfig, model_config=None, shared_head: bool = False):
    """All platforms' data at once, batches of one platform each, shuffled together; a head per
    platform, or (shared_head) one model for all, the most a single KB can hold."""
    seed_everything(cfg.seed)
    model = SharedModel(model_config) if shared_head else MultiHead(len(datas), model_config)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed)
    model.train()
    epochs = cfg.single_model_epochs
    average = LastEpochsAverage(epochs, cfg.average_last)
    for epoch in range(1, epochs + 1):
        todo = []
        for k, (d, ids) in enumerate(zip(datas, train_ids)):
            todo += [(k, idx, gid) for idx, gid in batches(task_groups(d, ids, cfg.group_size, rng), cfg.batch_tasks)]
        rng.shuffle(todo)
        for k, idx, gid in todo:
            model.platform = k
            loss = lambda_rank_loss(model(*datas[k].inputs(idx)), torch.from_numpy(datas[k].label[idx]), gid)
            optimizer_step(opt, loss, model.parameters(), cfg.clip)
        average.after_epoch(epoch, model)
    average.finish(model)
    model.eval()
    return model
