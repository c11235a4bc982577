"""TCL: fast, portable cost models for tensor-program tuning in Apache TVM.

`import tcl` needs numpy only. torch (training), onnxruntime (scoring) and apache-tvm (tuning,
collection) are imported by the modules that use them.
"""

from .errors import FormatError, MissingDependencyError
from .features import SPEC, FeatureSet, FeatureSpec, featurize, featurize_traces

__version__ = "0.1.0"
__all__ = [
    "SPEC",
    "FeatureSet",
    "FeatureSpec",
    "FormatError",
    "MissingDependencyError",
    "featurize",
    "featurize_traces",
]
