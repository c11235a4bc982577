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

import numpy as np

__all__ = ["HARDWARE_DIM", "HARDWARE_FIELDS", "hardware_vector", "is_gpu", "task_platform"]

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
