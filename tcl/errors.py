"""The one exception type a user's bad input raises."""

import re

# C0/C1 controls, DEL and the bidi overrides: quoted input holding them could move the terminal's
# cursor, change its colours or reorder the text around them when a message is printed.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """`text` with control characters written as escapes (\\x1b, \\r, \\n, \\u202e), one line."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class FormatError(ValueError):
    """A record file, database or trace that does not have the expected format.

    The message names the file and line (or the trace index) and what was expected there. Control
    characters of the bad input it quotes are escaped (escape_controls): it is printed as one line.
    """

    def __init__(self, *args):
        super().__init__(*(escape_controls(a) if isinstance(a, str) else a for a in args))


class MissingDependencyError(ImportError):
    """An optional dependency (torch, onnxruntime, apache-tvm) is needed for this feature."""

    def __init__(self, package: str, extra: str, feature: str):
        super().__init__(
            f"{feature} needs {package}; install it with `pip install 'tcl-tune[{extra}]'`"
        )
