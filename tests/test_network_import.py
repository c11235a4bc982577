"""Importing a network for tuning: batch norm after a convolution is folded into its weights, so the
activation after it joins the convolution's task, and the folded module computes what the plainly
decomposed one (and the framework) computes; convolutions are converted to the layout they are tuned
in, and compute the same there."""

import warnings

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
torch = pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

import tvm_ffi  # noqa: E402

from tcl.tvm.network_import import bind_weights, from_onnx, from_torch, with_conv_layout  # noqa: E402
from tcl.tvm.network_tuning import outputs  # noqa: E402
from tcl.tvm.networks import extract_tasks  # noqa: E402

TARGET = {"kind": "llvm", "num-cores": 1}


def conv_bn_net():
    torch.manual_seed(0)
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU6(),
        torch.nn.Conv2d(8, 8, 1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    for bn in (m[1], m[4]):  # statistics far from the identity, so a wrong fold shows
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.2, 3)
        bn.weight.data.uniform_(0.5, 2)
        bn.bias.data.uniform_(-1, 1)
    return m.eval(), (torch.randn(1, 3, 16, 16),)


def decomposed(module, x):
    """The plain path: every batch norm decomposed into elementwise ops, nothing folded."""
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        mod = from_exported_program(torch.export.export(module, x), keep_params_as_input=True)
    mod, params = relax.frontend.detach_params(mod)
    return relax.transform.DecomposeOpsForInference()(bind_weights(mod, params["main"]))


def run(mod, inputs):
    from tvm import relax

    target = tvm.target.Target(TARGET)
    vm = relax.VirtualMachine(relax.build(mod, target=target), tvm.cpu())
    return outputs(vm["main"](*[tvm.runtime.tensor(a) for a in inputs]))[0]


def tasks(mod):
    return extract_tasks(mod, tvm.target.Target(TARGET))


def task_names(mod):
    return sorted(t.task_name for t in tasks(mod))


def test_batch_norm_is_folded_and_each_activation_joins_its_convolution():
    module, x = conv_bn_net()
    net = from_torch(module, x, "conv_bn", conv_layout="NCHW")  # as PyTorch gives it: no layout transposes
    names = task_names(net.mod)
    assert len(names) == 2 and all("conv2d" in n for n in names), names
    assert any("clip" in n for n in names) and any("relu" in n for n in names), names
    # the plain path leaves each activation a task of its own
    plain = task_names(decomposed(module, x))
    assert any(n.startswith(("fused_relu", "fused_tir_clip")) for n in plain), plain
    got = run(net.mod, net.inputs)
    np.testing.assert_allclose(got, run(decomposed(module, x), net.inputs), rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(got, module(*x).numpy(), rtol=1e-4, atol=1e-5)


def test_onnx_batch_norm_is_folded_too(tmp_path):
    module, x = conv_bn_net()
    path = tmp_path / "conv_bn.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's notice
        # without constant folding the exporter keeps the BatchNormalization nodes for tcl to fold
        torch.onnx.export(module, x, str(path), input_names=["x"], dynamo=False, do_constant_folding=False)
    net = from_onnx(path, conv_layout="NCHW")
    names = task_names(net.mod)
    assert len(names) == 2 and all("conv2d" in n for n in names), names
    with torch.no_grad():
        want = module(torch.from_numpy(net.inputs[0])).numpy()
    np.testing.assert_allclose(run(net.mod, net.inputs), want, rtol=1e-4, atol=1e-5)


def data_shape(task) -> list[int]:
    mod = task.dispatched[0]
    func = mod[mod.get_global_vars()[0]]
    first = func.params[0]
    return [int(d) for d in (first if hasattr(first, "shape") else func.buffer_map[first]).shape]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_convolutions_in_the_tuned_layout_compute_what_pytorch_does(layout):
    module, x = conv_bn_net()
    net = from_torch(module, x, "conv_bn", conv_layout=layout)
    shapes = sorted(data_shape(t) for t in tasks(net.mod) if "conv2d" in t.task_name)
    assert shapes == ([[1, 16, 16, 3], [1, 16, 16, 8]] if layout == "NHWC" else [[1, 3, 16, 16], [1, 8, 16, 16]])
    # ReLU6 (clip) follows its convolution's layout: the data is permuted only at the input and output
    assert sum("transpose" in n for n in task_names(net.mod)) == (2 if layout == "NHWC" else 0)
    with torch.no_grad():
        np.testing.assert_allclose(run(net.mod, net.inputs), module(*x).numpy(), rtol=1e-4, atol=1e-5)


def test_converting_to_the_layout_a_module_has_changes_nothing():
    """A database tuned on a converted module matches the module converted again (from_relax)."""
    module, x = conv_bn_net()
    mod = from_torch(module, x, "conv_bn").mod
    assert tvm_ffi.structural_hash(with_conv_layout(mod, "NHWC")) == tvm_ffi.structural_hash(mod)


def test_an_unknown_layout_is_refused():
    module, x = conv_bn_net()
    with pytest.raises(ValueError, match="NCHWc.*known: NHWC, NCHW"):
        from_torch(module, x, "conv_bn", conv_layout="NCHWc")
