"""The sampling methods, one class each, in one registry: RDU and the baselines it is compared with.

Every method picks `budget[g]` new programs of each task g from the candidates not yet measured,
given program embeddings `x` (rows) and, where it needs them, the model's signals: the uncertainty
`u`, the predicted score `p` (higher = faster) and the top probability `q` per program. Scores are
normalised to [0, 1] within each task at every call (one call = one sampling round), so the weights
mean the same on every task and round.

Besides how it picks, a method says what the sampling loop (tcl.sampling.sampler) and the tools
around it need to know of it: which method picks in its place while no model exists yet (`round0`),
what R and D measure distances on by default once a model exists (`embedding`), whether it reads a
model or the embedding at all, and which fields of `Weights` its picks read. The command line and
bench/sampling.py take the method names and these properties from here.

R (representativeness), r_kind "density": 1 / (1 + mean distance to the k nearest neighbours in the
task), fixed during a round; r_kind "coverage": the gain in a facility-location objective on the
task's kNN graph (how much of the not-yet-covered neighbourhood the program would stand for,
kernels.greedy_select with coverage_k), updated after every pick so that a dense region stops
pulling once one of its programs is picked.
D (diversity) = distance to the nearest measured/picked program, over its maximum.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from . import kernels
from .strategies import Weights, normalize_per_group, representativeness, score_axis_embedding

# What each model signal is, for the error raised when a method lacks one.
SIGNALS = {"u": "the model's uncertainty u", "p": "the model's predicted scores p",
           "q": "the top probabilities q (strategies.top_probability)"}


class SamplingMethod:
    """One way of choosing the programs to measure next. Subclasses set the class attributes and
    pick(); `register` adds one instance to the registry under its name."""

    name: ClassVar[str] = ""
    round0: ClassVar[str] = "rd"  # the method that picks in its place while no model exists yet
    embedding: ClassVar[str] = "model"  # what R and D measure on by default (sampler.EMBEDDINGS)
    uses_model: ClassVar[bool] = True  # False: its picks never read a model, in any round
    reads_embedding: ClassVar[bool] = True  # False: its picks ignore x (no R, no D)
    weight_fields: ClassVar[tuple[str, ...]] = ()  # the fields of Weights its picks read

    def needs(self, weights: Weights) -> tuple[str, ...]:
        """The model signals (keys of SIGNALS) its picks read under these weights."""
        return ()

    @property
    def weight_fields_read(self) -> frozenset[str]:
        """The fields of Weights a sampling run of this method reads: its own and, for its round
        without a model, those of its round-0 method."""
        fields = set(self.weight_fields)
        if self.round0 != self.name:
            fields |= set(get_method(self.round0).weight_fields)
        return frozenset(fields)

    def pick(self, x, group, budget, selected, *, u=None, p=None, q=None, weights: Weights = Weights(),
             rng: np.random.Generator | None = None, threads: int = 0) -> np.ndarray:
        """Indices of the programs to measure next, task by task (inputs as strategies.select
        passes them: x float32 rows, group int32, budget int64, selected bool)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<sampling method {self.name}>"


REGISTRY: dict[str, SamplingMethod] = {}


def register(cls: type[SamplingMethod]) -> type[SamplingMethod]:
    """Class decorator: adds an instance of the method to REGISTRY under its name."""
    if not cls.name or cls.name in REGISTRY:
        raise ValueError(f"a sampling method needs a name of its own, not {cls.name!r}")
    REGISTRY[cls.name] = cls()
    return cls


def get_method(method: str | SamplingMethod) -> SamplingMethod:
    """The registered method of that name (a SamplingMethod is returned as it is)."""
    if isinstance(method, SamplingMethod):
        return method
    try:
        return REGISTRY[method]
    except (KeyError, TypeError):
        raise ValueError(f"unknown sampling method {method!r}; choose one of {', '.join(REGISTRY)}") from None


def method_names() -> tuple[str, ...]:
    """The registered method names, RDU first."""
    return tuple(REGISTRY)


def _per_task(group, budget, selected, choose) -> np.ndarray:
    """Concatenated choose(candidates of task g, budget of g) over the tasks."""
    picks = []
    for g, b in enumerate(budget):
        cand = np.nonzero((group == g) & ~selected)[0]
        picks.append(choose(cand, b))
    return np.concatenate(picks).astype(np.int64) if picks else np.zeros(0, np.int64)


class _Greedy(SamplingMethod):
    """Greedy wr * R + wd * D + wu * U per task, D updated after every pick (kernels.greedy_select)."""

    def terms(self, x, group, u, p, q, weights: Weights, threads: int):
        """(rows, R, U, (wr, wd, wu), coverage_k) of the greedy score; coverage_k > 0: R is the
        coverage gain, computed by the kernel itself."""
        raise NotImplementedError

    def pick(self, x, group, budget, selected, *, u=None, p=None, q=None, weights: Weights = Weights(),
             rng=None, threads: int = 0) -> np.ndarray:
        x, r, un, wts, coverage_k = self.terms(x, group, u, p, q, weights, threads)
        return kernels.greedy_select(x, group, budget, r, un, selected, wts, threads, coverage_k=coverage_k)


class _RD(_Greedy):
    """R + D with RDU's R and weights of R and D."""

    weight_fields = ("r", "d", "r_kind", "k")

    def representativeness(self, x, group, weights: Weights, threads: int):
        """(R, coverage_k): R from the kNN density, or zeros and coverage_k for the coverage gain."""
        if weights.r_kind == "coverage":
            return np.zeros(len(group)), weights.k
        return normalize_per_group(representativeness(x, group, weights.k, threads), group), 0

    def terms(self, x, group, u, p, q, weights, threads):
        r, coverage_k = self.representativeness(x, group, weights, threads)
        return x, r, np.zeros(len(group)), (weights.r, weights.d, 0.0), coverage_k


@register
class RDU(_RD):
    """wr * R + wd * D + wu * U, greedy. U is the spread of the model's scores sigma, plus u_speed x
    the predicted score p when u_speed > 0 (then U is an upper confidence bound p + sigma: for a
    Top-k metric only the programs that may be among the fastest need their rank known); with
    u_kind "top", U is instead the probability q that the program is among the top `top_fraction`
    of its task (strategies.top_probability): uncertain about the one question Top-k asks. With
    score_axis > 0, R and D measure distances in x plus one coordinate, the rank of p within the
    task (strategies.score_axis_embedding), to spread the picks over the predicted speed (measured,
    not the default: docs/sampling.md). R and D measure on the pooled feature rows by default: U
    already brings the model's view, so the three signals look at two views."""

    name = "rdu"
    embedding = "features"
    weight_fields = _RD.weight_fields + ("u", "u_speed", "u_kind", "top_fraction", "score_axis")

    def needs(self, weights):
        out = ["q"] if weights.u_kind == "top" else ["u"] + (["p"] if weights.u_speed else [])
        if weights.score_axis > 0 and "p" not in out:
            out.append("p")
        return tuple(out)

    def terms(self, x, group, u, p, q, weights, threads):
        if weights.score_axis > 0:
            x = score_axis_embedding(x, p, group, weights.score_axis)
        r, coverage_k = self.representativeness(x, group, weights, threads)
        if weights.u_kind == "top":
            un = q
        else:
            un = np.asarray(u, np.float64) + (weights.u_speed * np.asarray(p, np.float64) if weights.u_speed else 0.0)
        return x, r, normalize_per_group(un, group), (weights.r, weights.d, weights.u), coverage_k


@register
class RD(_RD):
    """R + D, no uncertainty: RDU without U (the same R and weights of R and D)."""

    name = "rd"


@register
class Diversity(_Greedy):
    """D only: greedy k-center. Needs no model signal, so it picks as itself in round 0 too."""

    name = "diversity"
    round0 = "diversity"

    def terms(self, x, group, u, p, q, weights, threads):
        zeros = np.zeros(len(group))
        return x, zeros, zeros, (0.0, 1.0, 0.0), 0


@register
class BiasedDiversity(_Greedy):
    """D + bias x predicted speed: diversity toward fast programs (BALTO-like)."""

    name = "biased_diversity"
    weight_fields = ("bias",)

    def needs(self, weights):
        return ("p",)

    def terms(self, x, group, u, p, q, weights, threads):
        return x, normalize_per_group(p, group), np.zeros(len(group)), (weights.bias, 1.0, 0.0), 0


@register
class Uncertainty(SamplingMethod):
    """The programs the model is least sure of, by the spread of its MC-dropout scores (ALT-like)."""

    name = "uncertainty"
    reads_embedding = False

    def needs(self, weights):
        return ("u",)

    def pick(self, x, group, budget, selected, *, u=None, p=None, q=None, weights=Weights(), rng=None,
             threads=0):
        un = normalize_per_group(u, group)
        return _per_task(group, budget, selected, lambda cand, b: cand[np.argsort(-un[cand], kind="stable")[:b]])


@register
class Random(SamplingMethod):
    """Uniform picks within each task; no model in any round."""

    name = "random"
    round0 = "random"
    uses_model = False
    reads_embedding = False

    def pick(self, x, group, budget, selected, *, u=None, p=None, q=None, weights=Weights(), rng=None,
             threads=0):
        rng = rng or np.random.default_rng(0)
        return _per_task(group, budget, selected,
                         lambda cand, b: rng.choice(cand, size=min(b, len(cand)), replace=False))
