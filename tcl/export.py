"""The cost model to ONNX: fixed sequence length (sequences are padded at the end), dynamic batch,
TCL metadata (FeatureSpec version, model config, platform and its hardware vector), no stack-trace
metadata. Needs torch and onnx (`pip install 'tcl-tune[export]'`)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from .errors import MissingDependencyError
from .features import SPEC
from .hardware import hardware_vector

INPUT_NAMES = ("seq", "lengths", "workload", "hardware")
META_PREFIX = "tcl."


def example_inputs(cfg, batch: int = 4, seed: int = 0):
    """Random inputs of the model's shapes, padded at the end like real features."""
    import torch

    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, cfg.seq_len + 1, (batch,), generator=g)
    seq = torch.randn(batch, cfg.seq_len, cfg.feature_dim, generator=g)
    seq[torch.arange(cfg.seq_len) >= lengths[:, None]] = 0
    return (seq, lengths, torch.randn(batch, cfg.workload_dim, generator=g),
            torch.randn(batch, cfg.hardware_dim, generator=g))


def export_onnx(model, path, platform: dict | None = None, extra: dict | None = None):
    """Writes `model` (a MambaCostModel or anything with its forward) to `path`; returns the proto."""
    try:
        import onnx
        import torch
    except ImportError as e:
        raise MissingDependencyError(e.name, "export", "ONNX export") from e

    cfg = model.cfg
    model = model.eval()
    batch = torch.export.Dim("batch", min=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation chatter
        prog = torch.onnx.export(model, example_inputs(cfg), input_names=list(INPUT_NAMES),
                                 output_names=["score"], dynamo=True,
                                 dynamic_shapes={n: {0: batch} for n in INPUT_NAMES})
    proto = prog.model_proto
    _compact(proto.graph)
    del proto.metadata_props[:]
    meta = {
        "spec_version": SPEC.version,
        "config": cfg.to_dict(),
        "platform": platform,
        "hardware": hardware_vector(platform).tolist() if cfg.hardware_dim else [],
        **(extra or {}),
    }
    for k, v in meta.items():
        proto.metadata_props.add(key=META_PREFIX + k, value=json.dumps(v))
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))
    return proto


def _compact(graph):
    """Drops what scoring does not need: dynamo's stack traces on every node (~280 KB), the
    intermediate shape annotations (onnxruntime infers them) and the long generated names of the
    unrolled scan's ~1,100 nodes and their intermediate values (renamed v0, v1, ...)."""
    del graph.value_info[:]
    keep = {v.name for v in graph.input} | {v.name for v in graph.output} | {t.name for t in graph.initializer}
    short: dict[str, str] = {}

    def rename(name: str) -> str:
        if not name or name in keep:
            return name
        return short.setdefault(name, f"v{len(short)}")

    for node in graph.node:
        del node.metadata_props[:]
        node.name, node.doc_string = "", ""
        node.input[:] = [rename(n) for n in node.input]
        node.output[:] = [rename(n) for n in node.output]


def read_metadata(path) -> dict:
    """TCL metadata of an exported model (without loading it into a session)."""
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    return {p.key[len(META_PREFIX):]: json.loads(p.value) for p in proto.metadata_props
            if p.key.startswith(META_PREFIX)}


def size_bytes(path) -> int:
    return Path(path).stat().st_size


def torch_scores(model, seq, length, workload, hardware) -> np.ndarray:
    """The torch model's scores on numpy inputs (the reference the ONNX model is checked against)."""
    import torch

    with torch.no_grad():
        out = model.eval()(torch.from_numpy(np.ascontiguousarray(seq)), torch.from_numpy(length.astype(np.int64)),
                           torch.from_numpy(np.ascontiguousarray(workload, np.float32)),
                           torch.from_numpy(np.ascontiguousarray(hardware, np.float32)))
    return out.numpy().astype(np.float64)
