"""Checks of user input for the readers (tcl.records): paths, JSON text, task.json, platform.json.

A field of task.json or platform.json that the readers use must have the type they use it as; a
wrong one raises FormatError naming the file and the field, instead of failing later (or silently
reading as "unknown"). Fields no reader uses are left alone. numpy-free.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import FormatError

# platform.json: numbers that tcl.hardware reads (null = unknown)
PLATFORM_NUMBERS = ("cores", "threads", "base_clock_ghz", "turbo_clock_ghz", "l1d_kb", "l2_kb", "l3_kb",
                    "memory_gb", "vector_bits", "sm_count", "gpu_memory_gb", "shared_memory_kb",
                    "host_cores", "host_vector_bits", "max_shared_memory_per_block")
PLATFORM_STRINGS = ("name", "target", "target_kind")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(v) -> bool:
    """A finite int or float (not a bool, not an int too large for a float)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def decode_json(data: bytes, where: str) -> Any:
    """The JSON value of a file's bytes; FormatError naming `where` for bad UTF-8, bad JSON or
    nesting too deep for the parser."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FormatError(f"{where}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(f"{where}:{e.lineno}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise FormatError(f"{where}: JSON nested too deeply") from None


def json_line(text: str) -> Any:
    """A line's JSON value; ValueError for bad JSON and for nesting too deep for the parser."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON at column {e.colno} ({e.msg})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def numbers(values: list, what: str) -> list[float]:
    """`values` as floats (an integer too large for one: inf); ValueError unless each is a number
    (or a number's text)."""
    if not all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in values):
        raise ValueError(f"{what}: expected numbers")
    return [math.inf if isinstance(v, int) and abs(v) > 2**1023 else float(v) for v in values]


def opens_like_ansor(head: bytes) -> bool:
    """Whether the first line of `head` that is not blank or a # comment opens a JSON object keyed
    like an Ansor record: TVM writes {"i": ..., "r": ..., "v": ...}."""
    for line in head.split(b"\n"):
        s = line.strip()
        if s and not s.startswith(b"#"):
            return re.match(rb'\{\s*"[irv]"\s*:', s) is not None
    return False


def check_exists(p: Path):
    """FileNotFoundError saying why `p` cannot be read: missing, a dangling symlink, a symlink loop."""
    try:
        os.stat(p)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise FileNotFoundError(f"{p}: a symlink loop (it cannot be resolved)") from None
        if e.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise
        if p.is_symlink():
            raise FileNotFoundError(f"{p}: a symlink to {os.readlink(p)}, which does not exist") from None
        raise FileNotFoundError(f"{p}: no such file or directory") from None


def _check_fields(path: Path, obj: dict, checks: dict[str, tuple[Callable[[Any], bool], str]]):
    for key, (ok, what) in checks.items():
        if key in obj and not ok(obj[key]):
            raise FormatError(f"{path}: \"{key}\" must be {what}, not {_show(obj[key])}")


def _networks_ok(v) -> bool:
    if isinstance(v, list):
        return all(isinstance(n, str) for n in v)
    return isinstance(v, dict) and all(_is_number(c) and c > 0 for c in v.values())


def check_task_info(path: Path, obj: Any) -> dict:
    """task.json as tcl.features reads it: name, weight, weights/networks, flops, split."""
    if not isinstance(obj, dict):
        raise FormatError(f"{path}: expected a JSON object {{\"name\": ..., \"weight\": ...}}, "
                          f"not a {type(obj).__name__}")
    _check_fields(path, obj, {
        "name": (lambda v: isinstance(v, str), "a string"),
        "weight": (lambda v: _is_number(v) and v > 0, "a positive number (occurrences in its networks)"),
        "weights": (_networks_ok, "{network: occurrences} or a list of network names"),
        "networks": (_networks_ok, "a list of network names or {network: occurrences}"),
        "flops": (lambda v: v is None or (_is_number(v) and v >= 0), "a non-negative number or null"),
        "split": (lambda v: isinstance(v, str), 'a string ("train" or "test")'),
    })
    return obj


def check_platform(path: Path, obj: Any) -> dict:
    """platform.json as tcl.hardware reads it: numbers (or null) and a few strings."""
    if not isinstance(obj, dict):
        raise FormatError(f"{path}: expected a JSON object of hardware fields, not a {type(obj).__name__}")
    checks = {k: (lambda v: v is None or (_is_number(v) and v >= 0), "a non-negative number or null")
              for k in PLATFORM_NUMBERS}
    checks.update({k: (lambda v: v is None or isinstance(v, str), "a string") for k in PLATFORM_STRINGS})
    _check_fields(path, obj, checks)
    return obj
