"""Keeping the terminal to our own progress lines: MetaSchedule's console logging, Python
warnings that third-party code raises on our paths, and what TVM's C++ side writes to stderr."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from pathlib import Path


def quiet_tvm_console() -> None:
    """MetaSchedule logs every batch and table to the console; keep warnings there, the rest goes to
    the run's log files (logs/ under its output directory)."""
    for handler in logging.getLogger("tvm.s_tir.meta_schedule").handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.setLevel(logging.WARNING)


@contextlib.contextmanager
def quiet_warnings():
    """Warnings third-party code raises on our paths (torch.export's pytree deprecations) stay out
    of the terminal; ours are errors instead."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        yield


@contextlib.contextmanager
def native_output_to(log_path: Path):
    """Sends what TVM's C++ side writes to stderr (its warnings) to log_path for the duration;
    yields a stream on the real stderr for the progress line."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(log_path, "a") as log:
        os.dup2(log.fileno(), 2)
        try:
            with os.fdopen(os.dup(saved), "w", buffering=1) as real_stderr:
                yield real_stderr
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
