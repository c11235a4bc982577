"""The operator sweep: synthetic tuning tasks that widen what the cost model learns from.

Shapes lie around those of common CNNs, transformers and audio models without being taken from one
network, and every operator family users' networks contain has several shapes: matmul (plain, with
bias and activation, batched), conv1d/2d/3d in channels-first and channels-last layouts, transposed,
grouped, depthwise and dilated convolutions, pooling, softmax, normalisation and reductions.
The first four families are the original sweep; their names and workloads must not change (dataset
directories are keyed by the workload's structural hash).
"""
from __future__ import annotations

from tvm import te, topi
from tvm.s_tir.meta_schedule.testing import te_workload as tw


def _matmul_bias_act(n, m, k, act):
    """Y = act(X W^T + b), as a dense layer of a transformer's MLP."""
    x = te.placeholder((n, k), name="X")
    w = te.placeholder((m, k), name="W")
    b = te.placeholder((m,), name="B")
    y = topi.add(topi.nn.dense(x, w), b)
    if act == "relu":
        y = topi.nn.relu(y)
    elif act == "gelu":  # tanh form
        y = te.compute(y.shape, lambda i, j: 0.5 * y[i, j] * (1.0 + te.tanh(
            0.7978845608 * (y[i, j] + 0.044715 * y[i, j] * y[i, j] * y[i, j]))), name="gelu")
    return x, w, b, y


def _layer_norm(rows, cols):
    x = te.placeholder((rows, cols), name="X")
    gamma, beta = te.placeholder((cols,), name="gamma"), te.placeholder((cols,), name="beta")
    return x, gamma, beta, topi.nn.layer_norm(x, gamma, beta, axis=[1], epsilon=1e-5)


def _conv(layout_fn):
    def make(*shape):
        data_shape, kernel_shape, rest = shape[0], shape[1], shape[2:]
        x, w = te.placeholder(data_shape, name="X"), te.placeholder(kernel_shape, name="W")
        return x, w, layout_fn(x, w, *rest)
    return make


def _unary(fn):
    def make(shape, *args):
        x = te.placeholder(shape, name="X")
        return x, fn(x, *args)
    return make


# family -> workload builder; each builder returns the placeholders and the output tensor(s)
_BUILDERS = {
    "matmul": tw.matmul,
    "conv2d": lambda n, h, w, ci, co, k, st, p: tw.conv2d_nchw(n, h, w, ci, co, k, k, st, p),
    "depthwise": lambda n, h, w, c, k, st, p: tw.depthwise_conv2d_nhwc(n, h, w, c, k, st, p),
    "batch_matmul": tw.batch_matmul_nkkm,
    # (rows, cols, inner, activation)
    "dense": _matmul_bias_act,
    # (N, L, CI, CO, kernel, stride, padding, dilation, groups)
    "conv1d_nlc": tw.conv1d_nlc,
    # (N, CI, L) data, (CO, CI, K) kernel, stride, padding, dilation
    "conv1d_ncw": _conv(lambda x, w, s, p, d: topi.nn.conv1d_ncw(x, w, s, p, d)),
    # (N, H, W, CI, CO, kernel, stride, padding, dilation, groups)
    "conv2d_nhwc": tw.conv2d_nhwc,
    # (N, H, W, CI, CO, kh, kw, stride, padding, dilation)
    "conv2d_nchw": tw.conv2d_nchw,
    # (N, CI, H, W) data, (CO, CI / groups, K, K) kernel, stride, padding, dilation, groups
    "group_conv2d_nchw": _conv(lambda x, w, s, p, d, g: topi.nn.group_conv2d_nchw(x, w, s, p, d, g)),
    # (N, H, W, CI, CO, kernel, stride, padding)
    "conv2d_transpose_nhwc": tw.conv2d_transpose_nhwc,
    # (N, CI, H, W) data, (CI, CO, K, K) kernel, stride, padding
    "conv2d_transpose_nchw": _conv(
        lambda x, w, s, p: topi.nn.conv2d_transpose_nchw(x, w, (s, s), (p, p), "float32", (0, 0))),
    # (N, D, H, W, CI, CO, kernel, stride, padding)
    "conv3d_ndhwc": tw.conv3d_ndhwc,
    # (N, CI, D, H, W) data, (CO, CI, K, K, K) kernel, stride, padding, dilation
    "conv3d_ncdhw": _conv(lambda x, w, s, p, d: topi.nn.conv3d_ncdhw(x, w, s, p, d, 1)),
    # (N, H, W, C, kernel, stride, padding, dilation)
    "depthwise_dilated": lambda n, h, w, c, k, st, p, d: tw.depthwise_conv2d_nhwc(n, h, w, c, k, st, p, d),
    # (batch, seq_len, heads, head_dim): attention scores Q K^T
    "attention_scores": tw.transpose_batch_matmul,
    # (N, H, W, C, padding): 3x3 stride-2 max pool
    "max_pool2d": tw.max_pool2d_nchw,
    # shape, kernel, stride, padding
    "avg_pool2d": _unary(lambda x, k, s, p: topi.nn.pool2d(x, (k, k), (s, s), (1, 1), (p, p, p, p), "avg",
                                                           layout="NCHW")),
    "global_avg_pool2d": _unary(lambda x: topi.nn.adaptive_pool(x, (1, 1), "avg", layout="NCHW")),
    "softmax": tw.softmax_mn,
    "layer_norm": _layer_norm,
    # (B, M, N): the norm over each of B matrices
    "norm": tw.norm_bmn,
    "reduce_sum": _unary(lambda x: topi.sum(x, axis=-1)),
    "reduce_mean_spatial": _unary(
        lambda x: topi.divide(topi.sum(x, axis=(2, 3)), float(int(x.shape[2]) * int(x.shape[3])))),
    "reduce_max": _unary(lambda x: topi.max(x, axis=-1)),
}

SHAPES = (
    [("matmul", (n, m, k)) for n, m, k in [(1, 1000, 512), (64, 64, 64), (128, 768, 768), (128, 3072, 768),
                                             (256, 256, 256), (512, 128, 1024), (384, 1024, 256), (32, 4096, 1024)]]
    + [("conv2d", s) for s in [(1, 56, 56, 64, 64, 3, 1, 1), (1, 28, 28, 128, 256, 3, 2, 1),
                                (1, 14, 14, 256, 256, 1, 1, 0), (1, 112, 112, 32, 64, 3, 1, 1),
                                (1, 7, 7, 512, 512, 3, 1, 1), (1, 56, 56, 64, 256, 1, 1, 0),
                                (1, 224, 224, 3, 32, 3, 2, 1), (1, 14, 14, 96, 192, 5, 1, 2)]]
    + [("depthwise", s) for s in [(1, 112, 112, 32, 3, 1, 1), (1, 56, 56, 144, 3, 2, 1), (1, 28, 28, 192, 3, 1, 1),
                                   (1, 14, 14, 576, 3, 1, 1), (1, 7, 7, 960, 5, 1, 2)]]
    + [("batch_matmul", s) for s in [(12, 128, 128, 64), (12, 128, 64, 128), (4, 256, 256, 32), (16, 64, 64, 64)]]
    # the widened sweep
    + [("dense", s) for s in [(128, 3072, 768, "gelu"), (64, 1024, 512, "relu"), (1, 1000, 2048, "none"),
                               (196, 768, 192, "gelu")]]
    + [("conv1d_nlc", s) for s in [(1, 256, 64, 128, 3, 1, 1, 1, 1), (1, 1024, 32, 32, 9, 1, 4, 1, 1),
                                    (1, 512, 64, 64, 3, 1, 2, 2, 1), (1, 256, 128, 128, 3, 1, 1, 1, 4),
                                    (1, 4000, 1, 32, 80, 4, 38, 1, 1)]]
    + [("conv1d_ncw", s) for s in [((1, 64, 256), (128, 64, 3), 1, 1, 1), ((1, 128, 512), (128, 128, 5), 2, 2, 1)]]
    + [("conv2d_nhwc", s) for s in [(1, 56, 56, 64, 64, 3, 1, 1, 1, 1), (1, 28, 28, 128, 128, 3, 1, 2, 2, 1),
                                     (1, 28, 28, 128, 128, 3, 1, 1, 1, 32), (1, 14, 14, 256, 512, 1, 2, 0, 1, 1),
                                     (1, 56, 56, 96, 96, 7, 1, 3, 1, 96)]]
    + [("conv2d_nchw", s) for s in [(1, 28, 28, 64, 64, 3, 3, 1, 2, 2), (1, 14, 14, 128, 128, 3, 3, 1, 4, 4)]]
    + [("group_conv2d_nchw", s) for s in [((1, 128, 56, 56), (128, 4, 3, 3), 1, 1, 1, 32),
                                           ((1, 256, 28, 28), (256, 8, 3, 3), 2, 1, 1, 32)]]
    + [("conv2d_transpose_nhwc", s) for s in [(1, 4, 4, 512, 256, 4, 2, 1), (1, 16, 16, 128, 64, 4, 2, 1),
                                               (1, 32, 32, 64, 3, 4, 2, 1)]]
    + [("conv2d_transpose_nchw", s) for s in [((1, 256, 8, 8), (256, 128, 4, 4), 2, 1),
                                               ((1, 64, 28, 28), (64, 32, 3, 3), 2, 1)]]
    + [("conv3d_ndhwc", s) for s in [(1, 8, 28, 28, 64, 64, 3, 1, 1), (1, 16, 32, 32, 16, 32, 3, 2, 1),
                                      (1, 4, 14, 14, 128, 128, 1, 1, 0)]]
    + [("conv3d_ncdhw", s) for s in [((1, 32, 8, 28, 28), (64, 32, 3, 3, 3), 1, 1, 1)]]
    + [("depthwise_dilated", s) for s in [(1, 28, 28, 192, 3, 1, 2, 2), (1, 56, 56, 64, 3, 1, 4, 4)]]
    + [("attention_scores", s) for s in [(1, 128, 12, 64), (1, 64, 4, 32), (1, 197, 3, 64)]]
    + [("max_pool2d", s) for s in [(1, 112, 112, 64, 1), (1, 56, 56, 256, 1)]]
    + [("avg_pool2d", s) for s in [((1, 64, 56, 56), 3, 2, 1), ((1, 256, 28, 28), 2, 2, 0)]]
    + [("global_avg_pool2d", s) for s in [((1, 512, 7, 7),), ((1, 1280, 7, 7),)]]
    + [("softmax", s) for s in [(1536, 128), (256, 1000), (768, 197)]]
    + [("layer_norm", s) for s in [(128, 768), (197, 192), (512, 1024)]]
    + [("norm", s) for s in [(1, 256, 256), (12, 128, 128)]]
    + [("reduce_sum", s) for s in [((128, 768),), ((64, 4096),)]]
    + [("reduce_mean_spatial", s) for s in [((1, 512, 7, 7),), ((1, 96, 56, 56),)]]
    + [("reduce_max", s) for s in [((1024, 1000),), ((128, 128, 64),)]]
)


def _shape_name(s) -> str:
    flat = []
    for v in s:
        flat.extend(v if isinstance(v, tuple) else [v])
    return "x".join(map(str, flat))


def workload(op: str, shape: tuple) -> list:
    """The tensors (inputs, then outputs) of one sweep entry."""
    out = _BUILDERS[op](*shape)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def sweep_entries():
    """(task name, op, shape) of every sweep task, in a fixed order."""
    return [(f"sweep_{op}_{_shape_name(s)}", op, s) for op, s in SHAPES]
