"""Fast MetaSchedule builder/runner and the host target (see TVM_NOTES.md, "The builder trap")."""
from __future__ import annotations

import sys

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm.target import Target, codegen


def f_build(mod, target, _params):
    """`ms.builder.local_builder.default_build` without `import tvm.s_tir.tensor_intrin`.

    That import takes ~22 s and the stock builder repeats it in every fresh worker process.
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


def make_builder(max_workers: int | None = None, timeout_sec: float = 60.0) -> ms.builder.LocalBuilder:
    """LocalBuilder with the fast `f_build` (max_workers defaults to the CPU count)."""
    _pickle_f_build_by_value()
    return ms.builder.LocalBuilder(f_build=f_build, max_workers=max_workers, timeout_sec=timeout_sec)


def make_runner(
    repeat: int = 1,
    number: int = 3,
    min_repeat_ms: int = 100,
    timeout_sec: float = 60.0,
    tracker_host: str | None = None,
    tracker_port: int | None = None,
    tracker_key: str | None = None,
    session_timeout_sec: int = 60,
    max_workers: int = 1,
):
    """LocalRunner, or RPCRunner through a TVM RPC tracker when tracker_host/port/key are given."""
    config = ms.runner.EvaluatorConfig(
        number=number, repeat=repeat, min_repeat_ms=min_repeat_ms, enable_cpu_cache_flush=False
    )
    if tracker_host is None:
        return ms.runner.LocalRunner(timeout_sec=timeout_sec, evaluator_config=config)
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
    """LLVM's name for this CPU (e.g. 'znver4'); without mcpu tuned code ran ~3x slower."""
    return codegen.llvm_get_system_cpu()


def default_target(num_cores: int | None = None, mcpu: str | None = None) -> Target:
    """The dict-form llvm Target for this host (num-cores is required in TVM 0.27)."""
    if num_cores is None:
        import psutil

        num_cores = psutil.cpu_count(logical=False) or psutil.cpu_count()
    return Target({"kind": "llvm", "mcpu": mcpu or host_cpu(), "num-cores": int(num_cores)})


__all__ = ["f_build", "make_builder", "make_runner", "default_target", "host_cpu"]
