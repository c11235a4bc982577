"""Measuring the programs the sampler picks, for real, with TVM.

The pool is a dataset's programs (e.g. those collected on one platform); each pick is built and
run on `target` (locally or through an RPC tracker) and committed to a stock JSONDatabase per task
under `out_dir`, so what the sampler measured is itself a dataset of the new platform.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tvm.s_tir import meta_schedule as ms

from .collect_session import check_rpc, make_measurer
from .measure import FAILED, run_seconds
from .targets import check_target, local_device_target, parse_target
from .dataset import RecordReader


class TVMOracle:
    """`measure(idx)` -> mean seconds per program (inf for a failed build or run)."""

    def __init__(self, featureset, out_dir, target=None, rpc: str | None = None, key: str | None = None,
                 repeat: int = 3, min_repeat_ms: int = 100, batch_size: int = 16):
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tracker = check_rpc(rpc, key)
        self.target = parse_target(target)
        if tracker is None:
            self.target = local_device_target(self.target)
        check_target(self.target)
        self.measurer = make_measurer(self.target, tracker, key, repeat, min_repeat_ms, None)
        self.batch_size = batch_size
        self.reader = RecordReader(featureset)
        self.calls = 0

    def close(self):
        self.measurer.close()

    def measure(self, idx) -> np.ndarray:
        self.calls += 1
        idx = np.asarray(idx)
        out = np.full(len(idx), np.inf)
        by_task: dict[str, list[tuple[int, object]]] = {}
        for k, i in enumerate(idx):
            rec, task_dir = self.reader.record(int(i))
            by_task.setdefault(task_dir, []).append((k, rec))
        for task_dir, items in by_task.items():
            (self.out_dir / task_dir).mkdir(exist_ok=True)
            db = ms.database.JSONDatabase(work_dir=str(self.out_dir / task_dir))
            workload = db.commit_workload(items[0][1].workload.mod)
            for a in range(0, len(items), self.batch_size):
                batch = items[a:a + self.batch_size]
                results = self.measurer.measure(db, workload, [r.as_measure_candidate() for _, r in batch])
                for (k, _), res in zip(batch, results):
                    secs = run_seconds(res)
                    out[k] = np.inf if secs == [FAILED] else float(np.mean(secs))
        return out
