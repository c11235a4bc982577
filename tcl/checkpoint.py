"""Model checkpoints: a torch state dict with the architecture, its config, the feature spec and
hardware-descriptor sizes it reads, and free metadata (e.g. the tasks it trained on).

Loading checks all of it, so a file from another tcl, a broken file or another kind of file fails
with one FormatError that names the path and what is wrong. Only tensors and plain values are
stored, read back with weights_only.
"""

from __future__ import annotations

import torch

from .architectures import ARCHS
from .errors import FormatError
from .features import SPEC
from .hardware import HARDWARE_DIM

__all__ = ["CHECKPOINT_FORMAT", "load_checkpoint", "save_checkpoint"]

CHECKPOINT_FORMAT = "tcl-cost-model/1"


def save_checkpoint(path, model, arch: str, meta: dict, **extra):
    """Writes the checkpoint whole or not at all; `extra` entries (e.g. EWC state) go beside the weights."""
    from .atomic import atomic_path

    with atomic_path(path) as tmp:
        torch.save({"format": CHECKPOINT_FORMAT, "arch": arch, "config": model.cfg.to_dict(),
                    "state_dict": model.state_dict(), "spec_version": SPEC.version,
                    "hardware_dim": HARDWARE_DIM, "meta": meta, **extra}, tmp)


def _check_fields(path, ck: dict):
    for key, kind in (("spec_version", int), ("hardware_dim", int), ("arch", str), ("config", dict),
                      ("state_dict", dict), ("meta", dict)):
        if key not in ck and key != "meta":
            raise FormatError(f"{path}: the checkpoint has no {key!r}")
        if key in ck and not isinstance(ck[key], kind):
            raise FormatError(f"{path}: the checkpoint's {key!r} must be of type {kind.__name__}, "
                              f"not {type(ck[key]).__name__}")
    SPEC.check(ck["spec_version"], what=f"model {path}")
    if ck["hardware_dim"] != HARDWARE_DIM:
        raise FormatError(f"model {path} reads {ck['hardware_dim']} hardware fields, this tcl has "
                          f"{HARDWARE_DIM}: retrain it with this version of tcl")
    if ck["arch"] not in ARCHS:
        raise FormatError(f"{path}: unknown model architecture {ck['arch']!r} (this tcl has {sorted(ARCHS)})")


def load_checkpoint(path) -> tuple[torch.nn.Module, dict]:
    """(model in eval mode, checkpoint without the weights). Refuses another feature spec."""
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as e:  # pickle/zip errors: not a torch file at all
        raise FormatError(f"{path}: not a tcl model checkpoint ({e})") from e
    if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
        raise FormatError(f"{path}: not a tcl model checkpoint (no format {CHECKPOINT_FORMAT!r})")
    _check_fields(path, ck)
    cfg_cls, model_cls = ARCHS[ck["arch"]]
    try:
        model = model_cls(cfg_cls(**ck["config"]))
    except Exception as e:  # unknown fields (TypeError), sizes no layer can take
        raise FormatError(f"{path}: the checkpoint's config does not make a {ck['arch']} model ({e})") from e
    try:
        model.load_state_dict(ck.pop("state_dict"))
    except RuntimeError as e:  # missing, unexpected or differently shaped weights
        first = str(e).strip().splitlines()
        raise FormatError(f"{path}: the weights do not match the checkpoint's config "
                          f"({' '.join(x.strip() for x in first[:3])[:300]})") from None
    model.eval()
    return model, ck
