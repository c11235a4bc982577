"""The cost-model architectures tcl can train, and a fresh model of one."""

from __future__ import annotations

import torch

from .features import SPEC
from .hardware import HARDWARE_DIM
from .model.cost_model import CostModelConfig, MambaCostModel
from .model.tlp import TLPConfig, TLPCostModel

__all__ = ["ARCHS", "HARDWARE_FILM", "build_model"]

# name -> (config class, model class); a checkpoint names its architecture by these keys
ARCHS = {"mamba": (CostModelConfig, MambaCostModel), "tlp": (TLPConfig, TLPCostModel)}
# mamba: the descriptor also FiLM-s every step and the pooled embedding (`tcl train --hardware-film`)
HARDWARE_FILM = {"hardware_film": True, "hardware_film_steps": True}


def build_model(arch: str = "mamba", **config) -> torch.nn.Module:
    """A fresh model; feature, workload and hardware sizes default to this tcl's, and config
    entries that are None keep the architecture's default."""
    if arch not in ARCHS:
        raise ValueError(f"unknown model architecture {arch!r}: choose from {sorted(ARCHS)}")
    cfg_cls, model_cls = ARCHS[arch]
    base = {"feature_dim": SPEC.row_dim, "seq_len": SPEC.seq_len}
    if arch == "mamba":
        base.update(workload_dim=SPEC.workload_dim, hardware_dim=HARDWARE_DIM)
    return model_cls(cfg_cls(**{**base, **{k: v for k, v in config.items() if v is not None}}))
