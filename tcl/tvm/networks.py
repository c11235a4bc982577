"""Networks written in plain PyTorch (no downloads) and their MetaSchedule tuning tasks.

`network_tasks(name, target)` imports a network through torch.export -> Relax, runs the passes
`ms.relax_integration.compile_relax` runs before applying a database (so database keys match), and
returns the extracted tasks with their weights (occurrences) and FLOPs. `sweep_tasks()` gives a
synthetic operator sweep (matmul / conv2d / depthwise / batch-matmul shapes) for wider coverage.
Weights are random: they do not change the tasks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn

import tvm
import tvm_ffi
from tvm import te
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.testing import te_workload

# ---------------------------------------------------------------------------------------------
# ResNet (He et al. 2016), torchvision layout


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.down = _downsample(cin, planes, stride)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride=1):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.down = _downsample(cin, out, stride)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


def _downsample(cin, cout, stride):
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        blocks, cin = [], 64
        for i, n in enumerate(layers):
            planes = 64 * 2**i
            for j in range(n):
                blocks.append(block(cin, planes, 2 if (j == 0 and i > 0) else 1))
                cin = planes * block.expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


# ---------------------------------------------------------------------------------------------
# MobileNetV2 (Sandler et al. 2018)


def _conv_bn(cin, cout, k, stride=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU6()) if act else nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = [_conv_bn(cin, hidden, 1)] if expand != 1 else []
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden), _conv_bn(hidden, cout, 1, act=False)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    # (expansion, channels, repeats, first stride)
    CONFIG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

    def __init__(self, num_classes=1000):
        super().__init__()
        layers, cin = [_conv_bn(3, 32, 3, 2)], 32
        for t, c, n, s in self.CONFIG:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


# ---------------------------------------------------------------------------------------------
# VGG-11 (Simonyan & Zisserman 2014, configuration A)


class VGG11(nn.Module):
    CONFIG = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]

    def __init__(self, num_classes=1000):
        super().__init__()
        layers, cin = [], 3
        for v in self.CONFIG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, 1, 1), nn.ReLU()]
                cin = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, num_classes)
        )

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


# ---------------------------------------------------------------------------------------------
# Transformer encoders: BERT (Devlin et al. 2019) and ViT (Dosovitskiy et al. 2021)


class EncoderLayer(nn.Module):
    """Self-attention + feed-forward, post-norm (BERT) or pre-norm (ViT)."""

    def __init__(self, hidden, heads, ffn, pre_norm=False):
        super().__init__()
        self.heads, self.pre_norm = heads, pre_norm
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.ffn = nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(), nn.Linear(ffn, hidden))

    def attention(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(h // self.heads), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, s, h))

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attention(self.norm1(x))
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.ffn(x))


class BertEncoder(nn.Module):
    def __init__(self, layers, hidden, heads, ffn, vocab=30522, max_len=512):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.layers = nn.Sequential(*[EncoderLayer(hidden, heads, ffn) for _ in range(layers)])

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        return self.layers(self.norm(self.word(ids) + self.pos(pos)))


class ViT(nn.Module):
    def __init__(self, image=224, patch=16, hidden=192, layers=12, heads=3, ffn=768, num_classes=1000):
        super().__init__()
        self.patch = nn.Conv2d(3, hidden, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, hidden))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, hidden))
        self.layers = nn.Sequential(*[EncoderLayer(hidden, heads, ffn, pre_norm=True) for _ in range(layers)])
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.layers(x))[:, 0])


# ---------------------------------------------------------------------------------------------
# DCGAN generator (Radford et al. 2016): latent 100 -> 3x64x64


class DCGANGenerator(nn.Module):
    def __init__(self, nz=100, ngf=64):
        super().__init__()
        chans = [nz, ngf * 8, ngf * 4, ngf * 2, ngf]
        layers = []
        for i in range(4):
            first = i == 0  # 1x1 -> 4x4, then each layer doubles the size
            layers += [nn.ConvTranspose2d(chans[i], chans[i + 1], 4, 1 if first else 2, 0 if first else 1, bias=False),
                       nn.BatchNorm2d(chans[i + 1]), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.net(z)


# ---------------------------------------------------------------------------------------------
# Registry

IMAGE = (1, 3, 224, 224)
SEQ_LEN = 128


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
}
# Test networks (as TenSet/TLP); any task that also occurs in one of them is held out too.
HELD_OUT = ("resnet50", "mobilenet_v2", "bert_base", "bert_tiny")
SWEEP = "sweep"


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


def relax_module(name: str, batch: int = 1):
    """torch model -> Relax IRModule and its parameters."""
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    if name not in NETWORKS:
        raise UnknownNetworkError(f"unknown network {name!r}; known: {', '.join(sorted(NETWORKS))}, {SWEEP}")
    make, inputs = NETWORKS[name]
    torch.manual_seed(0)
    with torch.no_grad():
        ep = torch.export.export(make().eval(), inputs(batch))
    mod = from_exported_program(ep, keep_params_as_input=True)
    mod = relax.transform.DecomposeOpsForInference()(mod)
    return relax.frontend.detach_params(mod)


def network_tasks(name: str, target, batch: int = 1) -> list[Task]:
    """The tasks MetaSchedule tunes for a network (legalized and fused as compile_relax does)."""
    from tvm import relax
    from tvm.relax import pipeline

    mod, params = relax_module(name, batch)
    main = mod["main"]
    weights = main.params[int(main.attrs["num_input"]):]  # after the real inputs
    mod = relax.transform.BindParams("main", dict(zip(weights, params["main"])))(mod)
    passes = [
        *pipeline.library_dispatch_passes(target),
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ]
    with target, tvm.transform.PassContext(opt_level=3):
        mod = tvm.transform.Sequential(passes)(mod)
    tasks = ms.relax_integration.extract_tasks(mod, target)
    return [Task(t.task_name, t.dispatched[0], int(t.weight), _flops(t.dispatched[0]), [name]) for t in tasks]


# Operator sweep: shapes around those of common CNNs and transformers, not taken from one network.
_SWEEP = (
    [("matmul", (n, m, k)) for n, m, k in [(1, 1000, 512), (64, 64, 64), (128, 768, 768), (128, 3072, 768),
                                             (256, 256, 256), (512, 128, 1024), (384, 1024, 256), (32, 4096, 1024)]]
    # (batch, H, W, Cin, Cout, kernel, stride, padding)
    + [("conv2d", s) for s in [(1, 56, 56, 64, 64, 3, 1, 1), (1, 28, 28, 128, 256, 3, 2, 1),
                                (1, 14, 14, 256, 256, 1, 1, 0), (1, 112, 112, 32, 64, 3, 1, 1),
                                (1, 7, 7, 512, 512, 3, 1, 1), (1, 56, 56, 64, 256, 1, 1, 0),
                                (1, 224, 224, 3, 32, 3, 2, 1), (1, 14, 14, 96, 192, 5, 1, 2)]]
    # (batch, H, W, C, kernel, stride, padding)
    + [("depthwise", s) for s in [(1, 112, 112, 32, 3, 1, 1), (1, 56, 56, 144, 3, 2, 1), (1, 28, 28, 192, 3, 1, 1),
                                   (1, 14, 14, 576, 3, 1, 1), (1, 7, 7, 960, 5, 1, 2)]]
    # (batch, M, N, K)
    + [("batch_matmul", s) for s in [(12, 128, 128, 64), (12, 128, 64, 128), (4, 256, 256, 32), (16, 64, 64, 64)]]
)


def _sweep_workload(op: str, s: tuple):
    if op == "matmul":
        return te_workload.matmul(*s)
    if op == "conv2d":
        n, h, w, ci, co, k, st, p = s
        return te_workload.conv2d_nchw(n, h, w, ci, co, k, k, st, p)
    if op == "depthwise":
        n, h, w, c, k, st, p = s
        return te_workload.depthwise_conv2d_nhwc(n, h, w, c, k, st, p)
    if op == "batch_matmul":
        b, m, n_, k = s
        return te_workload.batch_matmul_nkkm(b, m, n_, k)
    raise ValueError(op)


def sweep_tasks() -> list[Task]:
    tasks = []
    for op, s in _SWEEP:
        mod = tvm.IRModule({"main": te.create_prim_func(list(_sweep_workload(op, s)))})
        tasks.append(Task(f"sweep_{op}_" + "x".join(map(str, s)), mod, 1, _flops(mod), [SWEEP]))
    return tasks


def tasks_for(name: str, target, batch: int = 1) -> list[Task]:
    """Tasks of a network, or of the operator sweep when name == "sweep"."""
    return sweep_tasks() if name == SWEEP else network_tasks(name, target, batch)
