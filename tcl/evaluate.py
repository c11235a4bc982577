"""Scoring a trained cost model on datasets: Top-1/Top-5 and pairwise accuracy per task, per network
and pooled (tcl.metrics), on the tasks the model did not train on.

Which tasks: with `all_tasks`, every task; else the tasks task.json marks split "test" when any task
has a split; else the tasks the checkpoint did not train or validate on (so an Ansor log split with
`tcl train --test-fraction` is scored on exactly its held-out tasks, and a new dataset on all; a
model passed as an nn.Module carries no such record and is scored on all tasks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import FormatError
from .features import FeatureSet, TaskInfo, featurize
from .hardware import target_label
from .metrics import TASK_MEAN_MIN_PROGRAMS, held_out_summary

__all__ = ["DEFAULT_MODEL", "default_model_path", "evaluate", "format_table", "task_label", "task_names",
           "workload_label"]

DEFAULT_MODEL = Path(__file__).parent / "data" / "default_model.pt"


def default_model_path() -> Path:
    if not DEFAULT_MODEL.is_file():
        raise FileNotFoundError(
            f"no default model is shipped with this tcl yet ({DEFAULT_MODEL} is absent): pass "
            "--model MODEL.pt (train one with `tcl train DATA... --out MODEL.pt`)")
    return DEFAULT_MODEL


_HASH = re.compile(r"[0-9a-f]{32}")  # a TenSet workload key's first element: a hash, no operator name


def workload_label(key: str) -> str:
    """An Ansor workload key as `operator(arguments)`, e.g. "ansor_mm(1000,800,700,"float32")"; a
    TenSet key, whose first element is a hash of the computation, shows the hash's first 8 digits
    in place of the operator. Anything else is returned as it is."""
    try:
        w = json.loads(key)
    except (json.JSONDecodeError, RecursionError):
        return key
    if not (isinstance(w, list) and w and isinstance(w[0], str)):
        return key
    head = w[0][:8] if _HASH.fullmatch(w[0]) else w[0]
    return f"{head}({','.join(json.dumps(a, separators=(',', ':')) for a in w[1:])})"


def task_label(t: TaskInfo) -> str:
    """What a task is, readably: task.json's name (the operator or fused operators), else the
    operator and arguments of an Ansor workload key, else the name of the database directory it
    came from; then the networks it occurs in, e.g. "mean [mobilenet_v2]"."""
    if t.name:
        name = t.name
    elif t.workload.lstrip().startswith("["):  # an Ansor workload key
        name = workload_label(t.workload)
    else:  # a MetaSchedule structural hash: the directory names the database
        name = Path(t.source).parent.name or t.workload
    return f"{name} [{', '.join(t.networks)}]" if t.networks else name


def task_names(tasks: list[TaskInfo]) -> list[str]:
    """A readable, unique name per task (task_label), told apart where two are alike by the
    structural hash (MetaSchedule) or the target (Ansor), else by the task's index."""
    names, seen = [], set()
    for i, t in enumerate(tasks):
        name = task_label(t)
        other = f"{name} @ {target_label(t.target)}" if t.workload.lstrip().startswith("[") else f"{name} #{t.workload}"
        for candidate in (name, other, f"{other} #{i}"):
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
    from .checkpoint import load_checkpoint
    from .program_data import ProgramData, task_key
    from .scoring import predict

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
    nets = {names[i]: t.network_weights for i, t in enumerate(pd.tasks)}
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
    """A readable table: the pooled score over all the tasks, then per network, then per task,
    each part below a rule, so no task's row reads as the summary."""
    head = f"{'':<{name_width}} {'top1':>6} {'top5':>6} {'pairwise':>8} {'n':>6}"
    rule = "-" * len(head)
    d, m = result["data"], result["model"]
    title = (f"model {m['path'] or m['arch']} ({m['arch']}, {m['size_mb']} MB); {d['tasks']} "
             f"of {d['tasks_in_data']} tasks ({d['chosen']}), {d['programs']} programs")
    lines = [title, head, rule]

    def row(name, s, n):
        if len(name) > name_width:  # shortened in the middle, so the networks in brackets stay
            cut = name.rfind(" [")
            tail = name[cut:] if 0 < cut and len(name) - cut <= name_width // 2 else ""
            name = name[:name_width - 3 - len(tail)] + "..." + tail
        return (f"{name:<{name_width}} {_fmt(s['top1']):>6} {_fmt(s['top5']):>6} "
                f"{_fmt(s['pairwise']):>8} {n:>6}")

    lines.append(row("all tasks, pooled (n = tasks)", result["pooled"], d["tasks"]))
    mean = held_out_summary(result)
    lines.append(row(f"task mean, tasks of >= {TASK_MEAN_MIN_PROGRAMS} programs (n = tasks)",
                     {"top1": mean["task_mean"], "top5": None, "pairwise": None}, mean["tasks"]))
    lines += [rule, "networks (n = tasks)"]
    lines += [row("  " + k, v, v["tasks"]) for k, v in result["networks"].items()]
    lines += [rule, "tasks (n = programs)"]
    lines += [row("  " + k, v, v["programs"]) for k, v in result["tasks"].items()]
    return "\n".join(lines)
