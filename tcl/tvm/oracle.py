"""Measuring the programs the sampler picks, for real, with TVM.

The pool is a dataset's programs (e.g. those collected on one platform); each pick is built and
run on `target` (locally or through an RPC tracker) and committed to a stock JSONDatabase per task
under `out_dir`, so what the sampler measured is itself a dataset of the new platform.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tvm.s_tir import meta_schedule as ms

from ..records import read_bytes
from .collect import FAILED, _check_rpc, _make_measurer, check_target, local_device_target, parse_target


class TVMOracle:
    """`measure(idx)` -> mean seconds per program (inf for a failed build or run)."""

    def __init__(self, featureset, out_dir, target=None, rpc: str | None = None, key: str | None = None,
                 repeat: int = 3, min_repeat_ms: int = 100, batch_size: int = 16):
        self.fs = featureset
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        tracker = _check_rpc(rpc, key)
        self.target = parse_target(target)
        if tracker is None:
            self.target = local_device_target(self.target)
        check_target(self.target)
        self.measurer = _make_measurer(self.target, tracker, key, repeat, min_repeat_ms, None)
        self.batch_size = batch_size
        self._sources: dict[int, tuple[list[str], list]] = {}
        self.calls = 0

    def close(self):
        self.measurer.close()

    def _record(self, i: int):
        """The tuning record of program i, read from its line of its source database."""
        src = int(self.fs.source[i])
        path = Path(self.fs.sources[src])
        if src not in self._sources:  # each database's files are read once
            wl_path = next(p for p in path.parent.iterdir() if p.name.startswith("database_workload.json"))
            workloads = [ms.database.Workload.from_json(json.loads(w))
                         for w in read_bytes(wl_path).decode().split("\n") if w.strip()]
            self._sources[src] = (read_bytes(path).decode().split("\n"), workloads)
        lines, workloads = self._sources[src]
        idx, rec = json.loads(lines[int(self.fs.line[i]) - 1])
        return ms.database.TuningRecord.from_json(rec, workloads[idx]), path.parent.name

    def measure(self, idx) -> np.ndarray:
        self.calls += 1
        idx = np.asarray(idx)
        out = np.full(len(idx), np.inf)
        by_task: dict[str, list[tuple[int, object]]] = {}
        for k, i in enumerate(idx):
            rec, task_dir = self._record(int(i))
            by_task.setdefault(task_dir, []).append((k, rec))
        for task_dir, items in by_task.items():
            db = ms.database.JSONDatabase(work_dir=str(self.out_dir / task_dir))
            workload = db.commit_workload(items[0][1].workload.mod)
            for a in range(0, len(items), self.batch_size):
                batch = items[a:a + self.batch_size]
                results = self.measurer.measure(db, workload, [r.as_measure_candidate() for _, r in batch])
                for (k, _), res in zip(batch, results):
                    secs = [float(s) for s in res.run_secs] if res.run_secs and not res.error_msg else [FAILED]
                    out[k] = np.inf if secs == [FAILED] else float(np.mean(secs))
        return out
