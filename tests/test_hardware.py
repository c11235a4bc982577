"""The hardware descriptor: fixed size, log1p-scaled, zeros where unknown, CPU vs GPU fields."""

import math

import numpy as np

from tcl.features import TaskInfo
from tcl.hardware import HARDWARE_DIM, HARDWARE_FIELDS, hardware_vector, platform_name, target_label, task_platform


def _field(v, name):
    return float(v[HARDWARE_FIELDS.index(name)])


def test_cpu_platform():
    p = {"target": '{"kind":"llvm","num-cores":2}', "target_kind": "llvm", "cores": 2,
         "host_cores": 16, "threads": 32, "base_clock_ghz": 2.5, "l2_kb": 1024, "l3_kb": None,
         "memory_gb": 64.0, "vector_bits": 512, "sm_count": 99}
    v = hardware_vector(p)
    assert v.shape == (HARDWARE_DIM,) and v.dtype == np.float32
    assert _field(v, "cores") == np.float32(math.log1p(2))  # the target's cores, not the host's
    assert _field(v, "l2_kb") == np.float32(math.log1p(1024))
    assert _field(v, "l3_kb") == 0 and _field(v, "turbo_clock_ghz") == 0  # unknown
    assert _field(v, "sm_count") == 0  # GPU fields stay 0 on a CPU target
    p.pop("cores")
    assert _field(hardware_vector(p), "cores") == np.float32(math.log1p(16))  # host fallback


def test_gpu_platform_and_unknown():
    v = hardware_vector({"target_kind": "cuda", "threads": 32, "sm_count": 108,
                         "gpu_memory_gb": 40.0, "max_shared_memory_per_block": 49152})
    assert _field(v, "threads") == 0  # the host CPU does not run the kernel
    assert _field(v, "sm_count") == np.float32(math.log1p(108))
    assert _field(v, "shared_memory_kb") == np.float32(math.log1p(48))
    assert not hardware_vector(None).any()


def test_ansor_hardware_params():
    cpu = TaskInfo("w", "llvm -keys=cpu", "f", 0, [8, 64, 64, 0, 0, 0, 0, 0])
    gpu = TaskInfo("w", "cuda -keys=cuda,gpu -arch=sm_80", "f", 0,
                   [-1, 16, 64, 49152, 2147483647, 1024, 8, 32])
    assert task_platform(cpu) == {"target": cpu.target, "target_kind": "llvm", "cores": 8.0,
                                  "vector_bits": 512.0}
    v = hardware_vector(task_platform(gpu))
    assert _field(v, "shared_memory_kb") == np.float32(math.log1p(48)) and _field(v, "cores") == 0
    assert task_platform(TaskInfo("w", "", "f", 0)) is None


def test_target_label_is_the_kind_and_the_cpu_or_gpu():
    assert target_label("cuda -keys=cuda,gpu -arch=sm_80 -max_num_threads=1024") == "cuda sm_80"
    assert target_label("llvm -keys=cpu ") == "llvm"
    assert target_label('{"kind":"llvm","keys":["cpu"],"num-cores":2,"mcpu":"znver4"}') == "llvm znver4"
    assert target_label('{"kind":"cuda","arch":"sm_86","model":"unknown"}') == "cuda sm_86"
    assert target_label("") == "" and target_label("{not json") == ""


def test_platform_name_prefers_platform_json_then_the_directory_named(tmp_path):
    log = tmp_path / "logs" / "a100" / "conv.json"
    t = TaskInfo(workload='["conv2d", 1]', target="cuda -arch=sm_80", source=str(log), failed=0)
    (tmp_path / "logs" / "a100").mkdir(parents=True)
    assert platform_name(t, [tmp_path / "logs"]) == "logs (cuda sm_80)"  # the directory named ...
    assert platform_name(t, tmp_path / "logs") == "logs (cuda sm_80)"
    assert platform_name(t, [log]) == "a100 (cuda sm_80)"  # ... else the file's own directory
    assert platform_name(t) == "a100 (cuda sm_80)"
    t.platform = {"name": "my-gpu", "target": "cuda"}
    assert platform_name(t, [tmp_path / "logs"]) == "my-gpu"
