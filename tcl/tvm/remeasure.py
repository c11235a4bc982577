"""Measuring the programs of one dataset again on another target or device (same traces, same order)."""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from tvm.s_tir import meta_schedule as ms

from ..atomic import write_json
from . import collect_session as session
from .dataset import records_in_file_order
from .measure import Budget, Progress, repair_lines, summarize
from .targets import CollectError
from .task_dirs import count_lines


def source_measurement(src_dir) -> dict | None:
    """How a dataset's programs were measured (its platform.json's `measurement`; None: on warm caches).
    Its tasks were extracted for that way of measuring, so a re-measurement keeps it."""
    pf = Path(src_dir) / "platform.json"
    return json.loads(pf.read_text()).get("measurement") if pf.exists() else None


def remeasure(src_dir, out_dir, target=None, rpc: str | None = None, max_minutes: float | None = None, *,
              key: str | None = None, batch_size: int = 16, repeat: int = 3, min_repeat_ms: int = 100,
              platform_info: dict | None = None,
              builder_workers: int | None = None, progress_stream=sys.stderr) -> dict:
    """Measure the programs of the dataset `src_dir` again on another target/device into `out_dir`.

    Same task directories, same traces in the same order (the programs are the same loop nests; only
    the code generation target and the machine change), measured the way the source's were
    (source_measurement). Resumable like `collect`.
    """
    src_dir, out_dir = Path(src_dir), Path(out_dir)
    if not src_dir.is_dir():
        raise CollectError(f"{src_dir}: not a dataset directory")
    measured = source_measurement(src_dir)
    session.check_settings(batch_size=batch_size, repeat=repeat, min_repeat_ms=min_repeat_ms, max_minutes=max_minutes)
    lock, target, tracker = session.open_dataset(out_dir, target, rpc, key)
    handler = session.setup_log(out_dir)
    start = time.time()
    budget = Budget(start + 60 * max_minutes if max_minutes else None)
    measurer = None
    try:
        session.write_platform(out_dir, target, tracker, key, platform_info, measured)
        plan = []
        for s in sorted(p.parent for p in src_dir.glob("*/database_tuning_record.json*")):
            if (s / "database_tuning_record.json").exists():
                repair_lines(s / "database_tuning_record.json")  # the source may still be being written
            d = out_dir / s.name
            d.mkdir(exist_ok=True)
            for f in ("database_workload.json", "database_tuning_record.json"):
                if repair_lines(d / f):
                    session.LOG.warning("%s: dropped a line cut by an interrupted run", d / f)
            if (s / "task.json").exists():
                shutil.copy(s / "task.json", d / "task.json")
            src = records_in_file_order(s)
            have = count_lines(d / "database_tuning_record.json")
            if src and have < len(src):
                plan.append((d, src, have))
        measurer = session.make_measurer(target, tracker, key, repeat, min_repeat_ms, builder_workers,
                                         measured=measured)
        progress = Progress(sum(len(src) - have for _, src, have in plan), progress_stream)
        for d, src, have in plan:
            db = ms.database.JSONDatabase(work_dir=str(d))
            workload = db.commit_workload(src[0].workload.mod)
            for i in range(have, len(src), batch_size):
                if not budget.left():
                    break
                batch = [r.as_measure_candidate() for r in src[i:i + batch_size]]
                measurer.measure(db, workload, batch)
                progress.update(len(batch), d.name)
            info = json.loads((d / "task.json").read_text()) if (d / "task.json").exists() else {}
            info["summary"] = summarize(db.get_all_tuning_records())
            write_json(d / "task.json", info)
        progress.close()
        result = {"out_dir": str(out_dir), "tasks_worked_on": len(plan),
                  **session.collection_rates(measurer.counts(), start),
                  "stopped": "max_minutes" if not budget.left() else None}
        session.LOG.info("done: %s", result)
        return result
    finally:
        if measurer is not None:
            measurer.close()
        session.LOG.removeHandler(handler)
        handler.close()
        lock.close()
