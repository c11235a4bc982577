"""A pure-PyTorch Mamba (v1) mixer block, state-dict compatible with ``mamba_ssm.Mamba``.

Parameter names, shapes and initialisation follow mamba_ssm's ``modules/mamba_simple.py``, so a
state dict loads with ``strict=True`` in either direction. The selective scan is a plain loop over
time with the state laid out (batch, d_state, d_inner): it runs anywhere and is the reference.
Under torch.export (ONNX export) the same recurrence is written with torch's scan operator, which
becomes one ONNX Scan node: the graph then takes any sequence length, and onnxruntime runs it faster
than the loop unrolled into the graph, even at the full length. When the input is on CUDA and
mamba_ssm's fused kernel imports, that kernel is used instead.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["Mamba", "selective_scan", "selective_scan_for_export", "softplus", "fused_selective_scan"]


def softplus(x: torch.Tensor) -> torch.Tensor:
    """log(1 + exp(x)) from Max/Abs/Exp/Log.

    Why: onnxruntime's Softplus kernel is slower than these primitives. Agrees with F.softplus to
    about one ulp of the result (tests/test_model_mamba.py; F.softplus itself returns x for
    x > 20). torch.maximum splits the gradient at a tie, so the derivative at x == 0 is the true
    0.5 (relu would give 0).
    """
    return torch.maximum(x, torch.zeros_like(x)) + torch.log(1 + torch.exp(-torch.abs(x)))


def selective_scan(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    """Reference selective scan, time-major.

    u, delta, z: (L, batch, d_inner); A: (d_inner, d_state); B, C: (L, batch, d_state);
    D, delta_bias: (d_inner,). Returns y: (L, batch, d_inner), computed in u's dtype.

        h_t = exp(delta_t * A) * h_{t-1} + delta_t * B_t * u_t      (h: batch, d_state, d_inner)
        y_t = C_t . h_t + D * u_t,   then y *= silu(z)
    """
    if delta_bias is not None:
        delta = delta + delta_bias
    if delta_softplus:
        delta = softplus(delta)
    At = A.t().unsqueeze(0)  # (1, d_state, d_inner): d_inner innermost keeps broadcasts contiguous
    du = delta * u
    h = u.new_zeros(u.shape[1], A.shape[1], A.shape[0])
    ys = []
    for t in range(u.shape[0]):
        # Discretise per step rather than for all t at once: (L, b, n, d) tensors cost memory
        # and bandwidth and bought nothing in the timings.
        h = torch.exp(delta[t].unsqueeze(1) * At) * h + B[t].unsqueeze(2) * du[t].unsqueeze(1)
        ys.append(torch.matmul(C[t].unsqueeze(1), h).squeeze(1))  # (b, 1, n) @ (b, n, d)
    y = torch.stack(ys)
    if D is not None:
        y = y + u * D
    if z is not None:
        y = y * F.silu(z)
    return y


def selective_scan_for_export(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):
    """selective_scan (same arguments, same result) as one scan operator over time, for export.

    The first step is taken outside the scan: h_0 = 0, so h_1 = delta_1 * B_1 * u_1 needs no zero
    tensor of a fixed shape. The sequence must hold at least 2 steps.
    """
    from torch._higher_order_ops.scan import scan

    if delta_bias is not None:
        delta = delta + delta_bias
    if delta_softplus:
        delta = softplus(delta)
    At = A.t().contiguous()  # (d_state, d_inner); the scan wants contiguous carries and inputs
    du = delta * u
    h1 = B[0].unsqueeze(2) * du[0].unsqueeze(1)
    y1 = torch.matmul(C[0].unsqueeze(1), h1).squeeze(1)

    def step(h, xs):
        d_t, du_t, B_t, C_t = xs
        h = torch.exp(d_t.unsqueeze(1) * At) * h + B_t.unsqueeze(2) * du_t.unsqueeze(1)
        return h, torch.matmul(C_t.unsqueeze(1), h).squeeze(1)

    _, ys = scan(step, h1, tuple(t[1:].contiguous() for t in (delta, du, B, C)))
    y = torch.cat([y1.unsqueeze(0), ys])
    if D is not None:
        y = y + u * D
    if z is not None:
        y = y * F.silu(z)
    return y


_FUSED = None  # mamba_ssm's selective_scan_fn, False when it cannot be imported


def fused_selective_scan():
    """mamba_ssm's CUDA selective_scan_fn, or None. Never required: the import is tried once."""
    global _FUSED
    if _FUSED is None:
        try:
            from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
            _FUSED = selective_scan_fn
        except Exception:  # ImportError, or a CUDA/triton build that fails while importing
            _FUSED = False
    return _FUSED or None


class Mamba(nn.Module):
    """Mamba v1 mixer: (batch, L, d_model) -> (batch, L, d_model).

    Same constructor defaults and parameters as ``mamba_ssm.modules.mamba_simple.Mamba`` (minus the
    inference cache): in_proj, conv1d, x_proj, dt_proj, A_log, D, out_proj.
    """

    def __init__(self, d_model, d_state=16, d_conv=4, expand=2, dt_rank="auto", dt_min=0.001,
                 dt_max=0.1, dt_init="random", dt_scale=1.0, dt_init_floor=1e-4, conv_bias=True,
                 bias=False, use_fast_path=True, device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.d_model, self.d_state, self.d_conv, self.expand = d_model, d_state, d_conv, expand
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else dt_rank
        self.use_fast_path = use_fast_path  # allow the fused CUDA scan when available

        self.in_proj = nn.Linear(d_model, 2 * self.d_inner, bias=bias, **kw)
        # Depthwise conv padded d_conv-1 on both sides; forward keeps the first L outputs (causal).
        self.conv1d = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner,
                                padding=d_conv - 1, bias=conv_bias, **kw)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False, **kw)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True, **kw)

        # dt_proj weight keeps the variance of dt; its bias is softplus^-1 of a log-uniform dt
        # in [dt_min, dt_max], so the initial step sizes span slow and fast dynamics.
        std = self.dt_rank ** -0.5 * dt_scale
        if dt_init == "constant":
            nn.init.constant_(self.dt_proj.weight, std)
        elif dt_init == "random":
            nn.init.uniform_(self.dt_proj.weight, -std, std)
        else:
            raise ValueError(f"dt_init must be 'random' or 'constant', got {dt_init!r}")
        dt = torch.exp(torch.rand(self.d_inner, **kw) * (math.log(dt_max) - math.log(dt_min))
                       + math.log(dt_min)).clamp(min=dt_init_floor)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.dt_proj.bias._no_reinit = True

        # S4D-real init: A[:, n] = -(n + 1), stored as log so A stays negative (a decaying state).
        A = torch.arange(1, d_state + 1, dtype=torch.float32, device=device).repeat(self.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(self.d_inner, device=device))
        self.D._no_weight_decay = True

        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias, **kw)

    def forward(self, hidden_states: torch.Tensor, in_proj_delta: torch.Tensor | None = None) -> torch.Tensor:
        """in_proj_delta: added to in_proj's output (a per-input change of that layer, e.g. an adapter)."""
        L = hidden_states.shape[1]
        xz = self.in_proj(hidden_states)
        if in_proj_delta is not None:
            xz = xz + in_proj_delta
        x, z = xz.chunk(2, dim=-1)  # (b, L, d_inner) each
        x = F.silu(self.conv1d(x.transpose(1, 2))[..., :L])  # (b, d_inner, L), causal
        dt, B, C = self.x_proj(x.transpose(1, 2)).split(
            [self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.linear(dt, self.dt_proj.weight)  # bias is added inside the scan, as mamba_ssm does
        A = -torch.exp(self.A_log.to(x.dtype))

        fused = self.use_fast_path and x.is_cuda and fused_selective_scan()
        if fused:  # mamba_ssm's kernel wants (b, d, L) for u/delta/z and (b, n, L) for B/C
            y = fused(x.contiguous(), dt.transpose(1, 2).contiguous(), A,
                      B.transpose(1, 2).contiguous(), C.transpose(1, 2).contiguous(),
                      self.D.float(), z=z.transpose(1, 2).contiguous(),
                      delta_bias=self.dt_proj.bias.float(), delta_softplus=True)
            y = y.transpose(1, 2)
        else:
            tm = lambda t: t.transpose(0, 1)  # (b, L, c) <-> (L, b, c)
            scan = selective_scan_for_export if torch.compiler.is_exporting() else selective_scan
            y = tm(scan(x.permute(2, 0, 1), tm(dt), A, tm(B), tm(C), self.D, tm(z),
                        delta_bias=self.dt_proj.bias, delta_softplus=True))
        return self.out_proj(y)
