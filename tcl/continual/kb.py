"""Knowledge-base files: a tcl model checkpoint (tcl eval and tcl export read it like any other)
that also carries the online-EWC state, with it the platforms' hardware descriptors."""

from __future__ import annotations

from ..checkpoint import load_checkpoint, save_checkpoint
from ..errors import FormatError
from ..model.cost_model import MambaCostModel
from .ewc import OnlineEWC

__all__ = ["load_kb", "save_kb"]


def save_kb(path, kb: MambaCostModel, ewc: OnlineEWC, meta: dict):
    """Writes the KB and its EWC state whole or not at all."""
    save_checkpoint(path, kb, "mamba", meta, ewc=ewc.state_dict())


def load_kb(path) -> tuple[MambaCostModel, OnlineEWC, dict]:
    """(KB, its EWC state, the checkpoint without the weights); FormatError for a file that is not
    one `tcl distill` wrote."""
    kb, ck = load_checkpoint(path)
    if ck["arch"] != "mamba":
        raise FormatError(f"{path}: a knowledge base must be a Mamba cost model, not {ck['arch']!r}")
    if not ck.get("ewc"):
        raise FormatError(f"{path}: no EWC state; make the first knowledge base with "
                          "`tcl distill FIRST_PLATFORM --out KB.pt`")
    try:
        ewc = OnlineEWC.from_state_dict(ck["ewc"])
    except (TypeError, ValueError) as e:
        raise FormatError(f"{path}: the EWC state is not one `tcl distill` wrote ({e})") from None
    return kb, ewc, ck
