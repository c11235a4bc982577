"""bench/transfer.py: physical hosts are told apart by platform.json, each is left out in turn, and
every model is scored on every platform's held-out tasks."""

import json
import shutil
from pathlib import Path

import pytest
from bench_module import load_bench

from tcl.cli.options import named_checkpoint

ROOT = Path(__file__).resolve().parent.parent
transfer = load_bench("transfer")


def _dataset(root: Path, name: str, platform: dict) -> Path:
    d = root / name
    shutil.copytree(ROOT / "tests" / "fixtures" / "ms", d, ignore=shutil.ignore_patterns("*.md", "*.py"))
    for task, split in (("matmul_128", "train"), ("conv2d_1x16x14x14_32_3x3", "test")):
        (d / task / "task.json").write_text(json.dumps({"name": task, "weights": {"net": 1}, "split": split}))
    (d / "platform.json").write_text(json.dumps({"name": name, "cores": 2, **platform}))
    return d


def test_hosts_of_groups_target_settings_of_one_host(tmp_path):
    amd = {"vendor": "AuthenticAMD", "cpu_model": "AMD EPYC", "l3_kb": 32768}
    a = _dataset(tmp_path, "amd-2c", amd)
    b = _dataset(tmp_path, "amd-1c-haswell", {**amd, "vector_bits": 256})
    # a newer platform.json of the same host records more identity fields
    n = _dataset(tmp_path, "zen4-epyc-1c", {**amd, "cpu_family": 25, "cpu_model_number": 17})
    c = _dataset(tmp_path, "intel-1c", {"vendor": "GenuineIntel", "cpu_family": 6, "cpu_model_number": 167})
    z1 = _dataset(tmp_path, "zen1-epyc-2c", {**amd, "cpu_family": 23, "cpu_model_number": 1, "l3_kb": 8192})
    hosts = transfer.hosts_of([a, b, n, c, z1])
    assert hosts == {"AuthenticAMD AMD EPYC": [a, b, n],
                     "GenuineIntel 6 167": [c],
                     "AuthenticAMD 23 1 AMD EPYC": [z1]}


def test_named_checkpoint_wants_an_existing_file(tmp_path):
    (tmp_path / "m.pt").write_bytes(b"x")
    assert named_checkpoint(f"old={tmp_path / 'm.pt'}") == ("old", tmp_path / "m.pt")
    for bad in ("old", f"={tmp_path / 'm.pt'}", f"old={tmp_path / 'missing.pt'}"):
        with pytest.raises(Exception, match="NAME=CHECKPOINT"):
            named_checkpoint(bad)


@pytest.mark.slow
def test_every_host_left_out_and_every_model_scored(tmp_path):
    pytest.importorskip("torch")
    a = _dataset(tmp_path, "amd-2c", {"vendor": "AuthenticAMD", "cpu_model": "AMD EPYC"})
    c = _dataset(tmp_path, "intel-1c", {"vendor": "GenuineIntel", "cpu_family": 6, "cpu_model_number": 167})
    out = tmp_path / "transfer.json"
    args = [str(a), str(c), "--epochs", "1", "--min-programs", "2", "--threads", "1",
            "--work", str(tmp_path / "work"), "--out", str(out)]
    assert transfer.main(args) == 0
    result = json.loads(out.read_text())
    assert set(result["platforms"]) == {"amd-2c", "intel-1c"}
    for cells in result["platforms"].values():
        assert set(cells) == {"shipped", "every platform", "without amd-2c", "without intel-1c"}
        for cell in cells.values():
            assert 0 <= cell["top1"] <= 1 and 0 <= cell["task_mean"] <= 1 and cell["tasks"] == 1
    stamp = transfer.data_stamp
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == [
        f"amd-2c+intel-1c_{stamp([a, c])}_e1_s0.pt", f"amd-2c_{stamp([a])}_e1_s0.pt", f"intel-1c_{stamp([c])}_e1_s0.pt"]
    assert transfer.main(args) == 0  # a second run reuses the trained checkpoints

    # the FiLM recipe: its own checkpoint, a body that reads the descriptor centred on the platforms' mean
    # rows of the earlier run stay in the summary beside the new ones
    assert transfer.main(args + ["--recipes", "head,film", "--no-leave-out"]) == 0
    cells = json.loads(out.read_text())["platforms"]["amd-2c"]
    assert set(cells) == {"shipped", "every platform", "without amd-2c", "without intel-1c",
                          "every platform (head)", "every platform (film)"}
    # the log-ratio term: a checkpoint and a row of its own
    assert transfer.main(args + ["--log-ratio-weight", "1", "--no-leave-out"]) == 0
    assert "every platform (log-ratio 1)" in json.loads(out.read_text())["platforms"]["intel-1c"]
    assert (tmp_path / "work" / f"amd-2c+intel-1c_{stamp([a, c])}_e1_s0_lr1.pt").is_file()
    from tcl.checkpoint import load_checkpoint

    film, _ = load_checkpoint(tmp_path / "work" / f"amd-2c+intel-1c_{stamp([a, c])}_e1_s0_film.pt")
    assert film.body_reads_hardware
    from tcl.hardware import hardware_vector

    platforms = [json.loads((d / "platform.json").read_text()) for d in (a, c)]
    expected = (hardware_vector(platforms[0]) + hardware_vector(platforms[1])) / 2
    assert film.hardware_ref.numpy() == pytest.approx(expected, abs=1e-6)

    # --recipes none trains nothing: it scores the shipped model and the checkpoints given
    kept = sorted((tmp_path / "work").iterdir())
    ck = tmp_path / "work" / f"amd-2c_{stamp([a])}_e1_s0.pt"
    assert transfer.main(args + ["--recipes", "none", "--checkpoint", f"earlier={ck}"]) == 0
    assert sorted((tmp_path / "work").iterdir()) == kept
    assert "earlier" in json.loads(out.read_text())["platforms"]["intel-1c"]


def test_a_kept_checkpoint_is_not_reused_after_its_datasets_gain_measurements(tmp_path):
    a = _dataset(tmp_path, "amd-2c", {"vendor": "AuthenticAMD"})
    b = _dataset(tmp_path, "intel-1c", {"vendor": "GenuineIntel"})
    before = transfer.data_stamp([a, b])
    assert transfer.data_stamp([a, b]) == before
    assert transfer.data_stamp([b, a]) != before  # the order the KB learns them in counts too
    records = a / "matmul_128" / "database_tuning_record.json"
    records.write_text(records.read_text() + records.read_text().splitlines()[0] + "\n")
    assert transfer.data_stamp([a, b]) != before
