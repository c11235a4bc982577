"""A dataset's task directories: naming, the held-out split, and task.json."""
from __future__ import annotations

import json
from pathlib import Path

from tvm.target import Target

from ..atomic import write_json
from . import networks as nets


def task_dir(out_dir: Path, task: nets.Task) -> Path:
    """The task's directory: an existing one with the same structural hash, else <name>-<shash>."""
    found = sorted(out_dir.glob(f"*-{task.shash}"))
    return found[0] if found else out_dir / f"{task.name}-{task.shash}"


def held_out_hashes(target: Target, out_dir: Path | None = None, held_out=nets.HELD_OUT,
                    conv_layouts=nets.DATASET_CONV_LAYOUTS, prepack_weights: bool = False) -> set[str]:
    """Structural hashes of every task of the held-out networks in each of `conv_layouts`, weights
    prepacked or not (cached in out_dir)."""
    cache = out_dir / ".held_out_tasks.json" if out_dir is not None else None
    if cache is not None and cache.exists():
        data = json.loads(cache.read_text())
        if (sorted(data["hashes"]) == sorted(held_out) and data.get("conv_layouts") == list(conv_layouts)
                and data.get("prepack_weights", False) == prepack_weights):
            return {h for hs in data["hashes"].values() for h in hs}
    hashes = {n: sorted(t.shash for t in nets.tasks_for(n, target, conv_layouts=conv_layouts,
                                                          prepack_weights=prepack_weights)) for n in held_out}
    if cache is not None:
        write_json(cache, {"target": str(target), "conv_layouts": list(conv_layouts),
                           "prepack_weights": prepack_weights, "hashes": hashes})
    return {h for hs in hashes.values() for h in hs}


def task_split(info: dict, held_out: set[str], held_out_networks=nets.HELD_OUT) -> str:
    """'test' for a task of a held-out network or shared with one, else 'train'."""
    if info["shash"] in held_out or set(info.get("networks", [])) & set(held_out_networks):
        return "test"
    return "train"


def update_task_info(d: Path, task: nets.Task, network: str, split: tuple | None, **extra) -> dict:
    """Create or update task.json; split = (held-out hashes, held-out networks) or None."""
    path = d / "task.json"
    info = json.loads(path.read_text()) if path.exists() else {
        "name": task.name, "shash": task.shash, "flops": task.flops, "weight": task.weight,
        "weights": {}, "networks": []}
    info["weights"][network] = task.weight
    if network not in info["networks"]:
        info["networks"].append(network)
    if split is not None:
        info["split"] = task_split(info, *split)
    info.update(extra)
    write_json(path, info)
    return info


def count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0
