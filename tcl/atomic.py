"""Writing output files whole or not at all.

Every file the tools write (features, checkpoints, ONNX models, reports, JSON) goes to a temporary
file in the destination's directory and is renamed over the destination when complete: a killed
writer leaves the old file intact, and two writers at once leave one complete file, never a mix.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from .errors import FormatError


def check_writable(path: str | os.PathLike) -> Path:
    """Fail now, before hours of work, if `path` cannot be written: its directory must exist and be
    writable and the path must not be a directory."""
    path = Path(path)
    if not str(path) or path.name in ("", ".", ".."):
        raise FormatError(f"output path {str(path)!r} names no file")
    if path.is_dir():
        raise FormatError(f"{path}: is a directory; give a file path")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise FormatError(f"{path}: directory {parent} does not exist")
    try:  # a real write, not os.access: root passes access checks on read-only file systems
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as e:
        raise FormatError(f"{path}: cannot write in directory {parent} ({e.strerror})") from None
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yields a temporary path beside `path`; on normal exit it replaces `path`, on error it is removed.
    For writers that take a path (torch.save, onnx.save, savefig, np.savez)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part" + path.suffix, dir=path.parent or ".")
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would make every output private
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode())


def write_json(path: str | os.PathLike, obj, indent: int | None = 1) -> None:
    write_text(path, json.dumps(obj, indent=indent) + "\n")


def save_figure(fig, path: str | os.PathLike, **savefig_kwargs) -> None:
    """A matplotlib figure saved as PNG, whole or not at all."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", **savefig_kwargs)


@contextlib.contextmanager
def locked(path: str | os.PathLike):
    """Hold an exclusive lock beside `path` (`path`.lock), waiting for it: for a read-merge-write of
    one file by processes that run side by side, so that neither drops what the other wrote."""
    import fcntl

    lock = Path(path).with_name(Path(path).name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
