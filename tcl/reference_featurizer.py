"""A plain-Python featurizer written from the FeatureSpec (docs/features.md), independent of the C++
code except for the vocabulary list: the definition the C++ featurizer is tested against (its output
must equal this one's exactly) and the baseline bench/featurize.py times it against. Slow; not for
use on datasets (tcl.featurize is the featurizer).

reference_featurize(paths) returns the arrays of tcl.featurize plus the task count and the failed
measurements per task; ms_trace and ansor_program featurize one program."""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np

from .errors import FormatError
from .features import SPEC
from .records import _lines, discover, parse_ansor_line, parse_ms_record_line, parse_ms_workload_line

L, K, W = SPEC.seq_len, SPEC.num_numeric, SPEC.workload_dim
KIND = {name: i for i, name in enumerate(SPEC.kind_names) if i > 0}
KIND["GetBlock"] = KIND["GetSBlock"]

STRING_CODES = {
    "global": 1, "shared": 2, "shared.dyn": 3, "local": 4, "warp": 5,
    "wmma.matrix_a": 6, "wmma.matrix_b": 6, "wmma.accumulator": 6,
    "meta_schedule.parallel": 10, "meta_schedule.vectorize": 11,
    "meta_schedule.unroll_explicit": 12, "meta_schedule.unroll_implicit": 13,
    "meta_schedule.cooperative_fetch": 14, "meta_schedule.tiling_structure": 15,
    "meta_schedule.auto_tensorize": 16, "meta_schedule.thread_extent_low_inclusive": 17,
    "meta_schedule.thread_extent_high_inclusive": 18, "pragma_auto_unroll_max_step": 19,
    "pragma_unroll_explicit": 20, "meta_schedule.random_compute_producer": 21,
    "meta_schedule.layout_rewrite_preproc": 22, "software_pipeline_stage": 23,
    "software_pipeline_order": 24,
}
RV = re.compile(r"^[blv][0-9]+$")


def log_scale(v: float) -> float:
    return math.log1p(v) if v >= 0 else -math.log1p(-v)


def num(v) -> float:
    """A number the featurizer uses: one beyond the double range (1e400 parses as inf, a long
    integer does not convert) is malformed, as in the C++ cursor."""
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not math.isfinite(f):
        raise ValueError("number out of range")
    return f


def int64(v) -> int:
    """The C++ cursor's integer(): integral and in the int64 range."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("expected an integer")
    if isinstance(v, float) and not math.isfinite(v) or not -2**63 <= v < 2**63:
        raise ValueError("integer out of range")
    if v != int(v):
        raise ValueError("expected an integer")
    return int(v)


def pragma_value(s: str) -> float:
    m = re.fullmatch(r"auto_unroll_max_step\$([0-9]*)", s)
    return num(int(m.group(1) or 0)) if m else -1.0


def name_tags(name: str) -> int:
    s = name.lower()
    t = 0
    if "conv" in s:
        t |= 1
    if "depthwise" in s:
        t |= 2 | 1
    if "batch_matmul" in s or "batch_mm" in s:
        t |= 8
    elif any(w in s for w in ("matmul", "dense", "gemm", "_mm")) or s == "mm":
        t |= 4
    if "pool" in s:
        t |= 16
    if any(w in s for w in ("softmax", "norm", "sum", "mean", "reduce", "max", "min")):
        t |= 32
    if t == 0 and s:
        t |= 64
    return t


class Stats:
    def __init__(self):
        self.tags = 0
        self.extents: list[float] = []
        self.tensors: list[float] = []

    # A product that overflows (or is NaN) and a negative size are not counted, as in C++.
    def add_extent(self, e):
        if 0 < e <= sys.float_info.max:
            self.extents.append(float(e))

    def add_tensor(self, e):
        if 0 <= e <= sys.float_info.max:
            self.tensors.append(float(e))

    def vector(self, n_steps: int) -> np.ndarray:
        out = np.zeros(W, np.float32)
        for i in range(8):
            out[i] = (self.tags >> i) & 1
        if self.tags & 0x3F == 0:
            out[7] = 1
        ex, te = self.extents, self.tensors
        out[8] = log_scale(len(ex))
        out[9] = log_scale(max(ex) if ex else 0.0)
        out[10] = log_scale(min(ex) if ex else 0.0)
        out[11] = sum_in_order(math.log1p(e) for e in ex)
        out[12] = log_scale(len(te))
        out[13] = log_scale(max(te) if te else 0.0)
        out[14] = sum_in_order(math.log1p(e) for e in te)
        out[15] = log_scale(n_steps)
        return out


def sum_in_order(values) -> float:
    total = 0.0
    for v in values:
        total += v
    return total


def product(values) -> float:
    p = 1.0
    for v in values:
        p *= v
    return p


def rows_to_matrix(rows: list[tuple[int, list[float]]]) -> tuple[np.ndarray, int]:
    m = np.zeros((L, SPEC.row_dim), np.float32)
    for r, (kind, values) in enumerate(rows[:L]):
        m[r, kind] = 1
        for j, v in enumerate(values[:K]):
            m[r, SPEC.num_kinds + j] = log_scale(float(v))
    return m, min(len(rows), L)


# ---- Ansor


def _walk_key(items, stats: Stats, top: bool):
    numbers, numbers_only = [], True
    for i, it in enumerate(items):
        if isinstance(it, list):
            numbers_only = False
            _walk_key(it, stats, False)
        elif isinstance(it, str):
            numbers_only = False
            if top and i == 0 and not re.fullmatch(r"[0-9a-f]{32}", it):
                stats.tags |= name_tags(it)
        elif isinstance(it, bool) or it is None or isinstance(it, dict):
            numbers_only = False
        else:
            numbers.append(num(it))
    if not top and numbers_only and numbers:
        stats.add_tensor(product(numbers))
    else:
        for v in numbers:
            stats.add_tensor(v)


def _ansor_field(v, out: list, pragma: bool):
    if isinstance(v, list):
        for x in v:
            _ansor_field(x, out, False)
    elif isinstance(v, str):
        out.append(pragma_value(v) if pragma else STRING_CODES.get(v, 0))
    elif isinstance(v, bool):
        out.append(1.0 if v else 0.0)
    elif v is None:
        out.append(0.0)
    else:
        out.append(num(v))


def ansor_program(rec) -> tuple[np.ndarray, int, np.ndarray]:
    stats = Stats()
    rows = []
    for step in rec.steps:
        code, fields = step[0], step[1:]
        values: list[float] = []
        for i, f in enumerate(fields):
            if code == "SP" and i == 2 and isinstance(f, (int, float)) and not isinstance(f, bool):
                stats.add_extent(num(f))
            _ansor_field(f, values, code == "PR" and i == 2)
        rows.append((KIND[code], values))
    _walk_key(rec.task.workload(), stats, True)
    m, n = rows_to_matrix(rows)
    return m, n, stats.vector(len(rows))


# ---- MetaSchedule


def _ms_flatten(v, out: list, inputs: bool):
    if isinstance(v, list):
        for x in v:
            _ms_flatten(x, out, inputs)
    elif isinstance(v, str):
        if inputs and RV.match(v):
            out.append(num(int(v[1:])))
        elif len(v) >= 2 and v[0] == '"' and v[-1] == '"':
            out.append(STRING_CODES.get(v[1:-1], 0))
        else:
            out.append(STRING_CODES.get(v, 0))
    elif isinstance(v, bool):
        out.append(1.0 if v else 0.0)
    elif v is None:
        out.append(0.0)
    elif isinstance(v, dict):
        pass
    else:
        out.append(num(v))


def ms_trace(insts, decisions, args_info=None):
    stats = Stats()
    by_inst = {}
    for idx, value in decisions:
        vals: list[float] = []
        _ms_flatten(value, vals, False)
        by_inst[idx] = vals
        if insts[idx][0] in ("SamplePerfectTile", "SamplePartitionedTile"):
            stats.add_extent(product(vals))
    rows = []
    for i, (kind, inputs, attrs, outputs, *_) in enumerate(insts):
        values = [float(len(outputs))] + by_inst.get(i, [])
        if kind in ("GetSBlock", "GetBlock") and isinstance(attrs, list):
            for j, a in enumerate(attrs):
                if j == 0 and isinstance(a, str):
                    stats.tags |= name_tags(a)
                    values.append(0.0)
                else:
                    _ms_flatten(a, values, False)
        else:
            _ms_flatten(attrs, values, False)
        _ms_flatten(inputs, values, True)
        rows.append((KIND.get(kind, 0), values))
    if args_info:
        for arg in args_info:
            if isinstance(arg, list):
                for a in arg:
                    if isinstance(a, list):
                        stats.add_tensor(product(num(x) for x in a))
    m, n = rows_to_matrix(rows)
    return m, n, stats.vector(len(rows))


# ---- whole inputs, in the C++ driver's order


def reference_featurize(paths) -> dict:
    seq, length, task, cost, workload = [], [], [], [], []
    task_keys: dict = {}
    failed: list[int] = []

    def task_id(key):
        if key not in task_keys:
            task_keys[key] = len(task_keys)
            failed.append(0)
        return task_keys[key]

    def add(t, rec, latency, m, n, w):
        if rec.failed:
            failed[t] += 1
            return
        seq.append(m), length.append(n), task.append(t), cost.append(latency), workload.append(w)

    def ansor_line(text):
        rec = parse_ansor_line(text)
        for v in (rec.task.hardware_params or []) + [rec.error_no]:
            int64(v)
        for c in rec.costs:
            num(c)
        m, n, w = ansor_program(rec)
        add(task_id((rec.task.workload_key, rec.task.target)), rec,
            None if rec.failed else rec.latency, m, n, w)

    def ms_line(text, wl):
        rec = parse_ms_record_line(text, wl)
        for c in rec.run_secs or []:
            num(c)
        m, n, w = ms_trace(rec.insts, rec.decisions, rec.args_info)
        target = json.dumps(rec.target, separators=(",", ":"))
        add(task_id((rec.workload_hash, target)), rec, None if rec.failed else rec.latency, m, n, w)

    def each_line(path, fn):
        # A bad line raises FormatError naming file and line (no column: this is no cursor).
        for line_no, text in _lines(path):
            try:
                fn(text)
            except (ValueError, OverflowError) as e:
                raise FormatError(f"{path}:{line_no}: {e}") from None

    for src in discover(paths):
        if src.kind == "ansor":
            each_line(src.path, ansor_line)
        else:
            wl: list = []
            each_line(src.workload_path, lambda text: wl.append(parse_ms_workload_line(text)))
            each_line(src.path, lambda text: ms_line(text, wl))
    task_arr = np.array(task, np.int32)
    cost_arr = np.array(cost, np.float64)
    best = {}
    for t, c in zip(task, cost):
        best[t] = min(best.get(t, math.inf), c)
    label = np.array([best[t] / c for t, c in zip(task, cost)], np.float64).astype(np.float32)
    label = np.maximum(label, np.finfo(np.float32).smallest_subnormal)  # (0, 1], as in C++
    return {
        "seq": np.stack(seq) if seq else np.zeros((0, L, SPEC.row_dim), np.float32),
        "length": np.array(length, np.int32),
        "task": task_arr,
        "cost": cost_arr,
        "label": label,
        "workload": np.stack(workload) if workload else np.zeros((0, W), np.float32),
        "n_tasks": len(task_keys),
        "failed": failed,
    }
