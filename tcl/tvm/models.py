"""The networks TCL extracts tuning tasks from, written in plain PyTorch (no downloads, random weights:
weights do not change the tasks). Layouts follow the published architectures at their usual sizes."""
from __future__ import annotations

import math

import torch
from torch import nn

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
# ResNeXt (Xie et al. 2017): grouped 3x3 convolutions in the bottleneck


class ResNeXtBottleneck(Bottleneck):
    def __init__(self, cin, planes, stride=1, groups=32, width_per_group=4):
        super().__init__(cin, planes, stride)
        width = planes * width_per_group * groups // 64
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)


# ---------------------------------------------------------------------------------------------
# ConvNeXt (Liu et al. 2022): 7x7 depthwise conv, channels-last LayerNorm, inverted MLP


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        y = self.mlp(self.norm(self.dw(x).permute(0, 2, 3, 1)))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, depths=(3, 3, 9, 3), dims=(96, 192, 384, 768), num_classes=1000):
        super().__init__()
        layers = [nn.Conv2d(3, dims[0], 4, 4)]
        for i, (depth, dim) in enumerate(zip(depths, dims)):
            if i:
                layers.append(nn.Conv2d(dims[i - 1], dim, 2, 2))
            layers += [ConvNeXtBlock(dim) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(dims[-1])
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        return self.head(self.norm(self.features(x).mean((2, 3))))


# ---------------------------------------------------------------------------------------------
# GPT-2 (Radford et al. 2019): pre-norm decoder blocks with causal self-attention


class GPT2Block(EncoderLayer):
    def __init__(self, hidden, heads, seq_len):
        super().__init__(hidden, heads, 4 * hidden, pre_norm=True)
        mask = torch.full((seq_len, seq_len), float("-inf")).triu(1)
        self.register_buffer("causal", mask, persistent=False)

    def attention(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(x).reshape(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(h // self.heads) + self.causal, dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, s, h))


class GPT2(nn.Module):
    def __init__(self, layers=12, hidden=768, heads=12, seq_len=128, vocab=50257):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq_len, hidden)
        self.layers = nn.Sequential(*[GPT2Block(hidden, heads, seq_len) for _ in range(layers)])
        self.norm = nn.LayerNorm(hidden)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        return self.norm(self.layers(self.word(ids) + self.pos(pos)))


# ---------------------------------------------------------------------------------------------
# Audio: the 1-D convolutional feature encoder of wav2vec 2.0 (Baevski et al. 2020), raw 16 kHz audio


class Wav2VecFeatureEncoder(nn.Module):
    KERNELS, STRIDES = (10, 3, 3, 3, 3, 2, 2), (5, 2, 2, 2, 2, 2, 2)

    def __init__(self, channels=512):
        super().__init__()
        layers, cin = [], 1
        for i, (k, s) in enumerate(zip(self.KERNELS, self.STRIDES)):
            layers.append(nn.Conv1d(cin, channels, k, s, bias=False))
            if i == 0:
                layers.append(nn.GroupNorm(channels, channels))
            layers.append(nn.GELU())
            cin = channels
        self.conv = nn.Sequential(*layers)
        self.proj = nn.Linear(channels, 768)

    def forward(self, wave):
        return self.proj(self.conv(wave).transpose(1, 2))
