"""The settings of `tcl adapt` (no TVM import: `tcl adapt --help` works without apache-tvm)."""
from __future__ import annotations

from dataclasses import dataclass

from ..sampling.sampler import SamplingConfig


@dataclass(frozen=True)
class AdaptConfig:
    fraction: float | None = SamplingConfig.fraction  # measure this share of each task's candidate pool
    count: int | None = None  # ... or this many programs in total (instead of fraction)
    minutes: float | None = None  # stop measuring after this long from the start; what is measured is used
    pool_size: int = 256  # candidates generated per task, none measured
    random_fraction: float = 0.5  # share of the pool from replay-trace; the rest from evolutionary search
    population: int = 128  # evolutionary search's population while the pools are made
    rounds: int = SamplingConfig.rounds  # the measuring budget is spent over this many rounds
    repeat: int = 3  # runs per measured program, as tcl collect
    min_repeat_ms: int = 100  # each run at least this long, as tcl collect
    seed: int = 0
    threads: int | None = None  # torch threads (training); None: torch's own choice
