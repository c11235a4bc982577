"""The platform descriptor (platform.json): the hardware a dataset was measured on, as the cost model reads it.

Host fields come from Linux (/proc, /sys) and are detected where the code runs. The fields that the
target decides (cores used, vector ISA and width of `mcpu`) come from the target, so two target
configurations of one host (e.g. all cores with AVX-512, one core with `mcpu=haswell`) get different
descriptors. Measuring over RPC, the device is another machine: run `python hardware.py` there (it
needs only the standard library) and pass its output with `--platform-info`.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import sys
from pathlib import Path

_ISA_BITS = [("avx512f", "avx512", 512), ("avx2", "avx2", 256), ("avx", "avx", 256), ("sse4.2", "sse4.2", 128),
             ("sse4_2", "sse4.2", 128), ("sse2", "sse2", 128), ("neon", "neon", 128), ("asimd", "neon", 128)]


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _size_kb(text: str | None) -> float | None:
    m = re.fullmatch(r"(\d+)([KMG]?)", text or "")
    if not m:
        return None
    return int(m.group(1)) * {"": 1 / 1024, "K": 1, "M": 1024, "G": 1024 * 1024}[m.group(2)]


def _caches() -> dict:
    """Per-core view of cpu0's caches (L3 is shared by the cores of its complex)."""
    out = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    for idx in sorted(Path(base).glob("index*")) if os.path.isdir(base) else []:
        level, kind = _read(f"{idx}/level"), _read(f"{idx}/type")
        name = f"l{level}" + {"Data": "d", "Instruction": "i"}.get(kind or "", "")
        out[f"{name}_kb"] = _size_kb(_read(f"{idx}/size"))
    return out


def _cpuinfo() -> dict:
    info = {}
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        k, _, v = line.partition(":")
        info.setdefault(k.strip(), v.strip())
    return info


def _mhz(path: str) -> float | None:
    v = _read(path)
    return int(v) / 1000 if v and v.isdigit() else None  # sysfs gives kHz


def best_isa(flags) -> tuple[str | None, int | None]:
    flags = set(flags)
    for flag, isa, bits in _ISA_BITS:
        if flag in flags:
            return isa, bits
    return None, None


def detect_host() -> dict:
    """This machine's CPU, caches and memory (stdlib only; None where the OS does not say)."""
    info = _cpuinfo()
    flags = (info.get("flags") or info.get("Features") or "").split()
    logical = os.cpu_count()
    # physical cores: distinct (package, core) pairs
    cores = {(_read(f"{c}/topology/physical_package_id"), _read(f"{c}/topology/core_id"))
             for c in map(str, Path("/sys/devices/system/cpu").glob("cpu[0-9]*"))}
    mem = re.search(r"MemTotal:\s+(\d+) kB", _read("/proc/meminfo") or "")
    base = _mhz("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency")
    turbo = _mhz("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    isa, bits = best_isa(flags)
    return {
        "cpu_model": info.get("model name"),
        "vendor": info.get("vendor_id"),
        "host_cores": len(cores) if cores and None not in next(iter(cores)) else logical,
        "threads": logical,
        # In a VM without cpufreq, /proc/cpuinfo's current clock is the best there is.
        "base_clock_ghz": round((base or float(info.get("cpu MHz") or 0) or 0) / 1000, 3) or None,
        "turbo_clock_ghz": round(turbo / 1000, 3) if turbo else None,
        **_caches(),
        "memory_gb": round(int(mem.group(1)) / 2**20, 1) if mem else None,
        "host_vector_isa": isa,
        "host_vector_bits": bits,
    }


def target_fields(target) -> dict:
    """Fields the target decides: cores used, and the vector ISA/width LLVM enables for its mcpu."""
    import tvm
    from tvm.target import codegen

    kind = target.kind.name
    out = {"target": str(target), "target_kind": kind}
    if kind == "llvm":
        feats = [str(f) for f in codegen.llvm_get_cpu_features(target)]
        isa, bits = best_isa(feats)  # (llvm_get_vector_width reports the host's width, not mcpu's)
        out.update(mcpu=str(target.attrs.get("mcpu", "")), cores=int(target.attrs.get("num-cores", 1)),
                   vector_isa=isa, vector_bits=bits)
    elif kind == "cuda":
        dev = tvm.cuda(0)
        if dev.exist:
            out.update(gpu_name=dev.device_name, compute_version=dev.compute_version,
                       sm_count=dev.multi_processor_count, max_shared_memory_per_block=dev.max_shared_memory_per_block,
                       max_threads_per_block=dev.max_threads_per_block, warp_size=dev.warp_size,
                       gpu_memory_gb=round(dev.total_global_memory / 2**30, 1))
    return out


def platform_descriptor(target, host: dict | None = None, rpc: str | None = None) -> dict:
    """platform.json: host hardware (detected here unless given) + target fields + date, TVM version."""
    import tvm

    desc = {"host_detected": host is None}
    desc.update(host if host is not None else detect_host())
    desc.update(target_fields(target))
    desc.update(rpc=rpc, tvm_version=tvm.__version__, date=datetime.date.today().isoformat())
    return desc


if __name__ == "__main__":  # run on an RPC device: prints its host fields for --platform-info
    json.dump(detect_host(), sys.stdout, indent=1)
    print()
