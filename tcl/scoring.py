"""A model's scores of programs, and the Top-k summary of its ranking on some tasks."""

from __future__ import annotations

import numpy as np
import torch

from .features import FeatureSet
from .metrics import evaluate_predictions
from .program_data import ProgramData, task_key

__all__ = ["predict", "score_tasks"]


@torch.no_grad()
def predict(model, data: FeatureSet | ProgramData, batch_size: int = 256, idx=None) -> np.ndarray:
    """Scores [len(idx)] (all programs by default) in eval mode; higher = predicted faster."""
    data = data if isinstance(data, ProgramData) else ProgramData(data)
    idx = np.arange(len(data)) if idx is None else np.asarray(idx)
    order = idx[np.argsort(data.length[idx], kind="stable")]  # similar lengths batch together
    out = np.empty(len(data), np.float32)
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        for a in range(0, len(order), batch_size):
            b = order[a:a + batch_size]
            out[b] = model(*(t.to(device) for t in data.inputs(b))).float().cpu().numpy()
    finally:
        model.train(was_training)
    return out[idx]


def score_tasks(model, data: ProgramData, task_ids, batch_size: int = 256) -> dict:
    """tcl.metrics summary of the model's ranking on the given tasks (names = task keys)."""
    idx = data.programs_of(task_ids)
    keys = [task_key(t) for t in data.tasks]
    nets = {task_key(t): t.network_weights for t in data.tasks}
    return evaluate_predictions(data.cost[idx], predict(model, data, batch_size, idx),
                                data.task[idx], keys, nets)
