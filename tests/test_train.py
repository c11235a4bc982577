"""Training, checkpoints and evaluation of the cost models (stock MetaSchedule fixture; the shared
Ansor logs for learning)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tqdm")

import tcl  # noqa: E402
from tcl.architectures import ARCHS, build_model  # noqa: E402
from tcl.averaging import LastEpochsAverage  # noqa: E402
from tcl.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from tcl.cli import main  # noqa: E402
from tcl.evaluate import DEFAULT_MODEL, evaluate  # noqa: E402
from tcl.model.losses import lambda_rank_loss, log_ratio_loss, pairwise_accuracy  # noqa: E402
from tcl.program_data import ProgramData, hold_out, split_tasks, task_key  # noqa: E402
from tcl.scoring import predict  # noqa: E402
from tcl.train import lr_scheduler, seed_everything, train  # noqa: E402
from tcl.train_config import TrainConfig  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "ms"
SHARED = Path(__file__).parent.parent.parent / "shared"
ANSOR = SHARED / "data" / "ansor"
TINY = {"mamba": {"d_model": 16}, "tlp": {"d_model": 32, "heads": 4}}


@pytest.fixture(scope="module")
def data():
    return ProgramData(tcl.featurize(FIXTURE))


def _full_task_scores(model, data):
    """LambdaRank loss and pairwise accuracy with each task's programs as one group, eval mode."""
    s = torch.from_numpy(predict(model, data))
    y, g = torch.from_numpy(data.label), torch.from_numpy(data.task)
    return lambda_rank_loss(s, y, g).item(), pairwise_accuracy(s, y, g)


@pytest.mark.skipif(not ANSOR.is_dir(), reason=f"shared Ansor logs not found at {ANSOR}")
@pytest.mark.parametrize("arch", ["mamba", "tlp"])
def test_training_learns_the_training_tasks(arch):
    data = ProgramData(tcl.featurize(ANSOR / "x86_resnet18.json"))  # 24 tasks, 1025 programs
    ids = list(range(len(data.tasks)))
    seed_everything(0)  # the initial model train() starts from
    before = _full_task_scores(build_model(arch, **TINY[arch]), data)
    model, hist = train(data, ids, arch=arch, model_config=TINY[arch], epochs=6, lr=3e-3,
                        batch_tasks=8, group_size=16, seed=0, threads=1, progress=False)
    assert len(hist["loss"]) == 6 and hist["best_epoch"] == 6  # no validation: all epochs
    after = _full_task_scores(model, data)
    assert after[0] < 0.95 * before[0]
    # A random ranking orders half of the ~16,000 pairs right.
    assert after[1] > 0.56 and after[1] > before[1] + 0.04


def test_checkpoint_round_trip_and_spec_check(data, tmp_path):
    model, _ = train(data, [0], [1], model_config=TINY["mamba"], epochs=2, group_size=8,
                     progress=False, threads=1)
    path = tmp_path / "m.pt"
    save_checkpoint(path, model, "mamba", {"train_tasks": [task_key(data.tasks[0])]})
    loaded, ck = load_checkpoint(path)
    assert ck["config"] == model.cfg.to_dict() and "state_dict" not in ck
    assert np.array_equal(predict(loaded, data), predict(model, data))

    raw = torch.load(path, weights_only=True)
    raw["spec_version"] = tcl.SPEC.version + 1
    torch.save(raw, path)
    with pytest.raises(tcl.FormatError, match="feature spec version"):
        load_checkpoint(path)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(tcl.FormatError, match="not a tcl model checkpoint"):
        load_checkpoint(path)


def test_min_steps_adds_epochs_to_small_training_sets(data):
    # task 0 of the fixture: 40 programs in groups of 8 -> 5 groups -> 2 batches of 4 tasks per epoch
    _, hist = train(data, [0], model_config=TINY["mamba"], epochs=1, group_size=8, batch_tasks=4,
                    min_steps=7, progress=False, threads=1)
    assert len(hist["loss"]) == 4  # ceil(7 / 2) epochs
    _, hist = train(data, [0], model_config=TINY["mamba"], epochs=5, group_size=8, batch_tasks=4,
                    min_steps=7, progress=False, threads=1)
    assert len(hist["loss"]) == 5  # enough steps already


def test_init_fine_tunes_a_copy_of_the_given_model(data):
    start, _ = train(data, [0], model_config=TINY["mamba"], epochs=2, progress=False, threads=1, seed=3)
    before = {k: v.clone() for k, v in start.state_dict().items()}
    # no learning: the result scores exactly as the model it started from
    same, _ = train(data, [0, 1], epochs=1, lr=0.0, weight_decay=0.0, progress=False, threads=1, init=start)
    assert np.array_equal(predict(same, data), predict(start, data))
    assert same is not start
    tuned, _ = train(data, [1], epochs=2, progress=False, threads=1, init=start)
    assert not np.array_equal(predict(tuned, data), predict(start, data))
    # the config comes from init (d_model 16, not the default), and init itself is left as it was
    assert tuned.cfg.d_model == 16
    assert all(torch.equal(v, before[k]) for k, v in start.state_dict().items())


@pytest.mark.parametrize("schedule", ["constant", "cosine"])
def test_lr_schedule_sets_each_steps_learning_rate(data, monkeypatch, schedule):
    import tcl.train as tt

    seen, step = [], tt.optimizer_step

    def recording_step(opt, loss, params, clip):
        seen.append(opt.param_groups[0]["lr"])
        step(opt, loss, params, clip)

    monkeypatch.setattr(tt, "optimizer_step", recording_step)
    # task 0: 2 steps per epoch (see above), 3 epochs
    train(data, [0], model_config=TINY["mamba"], epochs=3, group_size=8, batch_tasks=4, lr=1e-3,
          progress=False, threads=1, lr_schedule=schedule)
    if schedule == "constant":
        expected = [1e-3] * 6
    else:
        expected = [1e-3 * 0.5 * (1 + np.cos(np.pi * k / 6)) for k in range(6)]
    assert seen == pytest.approx(expected)


def test_log_ratio_weight_fits_score_gaps_to_log_throughput_gaps(data):
    """With the log-ratio term the trained scores' differences within a task are closer to the
    log-throughput differences than LambdaRank alone makes them (same seed, same steps)."""
    y, g = torch.from_numpy(data.label), torch.from_numpy(data.task)
    fitted = {}
    for w in (0.0, 1.0):
        model, _ = train(data, [0, 1], model_config=TINY["mamba"], epochs=8, min_steps=150, group_size=16, lr=3e-3,
                            progress=False, threads=1, seed=0, log_ratio_weight=w)
        fitted[w] = log_ratio_loss(torch.from_numpy(predict(model, data)).double(), y, g).item()
    assert fitted[1.0] < 0.5 * fitted[0.0]


def test_lr_scheduler_scales_every_group_and_rejects_unknown_kinds():
    a, b = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([{"params": [a], "lr": 10.0}, {"params": [b]}], lr=1.0)
    sched = lr_scheduler(opt, "cosine", 4)
    for _ in range(2):
        opt.step()
        sched.step()
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([5.0, 0.5])  # half way down
    for _ in range(3):  # past the end it stays at 0
        opt.step()
        sched.step()
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([0.0, 0.0])
    with pytest.raises(ValueError, match="lr schedule"):
        lr_scheduler(opt, "linear", 4)


def test_refit_trains_again_on_every_training_task(data, monkeypatch):
    import tcl.train as tt

    runs = []
    real = tt.train

    def spy(d, ids, val_ids=(), config=None, **kw):
        runs.append((list(ids), list(val_ids), config.epochs))
        return real(d, ids, val_ids, config, **kw)

    monkeypatch.setattr(tt, "train", spy)
    _, hist, fit_ids, val_ids = tt.train_validated(data, [0, 1], val_fraction=0.5, seed=0, refit=True,
                                                   model_config=TINY["mamba"], epochs=3, group_size=8, progress=False,
                                                   threads=1)
    assert hist["refit"] and sorted(fit_ids) == [0, 1] and len(val_ids) == 1
    assert runs[1] == ([0, 1], [], hist["best_epoch"])  # all training tasks, the best epoch count
    cfg = TrainConfig(val_fraction=0.5, epochs=1, group_size=8, threads=1)
    _, hist, fit_ids, _ = tt.train_validated(data, [0, 1], cfg, model_config=TINY["mamba"], progress=False)
    assert not hist["refit"] and len(fit_ids) == 1 and len(runs) == 3


def test_average_last_returns_the_mean_of_the_last_epochs_weights(data, monkeypatch):
    """average_last=0.5 of 4 epochs: the returned weights are the mean of epochs 3 and 4's."""
    import copy

    from tcl.averaging import WeightAverage

    states = []
    real_add = WeightAverage.add

    def spy(self, model):
        states.append(copy.deepcopy(model.state_dict()))
        real_add(self, model)

    monkeypatch.setattr(WeightAverage, "add", spy)
    model, hist = train(data, [0, 1], model_config=TINY["mamba"], epochs=4, group_size=8, average_last=0.5,
                        progress=False, threads=1)
    assert hist["averaged_epochs"] == len(states) == 2
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(v.numpy(), ((states[0][k].double() + states[1][k].double()) / 2).numpy(),
                                   rtol=1e-6, atol=1e-7)
    _, hist = train(data, [0], [1], model_config=TINY["mamba"], epochs=2, group_size=8, average_last=0.5,
                    progress=False, threads=1)
    assert hist["averaged_epochs"] == 0  # with validation the best epoch is kept instead


def test_validation_keeps_the_best_epoch(data):
    _, hist = train(data, [0], [1], model_config=TINY["mamba"], epochs=4, patience=1,
                    group_size=8, progress=False, threads=1)
    best = hist["val_top1"][hist["best_epoch"] - 1]
    assert best == hist["best_val_top1"] == max(hist["val_top1"])
    assert len(hist["val_top1"]) <= hist["best_epoch"] + 1  # stopped one epoch after the best


def test_split_from_task_json(tmp_path):
    for name, split, nets in [("matmul_128", "test", {"netA": 2}), ("conv2d_1x16x14x14_32_3x3",
                                                                     "train", {"netB": 1})]:
        shutil.copytree(FIXTURE / name, tmp_path / name)
        info = {"name": name, "weight": sum(nets.values()), "networks": nets, "split": split}
        (tmp_path / name / "task.json").write_text(json.dumps(info))
    fs = tcl.featurize(tmp_path)
    train_ids, test_ids = split_tasks(fs.tasks, test_fraction=0.9)  # the files' split wins
    assert [fs.tasks[i].name for i in test_ids] == ["matmul_128"] and len(train_ids) == 1
    model, _ = train(ProgramData(fs), train_ids, model_config=TINY["mamba"], epochs=1,
                     progress=False, threads=1)
    out = evaluate(model, fs)
    assert list(out["tasks"]) == ["matmul_128 [netA]"] and list(out["networks"]) == ["netA"]  # name [networks]
    assert out["data"]["chosen"] == "split test"


@pytest.mark.skipif(not ANSOR.is_dir(), reason=f"shared Ansor logs not found at {ANSOR}")
def test_hold_out_ignores_file_order():
    files = sorted(ANSOR.glob("*.json")) + sorted(ANSOR.glob("*.log"))
    a, b = tcl.featurize(files), tcl.featurize(files[::-1])
    held = [{task_key(fs.tasks[i]) for i in split_tasks(fs.tasks, 0.25, seed=3)[1]}
            for fs in (a, b)]
    assert held[0] == held[1] and len(held[0]) == 7  # 25% of 28 tasks
    assert hold_out(a.tasks, range(len(a.tasks)), 0.0, 3)[1] == []


def test_cli_train_and_eval(tmp_path, capsys):
    out = tmp_path / "model.pt"
    assert main(["train", str(FIXTURE), "--out", str(out), "--epochs", "2", "--test-fraction",
                 "0.5", "--d-model", "16", "--group-size", "8", "--quiet", "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert "1 train, 0 val, 1 test" in printed and "held-out tasks: top1" in printed
    ck = load_checkpoint(out)[1]
    assert ck["meta"]["data"] == [str(FIXTURE)] and len(ck["meta"]["test_tasks"]) == 1

    assert main(["eval", "--model", str(out), str(FIXTURE), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) >= {"pooled", "networks", "tasks"}
    assert len(result["tasks"]) == 1 and list(result["networks"]) == ["all"]
    assert 0 < result["pooled"]["top1"] <= 1 and 0 < result["pooled"]["top5"] <= 1
    assert main(["eval", "--model", str(out), str(FIXTURE), "--all"]) == 0
    assert "2 of 2 tasks (all)" in capsys.readouterr().out


def test_cli_train_hardware_film(tmp_path, capsys):
    out = tmp_path / "film.pt"
    assert main(["train", str(FIXTURE), "--out", str(out), "--epochs", "1", "--test-fraction", "0.5",
                 "--d-model", "16", "--group-size", "8", "--quiet", "--threads", "1", "--hardware-film"]) == 0
    model, ck = load_checkpoint(out)
    assert model.body_reads_hardware and ck["config"]["hardware_film_steps"]
    # the FiLM is relative to the mean descriptor of the platforms trained on (here one)
    assert model.hardware_ref.tolist() == pytest.approx(np.mean(ck["meta"]["hardware"], axis=0).tolist())
    with pytest.raises(SystemExit, match="mamba"):
        main(["train", str(FIXTURE), "--out", str(tmp_path / "t.pt"), "--arch", "tlp", "--hardware-film"])


def test_cli_eval_uses_the_shipped_default_model(capsys):
    assert DEFAULT_MODEL.is_file(), "the pretrained default model must ship in tcl/data"
    assert main(["eval", str(FIXTURE), "--all", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model"]["path"] == str(DEFAULT_MODEL) and len(result["tasks"]) == 2


@pytest.mark.parametrize("fraction, taken", [(0.5, [3, 4]), (0.1, [4]), (1.0, [1, 2, 3, 4]), (0.0, [])])
def test_last_epochs_average_takes_the_states_after_the_last_epochs(fraction, taken):
    model = torch.nn.Linear(2, 1)
    average = LastEpochsAverage(4, fraction)
    for epoch in range(1, 5):
        with torch.no_grad():
            model.weight.fill_(float(epoch))
        average.after_epoch(epoch, model)
    average.finish(model)
    assert average.count == len(taken)
    expected = float(np.mean(taken)) if taken else 4.0  # nothing taken: the last state stays
    torch.testing.assert_close(model.weight, torch.full((1, 2), expected))


def test_train_takes_a_config_and_field_overrides(data):
    cfg = TrainConfig(epochs=3, group_size=8, threads=1)
    _, hist = train(data, [0], config=cfg, model_config=TINY["mamba"], progress=False)
    assert len(hist["loss"]) == 3
    _, hist = train(data, [0], config=cfg, model_config=TINY["mamba"], progress=False, epochs=1)
    assert len(hist["loss"]) == 1  # a field given on its own wins over the config's
    with pytest.raises(TypeError):
        train(data, [0], config=cfg, progress=False, epoch=1)  # not a TrainConfig field


def test_tcl_train_defaults_are_the_train_config():
    """`tcl train`'s options take their defaults from TrainConfig, every field has one, and the
    architectures it offers are tcl.architectures'."""
    from tcl.cli import build_parser
    from tcl.cli.models import ARCH_NAMES
    from tcl.cli.options import config_from_args

    args = build_parser().parse_args(["train", "d", "--out", "o"])
    assert config_from_args(TrainConfig, args) == TrainConfig()
    assert all(hasattr(args, f) for f in TrainConfig.__dataclass_fields__)
    assert set(ARCH_NAMES) == set(ARCHS) and args.arch == "mamba"
    args = build_parser().parse_args(["train", "d", "--out", "o", "--epochs", "3", "--refit", "--lr-schedule", "cosine"])
    assert config_from_args(TrainConfig, args) == TrainConfig(epochs=3, refit=True, lr_schedule="cosine")
