"""The hardware descriptor the cost model reads: a platform (platform.json) -> a fixed-size vector.

numpy only. Fields, in order (HARDWARE_FIELDS), each log1p-scaled, 0 when unknown:

    CPU (0 on GPU targets: the host CPU does not run the kernel)
      cores            cores the target uses (`cores`, else the host's `host_cores`)
      threads          logical CPUs of the host
      base_clock_ghz, turbo_clock_ghz
      l1d_kb, l2_kb, l3_kb   per-core view of the data caches, KB
      memory_gb        host memory
      vector_bits      SIMD width the target enables (`vector_bits`, else `host_vector_bits`)
    GPU (0 on CPU targets)
      sm_count, gpu_memory_gb, shared_memory_kb (max shared memory per block)

Ansor logs carry no platform.json, only the task's 8 hardware params (cores, vector bytes, cache
line, shared memory, local memory, threads per block, vthreads, warp): `task_platform` turns those
into the same field names, so every program gets what is known about its hardware.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

__all__ = ["HARDWARE_DIM", "HARDWARE_FIELDS", "hardware_vector", "is_gpu", "platform_name", "target_label",
           "task_platform"]

CPU_FIELDS = ("cores", "threads", "base_clock_ghz", "turbo_clock_ghz", "l1d_kb", "l2_kb", "l3_kb",
              "memory_gb", "vector_bits")
GPU_FIELDS = ("sm_count", "gpu_memory_gb", "shared_memory_kb")
HARDWARE_FIELDS = CPU_FIELDS + GPU_FIELDS
HARDWARE_DIM = len(HARDWARE_FIELDS)
_GPU_KINDS = ("cuda", "rocm", "vulkan", "metal", "opencl")
_FALLBACK = {"cores": "host_cores", "vector_bits": "host_vector_bits"}  # target value, else host's


def _target_kind(target: str) -> str:
    """Kind of a target given as TVM's string ('cuda -arch=sm_80') or JSON ('{"kind": "llvm"}')."""
    target = (target or "").strip()
    if target.startswith("{"):
        try:
            return str(json.loads(target).get("kind", ""))
        except (json.JSONDecodeError, AttributeError, RecursionError):
            return ""
    return target.split(" ", 1)[0]


def is_gpu(platform: dict | None) -> bool:
    p = platform or {}
    return (p.get("target_kind") or _target_kind(p.get("target", ""))) in _GPU_KINDS


def _number(v) -> float:
    """A positive finite number, else 0 (unknown)."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return 0.0
    return v if math.isfinite(v) and v > 0 else 0.0


def hardware_vector(platform: dict | None) -> np.ndarray:
    """[HARDWARE_DIM] float32: log1p of each field of HARDWARE_FIELDS, 0 where unknown."""
    p = platform or {}
    gpu = is_gpu(p)
    out = np.zeros(HARDWARE_DIM, np.float32)
    for i, name in enumerate(HARDWARE_FIELDS):
        if (name in GPU_FIELDS) != gpu:
            continue
        v = p.get(name)
        if v is None and name in _FALLBACK:
            v = p.get(_FALLBACK[name])
        if v is None and name == "shared_memory_kb" and p.get("max_shared_memory_per_block"):
            v = _number(p["max_shared_memory_per_block"]) / 1024  # tvm reports bytes
        out[i] = math.log1p(_number(v))
    return out


def task_platform(task) -> dict | None:
    """The task's platform.json, else what its target and Ansor hardware params say, else None.

    task: a tcl.features.TaskInfo (anything with .platform, .target, .hardware_params).
    """
    if task.platform:
        return task.platform
    hp = list(task.hardware_params or [])
    if len(hp) < 4:
        return {"target": task.target} if task.target else None
    num_cores, vector_bytes, _, shared_bytes = hp[:4]
    p = {"target": task.target, "target_kind": _target_kind(task.target)}
    if is_gpu(p):
        p["shared_memory_kb"] = _number(shared_bytes) / 1024
    else:
        p.update(cores=_number(num_cores), vector_bits=_number(vector_bytes) * 8)
    return p


def target_label(target: str) -> str:
    """A short readable form of a TVM target given as a string or as JSON: its kind and the CPU or
    GPU it is compiled for, e.g. "llvm znver4", "cuda sm_80", "llvm"."""
    target = (target or "").strip()
    model = ""
    if target.startswith("{"):
        try:
            obj = json.loads(target)
        except (json.JSONDecodeError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            model = next((str(obj[k]) for k in ("mcpu", "arch", "model")
                          if obj.get(k) not in (None, "", "unknown")), "")
    else:
        for option in target.split()[1:]:
            key, _, value = option.lstrip("-").partition("=")
            if key in ("mcpu", "arch", "model") and value not in ("", "unknown"):
                model = value
                break
    return f"{_target_kind(target)} {model}".strip()


def platform_name(task, roots=()) -> str:
    """A readable name of the platform a task was measured on: platform.json's "name" (by default
    the name of the directory that holds platform.json), else the name of the directory it was
    found under (the one of `roots`, the paths named, that holds it; else its file's directory)
    followed by the target's short form (target_label), so that one directory's CPU and GPU logs
    stay apart.

    task: a tcl.features.TaskInfo (anything with .platform, .source, .target).
    """
    name = (task.platform or {}).get("name")
    if name:
        return str(name)
    if isinstance(roots, (str, os.PathLike)):
        roots = [roots]
    source = Path(os.path.realpath(task.source))
    where = next((Path(os.path.realpath(r)) for r in roots
                  if os.path.isdir(r) and source.is_relative_to(os.path.realpath(r))), source.parent)
    label = target_label(task.target)
    return f"{where.name} ({label})" if label else where.name
