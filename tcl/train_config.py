"""The settings of training a cost model, each default stated once.

tcl.train reads them, and so do `tcl train`, the continual-learning config and the benchmarks.
This module needs no torch, so `tcl --help` can show the defaults without loading it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LR_SCHEDULES", "TrainConfig"]

LR_SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class TrainConfig:
    """How tcl.train fits a model. A fixed number of epochs and no validation tasks by default:
    early stopping on a few validation tasks stopped while the held-out Top-1 still swung from
    epoch to epoch (docs/training.md, "Why a fixed number of epochs")."""

    epochs: int = 40  # at most, when validation tasks stop training early
    lr: float = 7e-4  # Adam's learning rate
    weight_decay: float = 1e-6  # Adam's
    clip: float = 0.5  # gradient-norm clipping
    batch_tasks: int = 8  # task groups per batch
    group_size: int = 32  # programs of one task ranked together, at most
    patience: int = 10  # with validation tasks: epochs without a better Top-1 before stopping
    min_steps: int = 0  # run more epochs when `epochs` would make fewer optimizer steps
    # Without validation tasks: the model is the mean of its weights over this last fraction of the
    # epochs (0: the last epoch's). Off: it measured worse in the sampler (docs/sampling.md).
    average_last: float = 0.0
    # Weight of tcl.model.losses.log_ratio_loss beside LambdaRank (0: LambdaRank alone).
    log_ratio_weight: float = 0.0
    lr_schedule: str = "constant"  # one of LR_SCHEDULES; cosine was no better (docs/training.md)
    seed: int = 0  # of the splits, the initial weights and the shuffling
    threads: int | None = None  # torch threads (None: torch's own choice)
    test_fraction: float = 0.0  # tasks held out when no task.json has a split
    val_fraction: float = 0.0  # training tasks that validate each epoch and stop early (0: none)
    refit: bool = False  # after early stopping, train again on every training task for the best epoch count
