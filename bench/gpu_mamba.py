"""One GPU training step of the cost model: mamba_ssm's fused selective scan vs our plain scan.

    python bench/gpu_mamba.py [--batch 512 --steps 30 --warmup 5]   (CUDA, tcl and mamba_ssm importable)

Builds MambaCostModel(CostModelConfig(feature_dim=99, seq_len=64)) on CUDA in float32 and times one
training step -- forward, LambdaRank loss, backward, Adam step -- at the given batch (random inputs
padded at the end like tcl.export.example_inputs, random labels in groups of 32), once with every
Mamba block on use_fast_path=True (mamba_ssm's fused CUDA selective_scan_fn; the script stops if
that kernel is not the one that runs) and once with use_fast_path=False (tcl's own scan, a Python
loop over the 64 steps). Both runs start from the same weights. Each step is timed on its own
between torch.cuda.synchronize() calls after the warm-up steps; the median is reported. It also
scores one batch with each path (eval mode, no dropout) and reports the largest absolute difference.
Prints a summary; writes bench/results/gpu_mamba.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

import torch

import tcl.model.mamba as mamba_mod
from tcl.export import example_inputs
from tcl.model import CostModelConfig, MambaCostModel, lambda_rank_loss
from tcl.atomic import write_text  # noqa: E402
from tcl.cli.options import HelpFormatter  # noqa: E402


def set_fast_path(model, fast: bool):
    for m in model.modules():
        if isinstance(m, mamba_mod.Mamba):
            m.use_fast_path = fast


def time_steps(model, inputs, labels, groups, warmup: int, steps: int) -> list[float]:
    """Seconds per training step (forward, loss, backward, Adam), one entry per timed step."""
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lambda_rank_loss(model(*inputs), labels, groups)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    ts = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    return ts


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=HelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    ap.add_argument("--feature-dim", type=int, default=99, help="features per step of the synthetic input")
    ap.add_argument("--seq-len", type=int, default=64, help="steps per program")
    ap.add_argument("--batch", type=int, default=512, help="programs per training step")
    ap.add_argument("--group-size", type=int, default=32, help="candidates per LambdaRank group")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--steps", type=int, default=30, help="timed steps per path (median reported)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "gpu_mamba.json"), help="the summary JSON")
    args = ap.parse_args()

    if not torch.cuda.is_available():
        sys.exit("gpu_mamba.py: CUDA is not available; this benchmark needs a GPU")
    fused = mamba_mod.fused_selective_scan()
    if fused is None:
        sys.exit("gpu_mamba.py: mamba_ssm's selective_scan_fn (with the compiled selective_scan_cuda)"
                 " cannot be imported; nothing to compare")
    calls = [0]

    def counting(*a, **kw):
        calls[0] += 1
        return fused(*a, **kw)

    mamba_mod._FUSED = counting  # count, so a silent fallback to the plain scan cannot pass
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 throughout, as on the CPU
    torch.backends.cudnn.allow_tf32 = False

    dev = torch.device("cuda")
    torch.manual_seed(0)
    cfg = CostModelConfig(feature_dim=args.feature_dim, seq_len=args.seq_len)
    base = MambaCostModel(cfg).to(dev)
    inputs = tuple(t.to(dev) for t in example_inputs(cfg, args.batch, seed=0))
    g = torch.Generator().manual_seed(1)
    labels = torch.rand(args.batch, generator=g).to(dev)
    groups = (torch.arange(args.batch) // args.group_size).to(dev)

    # Same weights, both paths: scores in eval mode (dropout off).
    scores = {}
    for fast in (True, False):
        m = copy.deepcopy(base).eval()
        set_fast_path(m, fast)
        before = calls[0]
        with torch.no_grad():
            scores[fast] = m(*inputs)
        used = calls[0] > before
        if used != fast:
            sys.exit(f"gpu_mamba.py: use_fast_path={fast} but the fused kernel "
                     f"{'did not run' if fast else 'ran'}")
    max_diff = float((scores[True] - scores[False]).abs().max())

    ms = {}
    for fast in (True, False):
        m = copy.deepcopy(base)
        set_fast_path(m, fast)
        before = calls[0]
        ts = time_steps(m, inputs, labels, groups, args.warmup, args.steps)
        assert (calls[0] > before) == fast
        ms[fast] = (statistics.median(ts) * 1e3, min(ts) * 1e3)
        print(f"{'fused' if fast else 'plain'} scan: median {ms[fast][0]:.3f} ms/step "
              f"(min {ms[fast][1]:.3f}) over {args.steps} steps, batch {args.batch}", flush=True)

    mamba_version = getattr(sys.modules.get("mamba_ssm"), "__version__", None)
    res = {
        "device": torch.cuda.get_device_name(dev),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "mamba_ssm": mamba_version,
        "config": cfg.to_dict(),
        "batch": args.batch,
        "group_size": args.group_size,
        "warmup": args.warmup,
        "steps": args.steps,
        "step": "forward + lambda_rank_loss + backward + Adam(lr=1e-3), fp32, TF32 off",
        "fused_ms_per_step": ms[True][0],
        "plain_ms_per_step": ms[False][0],
        "fused_min_ms_per_step": ms[True][1],
        "plain_min_ms_per_step": ms[False][1],
        "speedup": ms[False][0] / ms[True][0],
        "max_abs_score_diff": max_diff,
        "score_abs_max": float(scores[False].abs().max()),
        "fused_kernel_calls": calls[0],
    }
    print(f"speedup (plain / fused): {res['speedup']:.2f}x; max |score diff| {max_diff:.3g}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(res, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
