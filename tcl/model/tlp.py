"""A TLP-style baseline (Zhai et al., ASPLOS 2023) over the same step sequences as the Mamba model.

    seq [B, L, D] --per-step MLP (64, 128, d, d)--> [B, L, d]
        --x + self-attention(x) (padding keys masked)--> --x + Linear(relu(x)), res_blocks times-->
        --per-step MLP decoder (d, d/2, d/4, 1)--> sum over the valid steps -> score [B]

TLP reads only the sequence: the workload and hardware descriptors are accepted (one forward
signature for every cost model) and ignored. Padding is at the end; padded steps are masked as keys
and left out of the sum, so a batch may be cropped to its longest sequence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

__all__ = ["TLPConfig", "TLPCostModel"]


@dataclass
class TLPConfig:
    feature_dim: int
    seq_len: int
    workload_dim: int = 0  # not read (see the module doc); kept so configs look alike
    hardware_dim: int = 0
    d_model: int = 256  # TLP's hidden width
    heads: int = 8
    res_blocks: int = 2

    def to_dict(self) -> dict:
        return asdict(self)


def _mlp(widths: list[int], last_activation: bool) -> nn.Sequential:
    layers = []
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        layers.append(nn.Linear(a, b))
        if last_activation or i < len(widths) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class TLPCostModel(nn.Module):
    def __init__(self, cfg: TLPConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.encoder = _mlp([cfg.feature_dim, 64, 128, d, d], last_activation=True)
        self.attention = nn.MultiheadAttention(d, cfg.heads, batch_first=True)
        self.blocks = nn.ModuleList(nn.Sequential(nn.ReLU(), nn.Linear(d, d))
                                    for _ in range(cfg.res_blocks))
        self.decoder = _mlp([d, d, d // 2, d // 4, 1], last_activation=False)

    def forward(self, seq, lengths, workload=None, hardware=None) -> torch.Tensor:
        """seq [B, L, D] float32, lengths [B] int -> score [B] (descriptors ignored)."""
        valid = torch.arange(seq.shape[1], device=seq.device) < lengths.unsqueeze(1)  # [B, L]
        # An all-padding row would softmax over nothing (NaN): let it attend to its zeros instead;
        # its score is still 0 because no step is summed.
        pad = ~valid & (lengths > 0).unsqueeze(1)
        x = self.encoder(seq)
        x = x + self.attention(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        for block in self.blocks:
            x = x + block(x)
        return (self.decoder(x).squeeze(-1) * valid).sum(1)

    def size_mb(self) -> float:
        """Parameter bytes at fp32, in MB (1e6 bytes)."""
        return sum(p.numel() for p in self.parameters()) * 4 / 1e6
