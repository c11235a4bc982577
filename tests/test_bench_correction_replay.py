"""bench/correction_replay.py: the in-loop correction fitted on one run's programs ranks another's."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from bench_module import load_bench

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parent.parent
correction_replay = load_bench("correction_replay")


def test_top_k_is_the_share_of_the_best_latency_found():
    score = np.array([0.9, 0.8, 0.1, 0.5])
    cost = np.array([4.0, 2.0, 1.0, 3.0])
    assert correction_replay.top_k(score, cost, 1) == 0.25
    assert correction_replay.top_k(score, cost, 2) == 0.5
    assert correction_replay.top_k(score, cost, 4) == 1.0


def test_pairs_of_runs_replayed(tmp_path):
    from tcl.tvm.hardware import platform_descriptor
    from tcl.tvm.targets import default_target

    target = default_target()
    runs = []
    for i in range(2):
        run = tmp_path / f"run{i}"
        for task in ("matmul_128", "conv2d_1x16x14x14_32_3x3"):
            shutil.copytree(ROOT / "tests" / "fixtures" / "ms" / task, run / "db" / task,
                            ignore=shutil.ignore_patterns("*.md", "*.py"))
        (run / "report.json").write_text(json.dumps({"target": str(target),
                                                     "platform": platform_descriptor(target)["name"]}))
        runs.append(run)
    out = tmp_path / "replay.json"
    assert correction_replay.main([*map(str, runs), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["pairs"]) == {"run0 -> run1", "run1 -> run0"}
    for pair in result["pairs"].values():
        assert pair["tasks"] == 2
        for top1, top16 in pair["top1_top16"].values():
            assert 0 < top1 <= top16 <= 1
    # the same programs in both runs: the replay does not depend on the direction
    a, b = result["pairs"].values()
    assert a["top1_top16"] == b["top1_top16"]
    assert result["tile_sizes"]
    assert correction_replay.main([*map(str, runs), "--without-tile-sizes", "--out", str(out)]) == 0
    without = json.loads(out.read_text())
    assert not without["tile_sizes"] and without["pairs"]["run0 -> run1"]["tasks"] == 2
    # the model's own scores do not depend on the correction's inputs
    assert [p["top1_top16"]["model"] for p in without["pairs"].values()] == \
        [p["top1_top16"]["model"] for p in result["pairs"].values()]
    # --after: fitted on the first N programs of each task and blended at each weight; weight 0 is the model
    assert correction_replay.main([*map(str, runs), "--after", "16,32", "--weights", "0,1", "--out", str(out)]) == 0
    after = json.loads(out.read_text())["after"]
    assert set(after) == {"16", "32"}
    for cell in after.values():
        # both runs have 40 programs of each task; the search's weight is N / 128
        assert cell["cases"] == 4 and set(cell["weights"]) == {"0.0", str(cell["search_weight"]), "1.0"}
        assert cell["weights"]["0.0"] == result["pairs"]["run0 -> run1"]["top1_top16"]["model"]
    with pytest.raises(SystemExit):
        correction_replay.main([*map(str, runs), "--after", "16", "--weights", "0,1.5", "--out", str(out)])
