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


def parse_metadata(props, path) -> dict:
    """The TCL metadata of an ONNX model: (key, JSON text) pairs whose key starts with "tcl.",
    decoded; FormatError naming the file and the key whose value is not JSON."""
    out = {}
    for k, v in props:
        if not k.startswith(META_PREFIX):
            continue
        try:
            out[k[len(META_PREFIX):]] = json.loads(v)
        except (json.JSONDecodeError, RecursionError, TypeError):
            raise FormatError(f"{path}: metadata {k} is not JSON: {v[:60]!r}") from None
    return out


def _array(a, name: str) -> np.ndarray:
    """`a` as a numeric array; FormatError for anything else."""
    try:
        a = np.asarray(a)
    except ValueError as e:  # ragged nested lists
        raise FormatError(f"{name}: not an array ({e})") from None
    if a.dtype.kind not in "biuf":
        raise FormatError(f"{name}: expected numbers, got an array of {a.dtype}")
    return a


DEFAULT_ONNX = Path(__file__).parent / "data" / "default_model.onnx"


def default_onnx_path() -> Path:
    """The pretrained model shipped inside the wheel."""
    if not DEFAULT_ONNX.is_file():
        raise FileNotFoundError(f"no default ONNX model is shipped with this tcl yet ({DEFAULT_ONNX} is "
                                "absent): export one with `tcl export MODEL.pt --out MODEL.onnx`")
    return DEFAULT_ONNX


def model_sha256(path=None) -> str:
    """SHA-256 of an exported model file (default: the shipped one): which model a stored run used."""
    import hashlib

    return hashlib.sha256(Path(path or default_onnx_path()).read_bytes()).hexdigest()


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
        self.metadata = parse_metadata(self.session.get_modelmeta().custom_metadata_map.items(), path)
        if "spec_version" not in self.metadata:
            raise FormatError(f"{path}: not a TCL cost model (no tcl.spec_version metadata)")
        SPEC.check(self.metadata["spec_version"], f"model {path}")
        self.config = self.metadata.get("config") or {}
        try:
            self.hardware = np.asarray(self.metadata.get("hardware") or [], np.float32)
        except (TypeError, ValueError):
            self.hardware = None
        if not isinstance(self.config, dict) or self.hardware is None or self.hardware.ndim != 1:
            raise FormatError(f"{path}: tcl.config must be a JSON object and tcl.hardware a list of numbers")
        # L, D, W, P: what score() checks its inputs against
        dims = {"seq_len": SPEC.seq_len, "feature_dim": SPEC.row_dim, "workload_dim": SPEC.workload_dim,
                "hardware_dim": len(self.hardware)}
        dims.update({k: self.config[k] for k in dims if k in self.config})
        if not all(isinstance(v, int) and v >= 0 for v in dims.values()):
            raise FormatError(f"{path}: tcl.config: expected whole numbers, got {dims}")
        self.seq_len, self.feature_dim, self.workload_dim, self.hardware_dim = dims.values()
        self.chunk = chunk
        self.input_names = [i.name for i in self.session.get_inputs()]
        # models exported before the sequence length was dynamic take exactly seq_len steps
        seq_dim = {i.name: i.shape for i in self.session.get_inputs()}["seq"][1]
        self.fixed_length = seq_dim if isinstance(seq_dim, int) else None

    def score(self, seq, length, workload, hardware=None) -> np.ndarray:
        """seq [N, S, D] (S >= the longest length), length [N] in 0..L (0: an empty program),
        workload [N, W], hardware [N, P] (default: the model's platform): finite numbers, else
        FormatError."""
        seq, length, workload = _array(seq, "seq"), _array(length, "length"), _array(workload, "workload")
        if length.ndim != 1:
            raise FormatError(f"{self.path}: length has shape {list(length.shape)}: expected one per program")
        n = len(length)
        if hardware is None:
            hardware = np.broadcast_to(self.hardware, (n, len(self.hardware)))
        hardware = _array(hardware, "hardware")
        length = self._check(seq, length, workload, hardware)
        if "workload" in self.input_names:  # checked [N, W], or [N, any] when the model reads none
            workload = workload[:, :self.workload_dim]
        if "hardware" in self.input_names:
            hardware = hardware[:, :self.hardware_dim]
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

    def _check(self, seq, length, workload, hardware) -> np.ndarray:
        """length as int64, after checking the inputs' shapes and values against the model."""
        n = len(length)
        shapes = (("seq", seq, (n, None, self.feature_dim)), ("lengths", length, (n,)),
                  ("workload", workload, (n, self.workload_dim)), ("hardware", hardware, (n, self.hardware_dim)))
        for name, a, want in shapes:
            if name not in self.input_names:
                continue
            if want[-1] == 0 and a.ndim == 2:  # a descriptor the model does not read (TLP): any width
                want = (n, a.shape[1])
            if a.ndim != len(want) or any(w is not None and w != d for w, d in zip(want, a.shape)):
                want = ", ".join("S" if w is None else str(w) for w in want)
                raise FormatError(f"{self.path}: {name} has shape {list(a.shape)}, the model takes [{want}] "
                                  f"(N = {n} programs, one length each; S rows per program)")
            if not np.isfinite(a).all():
                raise FormatError(f"{self.path}: {name} holds NaN or infinite values")
        if seq.shape[1] < (self.fixed_length or 1):
            raise FormatError(f"{self.path}: seq has {seq.shape[1]} rows per program, the model takes "
                              f"{self.fixed_length or 'at least 1'}")
        if n and not (np.all(length == np.round(length)) and length.min() >= 0
                      and length.max() <= min(self.seq_len, seq.shape[1])):
            raise FormatError(f"{self.path}: lengths must be whole numbers from 0 to L = {self.seq_len} "
                              f"(and at most seq's {seq.shape[1]} rows), got {length.min()} to {length.max()}")
        return length.astype(np.int64)

    def score_traces(self, traces, args_info=None, hardware=None) -> np.ndarray:
        """Featurize in-memory traces (JSON or str(trace) text) and score them."""
        seq, length, workload = featurize_traces(traces, args_info=args_info)
        return self.score(seq, length, workload, hardware)
