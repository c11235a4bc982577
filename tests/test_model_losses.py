"""LambdaRank loss and pairwise accuracy within groups (one group = one task)."""

import math

import pytest

torch = pytest.importorskip("torch")

from tcl.model.losses import group_matrix, lambda_rank_loss, log_ratio_loss, pairwise_accuracy  # noqa: E402


def _slow_lambda_rank(scores, labels, groups, sigma=1.0):
    """Plain-loop LambdaRank, straight from the definition, as the reference."""
    total, gids = 0.0, sorted(set(groups))
    for g in gids:
        idx = [i for i, gi in enumerate(groups) if gi == g]
        s = [scores[i] for i in idx]
        y = [labels[i] for i in idx]
        by_score = sorted(range(len(idx)), key=lambda k: (-s[k], k))
        by_label = sorted(range(len(idx)), key=lambda k: (-y[k], k))
        rank = {k: r + 1 for r, k in enumerate(by_score)}
        idcg = sum((2 ** y[k] - 1) / math.log2(1 + r + 1) for r, k in enumerate(by_label))
        gain = [(2 ** v - 1) / idcg for v in y]
        for i in range(len(idx)):
            for j in range(len(idx)):
                if y[i] > y[j]:
                    w = abs(gain[i] - gain[j]) * abs(1 / math.log2(1 + rank[i])
                                                     - 1 / math.log2(1 + rank[j]))
                    total += w * math.log1p(math.exp(-sigma * (s[i] - s[j])))
    return total / len(gids)


def _case():
    g = torch.Generator().manual_seed(0)
    groups = torch.tensor([5, 2, 5, 9, 2, 5, 9, 5, 2, 2, 9])  # interleaved, non-contiguous ids
    labels = torch.rand(len(groups), generator=g) * 0.9 + 0.1
    scores = torch.randn(len(groups), generator=g, dtype=torch.float64)
    return scores, labels, groups


def test_group_matrix_layout():
    groups = torch.tensor([7, 3, 7, 7])
    mask, v = group_matrix(groups, torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert mask.tolist() == [[True, False, False], [True, True, True]]
    assert v.tolist() == [[2.0, 0.0, 0.0], [1.0, 3.0, 4.0]]


def test_matches_plain_loop_reference():
    scores, labels, groups = _case()
    for sigma in (1.0, 2.5):
        fast = lambda_rank_loss(scores, labels, groups, sigma=sigma)
        slow = _slow_lambda_rank(scores.tolist(), labels.double().tolist(), groups.tolist(), sigma)
        assert fast.item() == pytest.approx(slow, rel=1e-9)


def test_perfect_ranking_beats_reversed():
    labels = torch.tensor([1.0, 0.8, 0.5, 0.3, 0.1, 1.0, 0.6, 0.2])
    groups = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1])
    perfect = labels * 3
    reversed_ = -perfect
    lp = lambda_rank_loss(perfect, labels, groups)
    lr = lambda_rank_loss(reversed_, labels, groups)
    assert 0 < lp < lr
    assert lambda_rank_loss(perfect * 10, labels, groups) < lp  # more margin, less loss
    assert pairwise_accuracy(perfect, labels, groups) == 1.0
    assert pairwise_accuracy(reversed_, labels, groups) == 0.0


def test_gradients_push_scores_the_right_way():
    scores, labels, groups = _case()
    scores = torch.zeros_like(scores, requires_grad=True)  # no order yet
    lambda_rank_loss(scores, labels, groups).backward()
    for g in groups.unique():
        idx = (groups == g).nonzero().squeeze(1)
        best, worst = idx[labels[idx].argmax()], idx[labels[idx].argmin()]
        assert scores.grad[best] < 0 < scores.grad[worst]  # descent raises best, lowers worst
        assert abs(float(scores.grad[idx].sum())) < 1e-12  # pairwise: a group's forces balance
    # a few gradient steps make the ranking better
    s = torch.zeros(len(labels), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.SGD([s], lr=1.0)
    for _ in range(50):
        opt.zero_grad()
        lambda_rank_loss(s, labels, groups).backward()
        opt.step()
    assert pairwise_accuracy(s, labels, groups) == 1.0


def test_groups_do_not_interact():
    scores, labels, groups = _case()
    per_group = [lambda_rank_loss(scores[groups == g], labels[groups == g], groups[groups == g])
                 for g in groups.unique()]
    whole = lambda_rank_loss(scores, labels, groups)
    assert whole.item() == pytest.approx(torch.stack(per_group).mean().item(), rel=1e-12)
    # moving one group's scores (even past the others) changes nothing for the rest
    moved = scores.clone().requires_grad_()
    base = scores.clone().requires_grad_()
    with torch.no_grad():
        moved[groups == 9] += 100.0
    g_moved, = torch.autograd.grad(lambda_rank_loss(moved, labels, groups), moved)
    g_base, = torch.autograd.grad(lambda_rank_loss(base, labels, groups), base)
    assert torch.allclose(g_moved, g_base, atol=1e-12)  # shift inside a group is invariant too
    # order in the batch does not matter
    perm = torch.randperm(len(groups), generator=torch.Generator().manual_seed(1))
    assert lambda_rank_loss(scores[perm], labels[perm], groups[perm]).item() == \
        pytest.approx(whole.item(), rel=1e-12)


def test_equal_labels_and_singletons_cost_nothing():
    scores = torch.tensor([0.3, -1.0, 2.0, 5.0], requires_grad=True)
    labels = torch.tensor([0.5, 0.5, 0.5, 1.0])
    groups = torch.tensor([1, 1, 1, 2])
    loss = lambda_rank_loss(scores, labels, groups)
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(scores.grad, torch.zeros(4))


def _slow_log_ratio(scores, labels, groups):
    """Plain-loop log_ratio_loss from its definition, as the reference."""
    per_group = []
    for g in sorted(set(groups)):
        s = [scores[i] for i, gi in enumerate(groups) if gi == g]
        ly = [math.log(labels[i]) for i, gi in enumerate(groups) if gi == g]
        ms, my = sum(s) / len(s), sum(ly) / len(ly)
        per_group.append(sum(((a - ms) - (b - my)) ** 2 for a, b in zip(s, ly)) / len(s))
    return sum(per_group) / len(per_group)


def test_log_ratio_matches_plain_loop_reference():
    scores, labels, groups = _case()
    fast = log_ratio_loss(scores, labels, groups)
    assert fast.item() == pytest.approx(_slow_log_ratio(scores.tolist(), labels.double().tolist(),
                                                        groups.tolist()), rel=1e-9)


def test_log_ratio_is_zero_at_log_throughput_up_to_a_shift_per_group():
    scores, labels, groups = _case()
    shift = {5: 3.0, 2: -7.0, 9: 0.0}
    exact = torch.log(labels.double()) + torch.tensor([shift[int(g)] for g in groups], dtype=torch.float64)
    assert log_ratio_loss(exact, labels, groups).item() == pytest.approx(0.0, abs=1e-12)
    # a program 30x slower than its group's best scored level with the best costs more than one 3x slower
    y = torch.tensor([1.0, 1 / 3, 1 / 30])
    g = torch.zeros(3, dtype=torch.long)
    far = log_ratio_loss(torch.log(torch.tensor([1.0, 1 / 3, 1.0])), y, g)
    near = log_ratio_loss(torch.log(torch.tensor([1.0, 1.0, 1 / 30])), y, g)
    assert far > near > 0


def test_pairwise_accuracy_hand_cases():
    groups = torch.tensor([0, 0, 0, 1, 1])
    labels = torch.tensor([1.0, 0.5, 0.2, 0.9, 0.3])
    # group 0: pairs (0,1) right, (0,2) right, (1,2) wrong; group 1: (3,4) right -> 3/4
    assert pairwise_accuracy(torch.tensor([3.0, 1.0, 2.0, 1.0, 0.0]), labels, groups) == 0.75
    # cross-group pairs are ignored: group 1 far below group 0 is still fully right
    assert pairwise_accuracy(torch.tensor([3.0, 2.0, 1.0, -9.0, -10.0]), labels, groups) == 1.0
    # a tie in score is half right
    assert pairwise_accuracy(torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0]), labels, groups) == \
        pytest.approx((0.5 + 1 + 1 + 0.5) / 4)
    # tied labels make no pair; no pair at all -> nan
    assert math.isnan(pairwise_accuracy(torch.tensor([0.0, 1.0]), torch.tensor([0.5, 0.5]),
                                        torch.tensor([0, 0])))
