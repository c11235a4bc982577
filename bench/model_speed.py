"""Cost-model speed on one thread: torch eager vs onnxruntime, plus ONNX export feasibility.

    python bench/model_speed.py [--feature-dim 100 --seq-len 64 --d-model 128]   (tcl importable)

Exports the default MambaCostModel with torch.onnx.export (dynamo; dynamic batch and sequence
length), runs it in onnxruntime with one thread, checks it against torch (max abs diff) and
times both per candidate. Prints a table; writes bench/results/model_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from tcl.export import INPUT_NAMES, example_inputs, export_onnx
from tcl.model import CostModelConfig, MambaCostModel, lambda_rank_loss
from tcl.atomic import write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402

def best_of(fn, repeats):
    fn()  # warm-up
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts)  # min: the 2 cores are shared, other processes only add time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=HelpFormatter)
    ap.add_argument("--feature-dim", type=int, default=100, help="features per step of the synthetic input")
    ap.add_argument("--seq-len", type=int, default=64, help="steps per program")
    ap.add_argument("--d-model", type=int, default=CostModelConfig.d_model, help="model width")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 64, 512], help="programs per call timed")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per case (the median is reported)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "model_speed.json"), help="the summary JSON")
    args = ap.parse_args()

    torch.set_num_threads(1)  # the tuning loop scores on one thread (MAMBA_NOTES.md)
    torch.manual_seed(0)
    cfg = CostModelConfig(feature_dim=args.feature_dim, seq_len=args.seq_len, d_model=args.d_model)
    model = MambaCostModel(cfg).eval()
    rows = []

    def row(backend, batch, seconds, **extra):
        rows.append(dict(backend=backend, batch=batch, us_per_candidate=seconds / batch * 1e6,
                         **extra))

    for b in args.batches:
        x = example_inputs(cfg, b)
        with torch.inference_mode():
            row("torch eager forward", b, best_of(lambda: model(*x), args.repeats))

    # training cost for reference: forward + LambdaRank + backward at the largest batch
    b = max(args.batches)
    x = example_inputs(cfg, b)
    labels, groups = torch.rand(b) * 0.9 + 0.1, torch.arange(b) // 64
    model.train()
    row("torch train step (fwd+loss+bwd)", b, best_of(
        lambda: lambda_rank_loss(model(*x), labels, groups).backward(), max(1, args.repeats // 2)))
    model.eval()

    export = {}
    try:
        import onnxruntime as ort

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            t = time.perf_counter()
            proto = export_onnx(model, path)
            export = dict(ok=True, seconds=time.perf_counter() - t, nodes=len(proto.graph.node),
                          file_kb=os.path.getsize(path) / 1e3, opset=proto.opset_import[0].version)
            so = ort.SessionOptions()
            so.intra_op_num_threads = so.inter_op_num_threads = 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for b in args.batches:
            x = example_inputs(cfg, b, seed=b)  # a batch size the export never saw
            feed = {n: v.numpy() for n, v in zip(INPUT_NAMES, x)}
            with torch.inference_mode():
                want = model(*x).numpy()
            diff = float(np.abs(sess.run(None, feed)[0] - want).max())
            row("onnxruntime", b, best_of(lambda: sess.run(None, feed), args.repeats),
                max_abs_diff_vs_torch=diff)
    except Exception as e:  # report, don't hide: the table says export failed and why
        export = dict(ok=False, error=repr(e))

    print(f"MambaCostModel d_model={cfg.d_model} L={cfg.seq_len} D={cfg.feature_dim} "
          f"W={cfg.workload_dim} P={cfg.hardware_dim}: {model.size_mb():.3f} MB fp32, 1 thread, "
          f"load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (best of {args.repeats})")
    print(f"{'backend':34s} {'batch':>6s} {'us/cand':>9s} {'max|diff|':>10s}")
    for r in rows:
        d = r.get("max_abs_diff_vs_torch")
        print(f"{r['backend']:34s} {r['batch']:6d} {r['us_per_candidate']:9.1f} "
              f"{'' if d is None else f'{d:10.2e}'}")
    print("onnx export:", ", ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}"
                                    for k, v in export.items()))

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor()) \
        if os.path.exists("/proc/cpuinfo") else platform.processor()
    out = dict(config=cfg.to_dict(), size_mb=model.size_mb(), threads=1, rows=rows,
               onnx_export=export,
               machine=dict(cpu=cpu, cores=os.cpu_count(), load_avg_1min=os.getloadavg()[0]),
               versions=dict(torch=torch.__version__, onnxruntime=_version("onnxruntime"),
                             onnx=_version("onnx"), python=platform.python_version()),
               date=time.strftime("%Y-%m-%d"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(args.out), json.dumps(out, indent=1) + "\n")
    print("wrote", args.out)


def _version(mod):
    try:
        return __import__(mod).__version__
    except ImportError:
        return None


if __name__ == "__main__":
    main()
