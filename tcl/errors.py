"""The one exception type a user's bad input raises."""


class FormatError(ValueError):
    """A record file, database or trace that does not have the expected format.

    The message names the file and line (or the trace index) and what was expected there.
    """


class MissingDependencyError(ImportError):
    """An optional dependency (torch, onnxruntime, apache-tvm) is needed for this feature."""

    def __init__(self, package: str, extra: str, feature: str):
        super().__init__(
            f"{feature} needs {package}; install it with `pip install 'tcl-tune[{extra}]'`"
        )
