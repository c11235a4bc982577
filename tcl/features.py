"""The feature spec and the front of the C++ featurizer.

A program becomes `seq[L, D]` float32 (one row per schedule step / trace instruction, padded with
zero rows at the END), its true `length`, and a `workload[W]` descriptor. See FeatureSpec and
docs/features.md ("Feature layout"). The same C++ code featurizes files (`featurize`) and in-memory
traces from the search loop (`featurize_traces`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import _core
from .errors import FormatError, escape_controls
from .records import discover, read_bytes, read_platform, read_task_info


@dataclass(frozen=True)
class FeatureSpec:
    """Fixed shapes and meaning of the features; `version` changes whenever they do."""

    version: int
    seq_len: int  # L: rows per program; steps beyond L are dropped (counted as truncated)
    kind_names: tuple[str, ...]  # one-hot vocabulary; index 0 = unknown kind
    num_numeric: int  # numeric slots per row after the one-hot; values beyond are dropped
    workload_dim: int  # W
    tag_names: tuple[str, ...]

    @property
    def num_kinds(self) -> int:
        return len(self.kind_names)

    @property
    def row_dim(self) -> int:  # D
        return self.num_kinds + self.num_numeric

    def check(self, version: int, what: str = "model"):
        if version != self.version:
            raise FormatError(
                f"{what} was made for feature spec version {version}, but this featurizer is "
                f"version {self.version}: retrain or re-export it with this version of tcl"
            )


SPEC = FeatureSpec(
    version=_core.SPEC_VERSION,
    seq_len=_core.SEQ_LEN,
    kind_names=tuple(_core.KIND_NAMES),
    num_numeric=_core.NUM_NUMERIC,
    workload_dim=_core.WORKLOAD_DIM,
    tag_names=tuple(_core.TAG_NAMES),
)


@dataclass
class TaskInfo:
    """One task (a workload on a target) of a FeatureSet."""

    workload: str  # Ansor workload key, or MetaSchedule structural hash
    target: str
    source: str  # the first file or database it came from
    failed: int  # failed measurements, not among the programs
    hardware_params: list = field(default_factory=list)
    weight: float = 1.0  # occurrences in its network(s), from task.json; 1 when unknown
    name: str = ""
    networks: dict = field(default_factory=dict)  # network -> occurrences in it
    flops: float | None = None
    split: str = ""  # "train" / "test" (held-out networks) when task.json says so
    platform: dict | None = None  # platform.json beside the database or in a parent

    @property
    def network_weights(self) -> dict:
        """{network: occurrences} for the pooled scores; {"all": weight} when no network is known."""
        return self.networks or {"all": self.weight}


@dataclass
class FeatureSet:
    """Featurized programs: arrays indexed by program, tasks indexed by `task`."""

    seq: np.ndarray  # [N, L, D] float32
    length: np.ndarray  # [N] int32
    task: np.ndarray  # [N] int32 index into tasks
    label: np.ndarray  # [N] float32 best latency of the task / latency, in (0, 1]
    cost: np.ndarray  # [N] float64 mean measured seconds
    workload: np.ndarray  # [N, W] float32
    source: np.ndarray  # [N] int32 index into sources
    line: np.ndarray  # [N] int64 line in that source
    tasks: list[TaskInfo]
    sources: list[str]
    skipped: int = 0  # malformed lines skipped under errors="skip"
    truncated: int = 0  # programs longer than L
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # files of a directory passed over: not records

    def __len__(self) -> int:
        return int(self.length.shape[0])

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.tasks)

    def summary(self) -> dict:
        return {
            "programs": len(self),
            "tasks": len(self.tasks),
            "failed": self.failed,
            "skipped": self.skipped,
            "truncated": self.truncated,
        }

    def save(self, path: str | os.PathLike):
        """Writes an .npz (at exactly `path`, whole or not at all) with the arrays plus the spec
        version and the task table as JSON."""
        from .atomic import atomic_path, check_writable

        tasks = [t.__dict__ for t in self.tasks]
        with atomic_path(check_writable(path)) as tmp, open(tmp, "wb") as f:  # a file object: no ".npz" added
            np.savez_compressed(
                f,
                seq=self.seq, length=self.length, task=self.task, label=self.label, cost=self.cost,
                workload=self.workload, source=self.source, line=self.line,
                spec_version=np.int32(SPEC.version),
                tasks=np.array(json.dumps(tasks)), sources=np.array(json.dumps(self.sources)),
            )


def _resolve_threads(threads: int | None) -> int:
    return 0 if threads is None else int(threads)


def featurize(paths, errors: str = "raise", threads: int | None = None) -> FeatureSet:
    """Featurize Ansor logs and MetaSchedule databases (any mix of files and directory trees).

    errors="raise" raises FormatError naming file, line and what was expected at the first bad
    line; errors="skip" skips bad lines and counts them in `.skipped` (first messages in `.errors`).
    threads: parser threads (default: all cores).
    """
    t0 = time.perf_counter()
    notes: list[str] = []
    sources = discover(paths, notes)
    items = []
    for s in sources:
        if s.kind == "ansor":
            items.append(("ansor", str(s.path), read_bytes(s.path), None, None))
        else:
            items.append(("metaschedule", str(s.path), read_bytes(s.path), str(s.workload_path),
                          read_bytes(s.workload_path)))
    out = _core.featurize_files(items, errors, _resolve_threads(threads))
    del items
    roots = [Path(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    tasks = []
    for t in out["tasks"]:
        src = sources[t["source"]]
        info = TaskInfo(workload=t["workload"], target=t["target"], source=str(src.path),
                        failed=t["failed"], hardware_params=t["hardware_params"])
        if src.kind == "metaschedule":
            meta = read_task_info(src.directory) or {}
            info.name = meta.get("name", "")
            info.weight = float(meta.get("weight", 1.0))
            # task.json: "weights" {network: occurrences}; "networks" a list (or such a dict)
            nets = meta.get("weights") or meta.get("networks") or {}
            info.networks = {n: 1 for n in nets} if isinstance(nets, list) else dict(nets)
            info.flops = meta.get("flops")
            info.split = meta.get("split", "")
            stop = next((r for r in roots if r.is_dir() and src.directory.resolve().is_relative_to(r.resolve())), None)
            info.platform = read_platform(src.directory, stop)
        tasks.append(info)
    return FeatureSet(
        seq=out["seq"], length=out["length"], task=out["task"], label=out["label"],
        cost=out["cost"], workload=out["workload"], source=out["source"], line=out["line"],
        tasks=tasks, sources=[str(s.path) for s in sources], skipped=out["skipped"],
        truncated=out["truncated"], errors=[escape_controls(e) for e in out["errors"]], notes=notes,
        seconds=time.perf_counter() - t0,
    )


def featurize_traces(traces, args_info=None, threads: int = 1):
    """Featurize in-memory MetaSchedule traces for scoring: no files involved.

    traces: a list of trace JSON strings `[[insts], [decisions]]` (as in a tuning record), or of
    lists in that form (`Trace.as_json()`), which are serialized first.
    args_info: the task's argument info (JSON string or list), shared by all traces, or None.
    Returns (seq [N, L, D] float32, length [N] int32, workload [N, W] float32).
    """
    texts = [t if isinstance(t, str) else json.dumps(t, separators=(",", ":")) for t in traces]
    if args_info is not None and not isinstance(args_info, str):
        args_info = json.dumps(args_info)
    return _core.featurize_traces(texts, args_info or "", threads)
