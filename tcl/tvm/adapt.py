"""`tcl adapt`: adapt a cost model to this host (or an RPC device) from a tenth of its measurements.

For the tasks of the networks given:
1. a candidate pool per task, nothing measured: replay-trace samples of the design space and
   evolutionary search scored by the starting model under this hardware's descriptor
   (candidates/<task>/candidates.json);
2. featurize the pools; the sampler picks what to measure in rounds from the model's scores and
   uncertainty (tcl.continual.adapt), each pick built and run with TVM's builder and runner and
   stored in a stock JSONDatabase per task (the output directory is a dataset of this platform);
3. the model learns the measurements by continual distillation (no earlier data, no growth) and is
   saved (model.pt) and exported (model.onnx) for `tcl tune --model`.

Resumable: pools are kept, and a program already in a task's database is never measured again.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tvm.s_tir import meta_schedule as ms

from ..atomic import write_json
from ..features import FeatureSet, TaskInfo, featurize_traces
from . import networks as nets
from .adapt_config import AdaptConfig
from .collect_session import make_measurer, open_dataset, setup_log, write_platform
from .measure import FAILED, Progress, _search_context, _trace_key, open_task_database, run_seconds
from .network_tuning_config import CONV_LAYOUT
from .task_dirs import task_dir, update_task_info

LOG = logging.getLogger("tcl.adapt")
CANDIDATES = "candidates.json"


@dataclass
class Pool:
    """One task's unmeasured candidates: tuning records without latencies, as JSON."""

    task: nets.Task
    records: list  # [trace, None, target, args_info] per candidate
    workload: object  # ms.database.Workload of the task

    def candidate(self, k: int):
        rec = ms.database.TuningRecord.from_json(self.records[k], self.workload)
        return rec.as_measure_candidate()


def _not_measured(cands) -> list:
    return [ms.runner.RunnerResult(None, "not measured: a pool candidate") for _ in cands]


def generate_pool(task: nets.Task, target, cost_model, size: int, random_fraction: float, seed: int,
                  population: int, batch: int = 64) -> list:
    """Up to `size` distinct candidates of the task (MeasureCandidates), none measured: the first
    `random_fraction` from replay-trace, the rest from evolutionary search under `cost_model`."""
    db = ms.database.MemoryDatabase()
    workload = db.commit_workload(task.mod)
    seen, out = set(), []
    n_random = round(size * random_fraction)
    for want, strategy, model in ((n_random, ms.search_strategy.ReplayTrace(), None),
                                  (size, ms.search_strategy.EvolutionarySearch(population_size=population),
                                   cost_model)):
        ctx = _search_context(task, target, strategy, seed + len(out), 1, db, workload, model, 4 * size, batch)
        stale = 0
        while len(out) < want and stale < 3:
            cands = ctx.generate_measure_candidates()
            if not cands:
                break
            fresh = []
            for c in cands:  # new to the pool, and once each within the batch too
                k = _trace_key(c.sch.trace)
                if k not in seen and len(out) + len(fresh) < want:
                    seen.add(k)
                    fresh.append(c)
            stale = 0 if fresh else stale + 1  # a small design space runs out of new programs
            out.extend(fresh)
            ctx.notify_runner_results(cands, _not_measured(cands))
        ctx.post_tuning()
    return out


def load_or_generate_pool(task: nets.Task, d: Path, target, cost_model, size: int, random_fraction: float,
                          seed: int, population: int) -> Pool:
    path = d / CANDIDATES
    workload = ms.database.Workload(task.mod)
    if path.is_file():
        records = json.loads(path.read_text())["records"]
    else:
        cands = generate_pool(task, target, cost_model, size, random_fraction, seed, population)
        records = [ms.database.TuningRecord(c.sch.trace, workload, None, target, c.args_info).as_json()
                   for c in cands]
        d.mkdir(parents=True, exist_ok=True)
        write_json(path, {"task": task.name, "shash": task.shash, "records": records}, indent=None)
    return Pool(task, records, workload)


def pool_featureset(pools: list[Pool], platform: dict, target) -> FeatureSet:
    """The pools' programs featurized as one FeatureSet (latencies unknown: cost NaN), one task each."""
    seqs, lengths, workloads, task_idx, tasks, sources, lines = [], [], [], [], [], [], []
    for i, p in enumerate(pools):
        seq, length, wl = featurize_traces([r[0] for r in p.records], p.records[0][3] if p.records else None)
        seqs.append(seq), lengths.append(length), workloads.append(wl)
        task_idx.append(np.full(len(length), i, np.int32))
        lines.append(np.arange(1, len(length) + 1, dtype=np.int64))
        sources.append(p.task.name)
        tasks.append(TaskInfo(workload=p.task.shash, target=str(target), source=p.task.name, failed=0,
                              weight=float(p.task.weight), name=p.task.name, platform=platform, split="train"))
    n = sum(len(x) for x in lengths)
    return FeatureSet(seq=np.concatenate(seqs), length=np.concatenate(lengths), task=np.concatenate(task_idx),
                      label=np.zeros(n, np.float32), cost=np.full(n, np.nan), workload=np.concatenate(workloads),
                      source=np.concatenate(task_idx), line=np.concatenate(lines), tasks=tasks, sources=sources)


class MeasuringOracle:
    """`measure(idx)` -> mean seconds of pool programs idx (inf: failed; nan: not measured, the
    deadline passed), built and run with TVM into each task's JSONDatabase under `out_dir`."""

    def __init__(self, pools: list[Pool], offsets: np.ndarray, dirs: list[Path], measurer, progress,
                 deadline: float | None = None, batch_size: int = 16):
        self.pools, self.offsets, self.dirs, self.measurer = pools, offsets, dirs, measurer
        self.progress, self.deadline, self.batch_size = progress, deadline, batch_size
        self.reused = 0
        self._dbs: dict[int, tuple] = {}

    def _db(self, t: int):
        """(JSONDatabase, workload, {trace key: mean seconds} of what it holds) of task t."""
        if t not in self._dbs:
            db, workload = open_task_database(self.dirs[t], self.pools[t].task.mod)
            known = {_trace_key(r.trace): float(np.mean([float(s) for s in r.run_secs]))
                     for r in db.get_all_tuning_records()}
            self._dbs[t] = (db, workload, known)
        return self._dbs[t]

    def measure(self, idx) -> np.ndarray:
        idx = np.asarray(idx)
        out = np.full(len(idx), np.nan)
        task_of = np.searchsorted(self.offsets, idx, side="right") - 1
        for t in np.unique(task_of):
            db, workload, known = self._db(int(t))
            todo = []
            for j in np.flatnonzero(task_of == t):
                cand = self.pools[t].candidate(int(idx[j] - self.offsets[t]))
                secs = known.get(_trace_key(cand.sch.trace))
                if secs is None:
                    todo.append((j, cand))
                else:
                    out[j] = np.inf if secs >= FAILED / 10 else secs
                    self.reused += 1
            for a in range(0, len(todo), self.batch_size):
                if self.deadline is not None and time.time() >= self.deadline:
                    return out
                batch = todo[a:a + self.batch_size]
                for (j, cand), r in zip(batch, self.measurer.measure(db, workload, [c for _, c in batch])):
                    secs = float(np.mean(run_seconds(r)))
                    known[_trace_key(cand.sch.trace)] = secs
                    out[j] = np.inf if secs == FAILED else secs
                self.progress.update(len(batch), self.pools[t].task.name)
        return out


def tasks_of(name: str, target) -> list[nets.Task]:
    """The tuning tasks of a built-in network as `tcl tune` tunes it (convolutions in CONV_LAYOUT), or
    the one task of a workload spec such as 'matmul:128,128,128' (tcl tune --workload's form)."""
    if ":" in name:
        from .tune import workload_task

        return [workload_task(name)]
    return nets.tasks_for(name, target, conv_layouts=(CONV_LAYOUT,))


def adapt_host(networks: list[str], out_dir, config: AdaptConfig | None = None, model_path=None, target=None,
               rpc: str | None = None, key: str | None = None, platform_info: dict | None = None,
               progress_stream=sys.stderr) -> dict:
    """Adapt the model at `model_path` (a tcl checkpoint; default the shipped one) to this host or
    the RPC device, for the tasks of `networks` (names or workload specs, tasks_of); writes
    out_dir/model.pt, model.onnx and report.json. TVM's own output goes to out_dir's log files."""
    from .console import native_output_to, quiet_tvm_console, quiet_warnings

    start = time.time()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lock, target, tracker = open_dataset(out_dir, target, rpc, key)
    handler = setup_log(out_dir)
    try:
        write_platform(out_dir, target, tracker, key, platform_info)
        quiet_tvm_console()
        with quiet_warnings(), native_output_to(out_dir / "tvm-stderr.txt") as terminal:
            report = _adapt(networks, out_dir, config or AdaptConfig(), model_path, target, tracker, key,
                            terminal if progress_stream is sys.stderr else progress_stream, start)
        write_json(out_dir / "report.json", report)
        return report
    finally:
        logging.getLogger().removeHandler(handler)
        lock.close()


def _adapt(networks, out_dir: Path, c: AdaptConfig, model_path, target, tracker, key, stream, start) -> dict:
    import torch

    from ..checkpoint import load_checkpoint
    from ..continual.adapt import adapt, as_knowledge_base
    from ..continual.config import CKDConfig
    from ..continual.kb import save_kb
    from ..evaluate import default_model_path
    from ..export import export_onnx
    from ..program_data import ProgramData
    from ..sampling.sampler import SamplingConfig
    from ..sampling.strategies import per_task_budget
    from .search_cost_model import CostModel

    deadline = start + 60 * c.minutes if c.minutes else None
    platform = json.loads((out_dir / "platform.json").read_text())
    if c.threads:
        torch.set_num_threads(c.threads)
    model_path = Path(model_path) if model_path else default_model_path()
    ckd = CKDConfig(seed=c.seed, threads=c.threads)
    kb, ewc = as_knowledge_base(*load_checkpoint(model_path), ckd)
    search_model = out_dir / "search_model.onnx"  # the starting model under this platform, for the pools
    export_onnx(kb, search_model, platform)
    cost_model = CostModel(search_model, platform=platform, adapt=False)

    tasks = {t.shash: (n, t) for n in networks for t in tasks_of(n, target)}
    pools, dirs = [], []
    progress = Progress(len(tasks), stream, "adapt", "candidate pools")
    for n, t in tasks.values():
        d = task_dir(out_dir, t)
        d.mkdir(exist_ok=True)
        update_task_info(d, t, n, None)
        pools.append(load_or_generate_pool(t, out_dir / "candidates" / d.name, target, cost_model, c.pool_size,
                                           c.random_fraction, c.seed, c.population))
        dirs.append(d)
        progress.update(1, f"{t.name}: {len(pools[-1].records)} candidates")
    progress.close()
    pools_done = time.time()
    data = ProgramData(pool_featureset(pools, platform, target))
    offsets = np.concatenate([[0], np.cumsum([len(p.records) for p in pools])])
    sampling = SamplingConfig(fraction=None if c.count else c.fraction, count=c.count, rounds=c.rounds,
                              seed=c.seed, threads=c.threads)
    budget = int(per_task_budget(data.task, sampling.fraction, sampling.count).sum())
    progress = Progress(budget, stream, "adapt", "programs measured")
    measurer = make_measurer(target, tracker, key, c.repeat, c.min_repeat_ms, None)
    oracle = MeasuringOracle(pools, offsets, dirs, measurer, progress, deadline)
    try:
        res = adapt(kb, ewc, data, list(range(len(pools))), oracle, sampling, ckd, say=progress.say)
    finally:
        progress.close()
        measurer.close()
    report = {"networks": networks, "model": str(model_path), "target": str(target), "platform": platform["name"],
              "tasks": len(pools), "pool": int(offsets[-1]), "budget": budget,
              "measured": int((~np.isnan(res.costs)).sum()), "failed": int(np.isinf(res.costs).sum()),
              "reused": oracle.reused, "learned_from": int(np.isfinite(res.costs).sum()), "preserve": res.preserve,
              "rounds": res.rounds, "measure_seconds": measurer.seconds,
              "seconds": {"pools": pools_done - start, **res.seconds}}
    save_kb(out_dir / "model.pt", res.kb, res.ewc, {"adapt": report})
    export_onnx(res.kb, out_dir / "model.onnx", platform)
    search_model.unlink()
    report["seconds"]["total"] = time.time() - start
    return report
