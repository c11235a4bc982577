"""The Mamba cost model (needs torch): the block, the model, the ranking losses."""

from .cost_model import CostModelConfig, MambaCostModel
from .losses import lambda_rank_loss, pairwise_accuracy
from .mamba import Mamba, selective_scan

__all__ = ["CostModelConfig", "MambaCostModel", "Mamba", "selective_scan", "lambda_rank_loss",
           "pairwise_accuracy"]
