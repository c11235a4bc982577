"""The settings of continual distillation (CKD) and of the baselines it is compared with.

No torch here, so `tcl distill --help` shows these defaults without loading it. Why each default
is what it is: docs/continual.md, with the measurements in docs/results.md (continual, ckd_variants).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..train_config import TrainConfig

__all__ = ["PRESERVE", "CKDConfig"]

PRESERVE = ("exact", "keep")  # how compress keeps the earlier platforms (CKDConfig.preserve)


@dataclass(frozen=True)
class CKDConfig:
    progress_epochs: int = 20  # epochs of the active column on the new platform
    compress_epochs: int = 20  # epochs of the KB learning from the column
    min_steps: int = 200  # per phase: small (sampled) platforms get more epochs (tcl.train.epochs_for_steps)
    lr: float = TrainConfig.lr
    beta: float = 1.0  # weight of the label ranking loss in compress
    # Weight of tcl.model.losses.log_ratio_loss beside every LambdaRank label term; off, as in
    # tcl train: adapting to a new host from a tenth of its programs ranked worse with it.
    log_ratio_weight: float = TrainConfig.log_ratio_weight
    # "exact": only the parameters that read the hardware descriptor learn, and their change is
    # projected so that the KB's scores under every earlier descriptor stay what they were;
    # "keep": the whole KB learns, held by the old-hardware ranking term (keep_old) and EWC.
    preserve: str = "exact"
    # preserve "keep" only. Online EWC's strength: off, since under Adam the penalty pinned the
    # body and pushed the change into the shared head, and the KB forgot more with it.
    ewc_lambda: float = 0.0
    keep_old: float = 1.0  # mu: weight of keeping the KB's rankings under the earlier descriptors
    # ... also on mixtures of two tasks' programs (compress.mixed_programs); off: it cost the new
    # platform accuracy.
    keep_old_mix: bool = False
    gamma: float = 0.99  # online-EWC decay of the earlier platforms' Fisher
    gated: bool = True  # weigh distillation per program by how well the column ranks it (compress.gate)
    alpha_init: float = 0.1  # the column's lateral gates start here
    column_from_kb: bool = True  # the active column starts as a copy of the KB (False: fresh, as in P&C)
    hardware_lr: float = 10.0  # compress: learning-rate multiplier of the descriptor-reading parameters
    # exact: that rate also times DescriptorProjection.gain, so a platform whose descriptor is close
    # to the earlier ones' span learns as fast as one far from it
    projected_lr: bool = True
    hardware_film: bool = True  # the first KB gets FiLM layers that read the descriptor
    hardware_film_steps: bool = True  # ... on every step's encoder output too, not only the pooled embedding
    hardware_adapter_rank: int = 4  # the first KB's descriptor adapters (0: none; needs hardware_film)
    # > 0: the first KB and each compressed KB are the mean of their weights over this last fraction
    # of the epochs (exact preservation holds for the mean too). Off: not better on average.
    average_last: float = 0.0
    # > 0: this fraction of the new platform's tasks is held back from both phases, and the KB keeps
    # the compress epoch (0: the KB as it came) whose mean Top-1 on them is best (learn.EpochChoice).
    # Off: on a tenth of a host's programs the held-back Top-1 moved from epoch to epoch with no trend.
    check_fraction: float = 0.0
    batch_tasks: int = TrainConfig.batch_tasks
    group_size: int = TrainConfig.group_size
    clip: float = TrainConfig.clip
    seed: int = TrainConfig.seed
    threads: int | None = TrainConfig.threads

    @property
    def single_model_epochs(self) -> int:
        """Epochs of a model trained in one phase (the first KB, and the baselines that train a
        model directly): both phases' epochs, so every method trains for as long."""
        return self.progress_epochs + self.compress_epochs

    def train_config(self) -> TrainConfig:
        """The TrainConfig of a model trained in one phase: both phases' epochs and minimum steps."""
        return TrainConfig(epochs=self.single_model_epochs, lr=self.lr, clip=self.clip, batch_tasks=self.batch_tasks,
                           group_size=self.group_size, min_steps=2 * self.min_steps,
                           average_last=self.average_last, log_ratio_weight=self.log_ratio_weight, seed=self.seed,
                           threads=self.threads)
