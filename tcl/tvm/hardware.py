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


# ISA flags that change what code is fast; platform.json keeps these, not the whole flag list.
_KEY_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
              "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2")
# Fields that identify the physical CPU; a dataset is measured on one of them only.
HOST_IDENTITY = ("vendor", "cpu_family", "cpu_model_number", "stepping", "cpu_model", "isa_flags",
                 "host_cores", "l1d_kb", "l2_kb", "l3_kb")


def _int(text: str | None) -> int | None:
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


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
        "vendor": info.get("vendor_id") or info.get("CPU implementer"),
        "cpu_family": _int(info.get("cpu family")),
        "cpu_model_number": _int(info.get("model") or info.get("CPU part")),
        "stepping": _int(info.get("stepping") or info.get("CPU revision")),
        "isa_flags": sorted(set(flags) & set(_KEY_FLAGS)),
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


def _microarchitecture(host: dict) -> str:
    """A short name of the CPU's microarchitecture, from vendor and family/model (stable across boots)."""
    vendor, fam, model = host.get("vendor"), host.get("cpu_family"), host.get("cpu_model_number")
    if vendor == "AuthenticAMD" and fam is not None:
        if fam == 23:
            return "zen2" if (model or 0) >= 0x30 else "zen1"
        if fam == 25:
            return "zen4" if (model or 0) in range(0x10, 0x20) or (model or 0) >= 0x60 else "zen3"
        if fam == 26:
            return "zen5"
        return f"amd-f{fam}"
    if vendor == "GenuineIntel" and fam is not None:
        return f"intel-f{fam}m{model}"
    name = (host.get("cpu_model") or "cpu").lower()
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-")[:24] or "cpu"


def _product_line(host: dict) -> str | None:
    model = (host.get("cpu_model") or "").lower()
    for word in ("epyc", "xeon", "ryzen", "threadripper", "core", "graviton", "neoverse"):
        if word in model.split() or f"{word}(" in model or f"{word}(r)" in model:
            return word
    return None


def platform_name(desc: dict) -> str:
    """A stable name for a platform.json: microarchitecture, product line, cores used, the LLVM CPU
    when it is not the host's own, and 'as-tuned' for programs measured as `tcl tune` measures them
    (e.g. 'zen1-epyc-2c', 'intel-f6m167-xeon-1c', 'zen4-epyc-1c-haswell', 'intel-f6m167-xeon-2c-as-tuned')."""
    parts = [_microarchitecture(desc), _product_line(desc)]
    cores = desc.get("cores") or desc.get("host_cores")
    parts.append(f"{cores}c" if cores else None)
    if desc.get("mcpu") and desc.get("host_mcpu") and desc["mcpu"] != desc["host_mcpu"]:
        parts.append(desc["mcpu"])
    if desc.get("measurement"):
        parts.append("as-tuned")
    return "-".join(p for p in parts if p)


def same_host(a: dict, b: dict) -> list[str]:
    """The identity fields in which two platform descriptors differ (only fields both record)."""
    return [k for k in HOST_IDENTITY if a.get(k) is not None and b.get(k) is not None and a[k] != b[k]]


def platform_descriptor(target, host: dict | None = None, rpc: str | None = None,
                        measurement: dict | None = None) -> dict:
    """platform.json: host hardware (detected here unless given) + target fields + date, TVM version,
    `measurement` when the programs are not measured as TVM does by default (tcl.tvm.collect_session
    .measurement), and `name`, the platform's stable name (platform_name)."""
    import tvm
    from tvm.target import codegen

    desc = {"host_detected": host is None}
    desc.update(host if host is not None else detect_host())
    if host is None:
        desc["host_mcpu"] = str(codegen.llvm_get_system_cpu())
    desc.update(target_fields(target))
    desc.update(rpc=rpc, tvm_version=tvm.__version__, date=datetime.date.today().isoformat())
    if measurement:
        desc["measurement"] = measurement
    desc["name"] = platform_name(desc)
    return desc


if __name__ == "__main__":  # run on an RPC device: prints its host fields for --platform-info
    json.dump(detect_host(), sys.stdout, indent=1)
    print()
