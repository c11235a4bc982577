"""The cost model to ONNX: dynamic batch, sequences of 2 to seq_len steps padded at the end (a batch
may be cut to its longest sequence: the scan is causal, so the scores do not change), TCL metadata
(FeatureSpec version, model config, platform and its hardware vector), no stack-trace metadata.
Needs torch and onnx (`pip install 'tcl-tune[export]'`)."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np

from .errors import FormatError, MissingDependencyError
from .features import SPEC
from .hardware import hardware_vector

INPUT_NAMES = ("seq", "lengths", "workload", "hardware")
EXPORT_BATCH = 61  # traced batch size: prime and unlike any model width, so _free_batch can check it
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
    # The sequence length is dynamic. A model with a Mamba scan (one Scan node) is traced at a fixed
    # batch size made dynamic afterwards (_free_batch): torch 2.13 fails to decompose a scan whose
    # body sees a symbolic batch size.
    from .model.mamba import Mamba

    has_scan = any(isinstance(m, Mamba) for m in model.modules())
    length = torch.export.Dim("length", min=2, max=cfg.seq_len)
    batch = None if has_scan else torch.export.Dim("batch", min=1)
    dims = {n: {0: batch} if batch else {} for n in INPUT_NAMES}
    dims["seq"][1] = length
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration.level
    registration.setLevel(logging.ERROR)  # "torchvision is not installed": its ops are not ours
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's deprecation chatter
            prog = torch.onnx.export(model, example_inputs(cfg, batch=EXPORT_BATCH), input_names=list(INPUT_NAMES),
                                     output_names=["score"], dynamo=True, dynamic_shapes=dims, verbose=False)
    finally:
        registration.setLevel(level)
    proto = prog.model_proto
    _compact(proto.graph)
    if has_scan:
        _free_batch(proto.graph)
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
    from .atomic import atomic_path

    with atomic_path(path) as tmp:
        onnx.save(proto, str(tmp))
    return proto


def _compact(graph):
    """Drops what scoring does not need: dynamo's stack traces on every node (most of the file), the
    intermediate shape annotations (onnxruntime infers them) and the long generated names of the
    nodes and their intermediate values (renamed v0, v1, ...), in the Scan body as well. One
    renaming for all graphs: the body reads values of the outer graph by name."""
    keep = {v.name for v in graph.input} | {v.name for v in graph.output} | {t.name for t in graph.initializer}
    short: dict[str, str] = {}

    def rename(name: str) -> str:
        if not name or name in keep:
            return name
        return short.setdefault(name, f"v{len(short)}")

    def compact(g, outer: bool):
        del g.value_info[:]
        if not outer:  # a body's formal inputs and outputs are its own names
            for v in list(g.input) + list(g.output):
                v.name = rename(v.name)
        for node in g.node:
            del node.metadata_props[:]
            node.name, node.doc_string = "", ""
            node.input[:] = [rename(n) for n in node.input]
            node.output[:] = [rename(n) for n in node.output]
            for a in node.attribute:
                if a.name == "body":
                    compact(a.g, False)

    compact(graph, True)


def _free_batch(graph):
    """Makes dimension 0 (the batch) of the graph's and the Scan body's inputs and outputs symbolic
    (after _compact, which dropped the intermediate shapes).

    Sound only when nothing else in the graph fixed the traced batch size: no integer constant
    (a shape for Reshape/Expand) may hold EXPORT_BATCH, which is checked here; the parity tests
    then score batches of other sizes against torch."""
    from onnx import numpy_helper

    def ints(t):
        return numpy_helper.to_array(t).ravel().tolist() if t.data_type == 7 else []  # int64

    def check(g):
        consts = list(g.initializer) + [a.t for n in g.node for a in n.attribute if a.name == "value"]
        if any(EXPORT_BATCH in ints(t) for t in consts):
            raise RuntimeError("the exported graph fixes the batch size (an integer constant holds it); "
                               "it cannot take other batch sizes")
        for v in list(g.input) + list(g.output):
            dims = v.type.tensor_type.shape.dim
            if len(dims) and dims[0].dim_value == EXPORT_BATCH:
                dims[0].dim_param = "batch"
        for n in g.node:
            for a in n.attribute:
                if a.name == "body":
                    check(a.g)

    check(graph)


def read_metadata(path) -> dict:
    """TCL metadata of an exported model (without loading it into a session)."""
    import onnx

    from .runtime import parse_metadata

    try:
        proto = onnx.load(str(path), load_external_data=False)
    except FileNotFoundError:
        raise
    except Exception as e:  # protobuf's decode errors: not an ONNX file
        raise FormatError(f"{path}: not an ONNX model ({e})") from e
    return parse_metadata(((p.key, p.value) for p in proto.metadata_props), path)


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
