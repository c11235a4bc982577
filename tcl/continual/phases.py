"""The two phases of learning a platform: progress, then compress.

progress: an active column (column.py) learns the new platform (LambdaRank) while the KB is frozen.
compress: the knowledge base learns the new platform from the active column and the labels:

    L = mean_i g_i * (z_KB(i) - z_AC(i))^2  +  beta * LambdaRank(KB, labels)

z are scores standardised within each task (only rankings matter), and the gate
g_i = exp(-|rank_AC(i) - rank_label(i)| / n_task) trusts the column on the programs it ranks where
the measurements put them (`gated=False`: g = 1). How the earlier platforms are kept is
CKDConfig.preserve:

- "exact": only the descriptor-reading parameters learn (tcl.continual.descriptor), and after every
  step DescriptorProjection takes their change off the earlier descriptors' span, so the KB scores
  every earlier platform exactly as before, with no extra term and no old data. There is no
  backward transfer: a later platform never improves an earlier one.
- "keep": the whole KB learns, plus mu * mean_h LambdaRank(KB(. | h), order of KB_old(. | h)) over
  the earlier descriptors h (learning without forgetting, the old hardware as the old task) and
  online EWC; the descriptor-reading parameters learn at hardware_lr times the rate.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from ..averaging import LastEpochsAverage
from ..model.cost_model import MambaCostModel
from ..model.losses import lambda_rank_loss, log_ratio_loss
from ..program_data import ProgramData, batches, task_groups
from ..train import epochs_for_steps, optimizer_step, seed_everything
from .column import ActiveColumn
from .config import PRESERVE, CKDConfig
from .descriptor import DescriptorProjection, platform_hardware
from .ewc import OnlineEWC

__all__ = ["compress", "frozen_outputs", "gate", "keep_old_platforms", "mixed_programs", "progress", "rank_labels", "standardise"]


def standardise(scores: torch.Tensor, gid: torch.Tensor) -> torch.Tensor:
    """Scores minus their group mean, over their group std: only the order within a task counts."""
    out = torch.empty_like(scores)
    for g in torch.unique(gid):
        m = gid == g
        s = scores[m]
        out[m] = (s - s.mean()) / (s.std(unbiased=False) + 1e-6)
    return out


def _ranks(v: torch.Tensor) -> torch.Tensor:
    return torch.argsort(torch.argsort(v)).float()


def gate(ac_scores: torch.Tensor, labels: torch.Tensor, gid: torch.Tensor) -> torch.Tensor:
    """g_i = exp(-|rank of program i by the AC - its rank by the measurements| / programs in its task)."""
    g = torch.empty_like(ac_scores)
    for k in torch.unique(gid):
        m = gid == k
        n = int(m.sum())
        g[m] = torch.exp(-(_ranks(ac_scores[m]) - _ranks(labels[m])).abs() / max(n, 1))
    return g


def rank_labels(scores: torch.Tensor, gid: torch.Tensor) -> torch.Tensor:
    """(rank from the bottom + 1) / programs, within each group: the top-scored program gets 1."""
    out = torch.empty_like(scores)
    for k in torch.unique(gid):
        m = gid == k
        out[m] = (_ranks(scores[m]) + 1) / int(m.sum())
    return out


def keep_old_platforms(kb, student, seq, lengths, emb, kb_emb, workload, gid, old_hw) -> torch.Tensor:
    """LambdaRank of the student's scores of these (new) programs under each earlier platform's
    descriptor against the order the incoming KB gives them there (labels: rank_labels of the KB's
    scores), averaged over those platforms. A ranking loss, like the label term, so that it weighs
    the top of each task most (Top-1 is decided there).
    emb, kb_emb: the student's and the incoming KB's embeddings of the programs; a body that reads
    the descriptor runs once per descriptor instead."""
    total = torch.zeros(())
    for h in old_hw:
        hw = h.expand(len(emb), -1)
        emb_h = emb
        with torch.no_grad():
            if kb.body_reads_hardware:
                kb_emb = kb.embedding(seq, lengths, hw)
            target = rank_labels(kb.head(kb_emb, workload, hw), gid)
        if student.body_reads_hardware:
            emb_h = student.embedding(seq, lengths, hw)
        total = total + lambda_rank_loss(student.head(emb_h, workload, hw), target, gid)
    return total / len(old_hw)


def mixed_programs(seq, lengths, workload, gid, rng):
    """Inputs between the batch's tasks, for the old-hardware term: each program of group g is
    mixed with a random program of group g + 1 (usually another task's: groups are shuffled) as
    lam * x + (1 - lam) * x', one lam ~ U(0, 1) per group for the sequences and the workload
    descriptors; the mixture is as long as the longer of the two (padding is zeros)."""
    g = gid.numpy()
    n_groups = int(g.max()) + 1
    members = [np.flatnonzero(g == k) for k in range(n_groups)]
    partner = np.concatenate([rng.choice(members[(k + 1) % n_groups], len(members[k])) for k in range(n_groups)])
    lam = torch.from_numpy(rng.uniform(0, 1, n_groups).astype(np.float32))[gid]
    mixed_seq = lam[:, None, None] * seq + (1 - lam[:, None, None]) * seq[partner]
    mixed_workload = lam[:, None] * workload + (1 - lam[:, None]) * workload[partner]
    return mixed_seq, torch.maximum(lengths, lengths[partner]), mixed_workload


@torch.no_grad()
def frozen_outputs(kb: MambaCostModel, ac: ActiveColumn, data: ProgramData, task_ids, chunk: int = 512):
    """The AC's scores and the KB's embeddings of every program of these tasks, indexed by
    program. Both models are frozen and in eval mode during compress, so each program's values are
    the same in every epoch: computing them once saves the three frozen body passes of each step.
    The embeddings are None when the KB's body reads the descriptor: compress then needs them
    under other descriptors (or not at all), never once under the program's own."""
    idx = data.programs_of(task_ids)
    teacher = torch.zeros(len(data))
    kb_emb = None if kb.body_reads_hardware else torch.zeros(len(data), kb.cfg.d_model)
    for a in range(0, len(idx), chunk):
        part = idx[a:a + chunk]
        seq, lengths, workload, hardware = data.inputs(part)
        teacher[part] = ac(seq, lengths, workload, hardware)
        if kb_emb is not None:
            kb_emb[part] = kb.embedding(seq, lengths, hardware)
    return teacher, kb_emb


def _keep_term(kb, student, inputs, emb, kb_emb, gid, old_hw, cfg: CKDConfig, rng) -> torch.Tensor:
    """preserve "keep": the old-hardware ranking term on the batch (and, keep_old_mix, on mixtures)."""
    seq, lengths, workload, hardware = inputs
    keep = keep_old_platforms(kb, student, seq, lengths, emb, kb_emb, workload, gid, old_hw)
    if cfg.keep_old_mix and int(gid.max()) > 0:
        m_seq, m_len, m_wl = mixed_programs(seq, lengths, workload, gid, rng)
        m_kb_emb = None
        if not kb.body_reads_hardware:  # otherwise computed per old descriptor
            with torch.no_grad():
                m_kb_emb = kb.embedding(m_seq, m_len, hardware)
        keep = (keep + keep_old_platforms(kb, student, m_seq, m_len, student.embedding(m_seq, m_len, hardware),
                                          m_kb_emb, m_wl, gid, old_hw)) / 2
    return keep


def label_loss(scores: torch.Tensor, labels: torch.Tensor, gid: torch.Tensor, cfg: CKDConfig) -> torch.Tensor:
    """LambdaRank on the measured labels, with the log-ratio term beside it when it has a weight."""
    loss = lambda_rank_loss(scores, labels, gid)
    if cfg.log_ratio_weight:
        loss = loss + cfg.log_ratio_weight * log_ratio_loss(scores, labels, gid)
    return loss


def progress(kb: MambaCostModel, data: ProgramData, task_ids, cfg: CKDConfig) -> ActiveColumn:
    """Trains an active column on the new platform (label_loss) with the KB frozen."""
    seed_everything(cfg.seed)
    ac = ActiveColumn(kb, cfg.alpha_init, cfg.column_from_kb)
    params = [p for p in ac.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed)
    ac.train()
    for _ in range(epochs_for_steps(data, task_ids, cfg.progress_epochs, cfg.min_steps, cfg.group_size, cfg.batch_tasks)):
        for idx, gid in batches(task_groups(data, task_ids, cfg.group_size, rng), cfg.batch_tasks):
            loss = label_loss(ac(*data.inputs(idx)), torch.from_numpy(data.label[idx]), gid, cfg)
            optimizer_step(opt, loss, params, cfg.clip)
    ac.eval()
    return ac


def compress(kb: MambaCostModel, ac: ActiveColumn, ewc: OnlineEWC, data: ProgramData, task_ids,
             cfg: CKDConfig, on_epoch=None) -> MambaCostModel:
    """Distils the AC into a copy of the KB (gated), with the label ranking loss; the earlier
    platforms kept exactly (preserve "exact") or by the old-hardware term and online EWC ("keep").
    on_epoch(epoch, student): called after each epoch (1-based), before any averaging."""
    if cfg.preserve not in PRESERVE:
        raise ValueError(f"CKDConfig.preserve: 'exact' or 'keep', not {cfg.preserve!r}")
    seed_everything(cfg.seed + 1)
    kb.eval()
    student = copy.deepcopy(kb)
    exact = cfg.preserve == "exact"
    hw_params = student.hardware_params()
    hw_ids = {id(p) for p in hw_params}
    for p in student.parameters():
        p.requires_grad_(not exact or id(p) in hw_ids)
    new_hw = platform_hardware(data, task_ids)
    old_hw = [h for h in ewc.hardware if h not in new_hw]
    projection = DescriptorProjection(student, old_hw, new_hw) if exact else None
    gain = projection.gain if exact and cfg.projected_lr else 1.0
    groups = [{"params": hw_params, "lr": cfg.lr * cfg.hardware_lr * gain}]
    if not exact:
        groups.append({"params": [p for p in student.parameters() if id(p) not in hw_ids]})
    opt = torch.optim.Adam(groups, lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed + 1)
    old_hw = [torch.tensor(h, dtype=torch.float32) for h in old_hw]
    ac.eval()
    all_teacher, all_kb_emb = frozen_outputs(kb, ac, data, task_ids)
    # exact, with a body that ignores the descriptor: it is frozen, so its embeddings are the incoming KB's
    cached = exact and all_kb_emb is not None
    student.train()
    epochs = epochs_for_steps(data, task_ids, cfg.compress_epochs, cfg.min_steps, cfg.group_size, cfg.batch_tasks)
    averaged = LastEpochsAverage(epochs, cfg.average_last)
    for epoch in range(1, epochs + 1):
        for idx, gid in batches(task_groups(data, task_ids, cfg.group_size, rng), cfg.batch_tasks):
            inputs = data.inputs(idx)
            seq, lengths, workload, hardware = inputs
            labels = torch.from_numpy(data.label[idx])
            teacher = all_teacher[idx]
            with torch.no_grad():
                g = gate(teacher, labels, gid) if cfg.gated else torch.ones_like(teacher)
            emb = all_kb_emb[idx] if cached else student.embedding(seq, lengths, hardware)
            s = student.head(emb, workload, hardware)
            distill = (g * (standardise(s, gid) - standardise(teacher, gid)) ** 2).mean()
            loss = distill + cfg.beta * label_loss(s, labels, gid, cfg)
            if exact:
                optimizer_step(opt, loss, hw_params, cfg.clip)
                projection.apply()
                continue
            loss = loss + ewc.penalty(student, cfg.ewc_lambda)
            if old_hw and cfg.keep_old:
                kb_emb = None if all_kb_emb is None else all_kb_emb[idx]
                loss = loss + cfg.keep_old * _keep_term(kb, student, inputs, emb, kb_emb, gid, old_hw, cfg, rng)
            optimizer_step(opt, loss, student.parameters(), cfg.clip)
        if on_epoch is not None:
            on_epoch(epoch, student)
        averaged.after_epoch(epoch, student)
    averaged.finish(student)
    student.eval()
    return student
