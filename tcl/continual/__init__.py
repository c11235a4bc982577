"""Continual learning across hardware platforms: continual knowledge distillation (CKD, Progress &
Compress with a gate) and the baselines it is compared with.

The knowledge base (KB) is the deployable MambaCostModel; the hardware descriptor is one of its
inputs, so one KB serves every platform it has learned. For a new platform:

1. progress (phases.py, column.py): an active column learns the new platform while the KB is frozen;
2. compress (phases.py): the KB learns from the column and the labels, keeping the earlier
   platforms exactly (descriptor.py) or by a ranking term and EWC (ewc.py);
3. consolidate (ewc.py): the platform's descriptor and Fisher join the KB's state.

learn.py runs the phases, kb.py reads and writes KB files, config.py holds every setting
(CKDConfig), baselines.py the methods CKD is compared with. How and why: docs/continual.md.

The names below are importable from this package; torch is loaded only when one is used, so the
command line can read CKDConfig without it.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "CKDConfig": "config", "PRESERVE": "config",
    "ActiveColumn": "column", "progress": "phases",
    "compress": "phases", "gate": "phases",
    "DescriptorProjection": "descriptor", "platform_hardware": "descriptor", "with_hardware_film": "descriptor",
    "OnlineEWC": "ewc",
    "first_platform": "learn", "learn_platform": "learn", "sampled_subset": "learn",
    "load_kb": "kb", "save_kb": "kb",
    "MultiHead": "baselines", "SharedModel": "baselines", "finetune": "baselines", "joint": "baselines",
    "separate": "baselines",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
