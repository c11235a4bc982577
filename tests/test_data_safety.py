"""Outputs are written whole or not at all, datasets have one writer, and bad CLI arguments are
refused before any work (issue: nothing lost, nothing silent)."""

import lzma
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tcl import FormatError
from tcl.atomic import atomic_path, check_writable, locked, write_json
from tcl.cli import main
from tcl.packing import DatasetBusy, dataset_lock, is_packed, pack_dataset
from tcl.records import RECORD_FILE, read

MS_FIXTURE = Path(__file__).parent / "fixtures" / "ms"


def _copy_fixture(tmp_path) -> Path:
    ds = tmp_path / "ds"
    shutil.copytree(MS_FIXTURE, ds, ignore=shutil.ignore_patterns("*.py", "*.md"))
    return ds


def test_interrupted_write_keeps_the_old_file(tmp_path):
    out = tmp_path / "report.json"
    write_json(out, {"good": 1})
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(out) as tmp:
            tmp.write_text('{"half')
            raise KeyboardInterrupt  # as a kill in the middle of the write
    assert out.read_text() == '{\n "good": 1\n}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary file left


def test_merges_side_by_side_take_turns(tmp_path):
    """Two writers merging into one file: the second reads only after the first has written."""
    import threading
    import time

    out, order = tmp_path / "summary.json", []

    def merge(name, hold):
        with locked(out):
            order.append(f"{name} in")
            time.sleep(hold)
            order.append(f"{name} out")

    first = threading.Thread(target=merge, args=("a", 0.3))
    first.start()
    time.sleep(0.1)
    merge("b", 0)
    first.join()
    assert order == ["a in", "a out", "b in", "b out"]


def test_written_files_get_the_usual_permissions(tmp_path):
    """A file written whole-or-nothing is readable by others as any other new file (umask), not
    private as the temporary file it started as."""
    import os

    old = os.umask(0o022)
    try:
        write_json(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644


def test_two_featurize_runs_at_once_leave_a_readable_file(tmp_path):
    ds = _copy_fixture(tmp_path)
    out = tmp_path / "o.npz"
    cmd = [sys.executable, "-m", "tcl.cli", "featurize", str(ds), "--out", str(out)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL) for _ in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    with np.load(out) as z:
        assert len(z["label"]) == len(read(ds).records)


def test_featurize_writes_exactly_the_path_given(tmp_path, capsys):
    ds = _copy_fixture(tmp_path)
    assert main(["featurize", str(ds), "--out", str(tmp_path / "feats")]) == 0
    assert (tmp_path / "feats").is_file() and not (tmp_path / "feats.npz").exists()
    assert str(tmp_path / "feats") in capsys.readouterr().out


@pytest.mark.parametrize("out, why", [("", "names no file"), ("{dir}", "is a directory"),
                                      ("{dir}/missing/o.npz", "does not exist"),
                                      ("/proc/tcl-test.npz", "cannot write")])
def test_bad_output_paths_fail_before_any_work(tmp_path, capsys, out, why):
    out = out.format(dir=tmp_path)
    for argv in (["featurize", str(MS_FIXTURE), "--out", out], ["train", str(MS_FIXTURE), "--out", out]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1  # one line, no traceback
    with pytest.raises(FormatError, match=why):
        check_writable(out)


@pytest.mark.parametrize("argv", [["train", str(MS_FIXTURE), "--out", "m.pt", "--threads", "-1"],
                                  ["eval", "m.pt", str(MS_FIXTURE), "--threads", "0"],
                                  ["featurize", str(MS_FIXTURE), "--out", "o.npz", "--threads", "x"],
                                  ["train", str(MS_FIXTURE), "--out", "m.pt", "--epochs", "0"],
                                  ["collect", "--network", "sweep", "--programs-per-task", "-5"],
                                  ["collect", "--network", "sweep", "--batch-size", "0"],
                                  ["collect", "--network", "sweep", "--random-fraction", "7"],
                                  ["collect", "--network", "sweep", "--max-minutes", "0"],
                                  ["collect", "--network", "sweep", "--min-repeat-ms", "-1"]])
def test_bad_counts_are_refused_by_the_parser(argv, capsys):
    """Refused by argparse, before any work (for collect: before TVM is imported)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert any(why in err for why in ("must be 1 or more", "must be 0 or more", "expected a whole number",
                                       "must be in [0, 1]", "must be above 0"))


def test_pack_refuses_a_dataset_being_written(tmp_path, capsys):
    ds = _copy_fixture(tmp_path)
    held = dataset_lock(ds)  # as a running collection holds it
    try:
        with pytest.raises(DatasetBusy, match="another process"):
            pack_dataset(ds)
        assert main(["pack", str(ds)]) == 2 and "another process" in capsys.readouterr().err
        assert not is_packed(ds)
    finally:
        held.close()
    assert main(["pack", str(ds)]) == 0 and is_packed(ds)


@pytest.mark.parametrize("restore", [False, True])
def test_a_file_both_packed_and_plain_is_joined_not_overwritten(tmp_path, restore):
    """What an older pack racing a collection left: old lines in .xz, newer ones in the plain file."""
    ds = _copy_fixture(tmp_path)
    rec = ds / "matmul_128" / RECORD_FILE
    before = len(read(ds).records)
    lines = rec.read_bytes().splitlines(keepends=True)
    (rec.parent / (RECORD_FILE + ".xz")).write_bytes(lzma.compress(b"".join(lines[:3])))
    rec.write_bytes(b"".join(lines[3:]))
    pack_dataset(ds, restore=restore)
    assert is_packed(ds) != restore
    assert len(read(ds).records) == before  # every line kept, none twice
    if restore:
        assert rec.read_bytes() == b"".join(lines)
