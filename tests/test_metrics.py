"""Top-k and pairwise accuracy on cases worked out by hand (numbers in the comments)."""

import itertools
import math

import numpy as np
import pytest

from tcl.metrics import (evaluate_predictions, held_out_summary, pairwise_counts, score_task, spearman, summarize,
                         top_k_latency)

# Task a: best latency 1 (program 3). Predicted order (score desc): 0, 1, 3, 2.
A_LAT, A_SCORE = [4.0, 2.0, 8.0, 1.0], [0.9, 0.5, 0.1, 0.3]
# Task b: best 10. Scores 1, 2, 2: the tie keeps the earlier program first -> order 1, 2, 0.
B_LAT, B_SCORE = [10.0, 10.0, 20.0], [1.0, 2.0, 2.0]
# Task c: no network. Order 1, 0: top-1 picks the 6, best is 3.
C_LAT, C_SCORE = [3.0, 6.0], [0.0, 1.0]


def test_task_top_k():
    a = score_task(A_LAT, A_SCORE, ks=(1, 2, 3, 5))
    assert a.best == 1.0
    assert a.ratio(1) == 1 / 4  # top-1 is program 0 (4 s)
    assert a.ratio(2) == 1 / 2  # programs 0, 1 -> best 2 s
    assert a.ratio(3) == 1.0  # program 3 enters
    assert a.ratio(5) == 1.0  # k beyond the task: all programs
    assert top_k_latency(B_LAT, B_SCORE, 1) == 10.0  # program 1 (tie with 2, earlier wins)
    assert top_k_latency(B_LAT, [2.0, 2.0, 1.0], 1) == 10.0


def test_spearman_hand_computed():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (0, 1, 2, 3) vs (1, 0, 2, 3): 1 - 6 * 2 / (4 * 15) = 0.8
    assert spearman([0.1, 0.2, 0.3, 0.4], [5, 1, 7, 9]) == pytest.approx(0.8)


def test_task_pairwise():
    # a: faster->slower pairs (3,1) wrong, (3,0) wrong, (3,2) right, (1,0) wrong, (1,2) right,
    # (0,2) right: 3 of 6.
    assert pairwise_counts(A_LAT, A_SCORE) == (3.0, 6)
    # b: (0,1) has equal latency and is not a pair; (0,2) wrong (1 < 2); (1,2) tied score: half.
    assert pairwise_counts(B_LAT, B_SCORE) == (0.5, 2)
    assert math.isnan(score_task([5.0, 5.0], [1.0, 2.0]).pairwise)  # no pair at all


def test_pairwise_blocks_match_plain_loop():
    rng = np.random.default_rng(0)
    lat = rng.integers(1, 20, 300).astype(float)  # many ties in latency
    s = rng.integers(0, 10, 300).astype(float)  # and in score
    right = pairs = 0
    for i, j in itertools.permutations(range(300), 2):
        if lat[i] < lat[j]:
            pairs += 1
            right += 1.0 if s[i] > s[j] else 0.5 if s[i] == s[j] else 0.0
    assert pairwise_counts(lat, s, block=7) == (right, pairs)
    assert pairwise_counts(lat, s) == (right, pairs)


def _expected_summary(out):
    # net1 = a (w 2) + b (w 1): top-1 = (2*1 + 1*10) / (2*4 + 1*10) = 12/18;
    #   top-5 = 12/12; pairwise = (3 + 0.5) / (6 + 2)
    n1 = out["networks"]["net1"]
    assert n1["top1"] == pytest.approx(12 / 18)
    assert n1["top5"] == pytest.approx(1.0)
    assert n1["pairwise"] == pytest.approx(3.5 / 8)
    assert n1["tasks"] == 2
    # net2 = b (w 3): top-1 = 30/30; pairwise 0.5/2
    assert out["networks"]["net2"] == {"top1": 1.0, "top5": 1.0, "pairwise": 0.25, "tasks": 1}
    # c has no network: "all", weight 1: top-1 = 3/6; its one pair is wrong
    assert out["networks"]["all"] == {"top1": 0.5, "top5": 1.0, "pairwise": 0.0, "tasks": 1}
    # pooled over (network, task) pairs: num = 2*1 + 1*10 + 3*10 + 1*3 = 45,
    #   top-1 den = 2*4 + 1*10 + 3*10 + 1*6 = 54; top-5 den = 45
    #   pairwise over distinct tasks: (3 + 0.5 + 0) / (6 + 2 + 1)
    assert out["pooled"]["top1"] == pytest.approx(45 / 54)
    assert out["pooled"]["top5"] == pytest.approx(1.0)
    assert out["pooled"]["pairwise"] == pytest.approx(3.5 / 9)
    assert out["tasks"]["a"] == {"top1": 0.25, "top5": 1.0, "pairwise": 0.5, "programs": 4}
    assert out["tasks"]["b"]["pairwise"] == 0.25


NETWORKS = {"a": {"net1": 2}, "b": {"net1": 1, "net2": 3}}


def test_summarize_networks_and_pooled():
    tasks = {"a": score_task(A_LAT, A_SCORE), "b": score_task(B_LAT, B_SCORE),
             "c": score_task(C_LAT, C_SCORE)}
    _expected_summary(summarize(tasks, NETWORKS))


def test_evaluate_predictions_from_interleaved_programs():
    # The same three tasks with their programs interleaved; each task keeps its program order.
    rows = [(0, 4.0, 0.9), (2, 3.0, 0.0), (1, 10.0, 1.0), (0, 2.0, 0.5), (1, 10.0, 2.0),
            (2, 6.0, 1.0), (0, 8.0, 0.1), (1, 20.0, 2.0), (0, 1.0, 0.3)]
    task, lat, score = map(np.array, zip(*rows))
    _expected_summary(evaluate_predictions(lat, score, task, ["a", "b", "c"], NETWORKS))


def test_perfect_ranking_scores_one():
    rng = np.random.default_rng(1)
    lat = rng.uniform(1e-4, 1e-2, 50)
    out = evaluate_predictions(lat, -lat, np.zeros(50, int), ["t"])
    assert out["pooled"] == {"top1": 1.0, "top5": 1.0, "pairwise": 1.0}


def test_the_task_mean_weighs_every_task_of_enough_programs_once():
    tasks = {"big": {"top1": 0.5, "programs": 40}, "also": {"top1": 0.9, "programs": 16},
             "few": {"top1": 1.0, "programs": 3}, "unranked": {"top1": None, "programs": 20}}
    s = held_out_summary({"pooled": {"top1": 0.6, "top5": 0.9}, "tasks": tasks})
    assert s == {"top1": 0.6, "top5": 0.9, "task_mean": pytest.approx(0.7), "tasks": 2}
    assert held_out_summary({"pooled": {"top1": 0.6, "top5": 0.9}, "tasks": tasks}, min_programs=50)["task_mean"] is None
