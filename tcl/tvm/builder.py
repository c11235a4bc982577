"""Fast MetaSchedule builder/runner and the host target (see TVM_NOTES.md, "The builder trap")."""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time

from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import local_builder
from tvm.support.popen_pool import PopenPoolExecutor, StatusKind
from tvm.target import Target, codegen

from .network_tuning_config import FLUSHED_REPEATS


BUILD_TIMEOUT_SEC = 60.0  # a build that takes longer is stored as a failed program
TIMED_OUT = "build timed out"  # how a PersistentBuilder's result says so


def timed_out(result) -> bool:
    """Whether a builder result is a build stopped by the timeout."""
    return bool(getattr(result, "error_msg", None)) and result.error_msg.startswith(TIMED_OUT)


def f_build(mod, target, _params):
    """`ms.builder.local_builder.default_build` without `import tvm.s_tir.tensor_intrin`.

    That import takes many seconds and the stock builder repeats it in every fresh worker process.
    """
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def _pickle_f_build_by_value() -> None:
    # Builder workers are fresh interpreters that may not have tcl on sys.path (e.g. under pytest
    # without an install); ship f_build's code instead of a module reference.
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


@derived_object
class PersistentBuilder(ms.builder.PyBuilder):
    """LocalBuilder's work (fast `f_build`, default export) in a worker pool kept across build() calls.

    The stock LocalBuilder starts new workers for every call (each imports tvm and torch, seconds) to
    dodge a slow memory leak in long-lived workers; here the pool is replaced every `recycle_after`
    builds instead.
    """

    def __init__(self, max_workers: int | None = None, timeout_sec: float = BUILD_TIMEOUT_SEC,
                 recycle_after: int = 256, initializer=None):
        super().__init__()
        self.max_workers = max_workers or os.cpu_count() or 1
        self.timeout_sec, self.recycle_after = timeout_sec, recycle_after
        self.initializer = initializer  # runs in each worker process (e.g. to pin it to CPUs)
        self._pool, self._built = None, 0
        self.seconds = 0.0  # spent in build() calls, for a tuning report's time split
        self.timed_out = 0  # builds stopped by the timeout

    def _ensure_pool(self) -> None:
        if self._pool is None or self._built >= self.recycle_after:
            self.shutdown()
            self._pool = PopenPoolExecutor(max_workers=self.max_workers, timeout=self.timeout_sec,
                                           initializer=self.initializer)
            self._built = 0

    def warm_up(self) -> None:
        """Start the worker processes and import what a build needs (seconds of CPU), now rather
        than inside the first build."""
        self._ensure_pool()
        module = local_builder.__name__
        for f in [self._pool.submit(importlib.import_module, module) for _ in range(self.max_workers)]:
            f.result()

    def build(self, build_inputs):
        start = time.perf_counter()
        self._ensure_pool()
        self._built += len(build_inputs)
        args = [(f_build, None, b.mod, b.target, local_builder._serialize_params(b.params)) for b in build_inputs]
        results = []
        for r in self._pool.map_with_error_catching(lambda x: local_builder._worker_func(*x), args):
            if r.status == StatusKind.COMPLETE:
                results.append(ms.builder.BuilderResult(r.value, None))
            elif r.status == StatusKind.TIMEOUT:
                self.timed_out += 1
                results.append(ms.builder.BuilderResult(None, f"{TIMED_OUT} after {self.timeout_sec} s"))
            else:
                results.append(ms.builder.BuilderResult(None, f"build failed: {r.value}"))
        self.seconds += time.perf_counter() - start
        return results

    def shutdown(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def make_builder(max_workers: int | None = None, timeout_sec: float = BUILD_TIMEOUT_SEC, persistent: bool = True,
                 initializer=None):
    """A builder with the fast `f_build` (max_workers defaults to the CPU count).

    persistent=False gives the stock LocalBuilder (new worker processes for every build() call).
    `initializer` runs in each of the persistent builder's worker processes.
    """
    _pickle_f_build_by_value()
    if persistent:
        return PersistentBuilder(max_workers=max_workers, timeout_sec=timeout_sec, initializer=initializer)
    return ms.builder.LocalBuilder(f_build=f_build, max_workers=max_workers, timeout_sec=timeout_sec)


def import_cpu_tensor_intrin() -> None:
    """Register the CPU tensor intrinsics without the CUDA/ROCm/Hexagon ones.

    `ms.TuneContext` runs `import tvm.s_tir.tensor_intrin`, whose __init__ imports every backend's
    intrinsics, most of the time in CUDA's. CPU schedule rules only use the x86 and Arm ones. This
    registers the package without running its __init__, so TuneContext's import finds it done; do not
    call it in a process that will also tune for a GPU.
    """
    name = "tvm.s_tir.tensor_intrin"
    if name in sys.modules:
        return
    package = importlib.util.module_from_spec(importlib.util.find_spec(name))
    sys.modules[name] = package
    try:
        for backend in ("x86", "arm_cpu"):
            importlib.import_module(f"{name}.{backend}")
    except BaseException:
        del sys.modules[name]
        raise


def alloc_arguments(device, args_info, alloc_repeat: int) -> list:
    """The runner's inputs: random, as TVM's default, except integer tensors, which are zeros. Integer
    inputs are indices (take, gather, embedding lookups); random ones fall outside the table and the
    program crashes the runner, so such a task could never be measured."""
    import numpy as np
    from tvm.s_tir.meta_schedule.runner.local_runner import default_alloc_argument

    repeated = default_alloc_argument(device, args_info, alloc_repeat)
    for args in repeated:
        for arg in args:
            if "int" in str(arg.dtype):
                arg.copyfrom(np.zeros(arg.shape, dtype=str(arg.dtype)))
    return repeated


def make_runner(
    repeat: int | None = None,
    number: int = 3,
    min_repeat_ms: int = 100,
    timeout_sec: float = 60.0,
    tracker_host: str | None = None,
    tracker_port: int | None = None,
    tracker_key: str | None = None,
    session_timeout_sec: int = 60,
    max_workers: int = 1,
    initializer=None,
    cache_flush: bool = False,
):
    """LocalRunner, or RPCRunner through a TVM RPC tracker when tracker_host/port/key are given.
    `initializer` runs in the LocalRunner's worker process (e.g. to pin it to CPUs). cache_flush:
    every call starts with the program's inputs and weights flushed from the CPU caches, as inside a
    whole network where the other layers evict them; each timed repeat is then one call
    (number and min_repeat_ms do not apply). repeat: timed repeats (default 1, or FLUSHED_REPEATS
    calls from flushed caches)."""
    if cache_flush:
        number, min_repeat_ms = 1, 0  # a longer repeat would time warm calls after the first
    if repeat is None:
        repeat = FLUSHED_REPEATS if cache_flush else 1
    config = ms.runner.EvaluatorConfig(
        number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, enable_cpu_cache_flush=cache_flush
    )
    if tracker_host is None:
        return ms.runner.LocalRunner(timeout_sec=timeout_sec, evaluator_config=config, initializer=initializer,
                                     f_alloc_argument=alloc_arguments)
    if tracker_port is None or tracker_key is None:
        raise ValueError("an RPC runner needs tracker_host, tracker_port and tracker_key")
    rpc = ms.runner.RPCConfig(
        tracker_host=tracker_host,
        tracker_port=int(tracker_port),
        tracker_key=tracker_key,
        session_timeout_sec=session_timeout_sec,
    )
    return ms.runner.RPCRunner(rpc_config=rpc, evaluator_config=config, max_workers=max_workers)


def host_cpu() -> str:
    """LLVM's name for this CPU (e.g. 'znver4'); without mcpu, tuned code runs several times slower."""
    return codegen.llvm_get_system_cpu()


def default_target(num_cores: int | None = None, mcpu: str | None = None) -> Target:
    """The dict-form llvm Target for this host (num-cores is required in TVM 0.27)."""
    if num_cores is None:
        import psutil

        num_cores = psutil.cpu_count(logical=False) or psutil.cpu_count()
    return Target({"kind": "llvm", "mcpu": mcpu or host_cpu(), "num-cores": int(num_cores)})


__all__ = ["f_build", "PersistentBuilder", "make_builder", "import_cpu_tensor_intrin", "alloc_arguments",
           "make_runner", "default_target", "host_cpu"]
