"""The Mamba cost model: a schedule sequence (plus workload and hardware descriptors) -> a score.

    seq [B, L, D] --Linear--> [B, L, d] --(optional) FiLM of every step by the hardware descriptor-->
        --(x + Mamba(norm(x))) * n_layer--> norm
        --masked mean over the true length--> [B, d]
        --(optional) FiLM by the hardware descriptor--> --concat proj(workload), proj(hardware)-->
        MLP -> score [B]

Sequences are padded at the END: the conv and the scan are causal, so padding never changes a valid
position and the pooling masks it out. The forward is split into ``hidden_states`` (per-layer
states; continual distillation reads them through lateral connections), ``embedding`` (the pooled
vector the RDU sampler uses) and ``head``; dropout lives only in the head so MC-dropout re-runs
just the head (``mc_scores``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from .mamba import Mamba

__all__ = ["CostModelConfig", "DescriptorAdapter", "MambaCostModel", "RMSNorm", "masked_mean"]


@dataclass
class CostModelConfig:
    feature_dim: int             # D: features per schedule step
    seq_len: int                 # L: steps per program after padding/cropping (fixed for export)
    workload_dim: int = 16       # W: workload descriptor size (0 = not used)
    hardware_dim: int = 12       # P: hardware descriptor size (0 = not used)
    d_model: int = 128           # the paper's size (the model's size: docs/training.md)
    n_layer: int = 1             # paper's ablation: 1 layer, d_state 8, expand 1, d_conv 4
    d_state: int = 8
    expand: int = 1
    d_conv: int = 4
    desc_dim: int = 32           # width of each descriptor projection
    head_hidden: int = 96
    dropout: float = 0.1         # head only; MC-dropout samples it at scoring time
    hardware_film: bool = False  # scale and shift the pooled embedding by (hardware - hardware_ref)
    hardware_film_steps: bool = False  # ... and every step's encoder output, before the Mamba layers
    # (with hardware_film) rank of the descriptor-linear adapters of the encoder, each Mamba
    # layer's in_proj and the head's first layer (0 = none): see DescriptorAdapter
    hardware_adapter_rank: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


class RMSNorm(nn.Module):
    """x / rms(x) * weight. Written out (not nn.RMSNorm) so it exports to any ONNX opset."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def masked_mean(h: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean of h [B, L, d] over the first lengths[b] steps (padding is at the end)."""
    mask = torch.arange(h.shape[1], device=h.device) < lengths.unsqueeze(1)  # [B, L]
    mask = mask.to(h.dtype).unsqueeze(-1)
    return (h * mask).sum(1) / mask.sum(1).clamp(min=1)  # an empty sequence pools to 0, not NaN


class DescriptorAdapter(nn.Module):
    """A low-rank change of a Linear layer's weight that is linear in the hardware descriptor:

        x -> U (d (x) A x),   d = hardware - hardware_ref [P],  A [rank, n_in] fixed,  U [n_out, P * rank]

    i.e. the layer's weight becomes W + sum_i d_i U_i A, a LoRA whose up-projection the descriptor
    generates. A is a fixed random orthonormal basis (a buffer, from `seed`; LoRA with a frozen
    random down-projection is reported to learn about as well as with a trained one, LoRA-FA),
    so everything that learns reads d linearly: a change of U whose P-axis is orthogonal to
    earlier platforms' d leaves their outputs exactly as they were (tcl.continual.descriptor.DescriptorProjection), while a new
    platform gets its own rank-`rank` change of the layer. U starts at zero: a model trained on
    the reference platform is unchanged by it."""

    def __init__(self, n_in: int, n_out: int, hardware_dim: int, rank: int, seed: int):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        basis = torch.linalg.qr(torch.randn(n_in, rank, generator=g))[0].T.contiguous()
        self.register_buffer("basis", basis)
        self.rank = rank
        self.up = nn.Linear(hardware_dim * rank, n_out, bias=False)
        nn.init.zeros_(self.up.weight)

    def forward(self, x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        """x [B, ..., n_in], d [B, P] -> [B, ..., n_out]."""
        P, r = d.shape[-1], self.rank
        # d (x) A x at index i * rank + k as a product of two matmuls: no reshape of a batch
        # dimension, which would fix the batch size in an exported graph
        spread_a = torch.eye(r, device=x.device, dtype=x.dtype).repeat(1, P)  # [r, P * r]: k -> i * r + k
        spread_d = torch.eye(P, device=x.device, dtype=x.dtype).repeat_interleave(r, dim=1)  # [P, P * r]
        a = x @ (self.basis.t() @ spread_a)  # [B, ..., P * r]
        d = d @ spread_d
        for _ in range(a.dim() - 2):
            d = d.unsqueeze(1)
        return self.up(d * a)


class MambaLayer(nn.Module):
    """Pre-norm residual Mamba layer: x + Mamba(norm(x)); its in_proj optionally adapted per platform."""

    def __init__(self, cfg: CostModelConfig):
        super().__init__()
        self.norm = RMSNorm(cfg.d_model)
        self.mixer = Mamba(cfg.d_model, d_state=cfg.d_state, d_conv=cfg.d_conv, expand=cfg.expand)
        self.adapter = None  # set by MambaCostModel (built after every other layer)

    def forward(self, x, d: torch.Tensor | None = None):
        h = self.norm(x)
        if self.adapter is None:
            return x + self.mixer(h)
        return x + self.mixer(h, in_proj_delta=self.adapter(h, d))


class MambaCostModel(nn.Module):
    def __init__(self, cfg: CostModelConfig):
        super().__init__()
        self.cfg = cfg
        d, h = cfg.d_model, cfg.desc_dim
        self.encoder = nn.Linear(cfg.feature_dim, d)
        self.layers = nn.ModuleList(MambaLayer(cfg) for _ in range(cfg.n_layer))
        self.norm_f = RMSNorm(d)
        # Descriptors are per program (not per step), so they join after pooling.
        self.workload_proj = nn.Sequential(nn.Linear(cfg.workload_dim, h), nn.SiLU()) \
            if cfg.workload_dim else None
        self.hardware_proj = nn.Sequential(nn.Linear(cfg.hardware_dim, h), nn.SiLU()) \
            if cfg.hardware_dim else None
        n_in = d + h * (bool(cfg.workload_dim) + bool(cfg.hardware_dim))
        self.decoder = nn.Sequential(
            nn.Dropout(cfg.dropout), nn.Linear(n_in, cfg.head_hidden), nn.SiLU(),
            nn.Dropout(cfg.dropout), nn.Linear(cfg.head_hidden, 1))
        # As mamba_ssm does for its residual stream: shrink out_proj by sqrt(n_layer) so the
        # residual's variance does not grow with depth.
        for layer in self.layers:
            with torch.no_grad():
                layer.mixer.out_proj.weight /= cfg.n_layer ** 0.5
        # FiLM (continual distillation's knowledge base): emb * (1 + gamma) + beta with
        # [gamma, beta] linear in the descriptor's difference from a reference platform's. Zero
        # at the reference, so a model trained on that platform alone is unchanged by it; another
        # platform's scores differ by a per-dimension rescaling of the embedding, which the
        # concatenated projection above, a shift of the MLP's inputs, expresses poorly.
        # The steps' FiLM lets the descriptor reweight the features the Mamba layer reads (a
        # platform's fast schedules differ in vector widths and tile sizes, which the features
        # carry), so the body computes differently per platform, not only the head.
        # Built last (and zeroed) so that the other layers' initial weights do not depend on them.
        self.hardware_film = self.hardware_film_steps = None
        if cfg.hardware_film and cfg.hardware_dim:
            self.hardware_film = nn.Linear(cfg.hardware_dim, 2 * d, bias=False)
            nn.init.zeros_(self.hardware_film.weight)
            if cfg.hardware_film_steps:
                self.hardware_film_steps = nn.Linear(cfg.hardware_dim, 2 * d, bias=False)
                nn.init.zeros_(self.hardware_film_steps.weight)
            self.register_buffer("hardware_ref", torch.zeros(cfg.hardware_dim))
        # Descriptor-linear low-rank adapters (DescriptorAdapter): a platform's own change of the
        # encoder, of every Mamba layer's in_proj and of the head's first layer, so a new
        # platform can change what the body computes, not only rescale it (FiLM).
        self.encoder_adapter = self.head_adapter = None
        r = cfg.hardware_adapter_rank if self.hardware_film is not None else 0
        if r:
            P = cfg.hardware_dim
            self.encoder_adapter = DescriptorAdapter(cfg.feature_dim, d, P, r, seed=1)
            for i, layer in enumerate(self.layers):
                layer.adapter = DescriptorAdapter(d, layer.mixer.in_proj.out_features, P, r, seed=2 + i)
            self.head_adapter = DescriptorAdapter(n_in, cfg.head_hidden, P, r, seed=2 + cfg.n_layer)

    def adapters(self) -> list[DescriptorAdapter]:
        """The descriptor adapters (encoder, each layer's in_proj, head), empty without them."""
        found = [self.encoder_adapter] + [layer.adapter for layer in self.layers] + [self.head_adapter]
        return [a for a in found if a is not None]

    @property
    def body_reads_hardware(self) -> bool:
        """Whether the pooled embedding depends on the hardware descriptor (steps' FiLM or adapters)."""
        return self.hardware_film_steps is not None or self.encoder_adapter is not None

    def _descriptor_delta(self, hardware: torch.Tensor | None) -> torch.Tensor:
        if hardware is None:
            raise ValueError("this model's body reads the hardware descriptor: pass `hardware`")
        return hardware - self.hardware_ref

    def layer_delta(self, hardware: torch.Tensor | None) -> torch.Tensor | None:
        """What each MambaLayer takes beside its input: d for its adapter, None without adapters."""
        return self._descriptor_delta(hardware) if self.encoder_adapter is not None else None

    def encode(self, seq: torch.Tensor, hardware: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's output [B, L, d_model], FiLM-ed by the descriptor if the model has the steps' FiLM."""
        x = self.encoder(seq)
        if self.encoder_adapter is not None:
            x = x + self.encoder_adapter(seq, self._descriptor_delta(hardware))
        if self.hardware_film_steps is not None:
            gamma, beta = self.hardware_film_steps(self._descriptor_delta(hardware)).unsqueeze(1).chunk(2, dim=-1)
            x = x * (1 + gamma) + beta
        return x

    def hidden_states(self, seq: torch.Tensor, hardware: torch.Tensor | None = None) -> list[torch.Tensor]:
        """[encoder output, output of layer 1, ..., layer n_layer], each [B, L, d_model]."""
        hs = [self.encode(seq, hardware)]
        d = self.layer_delta(hardware)
        for layer in self.layers:
            hs.append(layer(hs[-1], d))
        return hs

    def embedding(self, seq: torch.Tensor, lengths: torch.Tensor, hardware: torch.Tensor | None = None) -> torch.Tensor:
        """Pooled program embedding [B, d_model] (normed last hidden state, masked mean)."""
        return masked_mean(self.norm_f(self.hidden_states(seq, hardware)[-1]), lengths)

    def head(self, emb: torch.Tensor, workload: torch.Tensor | None = None,
             hardware: torch.Tensor | None = None) -> torch.Tensor:
        """Score [B] from the pooled embedding and the descriptors."""
        if self.hardware_film is not None:
            gamma, beta = self.hardware_film(hardware - self.hardware_ref).chunk(2, dim=-1)
            emb = emb * (1 + gamma) + beta
        parts = [emb]
        if self.workload_proj is not None:
            parts.append(self.workload_proj(workload))
        if self.hardware_proj is not None:
            parts.append(self.hardware_proj(hardware))
        x = self.decoder[0](torch.cat(parts, dim=-1))  # dropout
        hidden = self.decoder[1](x)
        if self.head_adapter is not None:
            hidden = hidden + self.head_adapter(x, self._descriptor_delta(hardware))
        return self.decoder[2:](hidden).squeeze(-1)

    def forward(self, seq, lengths, workload=None, hardware=None) -> torch.Tensor:
        """seq [B, L, D] float32, lengths [B] int, workload [B, W], hardware [B, P] -> score [B]."""
        return self.head(self.embedding(seq, lengths, hardware), workload, hardware)

    @torch.no_grad()
    def mc_scores(self, seq, lengths, workload=None, hardware=None, n: int = 16) -> torch.Tensor:
        """n MC-dropout samples of the score, [n, B]: the body runs once, the head n times."""
        emb = self.embedding(seq, lengths, hardware)
        was_training = self.decoder.training
        self.decoder.train()
        try:
            return torch.stack([self.head(emb, workload, hardware) for _ in range(n)])
        finally:
            self.decoder.train(was_training)

    def hardware_params(self) -> list[nn.Parameter]:
        """The parameters that read the hardware descriptor (projection, FiLM, adapters' up-projections)."""
        mods = [m for m in (self.hardware_proj, self.hardware_film, self.hardware_film_steps) if m is not None]
        return [p for m in mods + self.adapters() for p in m.parameters()]

    def size_mb(self) -> float:
        """Parameter and buffer bytes at fp32, in MB (1e6 bytes)."""
        return sum(t.numel() for t in [*self.parameters(), *self.buffers()]) * 4 / 1e6
