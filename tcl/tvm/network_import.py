"""A user's network as Relax, ready to tune and to compile: from a built-in name, a torch.nn.Module
with example inputs, an ONNX file, or a Relax IRModule.

Every source ends as a `Network`: the Relax module with its weights bound as constants (so the tasks
extracted for tuning are exactly the functions `compile_relax` later looks up in the database, and
the compiled library needs only the real inputs), example inputs for timing and checking, and a
reference runner (PyTorch eager for torch sources, onnxruntime for ONNX files) to compare against.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import tvm

from ..errors import FormatError
from .network_tuning_config import CONV_LAYOUT, CONV_LAYOUTS


@dataclass
class Network:
    name: str
    mod: tvm.IRModule  # Relax, weights bound: main takes only `inputs`
    inputs: list[np.ndarray]
    # (label, make(threads) -> a function that runs one inference) of the framework the network came from
    reference: tuple[str, Callable[[int], Callable[[], object]]] | None = None
    input_names: list[str] = field(default_factory=list)


def bind_weights(mod: tvm.IRModule, params: list | None) -> tvm.IRModule:
    """Binds the trailing parameters of main (the weights, after `num_input` real inputs) to params."""
    from tvm import relax

    if not params:
        return mod
    main = mod["main"]
    num_input = int(main.attrs["num_input"]) if main.attrs and "num_input" in main.attrs else len(main.params) - len(params)
    weights = main.params[num_input:]
    if len(weights) != len(params):
        raise ValueError(f"main has {len(weights)} weight parameters but {len(params)} values were given")
    return relax.transform.BindParams("main", dict(zip(weights, params)))(mod)


def for_inference(mod: tvm.IRModule, params: list | None, conv_layout: str = CONV_LAYOUT) -> tvm.IRModule:
    """The imported module as it is tuned and compiled: weights bound, every batch norm that follows a
    convolution folded into its weights and bias, the other batch norms decomposed, 2-D
    convolutions in `conv_layout` (with_conv_layout). Decomposed
    first, a batch norm leaves a chain of elementwise ops that FuseOps does not join to the
    activation after it, which then runs as a task of its own; folded, the convolution, its bias and
    the activation are one task."""
    from tvm import relax

    mod = bind_weights(mod, params)
    mod["main"] = _conv_bias_into_batch_norm(mod["main"])
    mod = relax.transform.FoldBatchnormToConv2D()(mod)
    return with_conv_layout(relax.transform.DecomposeOpsForInference()(mod), conv_layout)


def with_conv_layout(mod: tvm.IRModule, layout: str) -> tvm.IRModule:
    """Every 2-D convolution of main in `layout` (NHWC: OHWI weights; NCHW: OIHW), the data permuted
    around each one where its neighbours keep the other layout. Constants are folded first: the
    layout pass fails on the unfolded arithmetic a folded batch norm leaves, and the permuted weights
    fold into new constants after it."""
    from tvm import relax

    if layout not in CONV_LAYOUTS:
        raise ValueError(f"unknown convolution layout {layout!r}; known: {', '.join(CONV_LAYOUTS)}")
    if layout != "NCHW":  # in NCHW clip stays: the datasets' network tasks keep their structural hashes
        mod = mod.clone()
        mod["main"] = _clip_as_max_min(mod["main"])
    with tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential([
            relax.transform.FoldConstant(),
            relax.transform.ConvertLayout({"relax.nn.conv2d": [layout, CONV_LAYOUTS[layout]]}),
            relax.transform.FoldConstant(),
        ])(mod)


def _clip_as_max_min(func):
    """clip(x, lo, hi) -> minimum(maximum(x, lo), hi): Relax's layout pass has no rule for clip (ReLU6),
    so it would permute the data back to NCHW around every clip; max and min follow their input's layout."""
    from tvm import relax
    from tvm.relax.dpl import is_op, rewrite_call, wildcard

    def rewrite(expr, m):
        x, lo, hi = expr.args
        dtype = x.ty.dtype
        low = relax.op.maximum(x, relax.const(float(lo.value), dtype))
        return relax.op.minimum(low, relax.const(float(hi.value), dtype))
    return rewrite_call(is_op("relax.clip")(wildcard(), wildcard(), wildcard()), rewrite, func)


def _conv_bias_into_batch_norm(func):
    """batch_norm(conv2d(x, w) + b, mean) -> batch_norm(conv2d(x, w), mean - b): the same values,
    in the form FoldBatchnormToConv2D folds (it matches a batch norm right after the convolution)."""
    from tvm import relax
    from tvm.relax.dpl import is_const, is_op, rewrite_call, wildcard

    conv = is_op("relax.nn.conv2d")(wildcard(), is_const())
    values, gamma, beta, mean, var = (is_const() for _ in range(5))
    bias = values | is_op("relax.reshape")(values, wildcard())  # torch's bias comes reshaped to (1, C, 1, 1)
    norm = is_op("relax.nn.batch_norm")(is_op("relax.add")(conv, bias), gamma, beta, mean, var)

    def rewrite(expr, m):
        b, mu, axis = m[values].value.numpy(), m[mean].value.numpy(), int(expr.attrs.axis)
        shape = b.shape if m[bias].same_as(m[values]) else [int(d) for d in m[bias].args[1].values]
        if mu.ndim != 1 or b.size != mu.size or len(shape) <= axis or shape[axis] != mu.size:
            return expr  # not one bias per channel of the normalised axis
        shifted = relax.const((mu - b.reshape(-1)).astype(mu.dtype))
        a = expr.attrs
        return relax.op.nn.batch_norm(m[conv], m[gamma], m[beta], shifted, m[var], axis=axis,
                                      epsilon=float(a.epsilon), center=bool(a.center), scale=bool(a.scale),
                                      momentum=float(a.momentum), training=bool(a.training))
    return rewrite_call(norm, rewrite, func)


def _torch_reference(module, example_inputs):
    def make(threads: int):
        import torch

        torch.set_num_threads(threads)
        module.eval()

        def run():
            with torch.no_grad():
                return module(*example_inputs)
        return run
    return ("PyTorch eager", make)


def from_torch(module, example_inputs: tuple, name: str = "torch_module", conv_layout: str = CONV_LAYOUT) -> Network:
    """A torch.nn.Module and a tuple of example input tensors (their shapes are the ones compiled);
    2-D convolutions in `conv_layout`."""
    import torch
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    if not isinstance(example_inputs, tuple) or not all(isinstance(t, torch.Tensor) for t in example_inputs):
        raise TypeError("example_inputs must be a tuple of torch.Tensor")
    module = module.eval()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's pytree deprecations, raised inside both
        ep = torch.export.export(module, example_inputs)
        mod = from_exported_program(ep, keep_params_as_input=True)
    mod, params = relax.frontend.detach_params(mod)
    return Network(name, for_inference(mod, params.get("main"), conv_layout), [t.numpy() for t in example_inputs],
                   _torch_reference(module, example_inputs))


def from_builtin(name: str, batch: int = 1, conv_layout: str = CONV_LAYOUT) -> Network:
    """One of tcl.tvm.networks.NETWORKS (random weights, seed 0); 2-D convolutions in `conv_layout`."""
    import torch

    from .networks import NETWORKS, SWEEP, UnknownNetworkError

    if name not in NETWORKS:
        raise UnknownNetworkError(f"unknown network {name!r}; known: {', '.join(sorted(NETWORKS))} ({SWEEP} is "
                                  "not a network)")
    make, inputs = NETWORKS[name]
    torch.manual_seed(0)
    return from_torch(make(), inputs(batch), name, conv_layout)


def parse_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """'input:1,3,224,224;mask:1,128' -> {'input': (1, 3, 224, 224), 'mask': (1, 128)}."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, dims = part.rpartition(":")
        if not sep or not name or not re.fullmatch(r"\d+(,\d+)*", dims.replace(" ", "")):
            raise ValueError(f"bad input shape {part!r}: write NAME:D1,D2,... (several separated by ';')")
        out[name] = tuple(int(d) for d in dims.replace(" ", "").split(","))
    return out


_ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}


def from_onnx(path, shapes: dict[str, tuple[int, ...]] | None = None, seed: int = 0,
              conv_layout: str = CONV_LAYOUT) -> Network:
    """An ONNX file; `shapes` fixes the inputs whose dimensions the file leaves symbolic (every input
    must end with a static shape). Example inputs are random in each input's dtype. 2-D convolutions
    in `conv_layout`."""
    import onnx
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx as relax_from_onnx

    path = Path(path)
    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such ONNX file") from None
    except Exception as e:  # onnx raises DecodeError and friends for files that are not ONNX
        raise FormatError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from None
    shapes = dict(shapes or {})
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    unknown = sorted(set(shapes) - {i.name for i in graph_inputs})
    if unknown:
        raise ValueError(f"{path}: no input named {', '.join(unknown)}; its inputs: "
                         f"{', '.join(i.name for i in graph_inputs)}")
    rng = np.random.default_rng(seed)
    inputs, dtypes = [], {}
    for i in graph_inputs:
        t = i.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        shape = shapes.get(i.name) or tuple(dims)
        if None in shape or len(shape) != len(dims):
            raise ValueError(f"{path}: input {i.name!r} has shape {dims}; give a static one with "
                             f"--input-shape '{i.name}:" + ",".join(str(d or 1) for d in dims) + "'")
        shapes[i.name] = tuple(shape)
        dtypes[i.name] = _ONNX_DTYPES.get(t.elem_type)
        if dtypes[i.name] is None:
            raise ValueError(f"{path}: input {i.name!r} has an ONNX element type ({t.elem_type}) tcl cannot feed")
        if np.issubdtype(np.dtype(dtypes[i.name]), np.floating):
            inputs.append(rng.standard_normal(shape).astype(dtypes[i.name]))
        else:
            inputs.append(rng.integers(0, 2, shape).astype(dtypes[i.name]))
    mod = relax_from_onnx(model, shape_dict=shapes, dtype_dict=dtypes, keep_params_in_input=True)
    mod, params = relax.frontend.detach_params(mod)
    names = [i.name for i in graph_inputs]

    def make(threads: int):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        feed = dict(zip(names, inputs))
        return lambda: sess.run(None, feed)
    return Network(path.stem, for_inference(mod, params.get("main"), conv_layout), inputs, ("onnxruntime", make),
                   names)


def from_relax(mod: tvm.IRModule, inputs: list[np.ndarray], params: list | None = None,
               name: str = "relax_module", conv_layout: str = CONV_LAYOUT) -> Network:
    """A Relax IRModule whose main takes `inputs` (then the weights `params`, if not bound yet); 2-D
    convolutions in `conv_layout`."""
    if "main" not in [g.name_hint for g in mod.get_global_vars()]:
        raise ValueError("the Relax module has no main function")
    return Network(name, with_conv_layout(bind_weights(mod, params), conv_layout), [np.asarray(x) for x in inputs])
