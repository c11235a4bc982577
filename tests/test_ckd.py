"""Continual distillation: a frozen KB during progress, constant size, only new data, EWC."""

import copy
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_features import MS_FIXTURE  # noqa: E402

import tcl  # noqa: E402
import tcl.continual.phases as phases  # noqa: E402
from tcl.continual import (  # noqa: E402
    ActiveColumn,
    CKDConfig,
    DescriptorProjection,
    OnlineEWC,
    compress,
    first_platform,
    gate,
    learn_platform,
    load_kb,
    progress,
    with_hardware_film,
)
from tcl.model.losses import lambda_rank_loss, log_ratio_loss  # noqa: E402
from tcl.program_data import ProgramData  # noqa: E402

CFG = CKDConfig(progress_epochs=2, compress_epochs=2, min_steps=0, threads=1, group_size=16)
KEEP = replace(CFG, preserve="keep")  # the whole KB learns, held by the old-hardware term


@pytest.fixture(scope="module")
def platforms():
    # two databases stand in for two platforms' data
    return [ProgramData(tcl.featurize(MS_FIXTURE / name)) for name in ("matmul_128", "conv2d_1x16x14x14_32_3x3")]


@pytest.fixture(scope="module")
def kb1(platforms):
    return first_platform(platforms[0], [0], CFG, model_config={"d_model": 32})


@pytest.fixture(scope="module")
def column(platforms, kb1):
    """The second platform (under other hardware) and an active column trained on it."""
    new = other_hardware(platforms[1])
    return new, progress(kb1[0], new, [0], CFG)


def params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_progress_keeps_the_kb_frozen(platforms, kb1):
    kb, _, _ = kb1
    before = params(kb)
    ac = progress(kb, platforms[1], [0], CFG)
    assert isinstance(ac, ActiveColumn)
    for n, p in kb.named_parameters():
        assert torch.equal(p, before[n]), n
    assert not any(p.requires_grad for p in ac.kb.parameters())
    # the column did learn: its weights moved away from its initial ones (same seed, same init)
    from tcl.train import seed_everything

    seed_everything(CFG.seed)
    fresh = ActiveColumn(kb, CFG.alpha_init)
    assert any(not torch.equal(p, q) for p, q in zip(ac.col.parameters(), fresh.col.parameters()))


def other_hardware(data: ProgramData) -> ProgramData:
    """The same programs as if measured on a platform with another hardware descriptor."""
    import copy

    d = copy.copy(data)
    d.hardware = data.hardware.copy()
    d.hardware[:, 0] += 1.0
    return d


def test_column_from_the_kb_starts_as_the_kb(platforms, kb1):
    kb, _, _ = kb1
    x = platforms[1].inputs(np.arange(len(platforms[1])))
    with torch.no_grad():
        assert torch.allclose(ActiveColumn(kb, CFG.alpha_init, from_kb=True).eval()(*x), kb(*x), atol=1e-6)


def test_ewc_state_keeps_each_platforms_hardware(platforms, kb1):
    kb, ewc, _ = kb1
    assert ewc.hardware == np.unique(platforms[0].hardware, axis=0).tolist()
    e = OnlineEWC.from_state_dict(ewc.state_dict())
    e.consolidate(kb, other_hardware(platforms[1]), [0], CFG)
    assert len(e.hardware) == 2 and e.hardware[0] == ewc.hardware[0]
    assert OnlineEWC.from_state_dict(e.state_dict()).hardware == e.hardware


def test_compress_ranks_against_the_kb_under_each_old_descriptor(platforms, kb1, column, monkeypatch):
    kb, ewc, _ = kb1
    new, ac = column
    seen = []
    real = phases.keep_old_platforms

    def spy(kb_, student, seq, lengths, emb, kb_emb, workload, gid, old_hw):
        seen.append([h.tolist() for h in old_hw])
        before = torch.get_rng_state()  # the student's head draws dropout: replay the same masks
        loss = real(kb_, student, seq, lengths, emb, kb_emb, workload, gid, old_hw)
        after = torch.get_rng_state()
        torch.set_rng_state(before)
        # the target is the incoming KB's order under the old descriptor (both bodies read it)
        with torch.no_grad():
            hw = old_hw[0].expand(len(emb), -1)
            target = phases.rank_labels(kb.head(kb.embedding(seq, lengths, hw), workload, hw), gid)
            want = lambda_rank_loss(student.head(student.embedding(seq, lengths, hw), workload, hw), target, gid)
        torch.set_rng_state(after)
        assert float(loss.detach()) == pytest.approx(float(want.detach()), rel=1e-5)
        return loss

    monkeypatch.setattr(phases, "keep_old_platforms", spy)
    compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], KEEP)
    assert seen and all(s == ewc.hardware for s in seen)  # the old descriptor, never the new one
    seen.clear()
    compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), platforms[1], [0], KEEP)
    assert not seen  # same descriptor as before: nothing to keep apart
    compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], replace(KEEP, keep_old=0.0))
    assert not seen
    compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], CFG)
    assert not seen  # exact preservation needs no term


def test_frozen_outputs_match_the_models_run_per_batch(kb1, column):
    kb, _, _ = kb1
    new, ac = column
    teacher, kb_emb = phases.frozen_outputs(kb, ac, new, [0], chunk=7)  # several chunks
    assert kb_emb is None  # the steps' FiLM and the adapters: the body reads the descriptor
    plain = tcl.model.MambaCostModel(replace(kb.cfg, hardware_film=False, hardware_film_steps=False,
                                             hardware_adapter_rank=0))
    plain.load_state_dict(kb.state_dict(), strict=False)
    pooled_only = with_hardware_film(plain, kb.hardware_ref, steps=False).eval()  # a body that ignores it
    _, kb_emb = phases.frozen_outputs(pooled_only, ac, new, [0], chunk=7)
    idx = new.programs_of([0])[::3]
    seq, lengths, workload, hardware = new.inputs(idx)
    with torch.no_grad():
        torch.testing.assert_close(teacher[idx], ac(seq, lengths, workload, hardware), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(kb_emb[idx], pooled_only.embedding(seq, lengths, hardware), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cfg", [CFG, KEEP], ids=["exact", "keep"])
def test_kb_size_is_constant_and_it_learns_the_new_platform(platforms, kb1, cfg):
    kb, ewc, _ = kb1
    new = other_hardware(platforms[1])
    new_kb, ewc2, seconds = learn_platform(kb, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], cfg)
    assert new_kb.size_mb() == kb.size_mb()
    assert {n: p.shape for n, p in new_kb.named_parameters()} == {n: p.shape for n, p in kb.named_parameters()}
    assert ewc2.platforms == 2 and seconds > 0
    assert any(not torch.equal(p, q) for p, q in zip(new_kb.parameters(), kb.parameters()))


def scores_under(model, data, hardware):
    seq, lengths, workload, _ = data.inputs(np.arange(len(data)))
    with torch.no_grad():
        return model.eval()(seq, lengths, workload, torch.as_tensor(hardware, dtype=torch.float32).expand(len(data), -1))


@pytest.fixture(scope="module")
def kb1_film_only(platforms):
    """The first KB with FiLM layers and no descriptor adapters."""
    return first_platform(platforms[0], [0], replace(CFG, hardware_adapter_rank=0), model_config={"d_model": 32})


@pytest.mark.parametrize("adapted, average_last", [(False, 0.0), (True, 0.0), (True, 0.5)],
                         ids=["film", "film+adapters", "film+adapters+averaged"])
def test_exact_preservation_keeps_every_earlier_platforms_scores(platforms, request, adapted, average_last):
    kb, ewc, _ = request.getfixturevalue("kb1" if adapted else "kb1_film_only")
    assert len(kb.adapters()) == (3 if adapted else 0)  # encoder, the layer's in_proj, head
    h1 = platforms[0].hardware[0]
    second = other_hardware(platforms[1])
    third = copy.copy(platforms[0])
    third.hardware = platforms[0].hardware.copy()
    third.hardware[:, 8] += 0.7  # another field than the second platform's: outside the earlier span
    h2, h3 = second.hardware[0], third.hardware[0]
    cfg = replace(CFG, compress_epochs=4, average_last=average_last)  # the mean of two states, when averaged
    kb2, ewc2, _ = learn_platform(kb, OnlineEWC.from_state_dict(ewc.state_dict()), second, [0], cfg)
    kb3, ewc3, _ = learn_platform(kb2, ewc2, third, [0], cfg)
    assert ewc3.hardware == [h1.tolist(), h2.tolist(), h3.tolist()]
    for data in platforms:
        torch.testing.assert_close(scores_under(kb3, data, h1), scores_under(kb, data, h1), rtol=0, atol=1e-5)
        torch.testing.assert_close(scores_under(kb3, data, h2), scores_under(kb2, data, h2), rtol=0, atol=1e-5)
        # what was learned under h2 is not what the KB says under h1
        assert not torch.allclose(scores_under(kb2, data, h2), scores_under(kb, data, h2), atol=1e-4)
    assert not torch.allclose(scores_under(kb3, third, h3), scores_under(kb2, third, h3), atol=1e-4)
    # only the parameters that read the descriptor moved
    moved = {n for (n, p), q in zip(kb3.named_parameters(), kb.parameters()) if not torch.equal(p, q)}
    readers = {n for n, p in kb3.named_parameters() if n.startswith(("hardware_proj.0.", "hardware_film")) or "adapter" in n}
    assert moved and moved <= readers
    assert any("adapter" in n for n in moved) == adapted


def test_descriptor_projection_against_its_definition():
    """dW x = 0 for every earlier input x, and nothing else of dW removed (numpy reference)."""
    model = tcl.model.MambaCostModel(tcl.model.CostModelConfig(feature_dim=4, seq_len=3, d_model=8, hardware_film=True))
    rng = np.random.default_rng(0)
    old = [rng.normal(size=12).astype(np.float32) for _ in range(3)]
    with torch.no_grad():
        model.hardware_ref.copy_(torch.from_numpy(old[0]))
    proj = DescriptorProjection(model, old, [rng.normal(size=12).astype(np.float32)])
    w0 = model.hardware_film.weight.detach().numpy().copy()
    with torch.no_grad():
        model.hardware_film.weight.add_(torch.from_numpy(rng.normal(size=w0.shape).astype(np.float32)))
    step = model.hardware_film.weight.detach().numpy() - w0
    proj.apply()
    kept = model.hardware_film.weight.detach().numpy() - w0
    x = np.stack([h - old[0] for h in old[1:]], 1)  # the reference's own input is zero
    want = step - step @ x @ np.linalg.pinv(x)  # least-squares removal of the span's component
    np.testing.assert_allclose(kept, want, atol=1e-5)
    np.testing.assert_allclose(kept @ x, 0, atol=1e-5)


def test_descriptor_projection_of_an_adapter_against_its_definition():
    """An adapter's weight U [out, P * rank]: after the projection, sum_i dU[o, i, k] d_i = 0 for
    every earlier descriptor difference d, and only that component of the step was removed."""
    cfg = tcl.model.CostModelConfig(feature_dim=4, seq_len=3, d_model=8, hardware_film=True, hardware_adapter_rank=3)
    model = tcl.model.MambaCostModel(cfg)
    rng = np.random.default_rng(1)
    old = [rng.normal(size=12).astype(np.float32) for _ in range(3)]
    with torch.no_grad():
        model.hardware_ref.copy_(torch.from_numpy(old[0]))
    proj = DescriptorProjection(model, old, [rng.normal(size=12).astype(np.float32)])
    up = model.layers[0].adapter.up.weight
    w0 = up.detach().numpy().copy()
    with torch.no_grad():
        up.add_(torch.from_numpy(rng.normal(size=w0.shape).astype(np.float32)))
    step = (up.detach().numpy() - w0).reshape(len(w0), 12, 3)
    proj.apply()
    kept = (up.detach().numpy() - w0).reshape(len(w0), 12, 3)
    x = np.stack([h - old[0] for h in old[1:]], 1)  # [P, 2]
    want = step - np.einsum("oik,ij->ojk", step, x @ np.linalg.pinv(x))
    np.testing.assert_allclose(kept, want, atol=1e-5)
    np.testing.assert_allclose(np.einsum("oik,ij->ojk", kept, x), 0, atol=1e-5)


def test_projection_gain_and_the_learning_rate_it_scales(kb1, column, monkeypatch):
    """gain = |d| / |P d|: 1 for the second platform; for a third whose difference from the first
    lies partly along the second's, the inverse share of d that the projection leaves (numpy)."""
    kb, ewc, _ = kb1
    new, ac = column
    ref = kb.hardware_ref.numpy()
    h2 = new.hardware[0]
    assert DescriptorProjection(kb, [ref], [h2]).gain == pytest.approx(1.0)
    h3 = ref + 0.8 * (h2 - ref) + 0.3 * np.eye(len(ref), dtype=np.float32)[8]
    d2, d3 = h2 - ref, h3 - ref
    left = d3 - d2 * (d2 @ d3) / (d2 @ d2)
    want = np.linalg.norm(d3) / np.linalg.norm(left)
    assert want > 2
    assert DescriptorProjection(kb, [ref, h2], [h3]).gain == pytest.approx(want, rel=1e-4)
    # compress's descriptor-reading parameters learn at lr * hardware_lr * gain
    third = copy.copy(new)
    third.hardware = np.broadcast_to(h3, new.hardware.shape).copy()
    seen = []

    class Recording(torch.optim.Adam):
        def __init__(self, groups, **kw):
            super().__init__(groups, **kw)
            seen.append([g["lr"] for g in self.param_groups])

    monkeypatch.setattr(torch.optim, "Adam", Recording)
    two = OnlineEWC.from_state_dict(ewc.state_dict())
    two.hardware.append(h2.tolist())
    for projected, factor in ((True, want), (False, 1.0)):
        compress(kb, ac, OnlineEWC.from_state_dict(two.state_dict()), third, [0],
                 replace(CFG, compress_epochs=1, projected_lr=projected))
        assert seen[-1] == pytest.approx([CFG.lr * CFG.hardware_lr * factor], rel=1e-4)


def test_compress_average_is_the_mean_of_the_last_epochs_states(kb1, column):
    new, ac = column
    cfg = replace(CFG, compress_epochs=4, average_last=0.5)
    ends = []  # the student after each epoch
    averaged = compress(kb1[0], ac, copy.deepcopy(kb1[1]), new, [0], cfg, on_epoch=lambda e, s: ends.append(params(s)))
    # the same seed takes the same steps: the unaveraged run ends where the averaged one's last epoch did
    last = params(compress(kb1[0], ac, copy.deepcopy(kb1[1]), new, [0], replace(cfg, average_last=0.0)))
    assert len(ends) == 4 and all(torch.equal(ends[3][n], last[n]) for n in last)
    assert any(not torch.equal(ends[2][n], last[n]) for n in last)
    for n, p in params(averaged).items():
        torch.testing.assert_close(p, (ends[2][n] + ends[3][n]) / 2)


def test_exact_preservation_needs_a_new_descriptor(platforms, kb1, column):
    kb, ewc, _ = kb1
    _, ac = column
    with pytest.raises(ValueError, match="preserve='keep'"):
        compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), platforms[1], [0], CFG)  # the first's descriptor
    with pytest.raises(ValueError, match="'exact' or 'keep'"):
        compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), platforms[1], [0], replace(CFG, preserve="x"))


def test_ewc_penalty():
    model = torch.nn.Linear(3, 1)
    ewc = OnlineEWC()
    assert float(ewc.penalty(model, 10.0).detach()) == 0.0  # nothing consolidated yet
    ewc.fisher = {n: torch.full_like(p, 2.0) for n, p in model.named_parameters()}
    ewc.anchor = {n: p.detach().clone() for n, p in model.named_parameters()}
    assert float(ewc.penalty(model, 10.0).detach()) == 0.0  # at the anchor
    with torch.no_grad():
        model.weight += 0.5  # 3 weights moved by 0.5: (10 / 2) * 2 * 3 * 0.25 = 7.5
    assert float(ewc.penalty(model, 10.0).detach()) == pytest.approx(7.5)


def test_online_fisher_decays_and_normalises(platforms, kb1):
    kb, ewc, _ = kb1
    f1 = {n: f.clone() for n, f in ewc.fisher.items()}
    assert float(torch.cat([f.flatten() for f in f1.values()]).mean()) == pytest.approx(1.0, rel=1e-5)
    e = OnlineEWC.from_state_dict(ewc.state_dict())
    e.consolidate(kb, platforms[1], [0], CFG)
    total = torch.cat([f.flatten() for f in e.fisher.values()]).mean()
    assert float(total) == pytest.approx(CFG.gamma * 1.0 + 1.0, rel=1e-4)


def test_gate_trusts_the_column_where_it_ranks_right():
    labels = torch.tensor([0.1, 0.5, 1.0, 0.2])
    gid = torch.zeros(4, dtype=torch.long)
    assert torch.allclose(gate(labels * 3, labels, gid), torch.ones(4))
    g = gate(-labels, labels, gid)
    assert torch.all(g < 1) and g.min() < 0.5


def new_platform_dir(tmp_path) -> Path:
    """A fixture database as measured on other hardware (its own platform.json)."""
    out = tmp_path / "new-platform"
    shutil.copytree(MS_FIXTURE / "conv2d_1x16x14x14_32_3x3", out / "conv2d")
    (out / "platform.json").write_text(json.dumps({"target": "llvm -mcpu=znver4 -num-cores=2", "cores": 2,
                                                   "vector_bits": 512}))
    return out


def test_distill_cli_reads_only_the_new_platform(tmp_path, monkeypatch, capsys):
    from tcl import cli, features

    kb1 = tmp_path / "kb1.pt"
    args = ["--progress-epochs", "1", "--compress-epochs", "1", "--min-steps", "0", "--threads", "1"]
    assert cli.main(["distill", str(MS_FIXTURE / "matmul_128"), "--out", str(kb1), *args]) == 0
    # the same hardware again: nothing exact preservation could learn with, a clear error
    same = str(MS_FIXTURE / "conv2d_1x16x14x14_32_3x3")
    assert cli.main(["distill", same, "--model", str(kb1), "--out", str(tmp_path / "x.pt"), *args]) == 2
    assert "--preserve keep" in capsys.readouterr().err
    assert cli.main(["distill", same, "--model", str(kb1), "--out", str(tmp_path / "x.pt"),
                     "--preserve", "keep", *args]) == 0
    seen = []
    real = features.featurize

    def spy(paths, *a, **k):
        seen.append([str(p) for p in paths])
        return real(paths, *a, **k)

    monkeypatch.setattr(features, "featurize", spy)
    new = str(new_platform_dir(tmp_path))
    assert cli.main(["distill", new, "--model", str(kb1), "--out", str(tmp_path / "kb2.pt"), *args]) == 0
    assert seen == [[new]]

    kb2, ewc, ck = load_kb(tmp_path / "kb2.pt")
    assert ewc.platforms == 2 and len(ck["meta"]["platforms"]) == 2
    assert kb2.size_mb() == load_kb(kb1)[0].size_mb()


def test_distill_cli_learns_a_platform_from_an_rdu_sample(tmp_path):
    from tcl import cli

    args = ["--progress-epochs", "1", "--compress-epochs", "1", "--min-steps", "0", "--threads", "1"]
    kb1 = tmp_path / "kb1.pt"
    assert cli.main(["distill", str(MS_FIXTURE / "matmul_128"), "--out", str(kb1), *args]) == 0
    new = new_platform_dir(tmp_path)
    n = len(tcl.featurize(new))
    out = tmp_path / "kb2.pt"
    assert cli.main(["distill", str(new), "--model", str(kb1), "--out", str(out), "--sample", "0.25", *args]) == 0
    _, ewc, ck = load_kb(out)
    last = ck["meta"]["platforms"][-1]
    assert ewc.platforms == 2 and last["sample"] == 0.25
    assert last["programs_learned"] == int(np.ceil(0.25 * n))  # one task: a quarter of its programs
    assert cli.main(["distill", str(new), "--model", str(kb1), "--out", str(out), "--sample", "1.5", *args]) == 2


def test_compress_trains_the_hardware_projection_at_its_own_rate(kb1, column):
    kb, ewc, _ = kb1
    new, ac = column
    frozen_hw = compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], replace(KEEP, hardware_lr=0.0))
    for (n, p), q in zip(frozen_hw.named_parameters(), kb.parameters()):
        assert torch.equal(p, q) == (n.startswith(("hardware_proj.", "hardware_film")) or "adapter" in n), n  # lr 0 there
    fast = compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], replace(KEEP, hardware_lr=10.0))
    slow = compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], replace(KEEP, hardware_lr=1.0))
    moved = lambda m: sum(float((p - q).detach().abs().sum()) for p, q in zip(m.hardware_proj.parameters(), kb.hardware_proj.parameters()))
    assert moved(fast) > 3 * moved(slow)


def test_film_is_zero_at_the_first_platform_and_learns_the_next(platforms, kb1):
    kb, ewc, _ = kb1
    plain = first_platform(platforms[0], [0], replace(CFG, hardware_film=False), model_config={"d_model": 32})[0]
    assert plain.hardware_film is None and kb.hardware_film is not None
    assert kb.size_mb() > plain.size_mb()
    assert torch.equal(kb.hardware_ref, torch.from_numpy(platforms[0].hardware[0]))
    x = platforms[0].inputs(np.arange(len(platforms[0])))
    with torch.no_grad():
        assert torch.equal(kb(*x), plain(*x))  # the same training; FiLM is zero at its platform
        moved = with_hardware_film(plain, x[3][0])
        torch.nn.init.normal_(moved.hardware_film.weight)
        torch.nn.init.normal_(moved.hardware_film_steps.weight)
        assert torch.allclose(moved(*x), plain(*x))  # any FiLM weights: still zero at the reference
        other = (*x[:3], x[3] + 1.0)
        assert not torch.allclose(moved(*other), plain(*other))
        # the steps' FiLM changes the body itself under another descriptor; the body needs it then
        assert not torch.allclose(moved.embedding(x[0], x[1], other[3]), plain.embedding(x[0], x[1]))
        with pytest.raises(ValueError, match="pass `hardware`"):
            moved.embedding(x[0], x[1])
        pooled_only = with_hardware_film(plain, x[3][0], steps=False)
        assert pooled_only.hardware_film_steps is None and pooled_only.size_mb() < moved.size_mb()
        # descriptor adapters: also zero at the reference whatever their weights, a body change elsewhere
        adapted = with_hardware_film(plain, x[3][0], steps=False, adapter_rank=2)
        assert adapted.body_reads_hardware and not pooled_only.body_reads_hardware
        for a in adapted.adapters():
            torch.nn.init.normal_(a.up.weight)
        assert torch.allclose(adapted(*x), plain(*x))
        assert not torch.allclose(adapted.embedding(x[0], x[1], other[3]), plain.embedding(x[0], x[1]))
        # a model trained with FiLM (tcl train --hardware-film) keeps its FiLM and reference, and only
        # gains the (zero) adapters: it scores every program as before under every descriptor
        film = with_hardware_film(plain, x[3][0] + 0.5)
        torch.nn.init.normal_(film.hardware_film_steps.weight)
        kb_of_film = with_hardware_film(film, x[3][0], adapter_rank=2)
        assert kb_of_film.encoder_adapter is not None and torch.equal(kb_of_film.hardware_ref, film.hardware_ref)
        assert torch.equal(kb_of_film(*other), film(*other))
        assert with_hardware_film(kb_of_film, x[3][0], adapter_rank=2) is kb_of_film
    new = other_hardware(platforms[1])
    new_kb, _, _ = learn_platform(kb, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], CFG)
    assert new_kb.hardware_film.weight.abs().sum() > 0  # the new platform's descriptor is not the reference
    assert torch.equal(new_kb.hardware_ref, kb.hardware_ref)


def test_mixed_programs_blend_each_group_with_the_next_groups_programs():
    gid = torch.tensor([0, 0, 0, 1, 1, 2, 2])
    seq = torch.arange(7, dtype=torch.float32)[:, None, None].expand(7, 3, 2).clone()
    seq[[0, 3]] *= 10  # the first program of groups 0 and 1 is different from the rest
    lengths = torch.tensor([1, 2, 3, 3, 2, 1, 3])
    workload = torch.arange(7, dtype=torch.float32)[:, None]
    m_seq, m_len, m_wl = phases.mixed_programs(seq, lengths, workload, gid, np.random.default_rng(0))
    assert m_seq.shape == seq.shape and m_wl.shape == workload.shape
    for k, nxt in ((0, 1), (1, 2), (2, 0)):
        rows = np.flatnonzero(gid.numpy() == k)
        partners = set(np.flatnonzero(gid.numpy() == nxt))
        for i in rows:
            # every mixture is lam * own + (1 - lam) * a program of the next group, lam shared in the group
            ok = [j for j in partners if float(m_len[i]) == max(int(lengths[i]), int(lengths[j]))]
            lam = [(m_wl[i, 0] - workload[j, 0]) / (workload[i, 0] - workload[j, 0]) for j in ok]
            assert any(0 <= float(v) <= 1 and torch.allclose(m_seq[i], v * seq[i] + (1 - v) * seq[j])
                       for v, j in zip(lam, ok))


def test_compress_with_mixtures_keeps_the_size(kb1, column, monkeypatch):
    kb, ewc, _ = kb1
    new, ac = column
    calls = []
    real = phases.mixed_programs
    monkeypatch.setattr(phases, "mixed_programs", lambda *a: calls.append(1) or real(*a))
    student = compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], replace(KEEP, keep_old_mix=True))
    assert calls  # the mixtures were made
    assert student.size_mb() == kb.size_mb()
    assert any(not torch.equal(p, q) for p, q in zip(student.parameters(), kb.parameters()))


def test_distill_cli_defaults_are_ckdconfigs():
    """`tcl distill` reads its defaults from CKDConfig (the parser imports no torch): with no option
    given it makes CKDConfig(), and every field has an option."""
    from tcl.cli import build_parser
    from tcl.cli.distill import ckd_config

    args = build_parser().parse_args(["distill", "d", "--out", "o"])
    assert ckd_config(args) == CKDConfig()
    assert all(hasattr(args, f) for f in CKDConfig.__dataclass_fields__)
    args = build_parser().parse_args(["distill", "d", "--out", "o", "--no-gate", "--no-film", "--adapter-rank", "0",
                                      "--preserve", "keep", "--no-column-from-kb", "--log-ratio-weight", "0.5"])
    assert ckd_config(args) == replace(CKDConfig(), gated=False, hardware_film=False, hardware_adapter_rank=0,
                                       preserve="keep", column_from_kb=False, log_ratio_weight=0.5)


def test_the_log_ratio_term_joins_every_label_term_when_weighted(kb1, column, monkeypatch):
    """With log_ratio_weight W each LambdaRank label term of progress and compress gains
    W x log_ratio_loss; at 0 the term is not computed."""
    kb, ewc, _ = kb1
    new, ac = column
    scores, labels = torch.tensor([0.3, -1.0, 2.0, 0.1]), torch.tensor([1.0, 0.02, 0.5, 0.9])
    gid = torch.tensor([0, 0, 1, 1])
    weighted = replace(CFG, log_ratio_weight=0.5)
    assert float(phases.label_loss(scores, labels, gid, weighted)) == pytest.approx(
        float(lambda_rank_loss(scores, labels, gid) + 0.5 * log_ratio_loss(scores, labels, gid)))
    assert float(phases.label_loss(scores, labels, gid, CFG)) == pytest.approx(float(lambda_rank_loss(scores, labels, gid)))
    assert weighted.train_config().log_ratio_weight == 0.5
    calls = []
    real = phases.log_ratio_loss
    monkeypatch.setattr(phases, "log_ratio_loss", lambda *a: calls.append(1) or real(*a))
    progress(kb, new, [0], CFG)
    compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], CFG)
    assert not calls
    progress(kb, new, [0], weighted)
    after_progress = len(calls)
    compress(kb, ac, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0], weighted)
    assert after_progress > 0 and len(calls) > after_progress


def test_check_split_holds_back_a_seeded_share_of_the_tasks():
    from tcl.continual.learn import check_split

    tasks = list(range(20))
    fit, check = check_split(tasks, replace(CFG, check_fraction=0.2, seed=3))
    assert len(check) == 4 and sorted(fit + check) == tasks
    assert check_split(tasks, replace(CFG, check_fraction=0.2, seed=3)) == (fit, check)
    assert check_split(tasks, replace(CFG, check_fraction=0.2, seed=4))[1] != check
    assert check_split(tasks, CFG) == (tasks, [])  # off by default
    assert check_split([5], replace(CFG, check_fraction=0.5)) == ([5], [])  # nothing would be left to learn
    assert check_split([5, 6], replace(CFG, check_fraction=0.01))[1] in ([5], [6])  # at least one


def test_the_kb_keeps_the_epoch_that_ranks_the_held_back_tasks_best(tmp_path, kb1):
    """check_fraction: the KB learns from one task, and of the incoming KB (epoch 0) and every
    compress epoch, keeps the first whose Top-1 on the other task is the best."""
    from tcl.continual.learn import check_split
    from tcl.scoring import score_tasks

    for task in ("matmul_128", "conv2d_1x16x14x14_32_3x3"):
        shutil.copytree(MS_FIXTURE / task, tmp_path / task)
    new = other_hardware(ProgramData(tcl.featurize(tmp_path)))
    cfg = replace(CFG, compress_epochs=4, check_fraction=0.5)
    kb, ewc, _ = kb1
    report: dict = {}
    new_kb, ewc2, _ = learn_platform(kb, OnlineEWC.from_state_dict(ewc.state_dict()), new, [0, 1], cfg, report)
    _, check = check_split([0, 1], cfg)
    top1 = report["check_top1"]
    assert len(top1) == 1 + 4 and report["check_epoch"] == int(np.argmax(top1))
    assert score_tasks(kb, new, check)["pooled"]["top1"] == pytest.approx(top1[0])  # epoch 0: the KB
    assert score_tasks(new_kb, new, check)["pooled"]["top1"] == pytest.approx(max(top1))
    assert ewc2.platforms == 2 and new_kb.size_mb() == kb.size_mb()
