"""A FeatureSet's programs back as MetaSchedule objects (TuningRecord, MeasureCandidate).

tcl.featurize keeps, per program, its source database and line; this reads those lines with stock
TVM so that TVM's own cost models (XGBModel, MLPModel) or a builder/runner can use the same programs.
"""

from __future__ import annotations

import json
from pathlib import Path

from tvm.s_tir import meta_schedule as ms

from ..records import RECORD_FILE, WORKLOAD_FILE, _find, read_bytes


def read_database(task_dir) -> tuple[list[str], list]:
    """(the tuning-record lines, the Workloads) of one task database, plain or packed (.xz)."""
    task_dir = Path(task_dir)
    workloads = [ms.database.Workload.from_json(json.loads(w))
                 for w in read_bytes(_find(task_dir, WORKLOAD_FILE)).decode().split("\n") if w.strip()]
    return read_bytes(_find(task_dir, RECORD_FILE)).decode().split("\n"), workloads


def records_in_file_order(task_dir) -> list:
    """A task database's TuningRecords in file order (get_all_tuning_records sorts them by latency)."""
    lines, workloads = read_database(task_dir)
    out = []
    for line in lines:
        if line.strip():
            idx, rec = json.loads(line)
            out.append(ms.database.TuningRecord.from_json(rec, workloads[idx]))
    return out


class RecordReader:
    """record(i) -> (TuningRecord of program i, its task directory name); files are read once."""

    def __init__(self, featureset):
        self.fs = featureset
        self._sources: dict[int, tuple[list[str], list]] = {}

    def record(self, i: int):
        src = int(self.fs.source[i])
        task_dir = Path(self.fs.sources[src]).parent
        if src not in self._sources:
            # plain or packed, whichever is there now (a dataset may be packed after featurizing)
            self._sources[src] = read_database(task_dir)
        lines, workloads = self._sources[src]
        idx, rec = json.loads(lines[int(self.fs.line[i]) - 1])
        return ms.database.TuningRecord.from_json(rec, workloads[idx]), task_dir.name

    def records(self, idx) -> list:
        return [self.record(int(i))[0] for i in idx]
