"""TCL as a MetaSchedule cost model: `ms.tune_tir(..., cost_model=CostModel(path))`.

predict: each candidate's trace as `str(trace)` (the cheapest way out of TVM) -> featurized in
C++ -> scored by the ONNX model in onnxruntime on one thread. No torch.

update: the exported model is fixed; what this tuning run measures corrects it per task with a
small ridge regression (closed form, cheap next to a measurement) from [model score, pooled
features, tile sizes (tcl.tile_decisions)] to the measured normalised throughput (best latency of
the task so far / latency). It starts to count once a task has `min_samples` measurements and its
weight grows with their number, so the pretrained ranking leads early and the run's own evidence
later.

platform: the platform.json of the hardware being tuned (tcl.tvm.hardware.platform_descriptor); the
model reads its hardware descriptor, so one model trained on several platforms serves each of them.
Without it, the platform the model was exported with.
"""

from __future__ import annotations

import json
import time

import numpy as np
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from ..atomic import write_json
from ..features import SPEC, featurize_traces
from ..hardware import hardware_vector
from ..runtime import Scorer
from ..tile_decisions import NUM_FEATURES, alignment_features, innermost_factors


def _pooled(seq, length) -> np.ndarray:
    """Mean of each program's valid rows: a cheap fixed-size summary for the residual. The
    featurizer zeroes the padding rows, so a plain sum over the steps needs no mask."""
    return seq.sum(1) / np.maximum(length, 1)[:, None]


DEFAULT_EXPLORE = 0.5  # the weight bench/tuning.py measured (docs/tuning.md, docs/results.md)


def _with_intercept(x: np.ndarray) -> np.ndarray:
    return np.hstack([x, np.ones((len(x), 1))])


def _standard(v: np.ndarray) -> np.ndarray:
    return (v - v.mean()) / (v.std() + 1e-9)


class _TaskResidual:
    """Ridge regression of measured throughput on [score, pooled features, tile sizes] for one task."""

    def __init__(self):
        self.x: list[np.ndarray] = []
        self.secs: list[float] = []
        self.coef: np.ndarray | None = None
        self.a_inv: np.ndarray | None = None

    def add(self, x: np.ndarray, secs: np.ndarray):
        self.x.extend(x)
        self.secs.extend(secs.tolist())

    def fit(self, alpha: float):
        x = np.asarray(self.x, np.float64)
        secs = np.asarray(self.secs)
        y = secs.min() / secs  # normalised throughput within the task, in (0, 1]
        x1 = _with_intercept(x)
        self.a_inv = np.linalg.inv(x1.T @ x1 + alpha * np.eye(x1.shape[1]))
        self.coef = self.a_inv @ (x1.T @ y)

    def correct(self, x: np.ndarray) -> np.ndarray:
        return _with_intercept(x) @ self.coef

    def spread(self, x: np.ndarray) -> np.ndarray:
        """sqrt(x^T A^-1 x): how far x lies from what was measured, in the ridge's metric."""
        x1 = _with_intercept(x)
        return np.sqrt(np.maximum(((x1 @ self.a_inv) * x1).sum(1), 0.0))


@derived_object
class CostModel(ms.cost_model.PyCostModel):
    """A TCL cost model (exported ONNX file) inside MetaSchedule's search."""

    def __init__(self, model_path=None, threads: int = 1, adapt: bool = True, min_samples: int = 16,
                 alpha: float = 1.0, ramp: int = 128, explore: float = DEFAULT_EXPLORE,
                 platform: dict | None = None, tile_sizes: bool = True):
        super().__init__()
        if model_path is None:
            from ..runtime import default_onnx_path

            model_path = default_onnx_path()
        self.scorer = Scorer(model_path, threads=threads)
        self.hardware = hardware_vector(platform) if platform is not None else self.scorer.hardware
        self.adapt, self.min_samples, self.alpha, self.ramp = adapt, min_samples, alpha, ramp
        self.explore = explore
        self.tile_sizes = tile_sizes  # the correction reads tcl.tile_decisions (False: what that is worth)
        self.tasks: dict[int, _TaskResidual] = {}
        self.stats = {"predict_calls": 0, "predicted": 0, "predict_seconds": 0.0,
                      "update_calls": 0, "updated": 0, "update_seconds": 0.0}

    # -- the correction, on featurized programs (also what bench/correction_replay.py replays)
    def program_features(self, seq, length, workload) -> tuple[np.ndarray, np.ndarray]:
        """(the exported model's scores, the correction's inputs) of featurized programs."""
        hardware = np.broadcast_to(self.hardware, (len(seq), len(self.hardware)))
        score = self.scorer.score(seq, length, workload, hardware)
        tiles = alignment_features(innermost_factors(seq)) if self.tile_sizes else np.zeros((len(seq), 0))
        return score, np.hstack([score[:, None], _pooled(seq, length), workload, tiles])

    def observe(self, task, x: np.ndarray, secs: np.ndarray) -> None:
        """Measured programs of `task` (their correction inputs and mean seconds); the task's ridge is
        refitted once it has `min_samples`."""
        res = self.tasks.setdefault(task, _TaskResidual())
        res.add(x, secs)
        if len(res.secs) >= self.min_samples:
            res.fit(self.alpha)

    def ranking(self, task, score: np.ndarray, x: np.ndarray, explore: float | None = None) -> np.ndarray:
        """Higher = predicted faster: the model's scores, blended with the task's correction (which
        gains weight as its measurements accumulate) plus the exploration bonus (`explore`, default
        the model's)."""
        res = self.tasks.get(task)
        if not self.adapt or res is None or res.coef is None:
            return score
        w = min(1.0, len(res.secs) / self.ramp)
        blended = (1 - w) * _standard(score) + w * _standard(res.correct(x))
        explore = self.explore if explore is None else explore
        return blended + explore * _standard(res.spread(x)) if explore else blended

    def _features(self, candidates):
        return self.program_features(*featurize_traces([str(c.sch.trace) for c in candidates]))

    @staticmethod
    def _task(context) -> int:
        return int(tvm_ffi.structural_hash(context.mod))

    # -- PyCostModel
    def predict(self, context, candidates) -> np.ndarray:
        t0 = time.perf_counter()
        if not candidates:
            return np.zeros(0)
        score = self.ranking(self._task(context), *self._features(candidates))
        self.stats["predict_calls"] += 1
        self.stats["predicted"] += len(candidates)
        self.stats["predict_seconds"] += time.perf_counter() - t0
        return np.asarray(score, np.float64)

    def update(self, context, candidates, results) -> None:
        if not self.adapt or not candidates:
            return
        t0 = time.perf_counter()
        ok = [i for i, r in enumerate(results) if r.run_secs and not r.error_msg]
        if ok:
            secs = np.array([np.mean([float(s) for s in results[i].run_secs]) for i in ok])
            _, x = self._features([candidates[i] for i in ok])
            self.observe(self._task(context), x, secs)
        self.stats["update_calls"] += 1
        self.stats["updated"] += len(candidates)
        self.stats["update_seconds"] += time.perf_counter() - t0

    def save(self, path: str) -> None:
        state = {str(k): {"x": np.asarray(v.x).tolist(), "secs": v.secs} for k, v in self.tasks.items()}
        write_json(path, {"model": self.scorer.path, "tasks": state}, indent=None)

    def load(self, path: str) -> None:
        with open(path) as f:
            state = json.load(f)
        self.tasks = {}
        width = 1 + SPEC.row_dim + SPEC.workload_dim + (NUM_FEATURES if self.tile_sizes else 0)
        for k, v in state["tasks"].items():
            if v["x"] and len(v["x"][0]) != width:
                raise ValueError(f"{path}: saved by another version of tcl ({len(v['x'][0])} features per "
                                 f"program, this one has {width}); tune without it")
            self.observe(int(k), np.asarray(v["x"]), np.asarray(v["secs"]))
