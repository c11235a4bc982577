"""Opening a dataset directory for measuring: settings checks, the lock, unpacking, the log file, the
platform check (same host, same target, measured the same way) and the builder/runner pair, shared by
collect and remeasure."""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path

from ..atomic import write_json
from ..packing import DatasetBusy, dataset_lock, is_packed, pack_dataset
from .builder import make_builder, make_runner
from .hardware import platform_descriptor, platform_name, same_host
from .measure import SHARED_BUILD_TIMEOUT_SEC, Measurer, pin_to_cpus
from .network_tuning_config import CACHE_FLUSH, CONV_LAYOUTS, PREPACK_WEIGHTS
from .targets import CollectError, check_tracker, parse_rpc

LOG = logging.getLogger("tcl.collect")


def measurement(as_tuned: bool) -> dict | None:
    """How a dataset's programs are measured, for platform.json: None for TVM's default (weights in the
    network's layout, repeated calls on warm caches); with `as_tuned`, as `tcl tune` measures them
    (weights prepacked, each call from flushed caches), whose ranking is the one the search needs."""
    return {"prepack_weights": PREPACK_WEIGHTS, "cache_flush": CACHE_FLUSH} if as_tuned else None


def _measured_as(d: dict) -> str:
    return "as `tcl tune` measures (--as-tuned)" if d.get("measurement") else "on warm caches (without --as-tuned)"


def check_settings(**settings) -> None:
    """Refuse settings that cannot work before any set-up: counts must be positive, the random share
    a fraction. None means "not given" and is accepted."""
    for name, value in settings.items():
        if value is None:
            continue
        flag = "--" + name.replace("_", "-")
        if name == "random_fraction":
            if not 0.0 <= value <= 1.0:
                raise CollectError(f"{flag} must be between 0 and 1, not {value}")
        elif name == "min_repeat_ms":
            if value < 0:
                raise CollectError(f"{flag} must be 0 or more, not {value}")
        elif not value > 0:
            raise CollectError(f"{flag} must be positive, not {value}")


def check_conv_layouts(layouts) -> None:
    unknown = [x for x in layouts if x not in CONV_LAYOUTS]
    if not layouts or unknown:
        raise CollectError(f"--conv-layouts takes one or more of {', '.join(CONV_LAYOUTS)}, not {','.join(layouts)}")


def check_measure_cpus(cpus) -> None:
    if cpus is None:
        return
    allowed = os.sched_getaffinity(0)
    if not cpus or not set(cpus) <= allowed:
        raise CollectError(f"--measure-cpus {cpus} must name CPUs this process may use: {sorted(allowed)}")
    if not allowed - set(cpus):
        raise CollectError(f"--measure-cpus {cpus} leaves no CPU for searching and building")


def lock_dataset(out_dir) -> "object":
    """Create the dataset directory and take its lock (tcl.packing.dataset_lock) as a CollectError."""
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        return dataset_lock(out_dir)
    except DatasetBusy as e:
        raise CollectError(str(e)) from None
    except OSError as e:
        raise CollectError(f"cannot write to {out_dir}: {e.strerror}") from None


def unpack_dataset(out_dir: Path):
    """A shipped (packed) dataset goes back to stock plain files, which the collector appends to."""
    if is_packed(out_dir):
        stats = pack_dataset(out_dir, restore=True, lock=False)  # the caller holds the lock
        print(f"[collect] {out_dir}: unpacked {stats['files']} .xz files to continue collecting "
              f"(`tcl pack {out_dir}` compresses them again)", file=sys.stderr)


def setup_log(out_dir: Path) -> logging.Handler:
    handler = logging.FileHandler(out_dir / "collect-log.txt")  # not .log: tcl.records reads *.log as Ansor logs
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False  # the terminal shows the progress line; details go to the log file
    return handler


def write_platform(out_dir: Path, target, tracker, key, platform_info, measured: dict | None = None) -> str | None:
    """platform.json for a new dataset; an existing one must be of the same physical host and target,
    and measured the same way (`measured`: measurement())."""
    rpc_text = f"{tracker[0]}:{tracker[1]} key={key}" if tracker else None
    desc = platform_descriptor(target, host=platform_info, rpc=rpc_text, measurement=measured)
    pf = out_dir / "platform.json"
    if pf.exists():
        check_same_platform(json.loads(pf.read_text()), desc, out_dir)
        return rpc_text
    if tracker and platform_info is None:
        LOG.warning("RPC: the device's hardware was not probed; run tcl/tvm/hardware.py on it and pass "
                    "--platform-info")
    write_json(pf, desc)
    return rpc_text


def check_same_platform(old: dict, new: dict, out_dir) -> None:
    """Refuse to add measurements of another host, another target or another way of measuring to a
    dataset."""
    def who(d):
        return d.get("name") or platform_name(d)

    if old.get("target") != new["target"]:
        raise CollectError(f"{out_dir} holds data of platform {who(old)} (target {old.get('target')}), not "
                           f"{who(new)} (target {new['target']}); use one directory per platform")
    differ = same_host(old, new)
    if differ:
        fields = ", ".join(f"{k} {old[k]!r} here vs {new[k]!r} now" for k in differ)
        raise CollectError(f"{out_dir} holds data measured on another host ({who(old)}: {fields}); this host "
                           f"is {who(new)}: collect into its own directory, e.g. datasets/{who(new)}")
    if old.get("measurement") != new.get("measurement"):
        raise CollectError(f"{out_dir} holds programs measured {_measured_as(old)}, not {_measured_as(new)}; "
                           f"collect into its own directory, e.g. datasets/{who(new)}")


def check_rpc(rpc: str | None, key: str | None) -> tuple[str, int] | None:
    tracker = parse_rpc(rpc)
    if tracker is not None:
        if not key:
            raise CollectError("--rpc needs --key, the key the RPC servers registered with")
        check_tracker(*tracker, key)
    return tracker


def make_measurer(target, tracker, key, repeat, min_repeat_ms, builder_workers, measure_cpus=None,
                  gate=None, measured: dict | None = None) -> Measurer:
    """A builder and a runner; with measure_cpus, this process and its builders move to the other CPUs,
    the runner's worker to measure_cpus, and a second builder there builds between runs (locally).
    measured: measurement(); timing from flushed caches takes make_runner's repeats for it
    instead of `repeat` and `min_repeat_ms`."""
    flush = bool(measured and measured["cache_flush"])
    initializer, measure_builder = None, None
    if measure_cpus:
        check_measure_cpus(measure_cpus)
        others = set(os.sched_getaffinity(0)) - set(measure_cpus)
        os.sched_setaffinity(0, others)
        initializer = pin_to_cpus(measure_cpus)
        builder_workers = builder_workers or len(others)
        if tracker is None:
            measure_builder = make_builder(max_workers=len(measure_cpus), timeout_sec=SHARED_BUILD_TIMEOUT_SEC,
                                           initializer=initializer)
            with gate.run() if gate is not None else contextlib.nullcontext():  # never beside a run
                measure_builder.warm_up()
    runner = make_runner(repeat=None if flush else repeat, min_repeat_ms=min_repeat_ms, cache_flush=flush,
                         tracker_host=tracker[0] if tracker else None, tracker_port=tracker[1] if tracker else None,
                         tracker_key=key, initializer=initializer)
    return Measurer(target, make_builder(max_workers=builder_workers), runner, gate=gate,
                    measure_builder=measure_builder)


def collection_rates(stats: dict, start: float) -> dict:
    """Counts and speeds of a collection from its measurer counts {"measured", "failed", "seconds"}."""
    n, elapsed = stats["measured"], time.time() - start
    return {"measured": n, "failed": stats["failed"], "seconds": round(elapsed, 1),
            "measure_seconds_per_program": round(stats["seconds"] / n, 3) if n else None,  # build + run
            "seconds_per_program": round(elapsed / n, 3) if n else None,  # everything, search included
            "programs_per_hour": round(3600 * n / elapsed) if n else 0}


def open_dataset(out_dir: Path, target, rpc: str | None, key: str | None):
    """Take the dataset's lock first (a second writer learns at once, not after TVM's set-up), then
    check the target and the tracker and restore packed files. Returns (lock, target, tracker)."""
    from .builder import import_cpu_tensor_intrin
    from .targets import check_target, local_device_target, parse_target

    lock = lock_dataset(out_dir)
    try:
        target = parse_target(target)
        tracker = check_rpc(rpc, key)
        if tracker is None:
            target = local_device_target(target)
        check_target(target)
        if target.kind.name == "llvm":
            import_cpu_tensor_intrin()  # instead of TuneContext's import of every backend's intrinsics
        unpack_dataset(out_dir)
    except BaseException:
        lock.close()
        raise
    return lock, target, tracker

