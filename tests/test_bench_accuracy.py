"""bench/accuracy.py: each run merges its platforms into the committed summary, and the plot is
drawn from that summary, so a run on one platform keeps the panels of the others."""

import argparse
import json
from pathlib import Path

from bench_module import load_bench

ROOT = Path(__file__).resolve().parent.parent
accuracy = load_bench("accuracy")


def _summary(top1: float) -> dict:
    return {"top1": top1, "top5": 1.0, "size_mb": 0.35, "network_top1": {"bert_base": top1, "resnet50": top1 / 2}}


def test_a_run_on_one_platform_keeps_the_others_in_the_plot(tmp_path, monkeypatch):
    out = tmp_path / "accuracy.json"
    details = tmp_path / "accuracy_details.json"
    args = argparse.Namespace(seeds="0")
    # an older summary with a platform stored before per-network Top-1 was kept: left out of the plot
    out.write_text(json.dumps({"old-1c": {"tcl": {"top1": 0.5, "top5": 0.9, "size_mb": 0.35}}}))
    accuracy.write(out, details, {"amd-1c": {"tcl": _summary(0.8)}}, {"amd-1c": {"tcl": {}}}, args)
    details.unlink()  # the second run is on another machine: no details of the first
    merged = accuracy.write(out, details, {"intel-1c": {"tcl": _summary(0.6), "xgb": _summary(0.7)}},
                            {"intel-1c": {"tcl": {}, "xgb": {}}}, args)
    assert set(merged) == {"old-1c", "amd-1c", "intel-1c"}
    assert json.loads(out.read_text()) == merged

    drawn = {}

    def capture(fig, path, **kw):
        drawn["titles"] = [ax.get_title() for ax in fig.axes]
        drawn["bars"] = {ax.get_title(): [round(b.get_height(), 3) for b in ax.patches] for ax in fig.axes}

    monkeypatch.setattr(accuracy, "save_figure", capture)
    accuracy.plot(merged, tmp_path / "accuracy.png")
    assert drawn["titles"] == ["amd-1c", "intel-1c"]
    assert drawn["bars"]["amd-1c"] == [0.8, 0.4]
    assert drawn["bars"]["intel-1c"] == [0.6, 0.3, 0.7, 0.35]


def test_no_plot_without_per_network_numbers(tmp_path, capsys):
    accuracy.plot({"old-1c": {"tcl": {"top1": 0.5}}}, tmp_path / "accuracy.png")
    assert not (tmp_path / "accuracy.png").exists()
    assert "no plot drawn" in capsys.readouterr().out


def test_seeds_are_summarized_by_pooled_score_and_task_mean():
    runs = [{"size_mb": 0.35, "held_out": {"top1": 0.6, "top5": 0.9, "task_mean": 0.7}},
            {"size_mb": 0.35, "held_out": {"top1": 0.8, "top5": 1.0, "task_mean": 0.5}}]
    s = accuracy.summarize_seeds(runs)
    assert s["top1"] == 0.7 and s["top1_seeds"] == [0.6, 0.8] and abs(s["task_mean"] - 0.6) < 1e-12
    assert abs(s["task_mean_std"] - 0.1) < 1e-12
    no_mean = [{"size_mb": 0.35, "held_out": {"top1": 0.6, "top5": 0.9, "task_mean": None}}]
    assert "task_mean" not in accuracy.summarize_seeds(no_mean)  # no task of enough programs: no mean


FIXTURE = ROOT / "tests" / "fixtures" / "ms"  # two tasks: one trains, one is held out


def test_stored_seeds_are_reused_and_new_ones_added(tmp_path, monkeypatch):
    import numpy as np

    trained = []

    def fake_training(arch, data, train_ids, test_ids, args):
        trained.append((args.seed, args.epochs))
        scores = np.random.default_rng(args.seed).random(len(data))
        return {"metrics": accuracy._score(data, test_ids, scores), "size_mb": 0.35, "train_seconds": 1.0,
                "us_per_candidate": 1.0, "epochs": args.epochs, "best_epoch": None, "refit": False}

    monkeypatch.setattr(accuracy, "torch_model", fake_training)
    out = tmp_path / "accuracy.json"
    common = [str(FIXTURE), "--models", "tlp", "--test-fraction", "0.5", "--out", str(out)]
    accuracy.main(common + ["--seeds", "0"])
    one = json.loads(out.read_text())["ms"]["tlp"]
    accuracy.main(common + ["--seeds", "0,1"])
    assert trained == [(0, 40), (1, 40)]  # seed 0 came from the details file
    two = json.loads(out.read_text())["ms"]["tlp"]
    assert two["top1_seeds"][0] == one["top1"] and len(two["top1_seeds"]) == 2
    accuracy.main(common + ["--seeds", "1", "--epochs", "5"])  # other settings: trained again
    assert trained[-1] == (1, 5)


def test_runs_of_some_seeds_keep_the_other_stored_seeds(tmp_path, monkeypatch):
    """Seeds trained by separate invocations (side by side, say) end up together in the details."""
    import numpy as np

    trained = []

    def fake_training(arch, data, train_ids, test_ids, args):
        trained.append(args.seed)
        return {"metrics": accuracy._score(data, test_ids, np.random.default_rng(args.seed).random(len(data))),
                "size_mb": 0.35, "train_seconds": 1.0, "us_per_candidate": 1.0}

    monkeypatch.setattr(accuracy, "torch_model", fake_training)
    out = tmp_path / "accuracy.json"
    common = [str(FIXTURE), "--models", "tlp", "--out", str(out)]  # the fixture's split: no seed in it
    accuracy.main(common + ["--seeds", "2"])
    accuracy.main(common + ["--seeds", "0"])
    details = json.loads((tmp_path / "accuracy_details.json").read_text())["platforms"]["ms"]["tlp"]
    assert sorted(r["seed"] for r in details["seeds"]) == [0, 2]
    accuracy.main(common + ["--seeds", "0,2"])
    assert trained == [2, 0]  # both stored
    assert len(json.loads(out.read_text())["ms"]["tlp"]["top1_seeds"]) == 2
