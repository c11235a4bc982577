"""Per-candidate scoring cost inside the search loop: from MeasureCandidate to score, 1 thread.

TCL: str(trace) -> C++ featurizer -> onnxruntime (tcl.tvm.CostModel.predict). XGB: TVM's XGBModel
(PerStoreFeature extraction + booster predict). MLP: TVM's MLPModel (PerStoreFeature + SegmentSum
MLP). The candidates are programs rebuilt from stock databases (default: the 8 tasks with the
most programs in datasets/znver4-2c, real network and sweep tasks; `--db tests/fixtures/ms/*` for the
small fixture). Each task is scored in one predict call of --per-call candidates: 512 is the
population MetaSchedule's evolutionary search scores per call (a task's stored programs repeat
when it has fewer). Every model scores the same lists (XGBModel is first trained on them, since it
predicts at random without a booster; the other two cost the same whatever their weights).
Repeats are interleaved so the models see the same machine load.

Writes bench/results/inloop.json with tcl_us_per_candidate, xgb_us_per_candidate,
mlp_us_per_candidate (medians) and the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from tcl.atomic import write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def candidates(db_dirs, per, seed=0):
    """`per` programs of each database (plain or packed), as TuningRecords with a context."""
    from tvm.s_tir import meta_schedule as ms

    import tcl
    from tcl.tvm.dataset import RecordReader

    rng = np.random.default_rng(seed)
    picked = []
    for d in db_dirs:
        fs = tcl.featurize(d)
        recs = RecordReader(fs).records(rng.choice(len(fs), size=per, replace=per > len(fs)))
        picked.append((ms.TuneContext(mod=recs[0].workload.mod, target=recs[0].target, num_threads=1), recs))
    return picked


def default_dbs(n_tasks: int = 8) -> list[str]:
    """The shipped dataset's biggest tasks (their names sort ties), else the test fixture."""
    from tcl.records import RECORD_FILE, _find, read_bytes

    data = ROOT / "datasets" / "znver4-2c"
    dirs = [d for d in data.iterdir() if _find(d, RECORD_FILE)] if data.is_dir() else []
    if not dirs:
        return sorted(str(d) for d in (ROOT / "tests" / "fixtures" / "ms").iterdir() if d.is_dir())

    def programs(d):
        return read_bytes(_find(d, RECORD_FILE)).count(b"\n")

    return [str(d) for d in sorted(dirs, key=lambda d: (-programs(d), d.name))[:n_tasks]]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--db", nargs="+", default=None, help="stock JSONDatabase directories (default: see above)")
    p.add_argument("--model", default=None, help="TCL ONNX model (default: the shipped one, else a fresh export)")
    p.add_argument("--per-call", type=int, default=512, help="candidates per predict call (one call per task)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats per scorer (the median is reported)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "inloop.json"), help="the summary JSON")
    args = p.parse_args(argv)
    args.db = args.db or default_dbs()

    import torch

    torch.set_num_threads(1)
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.cost_model.mlp_model import MLPModel

    from tcl.tvm.builder import import_cpu_tensor_intrin
    from tcl.tvm.search_cost_model import CostModel

    import_cpu_tensor_intrin()
    groups = candidates(args.db, args.per_call)
    with tempfile.TemporaryDirectory() as tmp:
        model_path, model_label = args.model, args.model
        if model_path is None:
            from tcl.runtime import DEFAULT_ONNX

            if DEFAULT_ONNX.is_file():
                model_path, model_label = str(DEFAULT_ONNX), "the shipped default"
            else:  # same architecture and size as the default: the cost is what is measured
                from tcl.export import export_onnx
                from tcl.architectures import build_model

                model_path, model_label = os.path.join(tmp, "model.onnx"), "default-size fresh export"
                export_onnx(build_model("mamba"), model_path)
        models = {
            "tcl": CostModel(model_path, adapt=False),
            "xgb": ms.cost_model.XGBModel(extractor=ms.feature_extractor.PerStoreFeature(), num_warmup_samples=0,
                                          adaptive_training=False, num_tuning_cores=1),
            "mlp": MLPModel(),
        }
        cands = [(ctx, [r.as_measure_candidate() for r in recs]) for ctx, recs in groups]
        results = [[ms.runner.RunnerResult(r.run_secs, None) for r in recs] for _, recs in groups]
        # XGBModel predicts at random until it has a booster: train it on these programs. The
        # MLP's (and TCL's) cost does not depend on their weights.
        for (ctx, cs), rs in zip(cands, results):
            models["xgb"].update(ctx, cs, rs)
        n = sum(len(c) for _, c in cands)
        times = {k: [] for k in models}
        for _ in range(args.repeats):
            for name, m in models.items():
                t0 = time.perf_counter()
                for ctx, cs in cands:
                    m.predict(ctx, cs)
                times[name].append((time.perf_counter() - t0) / n * 1e6)
    res = {f"{k}_us_per_candidate": statistics.median(v) for k, v in times.items()}
    res.update(candidates=n, per_call=args.per_call, tasks=[Path(d).name for d in args.db], runs_us=times, model=model_label,
               load_average=os.getloadavg())
    print(f"{n} candidates in {len(cands)} calls of {args.per_call}, 1 thread, median of {args.repeats} "
          "(µs per candidate):")
    for k in models:
        print(f"  {k:<4} {res[f'{k}_us_per_candidate']:9.1f}   "
              f"{res['xgb_us_per_candidate'] / res[f'{k}_us_per_candidate']:5.1f}x cheaper than xgb")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(res, indent=1) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
