"""bench/tuned_ranking.py: checkpoints scored on tuning runs' programs, under the tuned hardware's
descriptor and under others, and only runs of this host."""

import json
import shutil
from pathlib import Path

import pytest
from bench_module import load_bench

pytest.importorskip("torch")
pytest.importorskip("tvm")

ROOT = Path(__file__).resolve().parent.parent
tuned_ranking = load_bench("tuned_ranking")


def _run(root: Path, name: str, target: str, platform: str) -> Path:
    run = root / name
    for task in ("matmul_128", "conv2d_1x16x14x14_32_3x3"):
        shutil.copytree(ROOT / "tests" / "fixtures" / "ms" / task, run / "db" / task,
                        ignore=shutil.ignore_patterns("*.md", "*.py"))
    (run / "report.json").write_text(json.dumps({"target": target, "platform": platform}))
    return run


def test_runs_scored_under_the_tuned_hardware_and_another(tmp_path):
    from tcl.evaluate import default_model_path
    from tcl.tvm.hardware import platform_descriptor
    from tcl.tvm.targets import default_target

    target = default_target()
    here = platform_descriptor(target)
    runs = [_run(tmp_path, f"run{i}", str(target), here["name"]) for i in range(2)]
    assert tuned_ranking.tuned_platform(runs)["name"] == here["name"]
    other = {**here, "name": "other-1c", "cores": 1}
    (tmp_path / "other.json").write_text(json.dumps(other))
    out = tmp_path / "tuned_ranking.json"
    assert tuned_ranking.main([*map(str, runs), "--platform", str(tmp_path / "other.json"), "--min-programs", "4",
                               "--checkpoint", f"again={default_model_path()}", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["platforms"]) == {here["name"], "other-1c"}
    for cells in result["platforms"].values():
        assert set(cells) == {"shipped", "again"} and cells["shipped"] == cells["again"]
        assert cells["shipped"]["tasks"] == 2 and 0 < cells["shipped"]["top1"] <= 1
        ranks = cells["shipped"]["best_rank"]
        assert set(ranks) == {"run0", "run1"} and ranks["run0"] == ranks["run1"]  # the same programs
        assert len(ranks["run0"]["tasks"]) == 2 and all(0 <= v <= 1 for v in ranks["run0"]["tasks"].values())


def test_runs_of_one_name_are_told_apart_by_their_parent():
    runs = [Path("work/tcl/seed0"), Path("work/xgb/seed0")]
    assert tuned_ranking.run_labels(runs) == ["tcl/seed0", "xgb/seed0"]
    assert tuned_ranking.run_labels([Path("a/run0"), Path("a/run1")]) == ["run0", "run1"]
    assert tuned_ranking.run_labels([Path("/w/old/net/tcl/seed0"), Path("/w/new/net/tcl/seed0")]) == \
        ["old/net/tcl/seed0", "new/net/tcl/seed0"]
    with pytest.raises(SystemExit, match="given twice"):
        tuned_ranking.run_labels([Path("/w/a"), Path("/w/a")])


def test_a_runs_best_program_is_placed_among_the_tasks_programs():
    import numpy as np

    score = np.array([0.9, 0.1, 0.5, 0.3, 0.7, 0.2])
    cost = np.array([2.0, 1.0, 3.0, 4.0, 1.5, 9.0])
    group = np.array(["a", "a", "a", "a", "b", "b"])
    run = np.array([0, 0, 1, 1, 0, 1])
    ranks = tuned_ranking.best_percentiles(score, cost, group, run, min_programs=2)
    # task a: run 0's fastest (cost 1.0) is scored lowest of four; run 1's fastest (3.0) above one of them
    assert ranks == {0: {"a": 0.0, "b": 0.5}, 1: {"a": 0.5, "b": 0.0}}
    assert tuned_ranking.best_percentiles(score, cost, group, run, min_programs=3) == {0: {"a": 0.0}, 1: {"a": 0.5}}


def test_runs_of_another_host_are_refused(tmp_path):
    from tcl.tvm.targets import default_target

    run = _run(tmp_path, "elsewhere", str(default_target()), "zen1-epyc-2c")
    with pytest.raises(SystemExit, match="runs of zen1-epyc-2c cannot be scored on this host"):
        tuned_ranking.tuned_platform([run])
