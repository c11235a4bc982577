"""Bad user input raises tcl.FormatError naming the file (and what was expected), and the CLI
prints one line and exits 2: never a raw traceback (issue 33)."""

import gzip
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import tcl
from tcl import FormatError
from tcl.cli import main
from tcl.records import discover, read

MS_DB = Path(__file__).parent / "fixtures" / "ms" / "matmul_128"
GOOD = json.dumps({"i": [["[\"ansor_mm\", 16, 16, 16]", "llvm -keys=cpu"], [[], [["SP", 0, 0, 56, [7, 8], 1]]]],
                   "r": [[0.004], 0, 1.0, 1700000001], "v": "v0.6"})
DEEP = "[" * 10000


@pytest.fixture
def db(tmp_path):
    shutil.copytree(MS_DB, tmp_path / "db")
    return tmp_path / "db"


# ---------------------------------------------------------------------------------------------
# 1. task.json and platform.json

BAD_TASK = [
    (b'{"name": "\xff\xfe"}', "not UTF-8"),
    (b'[1, 2]', "expected a JSON object"),
    (b'{"weight": "heavy"}', '"weight" must be a positive number'),
    (b'{"weight": -2}', '"weight" must be a positive number'),
    (b'{"name": 3}', '"name" must be a string'),
    (b'{"flops": "many"}', '"flops" must be'),
    (b'{"networks": 5}', '"networks" must be'),
    (b'{"weights": {"resnet18": "x"}}', '"weights" must be'),
    (b'{"split": ["test"]}', '"split" must be'),
    (DEEP.encode(), "nested too deeply"),
]
BAD_PLATFORM = [
    (b'{"cores": "\xff"}', "not UTF-8"),
    (b'["cores", 2]', "expected a JSON object"),
    (b'{"cores": "many"}', '"cores" must be'),
    (b'{"vector_bits": [512]}', '"vector_bits" must be'),
    (b'{"host_cores": true}', '"host_cores" must be'),
    (b'{"target": 5}', '"target" must be a string'),
    (b'{"name": {"a": 1}}', '"name" must be a string'),
    (DEEP.encode(), "nested too deeply"),
]


@pytest.mark.parametrize("name,content,expected", [("task.json", *c) for c in BAD_TASK]
                         + [("platform.json", *c) for c in BAD_PLATFORM], ids=lambda v: str(v)[:20])
def test_bad_side_file_names_the_file(db, name, content, expected):
    (db / name).write_bytes(content)
    with pytest.raises(FormatError, match=expected) as e:
        tcl.featurize(db)
    assert str(db / name) in str(e.value)


def test_good_side_files_with_nulls_still_read(db):
    (db / "task.json").write_text(json.dumps({"name": "mm", "weight": 2, "flops": None, "networks": ["a"]}))
    (db / "platform.json").write_text(json.dumps({"cores": 2, "turbo_clock_ghz": None, "rpc": None,
                                                  "target": "llvm"}))
    t = tcl.featurize(db).tasks[0]
    assert t.weight == 2 and t.networks == {"a": 1} and t.platform["cores"] == 2


def test_deeply_nested_target_is_not_a_crash():
    from tcl.hardware import hardware_vector, is_gpu

    p = {"target": '{"kind": ' + DEEP}
    assert not is_gpu(p) and hardware_vector(p).shape == (12,)


# ---------------------------------------------------------------------------------------------
# 2. a .gz file whose deflate stream is corrupt


def test_corrupt_gzip_deflate_stream(tmp_path):
    data = bytearray(gzip.compress((GOOD + "\n").encode() * 20))
    data[10] ^= 0xFF  # the first deflate block header: "invalid code lengths set" (zlib.error)
    path = tmp_path / "log.json.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"log\.json\.gz: not a valid \.gz file"):
        read(path)
    with pytest.raises(FormatError, match=r"log\.json\.gz"):
        tcl.featurize(path)


# ---------------------------------------------------------------------------------------------
# 3. a line nested too deeply for Python's JSON parser


def test_deeply_nested_line_is_a_bad_line(tmp_path):
    log = tmp_path / "deep.json"
    log.write_text(f"{GOOD}\n{DEEP}\n{GOOD}\n")
    with pytest.raises(FormatError, match=f"{log}:2: JSON nested too deeply"):
        read(log)
    r = read(log, errors="skip")
    assert r.skipped == 1 and len(r.records) == 2 and "deep.json:2:" in r.errors[0]
    assert tcl.featurize(log, errors="skip").skipped == 1


def test_non_numeric_costs_are_a_bad_line(tmp_path):
    log = tmp_path / "costs.json"
    log.write_text(GOOD.replace("[0.004]", "[{}]") + "\n")
    with pytest.raises(FormatError, match=f"{log}:1: .*expected numbers"):
        read(log)
    log.write_text(GOOD.replace("[0.004]", "[1" + "0" * 400 + "]") + "\n")  # too large for a float
    assert read(log).failed[0].costs == [float("inf")]


# ---------------------------------------------------------------------------------------------
# 4. one file reached twice is read once


def test_same_file_through_several_paths_is_read_once(tmp_path, db):
    log = tmp_path / "logs" / "a.json"
    log.parent.mkdir()
    log.write_text(GOOD + "\n")
    os.symlink(db, tmp_path / "db_link")
    once = len(read([db, log]).records)
    assert once == len(read(db).records) + 1
    assert len(read([db, db, log, log.parent, tmp_path / "db_link", db / "database_tuning_record.json"]).records) == once
    assert len(discover([tmp_path])) == 2  # the walk does not follow db_link; dedup keeps one of each
    fs = tcl.featurize([db, tmp_path / "db_link", log, log.parent])
    assert len(fs) == once and len(fs.sources) == 2


# ---------------------------------------------------------------------------------------------
# 5. a symlink loop is named as one


def test_symlink_loop_and_dangling_symlink(tmp_path, capsys):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    with pytest.raises(FileNotFoundError, match="symlink loop"):
        discover(tmp_path / "a")
    os.symlink(tmp_path / "missing", tmp_path / "dangling")
    with pytest.raises(FileNotFoundError, match="a symlink to .*missing, which does not exist"):
        discover(tmp_path / "dangling")
    assert main(["info", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "symlink loop" in err and "no such file" not in err


# ---------------------------------------------------------------------------------------------
# 6. tcl info on a half-written last line; unrelated JSON files in a dataset directory


def test_info_counts_a_half_written_last_line(tmp_path, db, capsys):
    rec = db / "database_tuning_record.json"
    text = rec.read_text().rstrip("\n")
    rec.write_text(text[:-40])  # what a collector killed mid-write leaves: no newline, cut JSON
    assert main(["info", "--json", str(db)]) == 0
    out, err = capsys.readouterr()
    info = json.loads(out)
    assert sum(v["programs"] for v in info.values()) == text.count("\n")  # all but the last line
    assert "1 malformed line skipped" in err and "database_tuning_record.json:" in err


def test_unrelated_json_files_are_passed_over_with_a_note(tmp_path, db, capsys):
    (tmp_path / "report.json").write_text(json.dumps({"network": "resnet18", "tasks": {}}, indent=1))
    (tmp_path / "summary.json").write_text(json.dumps({"network": "resnet18", "rows": [1]}) + "\n")
    fs = tcl.featurize(tmp_path)
    assert len(fs) == len(tcl.featurize(db)) and len(fs.notes) == 2
    assert "report.json: not an Ansor log" in fs.notes[0]
    assert main(["info", str(tmp_path)]) == 0
    assert main(["featurize", str(tmp_path), "--out", str(tmp_path / "f.npz")]) == 0
    err = capsys.readouterr().err
    assert err.count("summary.json: not an Ansor log") == 2


# ---------------------------------------------------------------------------------------------
# 7. control characters of the input are escaped in messages


def test_control_characters_are_escaped(tmp_path, capsys):
    bad = GOOD.replace('"SP"', '"\\u001b[31mXX\\r"')
    log = tmp_path / "ctl.json"
    log.write_text(bad + "\n")
    for f in (read, tcl.featurize):
        with pytest.raises(FormatError) as e:
            f(log)
        assert "\x1b" not in str(e.value) and "\r" not in str(e.value)
    assert "\x1b" not in read(log, errors="skip").errors[0]
    assert "\x1b" not in tcl.featurize(log, errors="skip").errors[0]
    assert main(["info", str(tmp_path / "\x1b[2Jgone\r.json")]) == 2
    assert main(["featurize", str(log), "--out", str(tmp_path / "x.npz")]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\r" not in err and "\\x1b[2Jgone\\r.json" in err
    assert str(FormatError("a\x1bb\nc\u202ed")) == "a\\x1bb\\nc\\u202ed"


# ---------------------------------------------------------------------------------------------
# 8 and 10. the ONNX Scorer's inputs and metadata


def _tiny_onnx(path, meta: dict, raw: dict | None = None, W: int = tcl.SPEC.workload_dim, P: int = 12):
    """A stand-in cost model (score = sums of its inputs) with TCL metadata: builds in
    milliseconds, unlike a real export."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    D = tcl.SPEC.row_dim
    inputs = [helper.make_tensor_value_info("seq", TensorProto.FLOAT, ["batch", "length", D]),
              helper.make_tensor_value_info("lengths", TensorProto.INT64, ["batch"]),
              helper.make_tensor_value_info("workload", TensorProto.FLOAT, ["batch", W]),
              helper.make_tensor_value_info("hardware", TensorProto.FLOAT, ["batch", P])]
    nodes = [helper.make_node("ReduceSum", ["seq", "ax12"], ["s"], keepdims=0),
             helper.make_node("ReduceSum", ["workload", "ax1"], ["w"], keepdims=0),
             helper.make_node("ReduceSum", ["hardware", "ax1"], ["h"], keepdims=0),
             helper.make_node("Cast", ["lengths"], ["l"], to=TensorProto.FLOAT),
             helper.make_node("Sum", ["s", "w", "h", "l"], ["score"])]
    inits = [helper.make_tensor("ax12", TensorProto.INT64, [2], [1, 2]),
             helper.make_tensor("ax1", TensorProto.INT64, [1], [1])]
    graph = helper.make_graph(nodes, "tiny", inputs, [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["batch"])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    for k, v in meta.items():
        model.metadata_props.add(key="tcl." + k, value=json.dumps(v))
    for k, v in (raw or {}).items():
        model.metadata_props.add(key="tcl." + k, value=v)
    onnx.save(model, str(path))
    return path


def _meta():
    return {"spec_version": tcl.SPEC.version, "hardware": [0.0] * 12,
            "config": {"seq_len": tcl.SPEC.seq_len, "feature_dim": tcl.SPEC.row_dim,
                       "workload_dim": tcl.SPEC.workload_dim, "hardware_dim": 12}}


def _inputs(n=3, rows=None):
    rows = rows or tcl.SPEC.seq_len
    seq = np.zeros((n, rows, tcl.SPEC.row_dim), np.float32)
    seq[:, :2] = 1
    return seq, np.full(n, 2, np.int64), np.ones((n, tcl.SPEC.workload_dim), np.float32)


def test_scorer_checks_its_inputs(tmp_path):
    from tcl.runtime import Scorer

    scorer = Scorer(_tiny_onnx(tmp_path / "m.onnx", _meta()))
    seq, length, workload = _inputs()
    good = scorer.score(seq, length, workload)
    assert np.all(np.isfinite(good))
    L, D = tcl.SPEC.seq_len, tcl.SPEC.row_dim
    bad = [
        ({"length": np.array([2, L + 1, 2])}, "lengths must be whole numbers from 0 to L"),
        ({"length": np.array([2, -1, 2])}, "lengths must be"),
        ({"length": np.array([2, 1.5, 2])}, "lengths must be"),
        ({"length": np.array([2, 2])}, rf"seq has shape \[3, {L}, {D}\], the model takes \[2, S, {D}\]"),
        ({"length": np.int64(2)}, "length has shape"),
        ({"seq": np.where(np.arange(3)[:, None, None] == 1, np.nan, seq)}, "seq holds NaN"),
        ({"seq": np.full_like(seq, -np.inf)}, "seq holds NaN or infinite"),
        ({"seq": seq[:, :, :5]}, rf"seq has shape \[3, {L}, 5\], the model takes \[3, S, {D}\]"),
        ({"seq": seq[:, :1]}, "at most seq's 1 rows"),
        ({"workload": workload[:, :3]}, "workload has shape"),
        ({"workload": workload * np.nan}, "workload holds NaN"),
        ({"hardware": np.full((3, 12), np.inf)}, "hardware holds NaN"),
        ({"hardware": np.zeros((3, 4))}, "hardware has shape"),
        ({"seq": [[1, 2], [3]]}, "seq: not an array"),
        ({"workload": np.array([["a"] * 16] * 3)}, "workload: expected numbers"),
    ]
    for change, expected in bad:
        args = {"seq": seq, "length": length, "workload": workload, "hardware": None, **change}
        with pytest.raises(FormatError, match=expected):
            scorer.score(**args)
    # an empty program (length 0, as the featurizer gives an empty trace) is a valid input
    assert np.isfinite(scorer.score(seq, np.array([0, 2, L]), workload)).all()
    assert scorer.score(seq[:0], length[:0], workload[:0]).shape == (0,)


def test_scorer_feeds_no_descriptor_to_a_model_that_reads_none(tmp_path):
    """TLP reads no workload or hardware descriptor (dims 0): the featurizer's ones are not fed."""
    from tcl.runtime import Scorer

    meta = _meta()
    meta["config"].update(workload_dim=0, hardware_dim=0)
    scorer = Scorer(_tiny_onnx(tmp_path / "m.onnx", {**meta, "hardware": []}, W=0, P=0))
    seq, length, workload = _inputs()
    np.testing.assert_array_equal(scorer.score(seq, length, workload, np.ones((3, 12))), 2 * tcl.SPEC.row_dim + 2)


@pytest.mark.parametrize("raw", [{"config": "{not json"}, {"spec_version": ""}, {"hardware": "[" * 5000}])
def test_onnx_metadata_that_is_not_json(tmp_path, raw):
    from tcl.export import read_metadata
    from tcl.runtime import Scorer

    meta = {k: v for k, v in _meta().items() if k not in raw}
    path = _tiny_onnx(tmp_path / "m.onnx", meta, raw)
    key = "tcl." + next(iter(raw))
    with pytest.raises(FormatError, match=f"m.onnx: metadata {key} is not JSON"):
        Scorer(path)
    with pytest.raises(FormatError, match=f"m.onnx: metadata {key} is not JSON"):
        read_metadata(path)


def test_onnx_metadata_of_the_wrong_shape(tmp_path):
    from tcl.export import read_metadata
    from tcl.runtime import Scorer

    with pytest.raises(FormatError, match="tcl.config must be a JSON object"):
        Scorer(_tiny_onnx(tmp_path / "a.onnx", {**_meta(), "config": [1]}))
    with pytest.raises(FormatError, match="expected whole numbers"):
        Scorer(_tiny_onnx(tmp_path / "b.onnx", {**_meta(), "config": {"seq_len": "64"}}))
    (tmp_path / "c.onnx").write_bytes(b"\x08\x07garbage")
    with pytest.raises(FormatError, match="c.onnx: not an ONNX model"):
        read_metadata(tmp_path / "c.onnx")


# ---------------------------------------------------------------------------------------------
# 9. checkpoints


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from tcl.architectures import build_model
    from tcl.checkpoint import save_checkpoint

    path = tmp_path_factory.mktemp("ck") / "m.pt"
    save_checkpoint(path, build_model("mamba", d_model=16), "mamba", {"data": []})
    return torch.load(path, weights_only=True)


def _broken(torch, ck, path, change):
    ck = {**ck, "config": dict(ck["config"])}
    change(ck)
    torch.save(ck, path)
    return path


@pytest.mark.parametrize("change,expected", [
    (lambda ck: ck["config"].update(d_model=32), "weights do not match the checkpoint's config"),
    (lambda ck: ck["config"].update(n_layer=2), "weights do not match"),
    (lambda ck: ck["config"].update(colour="red"), "config does not make a mamba model"),
    (lambda ck: ck["config"].update(d_model=-4), "config does not make a mamba model"),
    (lambda ck: ck.pop("spec_version"), "has no 'spec_version'"),
    (lambda ck: ck.pop("hardware_dim"), "has no 'hardware_dim'"),
    (lambda ck: ck.pop("state_dict"), "has no 'state_dict'"),
    (lambda ck: ck.update(arch="transformer-xl"), "unknown model architecture 'transformer-xl'"),
    (lambda ck: ck.update(config=[1, 2]), "'config' must be of type dict"),
    (lambda ck: ck.update(spec_version="1"), "'spec_version' must be of type int"),
])
def test_broken_checkpoint_names_the_file_and_what(tmp_path, checkpoint, change, expected, capsys):
    torch = pytest.importorskip("torch")
    from tcl.checkpoint import load_checkpoint

    path = _broken(torch, checkpoint, tmp_path / "bad.pt", change)
    with pytest.raises(FormatError, match=expected) as e:
        load_checkpoint(path)
    assert str(path) in str(e.value)
    assert main(["eval", str(MS_DB), "--model", str(path), "--all"]) == 2
    assert capsys.readouterr().err.startswith("tcl eval: error: ")


def test_broken_ewc_state_of_a_knowledge_base(tmp_path, checkpoint):
    torch = pytest.importorskip("torch")
    from tcl.continual.kb import load_kb

    path = _broken(torch, checkpoint, tmp_path / "kb.pt", lambda ck: ck.update(ewc={"fisher": None, "x": 1}))
    with pytest.raises(FormatError, match="kb.pt: the EWC state"):
        load_kb(path)


def test_export_checks_its_platform_file(tmp_path, checkpoint, capsys):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    ck = tmp_path / "m.pt"
    torch.save(checkpoint, ck)
    platform = tmp_path / "platform.json"
    for content in (b"[" * 10000, b'{"cores": "two"}', b"\xff"):
        platform.write_bytes(content)
        assert main(["export", str(ck), "--out", str(tmp_path / "m.onnx"), "--platform", str(platform)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tcl export: error: ") and f"{platform}: " in err and err.count("\n") == 1
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.parametrize("command", [["tune", "--network", "resnet18"], ["collect", "--network", "resnet18"]])
def test_platform_info_must_be_a_json_object(tmp_path, command, capsys):
    info = tmp_path / "device.json"
    for content in (b"[1, 2]", b"{", b"\xff", b"[" * 10000):
        info.write_bytes(content)
        with pytest.raises(SystemExit) as stop:
            main([*command, "--platform-info", str(info), "--out", str(tmp_path / "out")])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert f"error: argument --platform-info: {info}: " in err
    with pytest.raises(SystemExit):
        main([*command, "--platform-info", str(tmp_path / "missing.json")])
    assert "missing.json" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
