"""A FeatureSet's programs back as MetaSchedule objects (TuningRecord, MeasureCandidate).

tcl.featurize keeps, per program, its source database and line; this reads those lines with stock
TVM so that TVM's own cost models (XGBModel, MLPModel) or a builder/runner can use the same programs.
"""

from __future__ import annotations

import json
from pathlib import Path

from tvm.s_tir import meta_schedule as ms

from ..records import WORKLOAD_FILE, _base_name, _find, read_bytes


class RecordReader:
    """record(i) -> (TuningRecord of program i, its task directory name); files are read once."""

    def __init__(self, featureset):
        self.fs = featureset
        self._sources: dict[int, tuple[list[str], list]] = {}

    def record(self, i: int):
        src = int(self.fs.source[i])
        path = Path(self.fs.sources[src])
        if src not in self._sources:
            # plain or compressed, whichever is there now (a dataset may be packed after featurizing)
            path = _find(path.parent, _base_name(path)) or path
            wl_path = _find(path.parent, WORKLOAD_FILE)
            workloads = [ms.database.Workload.from_json(json.loads(w))
                         for w in read_bytes(wl_path).decode().split("\n") if w.strip()]
            self._sources[src] = (read_bytes(path).decode().split("\n"), workloads)
        lines, workloads = self._sources[src]
        idx, rec = json.loads(lines[int(self.fs.line[i]) - 1])
        return ms.database.TuningRecord.from_json(rec, workloads[idx]), path.parent.name

    def records(self, idx) -> list:
        return [self.record(int(i))[0] for i in idx]
