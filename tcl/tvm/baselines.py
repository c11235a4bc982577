"""TVM's own cost models, the baselines TCL is compared with, made usable beside torch 2.x.

XGBModel and RandomModel work as they are. MLPModel (TenSet-MLP) is meant to be pretrained on a
dataset and then adapted during tuning; fresh, its first update fails when a single task is tuned
(its validation split is 20% of the workloads, i.e. none). `pretrained_mlp` trains it on a dataset's
training tasks (the same tasks TCL's default model learned from) and caches the result;
`MLPCostModel` wraps it for the search loop with the workarounds TVM 0.27 needs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from .builder import import_cpu_tensor_intrin
from .dataset import RecordReader


@contextlib.contextmanager
def mlp_fixes():
    """Two fixes TVM 0.27's MLPModel needs while it trains: train_full passes verbose= to StepLR,
    which torch 2.x removed; and a batch of one program (the data size is 1 more than a multiple of
    the batch size, e.g. a measured batch of one) comes out of the model as a 0-d tensor that the
    loss and the top-k score cannot index and that predict_incremental cannot concatenate. Given
    1-d, all three handle it (a single program has nothing to rank against: loss 0)."""
    from unittest import mock

    import torch
    from tvm.s_tir.meta_schedule.cost_model import mlp_model

    class StepLR(torch.optim.lr_scheduler.StepLR):
        def __init__(self, *args, verbose=None, **kw):
            super().__init__(*args, **kw)

    def one_d(fn):
        return lambda preds, labels, *a, **kw: fn(torch.atleast_1d(preds), torch.atleast_1d(labels), *a, **kw)

    predict_step = mlp_model.SegmentSumMLPTrainer.predict_step

    def predict_step_1d(self, data):
        preds, loss, scores = predict_step(self, data)
        return np.atleast_1d(preds), loss, scores

    with mock.patch.object(torch.optim.lr_scheduler, "StepLR", StepLR), \
            mock.patch.object(mlp_model, "lambda_rank_loss", one_d(mlp_model.lambda_rank_loss)), \
            mock.patch.object(mlp_model, "topk_score", one_d(mlp_model.topk_score)), \
            mock.patch.object(mlp_model.SegmentSumMLPTrainer, "predict_step", predict_step_1d):
        yield


def mlp_predict(model, context, candidates) -> np.ndarray:
    """MLPModel.predict, except that it fails on a last batch of one program (a 0-d array): score
    one duplicate more and drop it."""
    extra = candidates[:1] if len(candidates) % model.trainer.batch_size == 1 else []
    return np.asarray(model.predict(context, list(candidates) + extra))[:len(candidates)]


def task_records(reader: RecordReader, data, task_id: int):
    """(program indices, TuneContext, MeasureCandidates, RunnerResults) of one task of a dataset."""
    idx = data.programs_of([task_id])
    recs = reader.records(idx)
    ctx = ms.TuneContext(mod=recs[0].workload.mod, target=recs[0].target, num_threads=1)
    return idx, ctx, [r.as_measure_candidate() for r in recs], [ms.runner.RunnerResult(r.run_secs, None) for r in recs]


def fit_mlp(reader: RecordReader, data, train_ids, seed: int = 0):
    """An MLPModel trained on every program of the training tasks at once (train_full)."""
    import random

    import torch

    from tvm.s_tir.meta_schedule.cost_model.mlp_model import MLPModel, extract_features

    import_cpu_tensor_intrin()
    train_ids = [t for t in train_ids if len(data.programs_of([t]))]
    if len(train_ids) < 5:
        raise ValueError(f"MLPModel needs 5 or more training tasks (its validation split is 20% of them); got {len(train_ids)}")
    model = MLPModel()
    state = model.trainer.state
    for t in train_ids:
        _, ctx, cands, results = task_records(reader, data, t)
        feats, costs = extract_features(ctx, cands, results, state.extractor)
        state.add_to_group(feats, costs, ms.utils.shash2hex(ctx.mod))
    random.seed(seed)  # train_full draws its validation workloads with `random`
    torch.manual_seed(seed)
    with mlp_fixes():
        model.trainer.train_full()
    return model


def _dataset_key(dataset_dir: Path) -> str:
    """Changes when the dataset's records do (names and sizes of its database files)."""
    h = hashlib.sha256()
    for f in sorted(dataset_dir.glob("*/database_tuning_record.json*")):
        h.update(f"{f.parent.name}/{f.name}:{f.stat().st_size}\n".encode())
    return h.hexdigest()[:16]


def pretrained_mlp(dataset_dir, cache_dir=None):
    """MLPModel trained on the training split of `dataset_dir`, loaded from the cache when that
    dataset was seen before (training takes about a minute on 2 cores)."""
    from tvm.s_tir.meta_schedule.cost_model.mlp_model import MLPModel

    import tcl
    from tcl.program_data import ProgramData, split_tasks

    dataset_dir = Path(dataset_dir)
    if not any(dataset_dir.glob("*/database_tuning_record.json*")):
        raise FileNotFoundError(f"{dataset_dir}: no measured dataset to pretrain MLPModel on (a `tcl collect` output)")
    cache_dir = Path(cache_dir or os.environ.get("TCL_CACHE", Path.home() / ".cache" / "tcl"))
    path = cache_dir / f"mlp-{dataset_dir.resolve().name}-{_dataset_key(dataset_dir)}.tar"
    model = MLPModel()
    if path.is_file():
        model.load(str(path))
    else:
        fs = tcl.featurize(dataset_dir)
        data = ProgramData(fs)
        train_ids, _ = split_tasks(data.tasks, 0.2, 0)
        model = fit_mlp(RecordReader(fs), data, train_ids)
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        model.save(str(tmp))
        os.replace(tmp, path)  # a killed run leaves no half-written cache entry
    # load() counts the cached programs as untrained, so the first update would retrain from scratch
    model.trainer.state.untrained_size = 0
    return model


@derived_object
class MLPCostModel(ms.cost_model.PyCostModel):
    """A pretrained MLPModel in the search loop: it adapts to each measured batch as MLPModel does
    (incremental steps; a full retrain once over 20% of its data is new)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def load(self, path):
        self.inner.load(path)

    def save(self, path):
        self.inner.save(path)

    def update(self, context, candidates, results):
        with mlp_fixes():
            self.inner.update(context, candidates, results)

    def predict(self, context, candidates):
        return mlp_predict(self.inner, context, candidates)
