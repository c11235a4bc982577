"""Scoring a trained cost model on datasets: Top-1/Top-5 and pairwise accuracy per task, per network
and pooled (tcl.metrics), on the tasks the model did not train on.

Which tasks: with `all_tasks`, every task; else the tasks task.json marks split "test" when any task
has a split; else the tasks the checkpoint did not train or validate on (so an Ansor log split with
`tcl train --test-fraction` is scored on exactly its held-out tasks, and a new dataset on all; a
model passed as an nn.Module carries no such record and is scored on all tasks).
"""

from __future__ import annotations

from pathlib import Path

from .errors import FormatError
from .features import FeatureSet, TaskInfo, featurize

__all__ = ["DEFAULT_MODEL", "default_model_path", "evaluate", "format_table", "task_names"]

DEFAULT_MODEL = Path(__file__).parent / "data" / "default_model.pt"


def default_model_path() -> Path:
    if not DEFAULT_MODEL.is_file():
        raise FileNotFoundError(
            f"no default model is shipped with this tcl yet ({DEFAULT_MODEL} is absent): pass "
            "--model MODEL.pt (train one with `tcl train DATA... --out MODEL.pt`)")
    return DEFAULT_MODEL


def task_names(tasks: list[TaskInfo]) -> list[str]:
    """A readable, unique name per task: task.json's name, else the workload key (+ target)."""
    names, seen = [], set()
    for i, t in enumerate(tasks):
        name = t.name or t.workload
        for candidate in (name, f"{name} @ {t.target}", f"{name} @ {t.target} #{i}"):
            if candidate not in seen:
                break
        seen.add(candidate)
        names.append(candidate)
    return names


def evaluate(model_or_checkpoint, data, all_tasks: bool = False, batch_size: int = 256,
             threads: int | None = None) -> dict:
    """Scores of a model (nn.Module, or a checkpoint path) on datasets (paths, a FeatureSet or a
    tcl.train.ProgramData).

    Returns {"pooled": {top1, top5, pairwise}, "networks": {net: {..., tasks}},
             "tasks": {name: {top1, top5, pairwise, programs}}, "model": {...}, "data": {...}}.
    """
    import torch

    from .metrics import evaluate_predictions
    from .train import ProgramData, load_checkpoint, predict, task_key

    if threads:
        torch.set_num_threads(threads)
    if isinstance(model_or_checkpoint, torch.nn.Module):
        model, ck, where = model_or_checkpoint, {}, None
    else:
        model, ck = load_checkpoint(model_or_checkpoint)
        where = str(model_or_checkpoint)
    if isinstance(data, ProgramData):
        pd = data
    else:
        pd = ProgramData(data if isinstance(data, FeatureSet) else featurize(data))
    meta = ck.get("meta", {})
    seen = set(meta.get("train_tasks", [])) | set(meta.get("val_tasks", []))
    if all_tasks:
        ids, chosen = list(range(len(pd.tasks))), "all"
    elif any(t.split for t in pd.tasks):
        ids, chosen = [i for i, t in enumerate(pd.tasks) if t.split == "test"], "split test"
    else:
        ids = [i for i, t in enumerate(pd.tasks) if task_key(t) not in seen]
        chosen = "not trained on"
    if not ids:
        raise FormatError("no held-out task in the data: the model trained on every task there "
                          "(or none is split 'test'); pass --all to score all tasks anyway")
    idx = pd.programs_of(ids)
    names = task_names(pd.tasks)
    nets = {names[i]: t.networks or {"all": t.weight} for i, t in enumerate(pd.tasks)}
    out = evaluate_predictions(pd.cost[idx], predict(model, pd, batch_size, idx), pd.task[idx],
                               names, nets)
    out["model"] = {"path": where, "arch": ck.get("arch", type(model).__name__),
                    "size_mb": round(model.size_mb(), 4)}
    out["data"] = {"programs": len(idx), "tasks": len(ids), "tasks_in_data": len(pd.tasks),
                   "chosen": chosen}
    return out


def _fmt(v) -> str:
    return "   -  " if v is None else f"{v:.4f}"


def format_table(result: dict, name_width: int = 48) -> str:
    """A readable table: pooled, then per network, then per task."""
    head = f"{'':<{name_width}} {'top1':>6} {'top5':>6} {'pairwise':>8} {'n':>6}"
    d, m = result["data"], result["model"]
    title = (f"model {m['path'] or m['arch']} ({m['arch']}, {m['size_mb']} MB); {d['tasks']} "
             f"of {d['tasks_in_data']} tasks ({d['chosen']}), {d['programs']} programs")
    lines = [title, head]

    def row(name, s, n):
        name = name if len(name) <= name_width else name[:name_width - 3] + "..."
        return (f"{name:<{name_width}} {_fmt(s['top1']):>6} {_fmt(s['top5']):>6} "
                f"{_fmt(s['pairwise']):>8} {n:>6}")

    lines.append(row("pooled", result["pooled"], d["tasks"]))
    lines.append("networks (n = tasks)")
    lines += [row("  " + k, v, v["tasks"]) for k, v in result["networks"].items()]
    lines.append("tasks (n = programs)")
    lines += [row("  " + k, v, v["programs"]) for k, v in result["tasks"].items()]
    return "\n".join(lines)
