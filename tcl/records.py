"""Readers for tensor-program measurement records, numpy-only.

Two formats, found by `discover()` in any mix of paths:

* Ansor / TenSet measure-record logs (JSON lines, v0.6): one file per task or many tasks per file.
* TVM MetaSchedule JSONDatabase directories (database_workload.json + database_tuning_record.json),
  alone or as a tree (one database per task). Optional files beside a database: `task.json`
  (name, weight = occurrences in its network, networks, flops) and, there or in a parent directory,
  `platform.json` (the hardware descriptor).

Every file may also be stored compressed as `<name>.xz` or `<name>.gz`. Failed measurements
(error_no != 0, a cost of 1e10, or one of 0 or below) are kept apart from the programs with
latencies.
"""

from __future__ import annotations

import gzip
import json
import lzma
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .errors import FormatError, escape_controls
from .inputcheck import (check_exists, check_platform, check_task_info, decode_json, json_line, numbers,
                         opens_like_ansor)

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
FAILED_COST = 1e9  # TVM writes 1e10 for a failed build or run; anything this large is a failure
_COMPRESSED = {".xz": lzma.decompress, ".gz": gzip.decompress}
_SIDE_FILES = {WORKLOAD_FILE, RECORD_FILE, "platform.json", "task.json"}


# ---------------------------------------------------------------------------------------------
# Finding and reading files


def _find(directory: Path, name: str) -> Path | None:
    """`name` in `directory`, plain or compressed."""
    for suffix in ("", ".xz", ".gz"):
        p = directory / (name + suffix)
        if p.is_file():
            return p
    return None


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes, decompressed when it ends in .xz or .gz."""
    path = Path(path)
    data = path.read_bytes()
    unpack = _COMPRESSED.get(path.suffix)
    if unpack is None:
        return data
    try:
        return unpack(data)
    except (OSError, lzma.LZMAError, EOFError, zlib.error) as e:
        raise FormatError(f"{path}: not a valid {path.suffix} file ({e})") from e


def _base_name(path: Path) -> str:
    return path.name[: -len(path.suffix)] if path.suffix in _COMPRESSED else path.name


@dataclass(frozen=True)
class Source:
    """One input: an Ansor log file, or a MetaSchedule database directory."""

    kind: str  # "ansor" | "metaschedule"
    path: Path  # the log file, or database_tuning_record.json(.xz)
    workload_path: Path | None = None  # database_workload.json(.xz) for metaschedule

    @property
    def directory(self) -> Path:
        return self.path.parent


def discover(paths: list[str | os.PathLike] | str | os.PathLike, notes: list[str] | None = None) -> list[Source]:
    """Sources under `paths`: files are Ansor logs, directories are searched recursively, following
    symlinked directories (a dataset assembled from links to other datasets' task directories);
    a directory reached again (a link to a parent, two links to one place) is not searched twice.
    A file reached twice (named twice, inside a directory also named, through a symlink) is one
    source. notes: if given, gets a line for each .json/.log file of a directory that was passed
    over because it is not a record file (e.g. a tuning report)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    sources: dict[str, Source] = {}
    searched: set[str] = set()  # real paths of the directories walked: no loop, no second walk

    def add(src: Source):
        sources.setdefault(os.path.realpath(src.path), src)

    for p in map(Path, paths):
        check_exists(p)
        if p.is_file():
            if _base_name(p) in (WORKLOAD_FILE, RECORD_FILE):
                p = p.parent  # a database file names its directory
            else:
                add(Source("ansor", p))
                continue
        for root, dirs, files in os.walk(p, followlinks=True):
            real = os.path.realpath(root)
            if real in searched:
                dirs[:] = []
                continue
            searched.add(real)
            dirs.sort()
            root_p = Path(root)
            rec = _find(root_p, RECORD_FILE)
            if rec is not None:
                wl = _find(root_p, WORKLOAD_FILE)
                if wl is None:
                    raise FormatError(f"{rec}: {WORKLOAD_FILE} is missing beside it")
                add(Source("metaschedule", rec, wl))
                continue
            for f in sorted(files):
                fp = root_p / f
                if _base_name(fp) in _SIDE_FILES or f.startswith("."):
                    continue
                if _base_name(fp).endswith((".json", ".log")):
                    if _looks_like_ansor(fp):
                        add(Source("ansor", fp))
                    elif notes is not None:
                        notes.append(f"{fp}: not an Ansor log or MetaSchedule database, passed over")
    return list(sources.values())


def _looks_like_ansor(path: Path) -> bool:
    """Found while walking a directory: a log whose first record is a JSON object keyed like an
    Ansor record (not, say, a text log file that also ends in .log, or a JSON report). Files named
    explicitly are always read."""
    try:
        head = read_bytes(path)[:4096] if path.suffix in _COMPRESSED else path.open("rb").read(4096)
    except (OSError, FormatError):
        return False
    return opens_like_ansor(head)


def read_platform(directory: Path, stop: Path | None = None) -> dict | None:
    """platform.json in `directory` or the nearest parent (not above `stop`); its "name" defaults
    to the name of the directory that holds it."""
    d = directory.resolve()
    stop = stop.resolve() if stop is not None else None
    while True:
        p = _find(d, "platform.json")
        if p is not None:
            platform = check_platform(p, _load_json_file(p))
            platform.setdefault("name", d.name)  # datasets/<platform>/platform.json
            return platform
        if d == stop or d.parent == d:
            return None
        d = d.parent


def read_task_info(directory: Path) -> dict | None:
    p = _find(directory, "task.json")
    return check_task_info(p, _load_json_file(p)) if p is not None else None


def _load_json_file(path: Path) -> Any:
    return decode_json(read_bytes(path), str(path))


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of lines that hold a value: not blank, not a # comment."""
    text = read_bytes(path).decode("utf-8", errors="replace")
    for i, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if s and not s.startswith("#"):
            yield i, s


# ---------------------------------------------------------------------------------------------
# Ansor / TenSet records


@dataclass
class AnsorTask:
    workload_key: str
    target: str
    hardware_params: list | None = None
    target_host: str | None = None
    layout_rewrite_option: int | None = None
    task_input_names: list = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return (self.workload_key, self.target)

    def workload(self) -> list:
        """The workload key decoded: [name or hash, shapes/args...] (flat or nested)."""
        return json.loads(self.workload_key)


@dataclass
class AnsorRecord:
    task: AnsorTask
    steps: list[list]  # [code, fields...] per transform step
    costs: list[float]
    error_no: int
    all_cost: float | None
    timestamp: float | None
    version: str | None
    path: str = ""
    line: int = 0

    @property
    def failed(self) -> bool:
        return _failed(self.costs, self.error_no)

    @property
    def latency(self) -> float:
        return sum(self.costs) / len(self.costs)


def _failed(costs, error_no=0) -> bool:
    # As the C++ parsers: a cost of 0, below 0 or NaN is no measurement either (its label would be
    # inf, NaN or negative).
    return error_no != 0 or not costs or any(not (0 < c < FAILED_COST) for c in costs)


def _need(cond: bool, what: str):
    if not cond:
        raise ValueError(what)


def parse_ansor_line(text: str) -> AnsorRecord:
    """One v0.6 record line -> AnsorRecord; ValueError with what was expected otherwise."""
    obj = json_line(text)
    _need(isinstance(obj, dict), "expected a JSON object {\"i\": ..., \"r\": ...}")
    _need("i" in obj, 'record has no "i" (task and schedule)')
    _need("r" in obj, 'record has no "r" (measurement)')
    inp, res = obj["i"], obj["r"]
    _need(isinstance(inp, list) and len(inp) >= 2, '"i": expected [task, state]')
    task_l, state = inp[0], inp[1]
    _need(isinstance(task_l, list) and len(task_l) >= 2, "task: expected [workload_key, target, ...]")
    _need(isinstance(task_l[0], str) and isinstance(task_l[1], str), "task: expected strings")
    hw = task_l[2] if len(task_l) > 2 and isinstance(task_l[2], list) else None
    task = AnsorTask(
        workload_key=task_l[0],
        target=task_l[1],
        hardware_params=hw,
        target_host=task_l[3] if len(task_l) > 3 else None,
        layout_rewrite_option=task_l[4] if len(task_l) > 4 else None,
        task_input_names=task_l[5] if len(task_l) > 5 else [],
    )
    try:
        task.workload()
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"workload key is not JSON ({getattr(e, 'msg', 'nested too deeply')})") from None
    _need(isinstance(state, list) and len(state) >= 2, "state: expected [stages, steps]")
    steps = state[1]
    _need(isinstance(steps, list), "state: expected a list of steps")
    for s in steps:
        _need(isinstance(s, list) and s and isinstance(s[0], str), "expected a step [code, ...]")
        _need(s[0] in ANSOR_STEP_CODES, f"unknown Ansor step code '{s[0]}'")
    _need(isinstance(res, list) and len(res) >= 2, '"r": expected [costs, error_no, ...]')
    _need(isinstance(res[0], list), '"r": expected a list of costs')
    _need(isinstance(res[1], int), '"r": expected an integer error number')
    return AnsorRecord(
        task=task,
        steps=steps,
        costs=numbers(res[0], '"r"'),
        error_no=res[1],
        all_cost=res[2] if len(res) > 2 else None,
        timestamp=res[3] if len(res) > 3 else None,
        version=obj.get("v"),
    )


ANSOR_STEP_CODES = ("AN", "FU", "PR", "RE", "SP", "FSP", "FFSP", "SA", "CA", "CI", "CR", "CHR", "CHW", "RF")


# ---------------------------------------------------------------------------------------------
# MetaSchedule databases


@dataclass
class MSRecord:
    workload_hash: str
    workload_index: int
    insts: list[list]  # [kind, inputs, attrs, outputs]
    decisions: list[list]  # [inst_index, value]
    run_secs: list[float] | None
    target: Any
    args_info: Any
    path: str = ""
    line: int = 0

    @property
    def failed(self) -> bool:
        return self.run_secs is None or _failed(self.run_secs)

    @property
    def latency(self) -> float:
        return sum(self.run_secs) / len(self.run_secs)

    @property
    def trace_json(self) -> list:
        return [self.insts, self.decisions]


def parse_ms_workload_line(text: str) -> str:
    obj = json_line(text)
    _need(isinstance(obj, list) and len(obj) >= 2 and isinstance(obj[0], str)
          and isinstance(obj[1], str), "workload: expected [structural hash, base64 IRModule]")
    return obj[0]


def parse_ms_record_line(text: str, workloads: list[str | None]) -> MSRecord:
    obj = json_line(text)
    _need(isinstance(obj, list) and len(obj) >= 2, "record: expected [workload index, tuning record]")
    idx, rec = obj[0], obj[1]
    _need(isinstance(idx, int) and 0 <= idx < len(workloads) and workloads[idx] is not None,
          f"workload index {idx} is not in {WORKLOAD_FILE} ({len(workloads)} workloads)")
    _need(isinstance(rec, list) and len(rec) >= 2, "tuning record: expected [trace, run_secs, ...]")
    trace = rec[0]
    _need(isinstance(trace, list) and len(trace) >= 1 and isinstance(trace[0], list),
          "trace: expected [instructions, decisions]")
    for inst in trace[0]:
        _need(isinstance(inst, list) and len(inst) >= 4 and isinstance(inst[0], str),
              "instruction: expected [kind, inputs, attrs, outputs]")
    decisions = trace[1] if len(trace) > 1 else []
    for d in decisions:
        _need(isinstance(d, list) and len(d) >= 2 and isinstance(d[0], int)
              and 0 <= d[0] < len(trace[0]), "decision: expected [instruction index, value]")
    run_secs = rec[1]
    _need(run_secs is None or isinstance(run_secs, list), "run_secs: expected a list or null")
    return MSRecord(
        workload_hash=workloads[idx],
        workload_index=idx,
        insts=trace[0],
        decisions=decisions,
        run_secs=numbers(run_secs, "run_secs") if run_secs is not None else None,
        target=rec[2] if len(rec) > 2 else None,
        args_info=rec[3] if len(rec) > 3 else None,
    )


# ---------------------------------------------------------------------------------------------
# Reading whole inputs


@dataclass
class ReadResult:
    """Records of a set of sources: measured ones, failed ones apart, and what was skipped."""

    records: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


def _read_lines(path: Path, parse, errors: str, out: ReadResult, on_record, on_skip=None):
    """Parses each line; a bad one raises FormatError (file:line: what) or is skipped and counted."""
    for line_no, text in _lines(path):
        try:
            rec = parse(text)
        except ValueError as e:
            msg = escape_controls(f"{path}:{line_no}: {e}")
            if errors == "raise":
                raise FormatError(msg) from None
            out.skipped += 1
            if len(out.errors) < 20:
                out.errors.append(msg)
            if on_skip is not None:
                on_skip()
            continue
        on_record(rec, line_no)


def read(paths, errors: str = "raise") -> ReadResult:
    """Read every record under `paths` (see module doc). errors: "raise" or "skip"."""
    if errors not in ("raise", "skip"):
        raise ValueError(f"errors must be 'raise' or 'skip', not {errors!r}")
    out = ReadResult()

    def keep(rec, line_no):
        rec.path, rec.line = str(rec_path), line_no
        (out.failed if rec.failed else out.records).append(rec)

    for src in discover(paths):
        rec_path = src.path
        if src.kind == "ansor":
            _read_lines(src.path, parse_ansor_line, errors, out, keep)
            continue
        workloads: list[str | None] = []
        # A bad workload line leaves a hole so that later indices stay aligned.
        _read_lines(src.workload_path, parse_ms_workload_line, errors, out,
                    lambda h, _: workloads.append(h), lambda: workloads.append(None))
        _read_lines(src.path, lambda t: parse_ms_record_line(t, workloads), errors, out, keep)
    return out
