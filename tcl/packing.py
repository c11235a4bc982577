"""Shipping datasets compressed, and the lock that keeps one writer per dataset directory.

`pack_dataset` xz-compresses the MetaSchedule database files of a dataset in place and restores them.
A collection appends to the plain files, so packing and collecting must not overlap: both take
`dataset_lock`. Should a directory hold a file both packed and plain (left by an older tool), the two
are joined, packed lines first, never one written over the other.
"""
from __future__ import annotations

import fcntl
import lzma
import os
from pathlib import Path

from .errors import FormatError
from .records import RECORD_FILE, WORKLOAD_FILE, read_bytes

LOCK_FILE = ".collect.lock"


class DatasetBusy(FormatError):
    """Another process (a collection, a pack) is writing to the dataset directory."""


def dataset_lock(root: str | os.PathLike, what: str = "collection"):
    """An exclusive lock on a dataset directory, held while the returned file is open. The OS drops
    it when the process dies, even by kill -9. Raises DatasetBusy when another process holds it."""
    f = open(Path(root) / LOCK_FILE, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise DatasetBusy(f"{root}: another process (a collection or a pack) is writing to it; wait for it to "
                          f"finish or stop it before this {what}") from None
    return f


def _write_atomic(dst: Path, data: bytes) -> None:
    tmp = dst.with_name(dst.name + ".part")
    tmp.write_bytes(data)
    os.replace(tmp, dst)


def pack_dataset(root: str | os.PathLike, restore: bool = False, preset: int = 6, lock: bool = True) -> dict:
    """xz-compress every MetaSchedule database file under `root` in place (`restore=True`: back to
    the stock plain files TVM's JSONDatabase reads and appends to). task.json, platform.json and
    READMEs stay plain. Each file is written beside the old one and renamed, so an interrupted run
    leaves every file readable. Takes the dataset lock unless the caller holds it (lock=False). Returns {"files", "bytes_before", "bytes_after"}."""
    root = Path(root)
    if not root.is_dir():
        raise FormatError(f"{root}: not a dataset directory")
    stats = {"files": 0, "bytes_before": 0, "bytes_after": 0}
    held = dataset_lock(root, "pack") if lock else None
    try:
        for dirpath, _, files in os.walk(root):
            for name in (WORKLOAD_FILE, RECORD_FILE):
                plain, packed = Path(dirpath) / name, Path(dirpath) / (name + ".xz")
                have_plain, have_packed = name in files, name + ".xz" in files
                if not (have_packed if restore else have_plain):
                    continue
                before = sum(p.stat().st_size for p, h in ((plain, have_plain), (packed, have_packed)) if h)
                data = (read_bytes(packed) if have_packed else b"") + (plain.read_bytes() if have_plain else b"")
                if restore:
                    _write_atomic(plain, data)
                    packed.unlink()
                    after = len(data)
                else:
                    out = lzma.compress(data, preset=preset)
                    _write_atomic(packed, out)
                    plain.unlink()
                    after = len(out)
                stats["files"] += 1
                stats["bytes_before"] += before
                stats["bytes_after"] += after
    finally:
        if held is not None:
            held.close()
    return stats


def is_packed(root: str | os.PathLike) -> bool:
    return any(f.endswith((WORKLOAD_FILE + ".xz", RECORD_FILE + ".xz")) for _, _, fs in os.walk(root) for f in fs)
