"""Networks written in plain PyTorch (no downloads) and their MetaSchedule tuning tasks.

`network_tasks(name, target)` imports a network through torch.export -> Relax (tcl.tvm.network_import),
runs the passes that precede applying a database when it is compiled (so database keys match), and
returns the extracted tasks with their weights (occurrences) and FLOPs. `sweep_tasks()` gives the
synthetic operator sweep (tcl.tvm.sweep) for wider coverage.
Weights are random: they do not change the tasks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

import tvm
import tvm_ffi
from tvm import te
from tvm.s_tir import meta_schedule as ms

from .catalog import DATASET_CONV_LAYOUTS, HELD_OUT, NETWORK_NAMES, SWEEP  # noqa: F401 (re-exported)
from .models import (BasicBlock, BertEncoder, Bottleneck, ConvNeXt, DCGANGenerator, GPT2, MobileNetV2, ResNet,
                     ResNeXtBottleneck, VGG11, ViT, Wav2VecFeatureEncoder)

# ---------------------------------------------------------------------------------------------
# Registry

IMAGE = (1, 3, 224, 224)
SEQ_LEN = 128
AUDIO_SAMPLES = 16000  # one second at 16 kHz


def _image(batch):
    return (torch.randn(batch, *IMAGE[1:]),)


def _tokens(batch):
    return (torch.randint(0, 30522, (batch, SEQ_LEN)),)


# name -> (model factory, example inputs for a batch size)
NETWORKS = {
    "resnet18": (lambda: ResNet(BasicBlock, [2, 2, 2, 2]), _image),
    "resnet50": (lambda: ResNet(Bottleneck, [3, 4, 6, 3]), _image),
    "mobilenet_v2": (MobileNetV2, _image),
    "vgg11": (VGG11, _image),
    "vit_tiny": (ViT, _image),
    "bert_tiny": (lambda: BertEncoder(layers=2, hidden=128, heads=2, ffn=512), _tokens),
    "bert_base": (lambda: BertEncoder(layers=12, hidden=768, heads=12, ffn=3072), _tokens),
    "dcgan": (DCGANGenerator, lambda batch: (torch.randn(batch, 100, 1, 1),)),
    "resnext50": (lambda: ResNet(ResNeXtBottleneck, [3, 4, 6, 3]), _image),
    "convnext_tiny": (ConvNeXt, _image),
    "gpt2": (GPT2, lambda batch: (torch.randint(0, 50257, (batch, SEQ_LEN)),)),
    "wav2vec_features": (Wav2VecFeatureEncoder, lambda batch: (torch.randn(batch, 1, AUDIO_SAMPLES),)),
}
assert tuple(NETWORKS) == NETWORK_NAMES, "tcl/tvm/catalog.py lists the networks built here"


class UnknownNetworkError(ValueError):
    pass


@dataclass
class Task:
    """One tuning task: a TIR IRModule, how often it occurs, and where."""

    name: str
    mod: tvm.IRModule
    weight: int
    flops: float
    networks: list[str] = field(default_factory=list)

    @property
    def shash(self) -> str:
        """The key MetaSchedule's JSONDatabase stores for this workload (structural hash)."""
        return str(tvm_ffi.structural_hash(self.mod))


def _flops(mod: tvm.IRModule) -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    return float(estimate_tir_flops(mod))


def fused_module(mod: tvm.IRModule, target, prepack_weights: bool) -> tvm.IRModule:
    """A Relax module whose weights are bound, as MetaSchedule tunes it: library dispatch, operators
    legalized to TIR and fused. With `prepack_weights` the constant inputs of every fused function are
    marked layout-free, so a tuned program may read its weights in a layout of its own choosing (they
    are converted once, at compile time, by compile_network)."""
    from tvm import relax
    from tvm.relax import pipeline

    passes = [
        *pipeline.library_dispatch_passes(target),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]
    if prepack_weights:
        passes.append(relax.transform.AttachAttrLayoutFreeBuffers())
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(passes)(mod)


def extract_tasks(mod: tvm.IRModule, target, prepack_weights: bool = False) -> list:
    """MetaSchedule's tuning tasks (ExtractedTask) of a Relax module whose weights are bound, from the
    module as fused_module gives it (as compile_network compiles it, so database keys match)."""
    return list(ms.relax_integration.extract_tasks(fused_module(mod, target, prepack_weights), target))


def network_tasks(name: str, target, batch: int = 1, conv_layout: str = DATASET_CONV_LAYOUTS[0],
                  prepack_weights: bool = False) -> list[Task]:
    """A built-in network's tuning tasks, its 2-D convolutions in `conv_layout` (by default as PyTorch
    gives them; `tcl tune` tunes the network in tcl.tvm.network_tuning_config.CONV_LAYOUT), with the
    weights prepacked (fused_module) or not."""
    from .network_import import from_builtin

    tasks = extract_tasks(from_builtin(name, batch, conv_layout).mod, target, prepack_weights)
    return [Task(t.task_name, t.dispatched[0], int(t.weight), _flops(t.dispatched[0]), [name]) for t in tasks]


def sweep_tasks() -> list[Task]:
    """The operator sweep's tasks (tcl.tvm.sweep), weight 1 each."""
    from .sweep import sweep_entries, workload

    tasks = []
    for name, op, shape in sweep_entries():
        mod = tvm.IRModule({"main": te.create_prim_func(workload(op, shape))})
        tasks.append(Task(name, mod, 1, _flops(mod), [SWEEP]))
    return tasks


def tasks_for(name: str, target, batch: int = 1, conv_layouts=DATASET_CONV_LAYOUTS,
              prepack_weights: bool = False) -> list[Task]:
    """Tasks of a network with its convolutions in each of `conv_layouts` (a task the layout does not
    change, such as a matmul, once), or of the operator sweep when name == "sweep" (whose operators
    have no constant weights to prepack)."""
    if name == SWEEP:
        return sweep_tasks()
    tasks: dict[str, Task] = {}
    for layout in conv_layouts:
        for t in network_tasks(name, target, batch, layout, prepack_weights):
            tasks.setdefault(t.shash, t)
    return list(tasks.values())
