"""The C++ featurizer against the plain-Python reference, on real and hand-made inputs."""

import json
import lzma
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tcl
from tcl import SPEC, FormatError
from tcl.records import read

from tcl.reference_featurizer import ms_trace, reference_featurize

HERE = Path(__file__).parent
# Real Ansor logs measured elsewhere (MIT, lac-dcc/bennu). Their README asks that they are read where
# they are, not copied into the project: without them these tests are skipped.
SHARED_ANSOR = HERE.parent.parent / "shared" / "data" / "ansor"
ANSOR_DIRS = [SHARED_ANSOR] if SHARED_ANSOR.is_dir() else []
ANSOR = SHARED_ANSOR
FAILED_IN = {SHARED_ANSOR: 5}  # failed A100 records (error_no 6, cost 1e10)
MS_FIXTURE = HERE / "fixtures" / "ms"
ARRAYS = ("seq", "length", "task", "cost", "label", "workload")


def ansor_logs():
    return [p for d in ANSOR_DIRS for p in sorted(d.iterdir()) if p.suffix in (".json", ".log")]


def dir_id(d: Path) -> str:
    return "shared"


def assert_same(fs, ref):
    assert len(fs) == len(ref["length"])
    for k in ARRAYS:
        a, b = getattr(fs, k), ref[k]
        assert a.shape == b.shape, k
        assert a.dtype == b.dtype, k
        np.testing.assert_array_equal(a, b, err_msg=k)
    assert len(fs.tasks) == ref["n_tasks"]
    assert [t.failed for t in fs.tasks] == ref["failed"]


@pytest.mark.parametrize("path", ansor_logs(), ids=lambda p: f"{dir_id(p.parent)}/{p.name}")
def test_cpp_equals_reference_on_real_ansor_logs(path):
    assert_same(tcl.featurize(path), reference_featurize(path))


def test_cpp_equals_reference_on_stock_metaschedule_databases():
    fs = tcl.featurize(MS_FIXTURE)
    assert len(fs.tasks) == 2 and len(fs) >= 40
    assert_same(fs, reference_featurize(MS_FIXTURE))


@pytest.mark.parametrize("logs", ANSOR_DIRS, ids=dir_id)
def test_threads_do_not_change_the_result(logs):
    one = tcl.featurize(logs, threads=1)
    many = tcl.featurize(logs, threads=4)
    for k in ARRAYS:
        np.testing.assert_array_equal(getattr(one, k), getattr(many, k))


@pytest.mark.parametrize("logs", ANSOR_DIRS, ids=dir_id)
def test_labels_failures_and_padding(logs):
    fs = tcl.featurize(logs)
    assert np.all(fs.label > 0) and np.all(fs.label <= 1)
    for t in range(len(fs.tasks)):
        assert fs.label[fs.task == t].max() == 1.0
    # Failed A100 records (error_no 6, cost 1e10) are counted, never given a latency.
    assert fs.failed == FAILED_IN[logs] and np.all(fs.cost < 1)
    # Rows past the true length are zero (padding at the end), rows before it are not.
    steps = np.arange(SPEC.seq_len)[None, :]
    pad = steps >= fs.length[:, None]
    assert not fs.seq[pad].any()
    assert np.all(fs.seq[~pad][:, : SPEC.num_kinds].sum(-1) == 1)
    # Registered names give operator tags; TenSet hash keys do not.
    by_key = {t.workload: i for i, t in enumerate(fs.tasks)}
    mm = [i for w, i in by_key.items() if "ansor_mm" in w][0]
    assert fs.workload[fs.task == mm][0, SPEC.tag_names.index("matmul")] == 1


def test_in_memory_traces_equal_the_file_path():
    fs = tcl.featurize(MS_FIXTURE)
    recs = read(MS_FIXTURE).records
    traces = [json.dumps(r.trace_json) for r in recs]
    args = recs[0].args_info
    seq, length, workload = tcl.featurize_traces(traces, args_info=args, threads=2)
    np.testing.assert_array_equal(seq, fs.seq)
    np.testing.assert_array_equal(length, fs.length)
    same_task = [i for i, r in enumerate(recs) if r.workload_hash == recs[0].workload_hash]
    np.testing.assert_array_equal(workload[same_task], fs.workload[same_task])
    m, n, w = ms_trace(recs[0].insts, recs[0].decisions, args)
    np.testing.assert_array_equal(seq[0], m)
    # Lists (Trace.as_json() form) are accepted too.
    seq2, _, _ = tcl.featurize_traces([r.trace_json for r in recs[:3]])
    np.testing.assert_array_equal(seq2, fs.seq[:3])


def test_compressed_files_read_the_same(tmp_path):
    for db in MS_FIXTURE.iterdir():
        if not db.is_dir():
            continue
        dst = tmp_path / db.name
        dst.mkdir()
        for f in db.iterdir():
            (dst / (f.name + ".xz")).write_bytes(lzma.compress(f.read_bytes()))
    a, b = tcl.featurize(MS_FIXTURE), tcl.featurize(tmp_path)
    for k in ARRAYS:
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))


def test_pack_and_restore_a_dataset(tmp_path, capsys):
    from tcl.cli import main
    from tcl.packing import is_packed

    ds = tmp_path / "ds"
    shutil.copytree(MS_FIXTURE, ds)
    original = {p.relative_to(ds): p.read_bytes() for p in ds.rglob("database_*.json")}
    assert main(["pack", str(ds)]) == 0 and is_packed(ds)
    assert not list(ds.rglob("database_*.json")) and "packed 4 files" in capsys.readouterr().out
    a, b = tcl.featurize(MS_FIXTURE), tcl.featurize(ds)  # read as they are
    for k in ARRAYS:
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    assert main(["pack", "--restore", str(ds)]) == 0 and not is_packed(ds)
    assert {p.relative_to(ds): p.read_bytes() for p in ds.rglob("database_*.json")} == original


# Every step code, booleans, nulls, an unknown pragma and both workload-key forms.
HANDMADE = [
    {"i": [["[\"conv2d_nchw\", [1, 3, 8, 8], [4, 3, 3, 3]]", "llvm -keys=cpu", [2, 64, 64, 0, 0, 0, 0, 0], "", 1, []],
           [[], [["CHW", 2, "local"], ["CHR", 0, "shared", [2]], ["SP", 2, 0, 8, [2, 4], 1],
                 ["SP", 2, 1, None, [1], True], ["FSP", 3, 0, 1, 1], ["FFSP", 3, 0, [2, 1], 1, False],
                 ["RE", 2, [0, 2, 1, 3]], ["FU", 3, [0, 1]], ["AN", 3, 0, 3], ["PR", 2, 0, "auto_unroll_max_step$64"],
                 ["PR", 2, 0, "debug_skip_region"], ["SA", 2, 1, 16, 0], ["CA", 1, 2, 3], ["CI", 1], ["CR", 4],
                 ["RF", 2, 3, 1]]]],
     "r": [[0.002, 0.003], 0, 1.5, 1700000000], "v": "v0.6"},
    {"i": [["[\"6d125280c99b3732e95e03b4ef2b5fb7\", [[1, 64, 56, 56], [64, 64, 3, 3]], 2.5]", "llvm -keys=cpu"],
           [[], [["SP", 0, 0, 56, [7, 8], 1], ["AN", 0, 1, 2]]]],
     "r": [[0.004], 0, 1.0, 1700000001], "v": "v0.6"},
    {"i": [["[\"ansor_mm\", 16, 16, 16, \"float32\"]", "llvm -keys=cpu"], [[], [["AN", 0, 0, 3]]]],
     "r": [[1e10], 4, 1.0, 1700000002], "v": "v0.6"},
]


def test_every_step_code_and_key_form(tmp_path):
    log = tmp_path / "handmade.json"
    log.write_text("# a comment line\n\n" + "\n".join(json.dumps(r) for r in HANDMADE) + "\n")
    fs = tcl.featurize(log)
    assert_same(fs, reference_featurize(log))
    assert fs.summary() == {"programs": 2, "tasks": 3, "failed": 1, "skipped": 0, "truncated": 0}
    seen = set(np.nonzero(fs.seq[0, :, : SPEC.num_kinds])[1])
    assert {SPEC.kind_names[i] for i in seen} == set(SPEC.kind_names[1:15])
    assert fs.line.tolist() == [3, 4]
    r = read(log)
    assert len(r.records) == 2 and len(r.failed) == 1 and r.failed[0].error_no == 4


def test_number_forms_equal_the_reference(tmp_path):
    # Plain integers take the parser's inline path; the rest (signs, fractions, exponents, more
    # digits than it reads) fall through to the full parse: both must give what Python gives.
    text = json.dumps(HANDMADE[1])
    odd = "[\"SP\", 0, 0, 123456789012345678901, [-0, 7.5, 2e3, -12, 1E-2, 123456789012345678], 1]"
    log = tmp_path / "numbers.json"
    log.write_text(text.replace("[\"AN\", 0, 1, 2]", odd) + "\n")
    fs = tcl.featurize(log)
    assert_same(fs, reference_featurize(log))
    row = fs.seq[0, 1, SPEC.num_kinds:]
    assert row[2] == np.float32(np.log1p(123456789012345678901.0)) and row[3] == 0.0


def test_long_sequences_are_cut_at_L_and_counted(tmp_path):
    rec = json.loads(json.dumps(HANDMADE[1]))
    rec["i"][1][1] = [["AN", 0, i, 2] for i in range(SPEC.seq_len + 10)]
    log = tmp_path / "long.json"
    log.write_text(json.dumps(rec) + "\n")
    fs = tcl.featurize(log)
    assert fs.truncated == 1 and fs.length[0] == SPEC.seq_len
    assert_same(fs, reference_featurize(log))


BAD_LINES = [
    ("{\"i\": [", "expected"),
    ("[1, 2, 3]", "expected '{'"),
    ("{\"r\": [[0.1], 0]}", "no \"i\""),
    ("{\"i\": [[\"[1]\", \"llvm\"], [[], [[\"XX\", 1]]]], \"r\": [[0.1], 0]}", "unknown Ansor step code 'XX'"),
    ("{\"i\": [[\"not json\", \"llvm\"], [[], []]], \"r\": [[0.1], 0]}", "workload key"),
    ("{\"i\": [[\"[1]\", \"llvm\"], [[], []]], \"r\": [[0.1], 0]} trailing", "trailing text"),
]


@pytest.mark.parametrize("bad,expected", BAD_LINES)
def test_bad_ansor_line_names_file_line_and_what(tmp_path, bad, expected):
    good = json.dumps(HANDMADE[1])
    log = tmp_path / "bad.json"
    log.write_text(f"{good}\n{bad}\n{good}\n")
    with pytest.raises(FormatError) as e:
        tcl.featurize(log)
    assert f"{log}:2:" in str(e.value) and expected in str(e.value)
    with pytest.raises(FormatError, match=f"{log}:2:"):
        read(log)
    fs = tcl.featurize(log, errors="skip")
    assert fs.skipped == 1 and len(fs) == 2 and f"{log}:2:" in fs.errors[0]
    assert read(log, errors="skip").skipped == 1


def test_bad_metaschedule_database(tmp_path):
    src = next(p for p in MS_FIXTURE.iterdir() if p.is_dir())
    db = tmp_path / "db"
    shutil.copytree(src, db)
    rec = db / "database_tuning_record.json"
    lines = rec.read_text().splitlines()
    lines[1] = lines[1].replace("[0,", "[7,", 1)  # a workload index that does not exist
    rec.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match=r"database_tuning_record.json:2: .*workload index 7"):
        tcl.featurize(db)
    assert tcl.featurize(db, errors="skip").skipped == 1
    (db / "database_workload.json").unlink()
    with pytest.raises(FormatError, match="database_workload.json is missing"):
        tcl.featurize(db)


def test_bad_traces_raise():
    with pytest.raises(FormatError, match="trace 1"):
        tcl.featurize_traces(['[[], []]', '[[["Split"'])
    with pytest.raises(FormatError, match="decision refers to instruction 5"):
        tcl.featurize_traces(['[[["Split", [], [], []]], [[5, 1]]]'])
    with pytest.raises(ValueError, match="errors must be"):
        tcl.featurize(MS_FIXTURE, errors="ignore")
    with pytest.raises(FileNotFoundError):
        tcl.featurize("/no/such/file.json")


def test_import_needs_numpy_only(tmp_path):
    code = "import sys, tcl; tcl.featurize_traces(['[[],[]]']); " \
           "bad = [m for m in ('torch', 'tvm', 'onnxruntime') if m in sys.modules]; assert not bad, bad"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)  # the installed tcl


def test_dataset_tree_with_task_and_platform_files(tmp_path):
    root = tmp_path / "datasets" / "cpu-avx512"
    for i, db in enumerate(sorted(d for d in MS_FIXTURE.iterdir() if d.is_dir())):
        shutil.copytree(db, root / db.name)
        (root / db.name / "task.json").write_text(json.dumps(
            {"name": db.name, "weight": 3, "weights": {"resnet18": 2, "vgg11": 1},
             "networks": ["resnet18", "vgg11"], "flops": 1e6 * (i + 1), "split": "train"}))
    (root / "platform.json").write_text(json.dumps({"cores": 2, "vector_bits": 512}))
    (root / "collect.log").write_text("2026-11-29 12:00:00 INFO not a record\n")  # skipped
    fs = tcl.featurize(tmp_path / "datasets")
    assert len(fs.tasks) == 2
    for t in fs.tasks:
        assert t.weight == 3 and t.networks == {"resnet18": 2, "vgg11": 1} and t.split == "train"
        assert t.platform == {"cores": 2, "vector_bits": 512, "name": "cpu-avx512"}
    from tcl.cli import dataset_info

    info = dataset_info([tmp_path / "datasets"])
    assert info["cpu-avx512"]["tasks"] == 2 and info["cpu-avx512"]["networks"] == ["resnet18", "vgg11"]



# ---- Numbers out of range and costs that are no measurement


def ansor_line(extent="56", value="2", key_extra="2.5", hw="2, 64", costs="0.004", error_no="0",
               timestamp="1700000001", extra_step=""):
    """HANDMADE[1] as text, with any part replaced by a literal that json.dumps cannot write."""
    key = json.dumps(f'["6d125280c99b3732e95e03b4ef2b5fb7", [[1, 64, 56, 56], [64, 64, 3, 3]], {key_extra}]')
    steps = f'["SP", 0, 0, {extent}, [7, 8], 1], ["AN", 0, 1, {value}]{extra_step}'
    return (f'{{"i": [[{key}, "llvm -keys=cpu", [{hw}]], [[], [{steps}]]], '
            f'"r": [[{costs}], {error_no}, 1.0, {timestamp}], "v": "v0.6"}}')


def ms_line(index="0", decision_index="2", decision="8, 16", split_attrs="1, 0", run_secs="[0.001]",
            shape="128, 128", loop="l1"):
    """One MetaSchedule tuning record as text (workload "123" of MS_WORKLOAD)."""
    insts = (f'["GetSBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2"]], '
             f'["SamplePerfectTile", ["{loop}"], [2, 64], ["v3", "v4"]], '
             f'["Split", ["l1", "v3", "v4"], [{split_attrs}], ["l5", "l6"]]')
    trace = f'[[{insts}], [[{decision_index}, [{decision}]]]]'
    return f'[{index}, [{trace}, {run_secs}, {{"kind": "llvm"}}, [["TENSOR", "float32", [{shape}]]]]]'


MS_WORKLOAD = '["123", "AA=="]\n'


def core(kind, text, errors="raise"):
    """tcl._core.featurize_files on one in-memory source named t.log."""
    wl = ("wl.json", MS_WORKLOAD.encode()) if kind == "metaschedule" else (None, None)
    return tcl._core.featurize_files([(kind, "t.log", text.encode(), *wl)], errors, 1)


def write_input(tmp_path, kind, lines):
    """An Ansor log or a MetaSchedule database holding `lines`; returns (path to featurize, file
    that errors name)."""
    if kind == "ansor":
        log = tmp_path / "log.json"
        log.write_text("\n".join(lines) + "\n")
        return log, log
    db = tmp_path / "db"
    db.mkdir()
    (db / "database_workload.json").write_text(MS_WORKLOAD)
    (db / "database_tuning_record.json").write_text("\n".join(lines) + "\n")
    return db, db / "database_tuning_record.json"


@pytest.mark.parametrize("value", ["9.3e18", "1e300", "-1e19", "9223372036854775808", "1e400", "-1e400"])
@pytest.mark.parametrize("where", ["error_no", "hardware_params", "workload_index", "decision_index"])
def test_integers_beyond_int64_raise_without_undefined_casts(value, where):
    # Such a double used to be converted to int64 before its range was checked: undefined
    # behaviour (the sanitizer job aborts on it), and the message said nothing about the range.
    kind, bad = {
        "error_no": ("ansor", ansor_line(error_no=value)),
        "hardware_params": ("ansor", ansor_line(hw="2, " + value)),
        "workload_index": ("metaschedule", ms_line(index=value)),
        "decision_index": ("metaschedule", ms_line(decision_index=value)),
    }[where]
    good = ansor_line() if kind == "ansor" else ms_line()
    text = f"{good}\n{bad}\n{good}\n"
    pattern = rf"t\.log:2: (integer|number) out of range at column \d+, found '{re.escape(value[:5])}"
    with pytest.raises(FormatError, match=pattern):
        core(kind, text)
    out = core(kind, text, "skip")
    assert out["skipped"] == 1 and len(out["label"]) == 2
    with pytest.raises(FormatError, match="expected an integer"):  # no NaN literal in JSON
        core("ansor", ansor_line(error_no="NaN"))


@pytest.mark.parametrize("kind,bad", [
    ("ansor", ansor_line(costs="0")),
    ("ansor", ansor_line(costs="-0.0")),
    ("ansor", ansor_line(costs="-1e-3")),
    ("ansor", ansor_line(costs="0.002, 0")),
    ("metaschedule", ms_line(run_secs="[0]")),
    ("metaschedule", ms_line(run_secs="[-0.0]")),
    ("metaschedule", ms_line(run_secs="[-1e-3]")),
    ("metaschedule", ms_line(run_secs="[0.001, -0.001]")),
], ids=lambda v: v if len(v) < 16 else None)
def test_zero_or_negative_costs_count_as_failed(tmp_path, kind, bad):
    # They used to become a label of inf, NaN, 0 or below zero; the labels are (0, 1].
    line = ansor_line if kind == "ansor" else ms_line
    good = [line(costs="0.004"), line(costs="0.002")] if kind == "ansor" else \
        [line(run_secs="[0.004]"), line(run_secs="[0.002]")]
    path, _ = write_input(tmp_path, kind, [good[0], bad, good[1]])
    fs = tcl.featurize(path)
    assert fs.summary()["failed"] == 1 and len(fs) == 2
    assert fs.label.tolist() == [0.5, 1.0]
    assert_same(fs, reference_featurize(path))
    r = read(path)
    assert len(r.records) == 2 and len(r.failed) == 1


def test_python_reader_fails_the_same_costs():
    from tcl.records import _failed

    for costs in ([0.0], [-0.0], [-1e-3], [math.nan], [0.002, 0.0], [1e10], []):
        assert _failed(costs), costs
    assert not _failed([0.002, 1e-300])


def test_labels_stay_above_zero_for_extreme_ratios(tmp_path):
    # best / cost below the smallest float32 used to round to a label of 0.
    log, _ = write_input(tmp_path, "ansor", [ansor_line(costs="1e-300"), ansor_line(costs="1e8")])
    fs = tcl.featurize(log)
    assert len(fs) == 2 and np.all(fs.label > 0) and np.all(fs.label <= 1)
    assert_same(fs, reference_featurize(log))


NINES = "9" * 400
NON_FINITE = [  # (kind, line, found): a literal beyond the double range where a value is read
    ("ansor", ansor_line(extent="1e400"), "1e400"),
    ("ansor", ansor_line(value="-1e400"), "-1e400"),
    ("ansor", ansor_line(value="1" + "0" * 400), "10000"),
    ("ansor", ansor_line(key_extra="[1e400, 2]"), "1e400"),
    ("ansor", ansor_line(costs="1e400"), "1e400"),
    ("ansor", ansor_line(extra_step=f', ["PR", 0, 1, "auto_unroll_max_step${NINES}"]'), '"auto'),
    ("metaschedule", ms_line(split_attrs="1e400, 0"), "1e400"),
    ("metaschedule", ms_line(decision="1e400, 16"), "1e400"),
    ("metaschedule", ms_line(shape="1e400, 128"), "1e400"),
    ("metaschedule", ms_line(run_secs="[1e400]"), "1e400"),
    ("metaschedule", ms_line(loop="l" + NINES), '"l999'),
]


@pytest.mark.parametrize("kind,bad,found", NON_FINITE, ids=lambda v: v[:12] if len(v) < 60 else None)
def test_numbers_beyond_double_range_are_format_errors(tmp_path, kind, bad, found):
    # They used to become inf in seq / workload (and a NaN score in the ONNX model).
    good = ansor_line() if kind == "ansor" else ms_line()
    path, named = write_input(tmp_path, kind, [good, bad, good])
    pattern = rf"{re.escape(str(named))}:2: .*number out of range at column \d+, found '{re.escape(found)}"
    with pytest.raises(FormatError, match=pattern):
        tcl.featurize(path)
    fs = tcl.featurize(path, errors="skip")
    assert fs.skipped == 1 and len(fs) == 2 and f"{named}:2:" in fs.errors[0]
    assert np.isfinite(fs.seq).all() and np.isfinite(fs.workload).all()
    with pytest.raises(FormatError, match=f"{re.escape(str(named))}:2:"):
        reference_featurize(path)


def test_numbers_beyond_double_range_in_traces_raise():
    trace = json.loads(ms_line())[1][0]
    bad = json.dumps(trace).replace("[8, 16]", "[1e400, 16]")
    with pytest.raises(FormatError, match="trace 1: number out of range at column"):
        tcl.featurize_traces([json.dumps(trace), bad])
    text = "\n".join([
        "def apply_trace(sch: s_tir.Schedule) -> None:",
        '  b0 = sch.get_sblock(name="C", func_name="main")',
        "  l1, l2 = sch.get_loops(block=b0)",
        "  v3, v4 = sch.sample_perfect_tile(loop=l1, n=2, max_innermost_factor=64, decision=[8, 16])",
    ])
    tcl.featurize_traces([text])
    bad = text.replace("[8, 16]", "[1e400, 16]")
    column = bad.splitlines()[3].index("1e400") + 1
    with pytest.raises(FormatError, match=f"line 4: number out of range at column {column}, found '1e400"):
        tcl.featurize_traces([bad])
    with pytest.raises(FormatError, match="line 4: number out of range"):
        tcl.featurize_traces([text.replace("loop=l1", "loop=l" + NINES)])


def test_tiny_and_skipped_out_of_range_literals_are_not_errors(tmp_path):
    # 1e-400 underflows to 0 (it used to read as inf); a skipped field may hold 1e400.
    lines = [ansor_line(value="1e-400", extent="-1e-400"), ansor_line(timestamp="1e400")]
    log, _ = write_input(tmp_path, "ansor", lines)
    fs = tcl.featurize(log)
    assert_same(fs, reference_featurize(log))
    assert len(fs) == 2 and fs.seq[0, 1, SPEC.num_kinds + 3] == 0.0


@pytest.mark.parametrize("kind,line", [
    ("ansor", ansor_line(key_extra="[1e200, 1e200], [-1, 3], -5, [1e300, 1e300, 0]")),
    ("metaschedule", ms_line(decision="1e200, 1e200", shape="1e300, 1e300")),
    ("metaschedule", ms_line(decision="-4, 4", shape="-4, 4")),
])
def test_overflowing_products_and_negative_sizes_stay_finite(tmp_path, kind, line):
    # A shape or tile product that overflows (or is inf * 0) and a negative size are not counted
    # in the workload descriptor: they used to make it inf or NaN.
    path, _ = write_input(tmp_path, kind, [line])
    fs = tcl.featurize(path)
    assert len(fs) == 1 and np.isfinite(fs.seq).all() and np.isfinite(fs.workload).all()
    assert_same(fs, reference_featurize(path))


def test_symlinked_task_directories_are_followed_once(tmp_path):
    # a dataset assembled from links to another dataset's task directories, with a link loop
    dbs = sorted(d for d in MS_FIXTURE.iterdir() if d.is_dir())
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "first").symlink_to(dbs[0], target_is_directory=True)
    (ds / "again").symlink_to(dbs[0], target_is_directory=True)
    nested = ds / "more"
    nested.mkdir()
    (nested / "second").symlink_to(dbs[1], target_is_directory=True)
    (nested / "loop").symlink_to(ds, target_is_directory=True)
    from tcl.records import discover

    found = discover(ds)
    assert sorted(s.path.resolve() for s in found) == sorted((d / "database_tuning_record.json").resolve() for d in dbs)
    fs, direct = tcl.featurize(ds), tcl.featurize(MS_FIXTURE)  # the same databases in the same order
    for k in ARRAYS:
        np.testing.assert_array_equal(getattr(fs, k), getattr(direct, k))
