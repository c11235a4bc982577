"""The active column: the model that learns a new platform in the progress phase, beside the frozen KB.

The column has the KB's architecture and reads the KB's hidden states through lateral adaptors
whose gates start small, so it can reuse what the KB knows. It starts as a copy of the KB
(adaptors zeroed): a fresh column, as in the published Progress & Compress, learned the new
platform much worse, and compress can only pass on what the column knows (docs/continual.md).
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

from ..model.cost_model import MambaCostModel, masked_mean
from .config import CKDConfig

__all__ = ["ActiveColumn"]


class ActiveColumn(nn.Module):
    """A MambaCostModel that also reads a frozen KB's hidden states through gated adaptors.

    from_kb: the column starts as a copy of the KB with zeroed adaptors (so it starts as the KB
    and fine-tunes from there); otherwise it starts fresh (Progress & Compress as published)."""

    def __init__(self, kb: MambaCostModel, alpha_init: float = CKDConfig.alpha_init,
                 from_kb: bool = CKDConfig.column_from_kb):
        super().__init__()
        self.kb = kb
        for p in self.kb.parameters():
            p.requires_grad_(False)
        self.col = copy.deepcopy(kb) if from_kb else MambaCostModel(kb.cfg)
        if not from_kb and kb.hardware_film is not None:
            self.col.hardware_ref.copy_(kb.hardware_ref)
        for p in self.col.parameters():
            p.requires_grad_(True)
        d = kb.cfg.d_model
        n = kb.cfg.n_layer + 1  # the encoder output and each layer's
        self.lateral = nn.ModuleList(nn.Linear(d, d) for _ in range(n))
        if from_kb:
            for lin in self.lateral:
                nn.init.zeros_(lin.weight)
                nn.init.zeros_(lin.bias)
        self.alpha = nn.Parameter(torch.full((n,), float(alpha_init)))

    def forward(self, seq, lengths, workload=None, hardware=None):
        with torch.no_grad():
            kb_h = self.kb.hidden_states(seq, hardware)
        x = self.col.encode(seq, hardware) + self.alpha[0] * self.lateral[0](kb_h[0])
        d = self.col.layer_delta(hardware)
        for i, layer in enumerate(self.col.layers):
            x = layer(x, d) + self.alpha[i + 1] * self.lateral[i + 1](kb_h[i + 1])
        emb = masked_mean(self.col.norm_f(x), lengths)
        return self.col.head(emb, workload, hardware)
