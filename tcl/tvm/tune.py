"""Tune tasks one at a time with a chosen cost model: one workload, or a network's heaviest tasks
at an equal trial budget each (what bench/tuning.py compares cost models on). Whole networks within
one shared budget: tcl.tvm.network_tuning.

Each selected task is tuned with stock `ms.tune_tir` (evolutionary search, the fast builder,
LocalRunner or RPC) into one shared JSONDatabase; one cost model instance serves every task. A thin
wrapper timestamps every measured batch, so the report has best latency vs trials and vs wall time
per task.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import tvm
import tvm_ffi
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms

from ..atomic import save_figure, write_json
from . import networks as nets
from .builder import default_target, import_cpu_tensor_intrin, make_builder, make_runner

COST_MODELS = ("tcl", "xgb", "mlp", "random")


@derived_object
class TimedCostModel(ms.cost_model.PyCostModel):
    """Delegates to a cost model and records (seconds since start, programs measured) per batch."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.start = time.perf_counter()
        self.batches: list[tuple[float, int, int]] = []  # (seconds, task hash, batch size)

    def load(self, path):
        self.inner.load(path)

    def save(self, path):
        self.inner.save(path)

    def update(self, context, candidates, results):
        self.inner.update(context, candidates, results)
        self.batches.append((time.perf_counter() - self.start, int(tvm_ffi.structural_hash(context.mod)),
                             len(candidates)))

    def predict(self, context, candidates):
        return self.inner.predict(context, candidates)


# The dataset a source checkout ships; MLPModel is pretrained on its training tasks by default.
DEFAULT_MLP_DATA = Path(__file__).resolve().parents[2] / "datasets" / "znver4-2c"


def make_cost_model(kind: str, model_path=None, mlp_data=None, explore: float | None = None,
                    platform: dict | None = None):
    """kind: tcl (model_path: ONNX, default the shipped model; explore: its exploration weight, default
    tcl.tvm.search_cost_model.DEFAULT_EXPLORE; platform: the tuned hardware's platform.json, whose
    descriptor the model reads), xgb, mlp (pretrained on the dataset mlp_data, default the
    checkout's datasets/znver4-2c) or random."""
    if kind == "tcl":
        from .search_cost_model import DEFAULT_EXPLORE, CostModel

        return CostModel(model_path, explore=DEFAULT_EXPLORE if explore is None else explore, platform=platform)
    if kind == "xgb":
        return ms.cost_model.XGBModel(extractor=ms.feature_extractor.PerStoreFeature(), num_tuning_cores=1)
    if kind == "mlp":
        from .baselines import MLPCostModel, pretrained_mlp

        if mlp_data is None and not DEFAULT_MLP_DATA.is_dir():
            raise FileNotFoundError("the mlp cost model is pretrained on a measured dataset: give one "
                                    "(--mlp-data DIR, a `tcl collect` output)")
        return MLPCostModel(pretrained_mlp(mlp_data or DEFAULT_MLP_DATA))
    if kind == "random":
        return ms.cost_model.RandomModel()
    raise ValueError(f"unknown cost model {kind!r}; choose from {', '.join(COST_MODELS)}")


def tuned_platform(target, tracker, platform_info: dict | None) -> dict | None:
    """platform.json of the hardware programs run on: this host's, or with an RPC tracker the device's
    as `python tcl/tvm/hardware.py` printed it there (platform_info); None when an RPC device's is not
    given (the TCL model then reads the platform it was exported with)."""
    from .hardware import platform_descriptor

    if tracker and platform_info is None:
        return None
    return platform_descriptor(target, host=platform_info)


def workload_task(spec: str) -> nets.Task:
    """'matmul:128,128,128' or 'conv2d_nchw:1,64,56,56,64,3,1,1' (ms.testing.te_workload names)."""
    from tvm import te

    from tvm.s_tir.meta_schedule.testing import te_workload

    name, _, args = spec.partition(":")
    fn = getattr(te_workload, name, None)
    if fn is None or not callable(fn):
        raise ValueError(f"unknown workload {name!r}: use a function of ms.testing.te_workload, e.g. matmul:128,128,128")
    mod = tvm.IRModule({"main": te.create_prim_func(fn(*[int(a) for a in args.split(",") if a]))})
    return nets.Task(spec, mod, 1, nets._flops(mod), ["workload"])


def _curve(db_dir: Path, task: nets.Task) -> list[float]:
    """Best latency so far after each measured program of the task, in measuring order."""
    from .dataset import records_in_file_order  # the database's records in commit order

    key = task.shash
    secs = []
    for r in records_in_file_order(db_dir):
        if str(tvm_ffi.structural_hash(r.workload.mod)) == key:
            s = [float(x) for x in r.run_secs]
            secs.append(np.mean(s) if s and max(s) < 1e9 else np.inf)
    return np.minimum.accumulate(secs).tolist() if secs else []


def tune(out_dir, network: str | None = None, workload: str | None = None, trials: int = 64,
         cost_model: str = "tcl", model_path=None, target=None, rpc: str | None = None,
         key: str | None = None, max_tasks: int | None = 4, trials_per_iter: int = 16, seed: int = 0,
         mlp_data=None, explore: float | None = None, platform_info: dict | None = None) -> dict:
    """Tunes and writes out_dir/report.json (+ report.png); returns the report."""
    from .collect_session import check_rpc
    from .targets import parse_target

    if (network is None) == (workload is None):
        raise ValueError("give exactly one of network and workload")
    target = parse_target(target) if target is not None else default_target()
    tracker = check_rpc(rpc, key)
    import_cpu_tensor_intrin()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = nets.network_tasks(network, target) if network else [workload_task(workload)]
    tasks.sort(key=lambda t: -t.weight * t.flops)  # heaviest first
    tasks = tasks[:max_tasks] if max_tasks else tasks
    (out_dir / "db").mkdir(exist_ok=True)
    db = ms.database.JSONDatabase(work_dir=str(out_dir / "db"))
    model = TimedCostModel(make_cost_model(cost_model, model_path, mlp_data, explore,
                                           tuned_platform(target, tracker, platform_info)))
    builder = make_builder(max_workers=2)
    runner = make_runner(repeat=3, tracker_host=tracker[0] if tracker else None,
                         tracker_port=tracker[1] if tracker else None, tracker_key=key)
    t0 = time.perf_counter()
    try:
        for task in tasks:
            ms.tune_tir(task.mod, target, str(out_dir / "logs" / task.name), max_trials_global=trials,
                        num_trials_per_iter=trials_per_iter, builder=builder, runner=runner, database=db,
                        cost_model=model, seed=seed)
    finally:
        if hasattr(builder, "shutdown"):
            builder.shutdown()
    report = {"network": network, "workload": workload, "cost_model": cost_model, "trials_per_task": trials,
              "target": str(target), "seconds": time.perf_counter() - t0, "tasks": {}}
    for task in tasks:
        curve = _curve(out_dir / "db", task)
        h = int(tvm_ffi.structural_hash(task.mod))
        stamps = [(s, n) for s, th, n in model.batches if th == h]
        times = np.repeat([s for s, _ in stamps], [n for _, n in stamps]).tolist()
        report["tasks"][task.name] = {"weight": task.weight, "flops": task.flops, "best_s": curve[-1] if curve else None,
                                      "best_vs_trials": curve, "wall_s_at_trial": times[: len(curve)]}
    tuned = [v for v in report["tasks"].values() if v["best_s"] is not None]
    report["weighted_best_s"] = float(sum(v["weight"] * v["best_s"] for v in tuned))
    if hasattr(model.inner, "stats"):
        report["cost_model_stats"] = model.inner.stats
    write_json(out_dir / "report.json", report)
    plot(report, out_dir / "report.png")
    return report


def plot(report: dict, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, t in report["tasks"].items():
        c = np.array(t["best_vs_trials"]) * 1e3
        a.plot(np.arange(1, len(c) + 1), c, label=name[:28])
        if t["wall_s_at_trial"]:
            b.plot(t["wall_s_at_trial"], c[: len(t["wall_s_at_trial"])], label=name[:28])
    for ax, xl in ((a, "trials"), (b, "wall time (s)")):
        ax.set_xlabel(xl)
        ax.set_ylabel("best latency (ms)")
        ax.set_yscale("log")
    a.legend(fontsize=6)
    fig.suptitle(f"{report['network'] or report['workload']}: cost model {report['cost_model']}")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)  # tuning many runs in one process
