"""bench/conv_layouts.py: a network's tasks are told apart by the layout of their convolutions, and
each layout's tasks are scored apart, per split."""

import json
import shutil
from pathlib import Path

import pytest
from bench_module import load_bench

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
conv_layouts = load_bench("conv_layouts")


@pytest.mark.tvm
def test_only_the_tasks_a_layout_changes_are_its_own():
    pytest.importorskip("tvm")
    from tcl.tvm import networks as nets
    from tcl.tvm.targets import default_target

    target = default_target(1)
    (per,) = conv_layouts.layout_tasks(["vit_tiny"], target).values()
    assert per["NCHW"] and per["NHWC"] and not per["NCHW"] & per["NHWC"]
    shared = {t.shash for t in nets.network_tasks("vit_tiny", target)} - per["NCHW"]
    assert shared and not shared & per["NHWC"]  # the transformer layers are the same tasks in both


def test_each_layout_and_split_is_scored_apart(tmp_path):
    from tcl.evaluate import default_model_path
    from tcl.features import featurize

    d = tmp_path / "ds"
    shutil.copytree(ROOT / "tests" / "fixtures" / "ms", d, ignore=shutil.ignore_patterns("*.md", "*.py"))
    (d / "platform.json").write_text(json.dumps({"name": "ds", "cores": 2}))
    for task, split in (("matmul_128", "train"), ("conv2d_1x16x14x14_32_3x3", "test")):
        (d / task / "task.json").write_text(json.dumps({"name": task, "weights": {"net": 2}, "split": split}))
    workload = {Path(t.source).parent.name: t.workload for t in featurize([str(d)]).tasks}
    hashes = {"net": {"NCHW": {workload["matmul_128"]}, "NHWC": {workload["conv2d_1x16x14x14_32_3x3"]}}}

    out = conv_layouts.layout_scores(default_model_path(), conv_layouts.dataset_programs(d), hashes, 4)
    assert set(out["train"]["NCHW"]) == {"net", "all"} and out["train"]["NHWC"] == {}
    assert set(out["test"]["NHWC"]) == {"net", "all"} and out["test"]["NCHW"] == {}
    row = out["test"]["NHWC"]["net"]
    assert row["tasks_with_programs"] == 1 and row["tasks"] == 1 and 0 < row["top1"] <= 1
    assert row == out["test"]["NHWC"]["all"]
