# The comparisons against mamba_ssm need its pure-Python parts (no CUDA kernels, no triton). CI:
#   pip install setuptools wheel packaging einops
#   MAMBA_FORCE_BUILD=TRUE MAMBA_SKIP_CUDA_BUILD=TRUE pip install --no-build-isolation --no-deps mamba-ssm==2.3.2.post1
# (torch must already be installed; --no-deps keeps triton/transformers/tvm-ffi pins out.)
# Without it those tests skip; the rest of this file needs only torch.
"""The pure-PyTorch Mamba block and cost model, checked against mamba_ssm's reference code."""

import contextlib
import importlib
import importlib.util
import math
import sys
import types

import numpy as np

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from tcl.model.cost_model import CostModelConfig, MambaCostModel, masked_mean  # noqa: E402
from tcl.model.mamba import Mamba, selective_scan, selective_scan_for_export, softplus  # noqa: E402


@contextlib.contextmanager
def _cpu_stubs():
    """Make mamba_ssm's pure-Python modules importable on a CPU box, then restore sys.modules.

    The package __init__ pulls in triton-only modules, selective_scan_interface imports the
    compiled selective_scan_cuda and a triton layer norm: a path-only package object and two empty
    modules stand in for those while we import.
    """
    spec = importlib.util.find_spec("mamba_ssm")
    if spec is None:
        raise ImportError("mamba_ssm is not installed")
    ours = lambda k: k.split(".")[0] in ("mamba_ssm", "selective_scan_cuda")  # noqa: E731
    saved = {k: v for k, v in sys.modules.items() if ours(k)}
    pkg = types.ModuleType("mamba_ssm")
    pkg.__path__ = list(spec.submodule_search_locations)  # submodules load, __init__ does not run
    layer_norm = types.ModuleType("mamba_ssm.ops.triton.layer_norm")
    layer_norm._layer_norm_fwd = None
    sys.modules.update({"mamba_ssm": pkg, "mamba_ssm.ops.triton.layer_norm": layer_norm,
                        "selective_scan_cuda": types.ModuleType("selective_scan_cuda")})
    try:
        yield
    finally:
        for k in [k for k in sys.modules if ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)


@pytest.fixture(scope="module")
def mamba_ssm():
    """(selective_scan_ref, mamba_ssm's Mamba class running on selective_scan_ref)."""
    try:
        with _cpu_stubs():
            ssi = importlib.import_module("mamba_ssm.ops.selective_scan_interface")
            simple = importlib.import_module("mamba_ssm.modules.mamba_simple")
    except Exception as e:  # not installed, or a version whose imports we don't stub
        pytest.skip(f"mamba_ssm's reference code cannot be imported on CPU ({e!r}); install it "
                    "as the comment at the top of this file says")
    simple.selective_scan_fn = ssi.selective_scan_ref  # this module object is private to us now
    return ssi.selective_scan_ref, simple.Mamba


def _close(a, b, tol, what=""):
    """max |a - b| <= tol, relative to max |b| when that is above 1."""
    a, b = a.detach(), b.detach()
    err, scale = float((a - b).abs().max()), max(1.0, float(b.abs().max()))
    assert err <= tol * scale, f"{what}: max abs diff {err:.3g} (scale {scale:.3g})"


def test_stubs_are_removed_after_import(mamba_ssm):
    assert "selective_scan_cuda" not in sys.modules
    assert "mamba_ssm.ops.triton.layer_norm" not in sys.modules
    assert getattr(sys.modules.get("mamba_ssm"), "__file__", "real") is not None


@pytest.mark.parametrize("batch,d_inner,d_state,L", [(1, 4, 1, 1), (2, 16, 8, 7), (3, 24, 16, 33)])
def test_scan_matches_selective_scan_ref(mamba_ssm, batch, d_inner, d_state, L):
    scan_ref, _ = mamba_ssm
    g = torch.Generator().manual_seed(batch * 1000 + L)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    # mamba_ssm layout: u, delta, z (b, d, L); B, C (b, n, L)
    inputs = dict(u=r(batch, d_inner, L), delta=r(batch, d_inner, L) * 0.5,
                  A=-torch.rand(d_inner, d_state, generator=g) * 3, B=r(batch, d_state, L),
                  C=r(batch, d_state, L), D=r(d_inner), z=r(batch, d_inner, L),
                  delta_bias=r(d_inner) * 0.5)
    inputs = {k: v.requires_grad_() for k, v in inputs.items()}
    tm = lambda t: t.permute(2, 0, 1)  # (b, c, L) -> (L, b, c)  # noqa: E731
    i = inputs
    ours = selective_scan(tm(i["u"]), tm(i["delta"]), i["A"], tm(i["B"]), tm(i["C"]), i["D"],
                          tm(i["z"]), i["delta_bias"], delta_softplus=True).permute(1, 2, 0)
    ref = scan_ref(**inputs, delta_softplus=True)
    _close(ours, ref, 1e-5)
    w = torch.randn(ref.shape, generator=g)
    g_ours = torch.autograd.grad((ours * w).sum(), list(inputs.values()))
    g_ref = torch.autograd.grad((ref * w).sum(), list(inputs.values()))
    for name, a, b in zip(inputs, g_ours, g_ref):
        _close(a, b, 1e-5, name)


def _pair(mamba_ssm, **kw):
    _, RefMamba = mamba_ssm
    torch.manual_seed(0)
    return RefMamba(**kw), Mamba(**kw)


@pytest.mark.parametrize("kw", [dict(d_model=32, d_state=8, expand=1),
                                dict(d_model=20, d_state=16, expand=2, d_conv=3, bias=True)])
def test_block_matches_mamba_ssm(mamba_ssm, kw):
    ref, ours = _pair(mamba_ssm, **kw)
    # strict loading both ways: same names and shapes
    ours.load_state_dict(ref.state_dict(), strict=True)
    ref.load_state_dict(ours.state_dict(), strict=True)
    for (n1, p1), (n2, p2) in zip(ref.named_parameters(), ours.named_parameters()):
        assert n1 == n2 and p1.shape == p2.shape and torch.equal(p1, p2)

    x = torch.randn(3, 11, kw["d_model"], requires_grad=True)
    y_ref, y = ref(x), ours(x)
    _close(y, y_ref, 1e-5)
    w = torch.randn(y.shape)
    gx_ref, *gp_ref = torch.autograd.grad((y_ref * w).sum(), [x, *ref.parameters()])
    gx, *gp = torch.autograd.grad((y * w).sum(), [x, *ours.parameters()])
    _close(gx, gx_ref, 1e-5)
    for (name, _), a, b in zip(ours.named_parameters(), gp, gp_ref):
        _close(a, b, 1e-5, name)


def test_init_follows_mamba_ssm(mamba_ssm):
    ref, ours = _pair(mamba_ssm, d_model=64, d_state=8, expand=1)
    assert ours.dt_rank == math.ceil(64 / 16) == ref.dt_rank
    assert torch.equal(ours.A_log, ref.A_log) and torch.equal(ours.D, ref.D)
    dt = F.softplus(ours.dt_proj.bias.detach())
    assert float(dt.min()) >= 1e-3 - 1e-7 and float(dt.max()) <= 0.1 + 1e-6
    bound = ours.dt_rank ** -0.5
    assert float(ours.dt_proj.weight.detach().abs().max()) <= bound


def test_softplus_matches_torch():
    for dtype, tol in ((torch.float32, 2e-6), (torch.float64, 1e-8)):
        x = torch.linspace(-40, 40, 20001, dtype=dtype, requires_grad=True)
        a, b = softplus(x), F.softplus(x)
        assert float((a - b).detach().abs().max()) <= tol
        ga, = torch.autograd.grad(a.sum(), x)
        gb, = torch.autograd.grad(b.sum(), x)
        assert float((ga - gb).abs().max()) <= tol
    z = torch.zeros(1, requires_grad=True)
    softplus(z).backward()
    assert float(z.grad) == 0.5


@pytest.mark.parametrize("L", [2, 3, 37])
def test_export_scan_matches_the_loop(L):
    """The scan-operator form ONNX export traces equals the reference loop (the first step outside)."""
    g = torch.Generator().manual_seed(L)
    b, d, n = 5, 16, 8
    u, delta, z = (torch.randn(L, b, d, generator=g) for _ in range(3))
    B, C = torch.randn(L, b, n, generator=g), torch.randn(L, b, n, generator=g)
    A, D, bias = -torch.rand(d, n, generator=g) * 4, torch.randn(d, generator=g), torch.randn(d, generator=g)
    kw = dict(D=D, z=z, delta_bias=bias, delta_softplus=True)
    torch.testing.assert_close(selective_scan_for_export(u, delta, A, B, C, **kw),
                               selective_scan(u, delta, A, B, C, **kw), atol=1e-5, rtol=1e-5)


def test_padding_at_end_leaves_valid_positions_unchanged():
    torch.manual_seed(1)
    block = Mamba(24, d_state=8, expand=1).double()
    x = torch.randn(2, 9, 24, dtype=torch.float64)
    junk = torch.randn(2, 7, 24, dtype=torch.float64) * 100
    full = block(torch.cat([x, junk], 1))
    assert torch.allclose(full[:, :9], block(x), atol=1e-12, rtol=0)


def _model(**kw):
    torch.manual_seed(0)
    cfg = dict(feature_dim=10, seq_len=12, workload_dim=4, hardware_dim=3, d_model=16)
    cfg.update(kw)
    return MambaCostModel(CostModelConfig(**cfg)).double().eval()


def _inputs(model, B=5):
    c = model.cfg
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    lengths = torch.tensor([c.seq_len, 1, 5, 7, c.seq_len - 1][:B])
    seq = r(B, c.seq_len, c.feature_dim)
    seq[torch.arange(c.seq_len) >= lengths[:, None]] = 0  # pad at the end
    return seq, lengths, r(B, c.workload_dim), r(B, c.hardware_dim)


def test_masked_mean_ignores_padding():
    h = torch.randn(3, 6, 4)
    lengths = torch.tensor([6, 2, 0])
    junk = h.clone()
    junk[1, 2:] = 1e6
    out = masked_mean(junk, lengths)
    assert torch.allclose(out[0], h[0].mean(0))
    assert torch.allclose(out[1], h[1, :2].mean(0))
    assert torch.equal(out[2], torch.zeros(4))  # empty -> 0, not NaN


def test_cost_model_ignores_padding_content():
    model = _model(n_layer=2)
    seq, lengths, w, hw = _inputs(model)
    junk = seq.clone()
    junk[torch.arange(seq.shape[1]) >= lengths[:, None]] = 50.0
    assert torch.allclose(model(seq, lengths, w, hw), model(junk, lengths, w, hw),
                          atol=1e-12, rtol=0)
    # ... and a longer padded copy scores the same
    longer = torch.cat([seq, torch.randn(seq.shape[0], 4, seq.shape[2], dtype=seq.dtype)], 1)
    assert torch.allclose(model(seq, lengths, w, hw), model(longer, lengths, w, hw),
                          atol=1e-12, rtol=0)


def test_cost_model_factored_forward():
    model = _model(n_layer=2)
    seq, lengths, w, hw = _inputs(model)
    hs = model.hidden_states(seq)
    assert len(hs) == 3 and all(h.shape == (5, 12, 16) for h in hs)
    emb = model.embedding(seq, lengths)
    assert emb.shape == (5, 16)
    assert torch.allclose(emb, masked_mean(model.norm_f(hs[-1]), lengths))
    assert torch.equal(model.head(emb, w, hw), model(seq, lengths, w, hw))
    # descriptors matter; gradients reach every parameter
    assert not torch.allclose(model(seq, lengths, w, hw), model(seq, lengths, w, hw * 2))
    model(seq, lengths, w, hw).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_cost_model_without_descriptors():
    model = _model(workload_dim=0, hardware_dim=0)
    seq, lengths, _, _ = _inputs(model)
    assert model(seq, lengths).shape == (5,)


def test_mc_dropout_samples_head_only():
    model = _model(dropout=0.3)
    x = _inputs(model)
    s = model.mc_scores(*x, n=8)
    assert s.shape == (8, 5) and float(s.std(0).min()) > 0
    assert not model.training and not model.decoder.training  # mode restored
    assert torch.equal(model(*x), model(*x))  # eval stays deterministic


def test_default_size_is_paper_size():
    model = MambaCostModel(CostModelConfig(feature_dim=100, seq_len=64))
    assert model.cfg.workload_dim == 16 and model.cfg.hardware_dim == 12
    n = sum(p.numel() for p in model.parameters())
    assert model.size_mb() == n * 4 / 1e6
    assert 0.33 <= model.size_mb() <= 0.37  # the paper's model is 0.35 MB
    seq = torch.randn(2, 64, 100)
    out = model(seq, torch.tensor([64, 3]), torch.randn(2, 16), torch.randn(2, 12))
    assert out.shape == (2,) and out.dtype == torch.float32


def _real_fused_scan():
    """(mamba_ssm's selective_scan_fn, '') on a CUDA box with the compiled kernel, else (None, why).

    Deliberately not the `mamba_ssm` fixture: that one stubs selective_scan_cuda out. A stub (an
    empty module left in sys.modules) has no `fwd`, and the real one is an extension module with a
    file, so neither can pass for the kernel here.
    """
    if not torch.cuda.is_available():
        return None, "CUDA is not available"
    try:
        import selective_scan_cuda
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
    except Exception as e:  # not installed, not built, or a triton/causal_conv1d import failing
        return None, f"mamba_ssm's CUDA selective scan cannot be imported ({e!r})"
    ssi = sys.modules["mamba_ssm.ops.selective_scan_interface"]
    for mod in (selective_scan_cuda, getattr(ssi, "selective_scan_cuda", None)):
        if not (callable(getattr(mod, "fwd", None)) and callable(getattr(mod, "bwd", None))
                and getattr(mod, "__file__", None)):
            return None, f"selective_scan_cuda is a stub, not the compiled kernel ({mod!r})"
    return selective_scan_fn, ""


@pytest.mark.parametrize("batch,L,d_model,d_state,expand",
                         [(4, 64, 128, 8, 1), (4, 64, 128, 16, 2), (3, 37, 64, 16, 2)])
def test_fused_cuda_scan_matches_plain_scan(monkeypatch, batch, L, d_model, d_state, expand):
    """On a GPU: mamba_ssm's fused kernel (use_fast_path) and our plain scan agree in fp32."""
    fused, why = _real_fused_scan()
    if fused is None:
        pytest.skip(why)
    import tcl.model.mamba as mamba_mod

    calls = []

    def counting(*args, **kw):
        calls.append(args[0].shape)
        return fused(*args, **kw)

    monkeypatch.setattr(mamba_mod, "_FUSED", counting)
    # Both paths run the same projections and conv; keep TF32 out of the scan comparison.
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)

    torch.manual_seed(batch * 100 + d_state)
    block = Mamba(d_model, d_state=d_state, expand=expand, device="cuda")
    x = torch.randn(batch, L, d_model, device="cuda")
    w = torch.randn(batch, L, d_model, device="cuda")
    params = [p for _, p in block.named_parameters()]

    def run(fast):
        block.use_fast_path = fast
        xi = x.clone().requires_grad_()
        y = block(xi)
        grads = torch.autograd.grad((y * w).sum(), [xi, *params])
        return y.detach(), grads

    y_fused, g_fused = run(True)
    assert len(calls) == 1 and calls[0] == (batch, block.d_inner, L), calls  # the kernel ran
    y_plain, g_plain = run(False)
    assert len(calls) == 1  # ... and the plain path did not call it

    torch.testing.assert_close(y_fused, y_plain, atol=1e-4, rtol=1e-3)
    names = ["input", *(n for n, _ in block.named_parameters())]
    for name, a, b in zip(names, g_fused, g_plain):
        # Parameter gradients sum over batch*L positions: scale atol by the gradient's size.
        atol = 1e-4 * max(1.0, float(b.abs().max()))
        torch.testing.assert_close(a, b, atol=atol, rtol=1e-3, msg=lambda m, n=name: f"{n}: {m}")


def test_descriptor_adapter_is_the_descriptor_generated_weight_change():
    """x -> U (d (x) A x) equals x @ (sum_i d_i U_i A)^T (numpy), per program and per step."""
    from tcl.model.cost_model import DescriptorAdapter

    torch.manual_seed(0)
    adapter = DescriptorAdapter(n_in=6, n_out=5, hardware_dim=4, rank=3, seed=7)
    torch.nn.init.normal_(adapter.up.weight)
    A = adapter.basis.numpy()
    np.testing.assert_allclose(A @ A.T, np.eye(3), atol=1e-6)  # orthonormal rows
    U = adapter.up.weight.detach().numpy().reshape(5, 4, 3)  # [out, P, rank]
    d = torch.randn(2, 4)
    for x in (torch.randn(2, 6), torch.randn(2, 9, 6)):
        got = adapter(x, d).detach().numpy()
        for b in range(2):
            W = np.einsum("i,oik,kn->on", d[b].numpy(), U, A)
            np.testing.assert_allclose(got[b], x[b].numpy() @ W.T, rtol=1e-5, atol=1e-5)
    # the basis comes from its seed alone, not from torch's global generator
    again = DescriptorAdapter(n_in=6, n_out=5, hardware_dim=4, rank=3, seed=7)
    assert torch.equal(again.basis, adapter.basis)
