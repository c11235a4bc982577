"""`tcl eval`'s names and table: readable task names, and a summary row no task can be mistaken for."""

import json
import shutil
from pathlib import Path

import tcl
from tcl.evaluate import format_table, task_label, task_names, workload_label
from tcl.features import TaskInfo

HERE = Path(__file__).parent


def task(workload, **kw):
    return TaskInfo(workload=workload, target=kw.pop("target", "llvm -keys=cpu"), source=kw.pop("source", "x/log.json"),
                    failed=0, **kw)


def test_ansor_workload_keys_read_as_operator_and_arguments():
    assert workload_label('["ansor_mm", 1000, 800, 700, "float32"]') == 'ansor_mm(1000,800,700,"float32")'
    conv = '["conv2d_ansor", [1, 3, 224, 224], [64, 3, 3, 3]]'
    assert workload_label(conv) == "conv2d_ansor([1,3,224,224],[64,3,3,3])"
    # TenSet keys carry a hash of the computation where the operator's name would be
    tenset = '["6d125280c99b3732e95e03b4ef2b5fb7", [1, 512], [1000, 512]]'
    assert workload_label(tenset) == "6d125280([1,512],[1000,512])"
    assert workload_label("12345") == "12345" and workload_label("not json") == "not json"


def test_task_names_are_readable_and_unique():
    tasks = [task("1", name="mean", networks={"mobilenet_v2": 1}),
             task("2", name="mean", networks={"resnet50": 1}),
             task("3", name="matmul2", networks={"bert_base": 12}),
             task("4", name="matmul2", networks={"bert_base": 12}),  # the same name, another shape
             task("5", source="db/matmul_128/database_tuning_record.json"),  # no task.json
             task('["ansor_mm", 16, 16]'),
             task('["ansor_mm", 16, 16]', target="cuda -arch=sm_80")]
    assert task_label(tasks[0]) == "mean [mobilenet_v2]"
    assert task_names(tasks) == ["mean [mobilenet_v2]", "mean [resnet50]", "matmul2 [bert_base]",
                                 "matmul2 [bert_base] #4", "matmul_128", "ansor_mm(16,16)",
                                 "ansor_mm(16,16) @ cuda sm_80"]


def test_the_table_sets_the_pooled_row_apart_from_the_tasks():
    score = {"top1": 0.5, "top5": 1.0, "pairwise": 0.75}
    result = {"pooled": score, "networks": {"all": {**score, "tasks": 2}},
              "tasks": {"mean [resnet18]": {**score, "programs": 40}, "pooled": {**score, "programs": 3}},
              "model": {"path": "m.pt", "arch": "mamba", "size_mb": 0.35},
              "data": {"programs": 43, "tasks": 2, "tasks_in_data": 2, "chosen": "all"}}
    lines = format_table(result).splitlines()
    summary = [i for i, line in enumerate(lines) if line.startswith("all tasks, pooled")]
    assert len(summary) == 1 and set(lines[summary[0] - 1]) == {"-"}
    mean_row = lines[summary[0] + 1]  # the task mean leaves out the task of 3 programs
    assert mean_row.startswith("task mean, tasks of >= 16 programs") and mean_row.split()[-4:] == ["0.5000", "-", "-", "1"]
    tasks_head = lines.index("tasks (n = programs)")
    assert set(lines[tasks_head - 1]) == {"-"} and lines[tasks_head + 1].startswith("  mean [resnet18]")
    assert all(line.startswith("  ") for line in lines[tasks_head + 1:])  # tasks are indented below their rule
    long = "fused_conv2d18_subtract10_divide10_multiply10_add18 [resnet50]"
    result["tasks"] = {long: {**score, "programs": 40}}
    row = format_table(result, name_width=40).splitlines()[-1]
    assert row[:41] == "  fused_conv2d18_subtract1... [resnet50] "  # the networks stay in sight


def test_dataset_tasks_are_named_after_task_json_and_networks(tmp_path):
    root = tmp_path / "ds"
    for i, db in enumerate(sorted(d for d in (HERE / "fixtures" / "ms").iterdir() if d.is_dir())):
        shutil.copytree(db, root / f"mean-{i}")
        (root / f"mean-{i}" / "task.json").write_text(json.dumps({"name": "mean", "networks": [f"net{i}"]}))
    fs = tcl.featurize(root)
    assert sorted(task_names(fs.tasks)) == ["mean [net0]", "mean [net1]"]
    assert sorted(task_names(tcl.featurize(HERE / "fixtures" / "ms").tasks)) == [
        "conv2d_1x16x14x14_32_3x3", "matmul_128"]
