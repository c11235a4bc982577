"""tcl.tvm.measure: the gate that keeps runs on the measurement CPUs alone, and builds shared between
this process's CPUs and the measurement CPUs."""

import multiprocessing
import threading
import time

import pytest

pytestmark = pytest.mark.tvm
pytest.importorskip("tvm")

from tcl.tvm.measure import Measurer, RunGate  # noqa: E402


class _Builder:
    """Records which programs it built; each build takes `seconds`."""

    def __init__(self, name, seconds=0.0, gate=None, max_workers=1):
        self.name, self.seconds, self.gate, self.built, self.beside_a_run = name, seconds, gate, [], 0
        self.max_workers, self.calls = max_workers, []

    def build(self, inputs):
        if self.gate is not None and self.gate.lock.acquire(block=False):  # free: nobody holds the CPUs
            self.gate.lock.release()
            self.beside_a_run += 1  # a build on the measurement CPUs must hold the gate itself
        time.sleep(self.seconds)
        self.calls.append(len(inputs))
        self.built.extend(inputs)
        return [(self.name, x) for x in inputs]


def _gate():
    return RunGate.for_processes(multiprocessing.get_context("spawn"))


def test_builds_are_shared_and_come_back_in_order():
    own, measure_cpus = _Builder("own", 0.01), _Builder("measure", 0.01)
    m = Measurer(target=None, builder=own, runner=None, measure_builder=measure_cpus)
    inputs = list(range(20))
    results = m.build(inputs)
    assert [x for _, x in results] == inputs
    assert sorted(own.built + measure_cpus.built) == inputs  # each program built once
    assert own.built and measure_cpus.built


def test_a_builder_with_several_workers_gets_that_many_programs_at_a_time():
    own, measure_cpus = _Builder("own", 0.01, max_workers=3), _Builder("measure", 0.01)
    m = Measurer(target=None, builder=own, runner=None, measure_builder=measure_cpus)
    assert [x for _, x in m.build(list(range(12)))] == list(range(12))
    assert max(own.calls) == 3 and set(measure_cpus.calls) == {1}


def test_without_a_measure_builder_everything_builds_on_own_cpus():
    own = _Builder("own")
    assert Measurer(target=None, builder=own, runner=None).build([1, 2, 3]) == [("own", 1), ("own", 2), ("own", 3)]


def test_measure_cpus_build_only_while_they_hold_the_gate():
    gate = _gate()
    own, measure_cpus = _Builder("own", 0.01), _Builder("measure", 0.01, gate=gate)
    m = Measurer(target=None, builder=own, runner=None, gate=gate, measure_builder=measure_cpus)
    assert m.build(list(range(10))) and measure_cpus.built
    assert measure_cpus.beside_a_run == 0  # every build there held the gate


def test_a_running_process_keeps_the_measure_cpus():
    """While another process runs programs (holds the gate), every build goes to this process's CPUs."""
    gate = _gate()
    own, measure_cpus = _Builder("own", 0.01), _Builder("measure")
    m = Measurer(target=None, builder=own, runner=None, gate=gate, measure_builder=measure_cpus)
    with gate.run():
        assert [x for _, x in m.build(list(range(8)))] == list(range(8))
    assert measure_cpus.built == [] and len(own.built) == 8


def test_a_waiting_run_goes_before_builds():
    gate = _gate()
    started, release = threading.Event(), threading.Event()

    def run():
        with gate.run():
            started.set()
            release.wait(5)

    gate.lock.acquire()  # a build holds the CPUs; a run arrives and waits
    t = threading.Thread(target=run)
    t.start()
    for _ in range(200):
        if gate.waiting.value:
            break
        time.sleep(0.01)
    assert gate.waiting.value == 1
    gate.release()
    assert not gate.try_build()  # no new build while the run waits
    assert started.wait(5)
    assert not gate.try_build()  # nor while it runs
    release.set()
    t.join(5)
    assert gate.try_build()
    gate.release()


class _SlowOnMeasureCpus(_Builder):
    """A builder on the measurement CPUs whose builds of `slow` programs hit its timeout."""

    def __init__(self, slow):
        super().__init__("measure")
        self.slow = set(slow)

    def build(self, inputs):
        from tvm.s_tir import meta_schedule as ms

        from tcl.tvm.builder import TIMED_OUT

        self.built.extend(inputs)
        return [ms.builder.BuilderResult(None, f"{TIMED_OUT} after 10.0 s") if x in self.slow else ("measure", x)
                for x in inputs]


def test_a_build_too_slow_for_the_measure_cpus_is_built_again_on_own_cpus():
    own, measure_cpus = _Builder("own", 0.01), _SlowOnMeasureCpus(slow=range(20))
    m = Measurer(target=None, builder=own, runner=None, measure_builder=measure_cpus)
    results = m.build(list(range(20)))
    assert measure_cpus.built  # the measurement CPUs tried some
    assert results == [("own", x) for x in range(20)]  # and each of those was built again here
    assert sorted(own.built) == list(range(20))
