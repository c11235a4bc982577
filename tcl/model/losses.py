"""Ranking losses within groups (one group = one task's programs in the batch).

Labels are normalised throughput in (0, 1] (best program of the task = 1), higher is better.
Everything is vectorised: the batch is laid out as a padded [n_groups, max_group_size] matrix and
all pairs of a group are compared at once (memory ~ n_groups * max_group_size^2, not batch^2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["group_matrix", "lambda_rank_loss", "log_ratio_loss", "pairwise_accuracy"]


def group_matrix(groups: torch.Tensor, *values: torch.Tensor):
    """Scatter per-item values [B] into padded [G, M] rows, one row per distinct group id.

    Returns (mask [G, M] bool, *padded values); padded slots hold 0 and mask False.
    """
    _, inv, counts = torch.unique(groups, return_inverse=True, return_counts=True)
    order = torch.argsort(inv, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    col = torch.empty_like(inv)
    col[order] = torch.arange(len(inv), device=inv.device) - starts[inv[order]]  # rank in group
    shape = (len(counts), int(counts.max()))
    mask = torch.zeros(shape, dtype=torch.bool, device=inv.device)
    mask[inv, col] = True
    # index_put out of place, so gradients flow back to the values
    return (mask, *(v.new_zeros(shape).index_put((inv, col), v) for v in values))


def _ranks(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1-based descending rank of each valid item within its row; ties go to the earlier item."""
    G, M = x.shape
    idx = torch.arange(M, device=x.device)
    ahead = (x.unsqueeze(1) > x.unsqueeze(2)) | ((x.unsqueeze(1) == x.unsqueeze(2))
                                                 & (idx.view(1, M) < idx.view(M, 1)))
    return 1 + (ahead & mask.unsqueeze(1)).sum(-1)  # [G, M]: ahead[g, i, j] = j is ahead of i


def lambda_rank_loss(scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor,
                     sigma: float = 1.0) -> torch.Tensor:
    """LambdaRank: NDCG-weighted pairwise logistic loss, averaged over groups.

    For every pair (i, j) of one group with labels_i > labels_j the loss is
        |dNDCG_ij| * log(1 + exp(-sigma * (s_i - s_j)))
    where |dNDCG_ij| = |G_i - G_j| * |1/log2(1+r_i) - 1/log2(1+r_j)| is the change in NDCG from
    swapping i and j in the current predicted order (r = rank by score, G = (2^label - 1) / IDCG).
    The weight is a constant (no gradient): it only says how much each pair matters to NDCG.
    """
    mask, s, y = group_matrix(groups, scores, labels.to(scores.dtype))
    with torch.no_grad():
        disc = 1 / torch.log2(1 + _ranks(s, mask).to(s.dtype))  # by the predicted order
        ideal = 1 / torch.log2(1 + _ranks(y, mask).to(s.dtype))  # by the true order
        gain = (torch.pow(2.0, y) - 1) * mask
        gain = gain / (gain * ideal).sum(1, keepdim=True).clamp(min=1e-12)  # / IDCG per group
        weight = (gain.unsqueeze(2) - gain.unsqueeze(1)).abs() \
            * (disc.unsqueeze(2) - disc.unsqueeze(1)).abs()
        pair = (y.unsqueeze(2) > y.unsqueeze(1)) & mask.unsqueeze(2) & mask.unsqueeze(1)
        weight = weight * pair
    diff = s.unsqueeze(2) - s.unsqueeze(1)  # [G, M, M]: s_i - s_j
    return (weight * F.softplus(-sigma * diff)).sum() / mask.shape[0]


def log_ratio_loss(scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """How far score differences are from log-throughput differences, averaged over groups.

    Per group, the mean over its items of ((s_i - mean s) - (log y_i - mean log y))^2: the scores
    are read as log throughput up to a shift of the group's own. LambdaRank's gains (2^label - 1)
    are small for every program several times slower than the best, so it weighs little whether
    such a program is 3x or 30x slower; this term does, so a program far from the best is not
    scored next to it.
    """
    mask, s, y = group_matrix(groups, scores, labels.to(scores.dtype))
    n = mask.sum(1, keepdim=True).to(s.dtype)
    logy = torch.where(mask, torch.log(y.clamp(min=1e-12)), torch.zeros_like(y))
    s_c = (s - (s * mask).sum(1, keepdim=True) / n) * mask
    y_c = (logy - logy.sum(1, keepdim=True) / n) * mask
    return (((s_c - y_c) ** 2).sum(1) / n.squeeze(1)).mean()


@torch.no_grad()
def pairwise_accuracy(scores: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor) -> float:
    """Fraction of same-group pairs with different labels whose scores are ordered like the labels.

    A tie in score counts as half right. Returns nan when there is no such pair.
    """
    mask, s, y = group_matrix(groups, scores, labels.to(scores.dtype))
    pair = (y.unsqueeze(2) > y.unsqueeze(1)) & mask.unsqueeze(2) & mask.unsqueeze(1)
    ds = s.unsqueeze(2) - s.unsqueeze(1)
    right = (ds > 0).to(s.dtype) + 0.5 * (ds == 0).to(s.dtype)
    n = pair.sum()
    return float((right * pair).sum() / n) if n else float("nan")
