"""Scoring an exported cost model with onnxruntime: numpy + onnxruntime only, no torch.

One thread by default: inside TVM's search the builder and runner processes share the cores, and
extra scoring threads slow everything down. Programs are scored in chunks of similar length (sorted
by length), each cut to its longest sequence: the scan's work follows the length, and chunks of 64
keep the scan's state in cache.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .errors import FormatError, MissingDependencyError
from .features import SPEC, featurize_traces

META_PREFIX = "tcl."
DEFAULT_ONNX = Path(__file__).parent / "data" / "default_model.onnx"


def default_onnx_path() -> Path:
    """The pretrained model shipped inside the wheel."""
    if not DEFAULT_ONNX.is_file():
        raise FileNotFoundError(f"no default ONNX model is shipped with this tcl yet ({DEFAULT_ONNX} is "
                                "absent): export one with `tcl export MODEL.pt --out MODEL.onnx`")
    return DEFAULT_ONNX


class Scorer:
    """score(seq, length, workload[, hardware]) -> float64 scores, higher = predicted faster."""

    def __init__(self, path, threads: int = 1, chunk: int = 64):
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise MissingDependencyError("onnxruntime", "runtime", "ONNX scoring") from e
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.path = str(path)
        try:
            self.session = ort.InferenceSession(self.path, opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own types for missing / broken files
            raise FormatError(f"{path}: not a loadable ONNX model ({e})") from e
        meta = self.session.get_modelmeta().custom_metadata_map
        self.metadata = {k[len(META_PREFIX):]: json.loads(v) for k, v in meta.items() if k.startswith(META_PREFIX)}
        if "spec_version" not in self.metadata:
            raise FormatError(f"{path}: not a TCL cost model (no tcl.spec_version metadata)")
        SPEC.check(self.metadata["spec_version"], f"model {path}")
        self.config = self.metadata.get("config", {})
        self.hardware = np.asarray(self.metadata.get("hardware") or [], np.float32)
        self.chunk = chunk
        self.input_names = [i.name for i in self.session.get_inputs()]
        # models exported before the sequence length was dynamic take exactly seq_len steps
        seq_dim = {i.name: i.shape for i in self.session.get_inputs()}["seq"][1]
        self.fixed_length = seq_dim if isinstance(seq_dim, int) else None

    def score(self, seq, length, workload, hardware=None) -> np.ndarray:
        n = len(length)
        length = np.asarray(length, np.int64)
        if hardware is None:
            hardware = np.broadcast_to(self.hardware, (n, len(self.hardware)))
        order = np.argsort(length, kind="stable")
        out = np.empty(n, np.float64)
        for lo in range(0, n, self.chunk):
            idx = order[lo:lo + self.chunk]
            steps = self.fixed_length or min(seq.shape[1], max(2, int(length[idx].max())))
            feed = {"seq": np.ascontiguousarray(seq[idx, :steps], np.float32),
                    "lengths": length[idx],
                    "workload": np.ascontiguousarray(workload[idx], np.float32),
                    "hardware": np.ascontiguousarray(hardware[idx], np.float32)}
            out[idx] = self.session.run(None, {k: feed[k] for k in self.input_names})[0]
        return out

    def score_traces(self, traces, args_info=None, hardware=None) -> np.ndarray:
        """Featurize in-memory traces (JSON or str(trace) text) and score them."""
        seq, length, workload = featurize_traces(traces, args_info=args_info)
        return self.score(seq, length, workload, hardware)
