"""tcl.tvm.builder: the host target, the fast builder (stock and persistent pool), the runner, and the
committed MetaSchedule fixture they made."""

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.tvm
tvm = pytest.importorskip("tvm")

from tvm.s_tir import meta_schedule as ms  # noqa: E402

from tcl.tvm.builder import PersistentBuilder, default_target, make_builder, make_runner, timed_out  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "ms"


def test_default_target_is_the_dict_form_with_this_cpu():
    t = default_target(num_cores=2)
    assert t.kind.name == "llvm" and int(t.attrs["num-cores"]) == 2
    assert str(t.attrs["mcpu"]) == tvm.target.codegen.llvm_get_system_cpu()
    assert str(default_target(1, "haswell").attrs["mcpu"]) == "haswell"


def test_fixture_is_a_stock_database():
    readme = (FIXTURE / "README.md").read_text()
    assert "make_fixture.py" in readme and tvm.__version__ in readme
    for name in ("matmul_128", "conv2d_1x16x14x14_32_3x3"):
        records = ms.database.JSONDatabase(work_dir=str(FIXTURE / name)).get_all_tuning_records()
        assert len(records) == 40 and f"| {name} | 40 |" in readme
        assert len({str(r.trace) for r in records}) == 40
        target = json.loads((FIXTURE / name / "database_tuning_record.json").read_text().splitlines()[0])[1][2]
        assert target["kind"] == "llvm" and target["num-cores"] == 2


@pytest.mark.slow
def test_fast_builder_builds_and_runner_runs():
    records = ms.database.JSONDatabase(work_dir=str(FIXTURE / "matmul_128")).get_all_tuning_records()[:3]
    cands = [r.as_measure_candidate() for r in records]
    target = default_target(2)
    builder = make_builder(max_workers=2)
    assert isinstance(builder, PersistentBuilder)
    for _ in range(2):  # the second call reuses the workers
        built = builder.build([ms.builder.BuilderInput(c.sch.mod, target) for c in cands])
        assert [b.error_msg for b in built] == [None] * 3
    builder.shutdown()
    runner = make_runner(repeat=2)
    results = [f.result() for f in runner.run(
        [ms.runner.RunnerInput(b.artifact_path, "cpu", c.args_info) for b, c in zip(built, cands)])]
    for r in results:
        assert r.error_msg is None and len(r.run_secs) == 2
        assert all(0 < float(s) < 0.1 for s in r.run_secs)  # a 128^3 matmul: well under 100 ms


def test_a_build_past_the_timeout_is_reported_as_timed_out():
    (record,) = ms.database.JSONDatabase(work_dir=str(FIXTURE / "matmul_128")).get_all_tuning_records()[:1]
    builder = make_builder(max_workers=1, timeout_sec=0.001)
    (built,) = builder.build([ms.builder.BuilderInput(record.as_measure_candidate().sch.mod, default_target(2))])
    builder.shutdown()
    assert built.artifact_path is None and timed_out(built)
    assert not timed_out(ms.builder.BuilderResult(None, "build failed: an error"))


@pytest.mark.slow
def test_stock_builder_on_request():
    assert isinstance(make_builder(max_workers=1, persistent=False), ms.builder.LocalBuilder)


def test_rpc_runner_needs_all_three_tracker_fields():
    with pytest.raises(ValueError, match="tracker_host, tracker_port and tracker_key"):
        make_runner(tracker_host="127.0.0.1")


@pytest.mark.slow
def test_a_lookup_task_is_measured_not_crashed():
    """Random int64 indices fall outside the table and the program crashes the runner; the runner's
    integer inputs are zeros, so embedding lookups (take) can be measured."""
    from tvm import te, topi

    table = te.placeholder((1000, 64), name="table")
    ids = te.placeholder((1, 128), dtype="int64", name="ids")
    mod = tvm.IRModule({"main": te.create_prim_func([table, ids, topi.take(table, ids, axis=0, mode="fast")])})
    sch = tvm.s_tir.Schedule(mod)
    target = default_target(1)
    (built,) = make_builder(max_workers=1, persistent=False).build([ms.builder.BuilderInput(sch.mod, target)])
    assert built.error_msg is None
    args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    (result,) = [f.result() for f in make_runner().run([ms.runner.RunnerInput(built.artifact_path, "cpu", args_info)])]
    assert result.error_msg is None and all(0 < float(s) < 0.1 for s in result.run_secs)


@pytest.mark.slow
def test_cache_flushing_runner_times_one_cold_call_per_repeat():
    """With cache_flush, every timed repeat is one call after the arguments were flushed (a longer
    repeat would time warm calls), whatever number and min_repeat_ms were asked for."""
    from tvm import te

    a = te.placeholder((256, 256), name="a")
    x = te.placeholder((256,), name="x")
    k = te.reduce_axis((0, 256), name="k")
    y = te.compute((256,), lambda i: te.sum(a[i, k] * x[k], axis=k), name="y")
    mod = tvm.IRModule({"main": te.create_prim_func([a, x, y])})
    runner = make_runner(repeat=7, number=20, min_repeat_ms=100, cache_flush=True)
    config = runner.evaluator_config
    assert (config.number, config.repeat, config.min_repeat_ms, config.enable_cpu_cache_flush) == (1, 7, 0, True)
    assert not make_runner().evaluator_config.enable_cpu_cache_flush
    (built,) = make_builder(max_workers=1, persistent=False).build([ms.builder.BuilderInput(mod, default_target(1))])
    assert built.error_msg is None
    run_input = ms.runner.RunnerInput(built.artifact_path, "cpu", ms.arg_info.ArgInfo.from_prim_func(mod["main"]))
    (result,) = [f.result() for f in runner.run([run_input])]
    assert result.error_msg is None and len(result.run_secs) == 7 and all(float(s) > 0 for s in result.run_secs)


class _CountingPool:
    """Stands in for TVM's PopenPoolExecutor: records each pool started and what ran in it."""

    started: list = []

    def __init__(self, max_workers=None, timeout=None, initializer=None, **_):
        self.initializer, self.submitted, self.closed = initializer, [], False
        _CountingPool.started.append(self)

    def map_with_error_catching(self, fn, args):
        from tvm.support.popen_pool import MapResult, StatusKind

        return [MapResult(StatusKind.COMPLETE, "lib.so") for _ in args]

    def submit(self, fn, *args):
        import concurrent.futures

        self.submitted.append((fn, args))
        f = concurrent.futures.Future()
        f.set_result(None)
        return f

    def shutdown(self):
        self.closed = True


def test_persistent_builder_replaces_its_pool_once_per_recycle_after(monkeypatch):
    """After `recycle_after` builds the workers are replaced once, and the new pool serves the next
    `recycle_after` builds (not a fresh pool for every later call)."""
    import tcl.tvm.builder as builder_module

    monkeypatch.setattr(builder_module, "PopenPoolExecutor", _CountingPool)
    _CountingPool.started = []
    b = PersistentBuilder(max_workers=1, recycle_after=4)
    mod = tvm.IRModule()
    target = default_target(1)
    pools = []
    for _ in range(5):
        results = b.build([ms.builder.BuilderInput(mod, target)] * 3)
        assert [r.artifact_path for r in results] == ["lib.so"] * 3
        pools.append(b._pool)
    assert pools[0] is pools[1] and pools[2] is pools[3] and pools[4] is not pools[3]
    assert pools[1] is not pools[2] and len(_CountingPool.started) == 3
    assert all(p.closed for p in _CountingPool.started[:2])


def test_persistent_builder_warm_up_starts_pinned_workers(monkeypatch):
    import tcl.tvm.builder as builder_module

    monkeypatch.setattr(builder_module, "PopenPoolExecutor", _CountingPool)
    _CountingPool.started = []
    pin = object()
    b = make_builder(max_workers=2, initializer=pin)
    b.warm_up()
    (pool,) = _CountingPool.started
    assert pool.initializer is pin and len(pool.submitted) == 2  # one import per worker
    b.build([ms.builder.BuilderInput(tvm.IRModule(), default_target(1))])
    assert _CountingPool.started == [pool]  # the build reuses the warmed-up workers
