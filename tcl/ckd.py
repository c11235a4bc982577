"""Continual knowledge distillation across hardware platforms (Progress & Compress, with a gate).

The knowledge base (KB) is the deployable MambaCostModel; the hardware descriptor is one of its
inputs, so one KB serves every platform it has learned. For a new platform:

1. progress: an active column (AC) of the same architecture learns the new platform's programs
   (LambdaRank) while the KB is frozen; the AC reads the KB's hidden states through lateral
   adaptors whose gates alpha start small (0.1), so it can reuse what the KB knows. The AC
   starts as a copy of the KB (adaptors zeroed): measured on znver4-2c -> haswell-1c, a fresh
   column (as published) reached held-out Top-1 0.44 where the copy reached 0.66, and
   compress can only pass on what the AC knows.
2. compress: the KB learns the new platform from the AC and the measured labels:
       L = mean_i g_i * (z_KB(i) - z_AC(i))^2  +  beta * LambdaRank(KB, labels)
   where z are scores standardised within each task (rankings are what matter) and the gate
   g_i = exp(-|rank_AC(i) - rank_label(i)| / n_task) trusts the AC on the programs it ranks
   where the measurements put them (per program; `gated=False` sets g = 1 for the ablation).
   The hardware descriptor is the KB's only way to tell platforms apart, and how the earlier
   platforms are kept is CKDConfig.preserve:
   "exact" (default): only the parameters that read the descriptor learn: FiLM layers that scale
   and shift every step's encoder output and the pooled embedding by W (h - h_first),
   descriptor adapters (tcl.model.cost_model.DescriptorAdapter: each later platform's own
   low-rank change of the encoder, the Mamba in_proj and the head's first layer), all zero on the
   first platform (first_platform adds them), and the hardware projection. They see the
   descriptor linearly, so after every step their change is projected off the span of the
   earlier platforms' inputs (DescriptorProjection): the KB's scores under every earlier
   descriptor stay exactly what they were, with no term to balance and no old data. The price is
   backward transfer (a later platform never improves an earlier one). Measured
   (bench/ckd_variants.py, seed 0, old / new held-out Top-1, README): znver4-2c -> x86-64-2c
   0.755 / 0.835 with the adapters, 0.755 / 0.642 with FiLM only, keep (below) 0.695 / 0.859;
   haswell-1c -> x86-64-2c 0.672 / 0.756, 0.672 / 0.691, keep 0.704 / 0.788. Over three
   platforms in both orders and seeds 0-2 (bench/continual.py, README) exact averaged 0.719 /
   0.738 Top-1 with no forgetting (FiLM only 0.679 / 0.728), keep (with the pooled FiLM only)
   0.671 / 0.712 forgetting 8-11%, joint training 0.749 / 0.741; over seeds 0-8 exact is level
   with joint on average in both orders, each seed's result deciding by a few heavy held-out
   tasks (README: the numbers).
   "keep": the whole KB learns, plus
       mu * mean_h LambdaRank(KB(. | h), order of KB_old(. | h))  +  EWC,
   the new programs scored under each earlier descriptor h as the incoming KB scored them
   (learning without forgetting with the old hardware as the old task), the descriptor-reading
   parameters at CKDConfig.hardware_lr (10x: a KB that saw one platform reads all descriptors
   almost alike). EWC (off by default, see CKDConfig.ewc_lambda) is online:
   sum_k (lambda/2) F*_k (theta - theta*_k)^2 with one running Fisher
   F* <- gamma F* + F_new / mean(F_new) (normalised per platform) and one anchor theta*.
3. consolidate: the Fisher of the KB on the new platform's programs (squared gradients of the
   ranking loss) is folded into F*, and the anchor moves to the new KB.

Only the KB, its EWC state and the new platform's programs are used: no old platform's data, and
the KB never grows (the AC is thrown away after compress).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn as nn

from .model.cost_model import MambaCostModel, masked_mean
from .model.losses import lambda_rank_loss
from .train import LastEpochsAverage, ProgramData, _groups, _seed_everything, epochs_for_steps, optimizer_step


@dataclass
class CKDConfig:
    progress_epochs: int = 20
    compress_epochs: int = 20
    min_steps: int = 200  # per phase: small (sampled) platforms get more epochs, as in tcl.train
    lr: float = 7e-4
    beta: float = 1.0  # weight of the label ranking loss in compress
    # How compress keeps the earlier platforms (module docstring, step 2):
    #   "exact": only the parameters that read the descriptor learn, and their change is projected
    #            so the KB's scores under every earlier descriptor stay what they were (no forgetting);
    #   "keep":  the whole KB learns, held by the old-hardware ranking term (keep_old) and EWC.
    preserve: str = "exact"
    # preserve "keep" only: EWC, the old-hardware term and its mixtures.
    # lambda: off by default. Measured (znver4-2c -> haswell-1c, keep_old 3): lambda 0 kept the
    # first platform's held-out Top-1 (0.755 -> 0.771), lambda 1 and 10 both dropped it to 0.684.
    # Under Adam the penalty acts as a switch once it dominates a weight's gradient: it pins the
    # high-Fisher body and moves the change into the head, which every platform's score shares.
    ewc_lambda: float = 0.0
    keep_old: float = 1.0  # mu, the earlier platforms' ranking term (1 and 3 measured: README)
    # The old-hardware term also on mixtures of two tasks' programs (see _mixed_programs): the old
    # ranking is kept a little better on training tasks than on held-out ones (median Spearman 0.981
    # vs 0.963, x86-64-2c -> znver4-2c). Off: it raised the held-out agreement in 3 of 3 runs but
    # cost the new platform up to 0.11 Top-1 (README).
    keep_old_mix: bool = False
    gamma: float = 0.99  # online-EWC decay of earlier platforms' Fisher
    gated: bool = True
    alpha_init: float = 0.1
    column_from_kb: bool = True  # the active column starts as the KB (False: fresh, as in P&C)
    hardware_lr: float = 10.0  # compress: learning-rate multiplier of the descriptor-reading parameters
    # exact: that rate also times DescriptorProjection.gain, so a platform whose descriptor is
    # close to the earlier ones' span learns as fast as one far from it
    projected_lr: bool = True
    hardware_film: bool = True  # the KB scales its embedding by the descriptor (first_platform)
    hardware_film_steps: bool = True  # ... and every step's encoder output (with hardware_film)
    # rank of the KB's descriptor adapters (0: none; with hardware_film). Measured (README): 4 raised
    # exact CKD's average Top-1 over three platforms from 0.679 to 0.719 in one order (seeds 0-2)
    # and from 0.728 to 0.730 in the other, for 99 KB more; rank 8 was no better on two pairs.
    hardware_adapter_rank: int = 4
    # > 0: the first KB and each compressed KB are the mean of their weights over this last fraction
    # of the epochs (tcl.train's average_last). Exact preservation holds for the mean too: every
    # state's change lies in the projection's subspace, so their mean's does. Off: 0.5 measured
    # (bench/continual.py, seeds 0-2, README) 0.739 / 0.668 average Top-1 in the two orders against
    # 0.719 / 0.738 without; a run's average moved by -0.175 to +0.050, three runs up, three down.
    average_last: float = 0.0
    batch_tasks: int = 8
    group_size: int = 32
    clip: float = 0.5
    seed: int = 0
    threads: int | None = None


class ActiveColumn(nn.Module):
    """A MambaCostModel that also reads a frozen KB's hidden states through gated adaptors.

    from_kb: the column starts as a copy of the KB with zeroed adaptors (so it starts as the KB
    and fine-tunes from there); otherwise it starts fresh (Progress & Compress as published)."""

    def __init__(self, kb: MambaCostModel, alpha_init: float = 0.1, from_kb: bool = True):
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


def platform_hardware(data: ProgramData, task_ids) -> list[list[float]]:
    """The distinct hardware descriptors of these tasks' programs (one per platform)."""
    return np.unique(data.hardware[data.programs_of(task_ids)], axis=0).tolist()


class OnlineEWC:
    """One running Fisher and one anchor over all platforms seen so far, and those platforms'
    hardware descriptors (what compress keeps the KB's scores under)."""

    def __init__(self, fisher: dict | None = None, anchor: dict | None = None, platforms: int = 0,
                 hardware: list | None = None):
        self.fisher, self.anchor, self.platforms = fisher, anchor, platforms
        self.hardware = [list(map(float, h)) for h in (hardware or [])]

    def penalty(self, model: nn.Module, lam: float) -> torch.Tensor:
        if self.fisher is None:
            return torch.zeros(())
        total = torch.zeros(())
        for name, p in model.named_parameters():
            total = total + (self.fisher[name] * (p - self.anchor[name]) ** 2).sum()
        return 0.5 * lam * total

    def consolidate(self, model: nn.Module, data: ProgramData, task_ids, cfg: CKDConfig):
        """Folds the model's Fisher on these programs into the running one; moves the anchor."""
        fisher = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
        for p in model.parameters():
            p.requires_grad_(True)
        rng = np.random.default_rng(cfg.seed)
        groups = _groups(data, task_ids, cfg.group_size, rng)
        model.eval()  # no dropout noise in the curvature estimate
        for a in range(0, len(groups), cfg.batch_tasks):
            chunk = groups[a:a + cfg.batch_tasks]
            idx = np.concatenate(chunk)
            gid = torch.from_numpy(np.repeat(np.arange(len(chunk)), [len(g) for g in chunk]))
            model.zero_grad()
            lambda_rank_loss(model(*data.inputs(idx)), torch.from_numpy(data.label[idx]), gid).backward()
            for n, p in model.named_parameters():
                if p.grad is not None:
                    fisher[n] += p.grad.detach() ** 2
        scale = torch.cat([f.flatten() for f in fisher.values()]).mean().clamp(min=1e-12)
        fisher = {n: f / scale for n, f in fisher.items()}  # normalised per platform
        if self.fisher is not None:
            fisher = {n: cfg.gamma * self.fisher[n] + f for n, f in fisher.items()}
        self.fisher = fisher
        self.anchor = {n: p.detach().clone() for n, p in model.named_parameters()}
        self.platforms += 1
        for h in platform_hardware(data, task_ids):
            if h not in self.hardware:
                self.hardware.append(h)
        model.zero_grad()

    def state_dict(self) -> dict:
        return {"fisher": self.fisher, "anchor": self.anchor, "platforms": self.platforms, "hardware": self.hardware}

    @classmethod
    def from_state_dict(cls, state: dict | None) -> "OnlineEWC":
        return cls(**state) if state else cls()


def _standardise(scores: torch.Tensor, gid: torch.Tensor) -> torch.Tensor:
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


def _batches(data, task_ids, cfg, rng):
    groups = _groups(data, task_ids, cfg.group_size, rng)
    for a in range(0, len(groups), cfg.batch_tasks):
        chunk = groups[a:a + cfg.batch_tasks]
        idx = np.concatenate(chunk)
        yield idx, torch.from_numpy(np.repeat(np.arange(len(chunk)), [len(g) for g in chunk]))


def progress(kb: MambaCostModel, data: ProgramData, task_ids, cfg: CKDConfig) -> ActiveColumn:
    """Trains an active column on the new platform with the KB frozen."""
    _seed_everything(cfg.seed)
    ac = ActiveColumn(kb, cfg.alpha_init, cfg.column_from_kb)
    params = [p for p in ac.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    rng = np.random.default_rng(cfg.seed)
    ac.train()
    for _ in range(epochs_for_steps(data, task_ids, cfg.progress_epochs, cfg.min_steps, cfg.group_size, cfg.batch_tasks)):
        for idx, gid in _batches(data, task_ids, cfg, rng):
            loss = lambda_rank_loss(ac(*data.inputs(idx)), torch.from_numpy(data.label[idx]), gid)
            optimizer_step(opt, loss, params, cfg.clip)
    ac.eval()
    return ac


def _keep_old_platforms(kb, student, seq, lengths, emb, kb_emb, workload, gid, old_hw) -> torch.Tensor:
    """LambdaRank of the student's scores of these (new) programs under each earlier platform's
    descriptor against the order the incoming KB gives them there (labels: the KB's rank within
    the task scaled to (0, 1], its top program = 1), averaged over those platforms. A ranking loss,
    like the label term, so that it weighs the top of each task most (Top-1 is decided there).
    emb, kb_emb: the student's and the incoming KB's embeddings of the programs; a body without
    the steps' FiLM runs once for all descriptors, one with it once per descriptor."""
    total = torch.zeros(())
    for h in old_hw:
        hw = h.expand(len(emb), -1)
        emb_h = emb
        with torch.no_grad():
            if kb.body_reads_hardware:
                kb_emb = kb.embedding(seq, lengths, hw)
            target = _rank_labels(kb.head(kb_emb, workload, hw), gid)
        if student.body_reads_hardware:
            emb_h = student.embedding(seq, lengths, hw)
        total = total + lambda_rank_loss(student.head(emb_h, workload, hw), target, gid)
    return total / len(old_hw)


def _mixed_programs(seq, lengths, workload, gid, rng):
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
def _frozen_outputs(kb: MambaCostModel, ac: ActiveColumn, data: ProgramData, task_ids, chunk: int = 512):
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


def _rank_labels(scores: torch.Tensor, gid: torch.Tensor) -> torch.Tensor:
    """(rank from the bottom + 1) / programs, within each group: the top-scored program gets 1."""
    out = torch.empty_like(scores)
    for k in torch.unique(gid):
        m = gid == k
        out[m] = (_ranks(scores[m]) + 1) / int(m.sum())
    return out


class DescriptorProjection:
    """Keeps the KB's scores under earlier platforms' descriptors exactly as they were while the
    parameters that read the descriptor learn a new platform (CKDConfig.preserve = "exact").

    Those parameters act on the descriptor linearly before any nonlinearity: the FiLM layers on
    d = h - hardware_ref, the descriptor adapters' up-projections on d (x) (A x) (so their
    projector is the FiLM one's Kronecker product with the identity of the rank), the hardware
    projection's first Linear on [h, 1]. So a change dW leaves
    every earlier platform's output alone iff dW x = 0 for each earlier input x: after every
    optimizer step the change from the incoming KB's weights is projected onto the orthogonal
    complement of the earlier inputs' span. The rest of the KB is frozen, so old scores are
    unchanged (up to float rounding). One platform uses one dimension of each input space, so a
    KB can tell apart at most hardware_dim + 1 platforms this way (13 here); a new platform whose
    descriptor lies in the earlier ones' span has nothing left to learn with (ValueError).

    gain = |d| / |P d| for the new platform's d: how much the projection shrinks what the new
    platform's input leaves to learn with. A step of the same size then moves the new platform's
    scores gain times less, so compress multiplies the learning rate by it (1 for the second
    platform, whose only earlier input is the reference's zero)."""

    def __init__(self, model: MambaCostModel, old_hw: list, new_hw: list):
        self.sites = []  # (weight, bias or None, projector P, weight's incoming value, bias's)
        self.gain = 1.0
        ref = model.hardware_ref if model.hardware_film is not None else None
        if ref is not None:
            new_d = [torch.as_tensor(h) - ref for h in new_hw]
            delta = self._projector([torch.as_tensor(h) - ref for h in old_hw], new_d)
            self.gain = float(np.mean([float(d.norm() / (delta @ d.float()).norm()) for d in new_d]))
            for film in (model.hardware_film, model.hardware_film_steps):
                if film is not None:
                    self._add(film, delta)
            # an adapter's input is d (x) (A x), flattened with d's index outermost
            for adapter in model.adapters():
                self._add(adapter.up, torch.kron(delta, torch.eye(adapter.rank)))
        if model.hardware_proj is not None:
            one = torch.ones(1)
            self._add(model.hardware_proj[0], self._projector([torch.cat([torch.as_tensor(h), one]) for h in old_hw],
                                                              [torch.cat([torch.as_tensor(h), one]) for h in new_hw]))

    @staticmethod
    def _projector(old_inputs, new_inputs) -> torch.Tensor:
        """The orthogonal projector onto the complement of the old inputs' span."""
        proj = torch.eye(len(new_inputs[0]))
        if old_inputs:
            x = torch.stack(old_inputs).float()
            u, s, _ = torch.linalg.svd(x.T, full_matrices=False)
            basis = u[:, s > 1e-6 * max(float(s.max()), 1e-12)]
            proj = proj - basis @ basis.T
        for h in new_inputs:
            if float((proj @ h.float()).norm()) <= 1e-4 * max(float(h.norm()), 1e-12):
                raise ValueError("the new platform's hardware descriptor is a combination of earlier platforms' "
                                 "(or the same): exact preservation leaves it nothing to learn with; "
                                 "use CKDConfig(preserve='keep') (tcl distill --preserve keep)")
        return proj

    def _add(self, linear: nn.Linear, proj: torch.Tensor):
        bias = linear.bias
        assert proj.shape[0] == linear.in_features + (bias is not None)
        self.sites.append((linear.weight, bias, proj, linear.weight.detach().clone(),
                           None if bias is None else bias.detach().clone()))

    @torch.no_grad()
    def apply(self):
        for weight, bias, proj, w0, b0 in self.sites:
            dw = weight - w0 if bias is None else torch.cat([weight - w0, (bias - b0)[:, None]], 1)
            dw = dw @ proj
            weight.copy_(w0 + dw[:, :weight.shape[1]])
            if bias is not None:
                bias.copy_(b0 + dw[:, -1])


def compress(kb: MambaCostModel, ac: ActiveColumn, ewc: OnlineEWC, data: ProgramData, task_ids,
             cfg: CKDConfig, on_epoch=None) -> MambaCostModel:
    """Distils the AC into a copy of the KB (gated), with the label ranking loss; the earlier
    platforms kept exactly (preserve "exact") or by the old-hardware term and online EWC ("keep").
    on_epoch(epoch, student): called after each epoch (1-based), before any averaging."""
    if cfg.preserve not in ("exact", "keep"):
        raise ValueError(f"CKDConfig.preserve: 'exact' or 'keep', not {cfg.preserve!r}")
    _seed_everything(cfg.seed + 1)
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
    all_teacher, all_kb_emb = _frozen_outputs(kb, ac, data, task_ids)
    # exact, with a body that ignores the descriptor: it is frozen, so its embeddings are the incoming KB's
    cached = exact and all_kb_emb is not None
    student.train()
    epochs = epochs_for_steps(data, task_ids, cfg.compress_epochs, cfg.min_steps, cfg.group_size, cfg.batch_tasks)
    averaged = LastEpochsAverage(epochs, cfg.average_last)
    for epoch in range(1, epochs + 1):
        for idx, gid in _batches(data, task_ids, cfg, rng):
            seq, lengths, workload, hardware = data.inputs(idx)
            labels = torch.from_numpy(data.label[idx])
            teacher = all_teacher[idx]
            with torch.no_grad():
                g = gate(teacher, labels, gid) if cfg.gated else torch.ones_like(teacher)
            emb = all_kb_emb[idx] if cached else student.embedding(seq, lengths, hardware)
            s = student.head(emb, workload, hardware)
            distill = (g * (_standardise(s, gid) - _standardise(teacher, gid)) ** 2).mean()
            loss = distill + cfg.beta * lambda_rank_loss(s, labels, gid)
            if exact:
                optimizer_step(opt, loss, hw_params, cfg.clip)
                projection.apply()
                continue
            loss = loss + ewc.penalty(student, cfg.ewc_lambda)
            if old_hw and cfg.keep_old:
                kb_emb = None if all_kb_emb is None else all_kb_emb[idx]
                keep = _keep_old_platforms(kb, student, seq, lengths, emb, kb_emb, workload, gid, old_hw)
                if cfg.keep_old_mix and int(gid.max()) > 0:
                    m_seq, m_len, m_wl = _mixed_programs(seq, lengths, workload, gid, rng)
                    m_kb_emb = None
                    if not kb.body_reads_hardware:  # otherwise computed per old descriptor
                        with torch.no_grad():
                            m_kb_emb = kb.embedding(m_seq, m_len, hardware)
                    keep = (keep + _keep_old_platforms(kb, student, m_seq, m_len, student.embedding(m_seq, m_len, hardware),
                                                       m_kb_emb, m_wl, gid, old_hw)) / 2
                loss = loss + cfg.keep_old * keep
            optimizer_step(opt, loss, student.parameters(), cfg.clip)
        if on_epoch is not None:
            on_epoch(epoch, student)
        averaged.after_epoch(epoch, student)
    averaged.finish(student)
    student.eval()
    return student


def learn_platform(kb: MambaCostModel, ewc: OnlineEWC, data: ProgramData, task_ids, cfg: CKDConfig):
    """progress -> compress -> consolidate on one new platform; returns (new KB, EWC, seconds)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    ac = progress(kb, data, task_ids, cfg)
    new_kb = compress(kb, ac, ewc, data, task_ids, cfg)
    ewc.consolidate(new_kb, data, task_ids, cfg)
    return new_kb, ewc, time.perf_counter() - t0


def sampled_subset(data: ProgramData, task_ids, fraction: float, seed: int = 0, threads: int | None = None,
                   progress_bar: bool = False):
    """The new platform's programs the RDU sampler picks (`fraction` of each task's programs),
    labelled from their measurements alone; returns (those programs, their task ids, the
    sampler's last model: one trained from scratch on them).

    The latencies come from the dataset (LookupOracle): for a platform not yet measured, run
    `tcl sample` with a TVM oracle instead and distil on what it measured."""
    from .sampling.sampler import LookupOracle, SamplingConfig, run_sampling

    res = run_sampling(data, task_ids, SamplingConfig(method="rdu", fraction=fraction, seed=seed, threads=threads),
                       LookupOracle(data.cost), progress=progress_bar)
    sub = data.measured(res.selected, res.costs)
    return sub, sorted({int(t) for t in sub.task}), res.model


def first_platform(data: ProgramData, task_ids, cfg: CKDConfig, model_config: dict | None = None):
    """The KB of the first platform: plain training, then its Fisher; returns (KB, EWC, seconds)."""
    from .train import train

    t0 = time.perf_counter()
    kb, _ = train(data, task_ids, (), arch="mamba", model_config=model_config,
                  epochs=cfg.progress_epochs + cfg.compress_epochs, lr=cfg.lr, seed=cfg.seed,
                  threads=cfg.threads, progress=False, min_steps=2 * cfg.min_steps,
                  average_last=cfg.average_last)
    if cfg.hardware_film:
        kb = with_hardware_film(kb, platform_hardware(data, task_ids)[0], steps=cfg.hardware_film_steps,
                                adapter_rank=cfg.hardware_adapter_rank)
    ewc = OnlineEWC()
    ewc.consolidate(kb, data, task_ids, cfg)
    return kb, ewc, time.perf_counter() - t0


def with_hardware_film(model: MambaCostModel, reference, steps: bool = True, adapter_rank: int = 0) -> MambaCostModel:
    """The same model with FiLM layers relative to `reference` (a hardware descriptor): it
    scores every program as before under that descriptor; under another, the FiLM weights
    (zero here) rescale the pooled embedding and (steps) every step's encoder output, and
    (adapter_rank > 0) descriptor adapters change the encoder, in_proj and head. The KB
    gets them before it learns a second platform, so its size stays constant from then on."""
    if model.hardware_film is not None:
        return model  # a KB already: its reference and layers stay
    out = MambaCostModel(replace(model.cfg, hardware_film=True, hardware_film_steps=steps,
                                 hardware_adapter_rank=adapter_rank))
    missing = out.load_state_dict(model.state_dict(), strict=False).missing_keys
    assert all(k.startswith("hardware_") or "adapter" in k for k in missing), missing
    with torch.no_grad():
        out.hardware_ref.copy_(torch.as_tensor(reference, dtype=torch.float32))
    return out.train(model.training)


def save_kb(path, kb: MambaCostModel, ewc: OnlineEWC, meta: dict):
    """A tcl checkpoint (tcl eval / tcl export read it) that also carries the EWC state."""
    from .train import save_checkpoint

    save_checkpoint(path, kb, "mamba", meta, ewc=ewc.state_dict())


def load_kb(path) -> tuple[MambaCostModel, OnlineEWC, dict]:
    from .errors import FormatError
    from .train import load_checkpoint

    kb, ck = load_checkpoint(path)
    if ck["arch"] != "mamba":
        raise FormatError(f"{path}: a knowledge base must be a Mamba cost model, not {ck['arch']!r}")
    if not ck.get("ewc"):
        raise FormatError(f"{path}: no EWC state; make the first knowledge base with "
                          "`tcl distill --data FIRST_PLATFORM --out KB.pt`")
    try:
        ewc = OnlineEWC.from_state_dict(ck["ewc"])
    except (TypeError, ValueError) as e:
        raise FormatError(f"{path}: the EWC state is not one `tcl distill` wrote ({e})") from None
    return kb, ewc, ck
