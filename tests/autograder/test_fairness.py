"""Per-parameter attribution on cohorts simulated from a known truth.

The generative model is a two-parameter logistic IRT model: a student of ability
theta ~ N(0, 1) gets an item right with probability 1 / (1 + exp(-1.7 (theta - b))), and
an item's difficulty b depends on a drawn parameter only where we plant it.  The
parameters are drawn independently of ability, as the HMAC of the student id draws them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from autograder.analysis.fairness import FAMILY_ALPHA, attribute, holm

WORKERS = [2, 4, 8, 16, 32, 64]
WIDTHS = [1024, 2048, 4096, 8192]
GPUS = ["A100", "H100", "L4"]


def _cohort(rng, n: int, planted: float = 0.0, items: int = 6):
    """Standings and params of ``n`` students; item 0's difficulty rises with
    log2(n_workers) by ``planted`` per doubling, the others are fair."""
    theta = rng.normal(size=n)
    workers = rng.choice(WORKERS, size=(n, items))
    widths = rng.choice(WIDTHS, size=(n, items))
    gpus = rng.choice(len(GPUS), size=(n, items))
    b = -0.3 + 0.2 * np.arange(items) + np.zeros((n, 1))
    b[:, 0] += planted * (np.log2(workers[:, 0]) - 3.5)
    right = rng.random((n, items)) < 1 / (1 + np.exp(-1.7 * (theta[:, None] - b)))
    results, params = [], {}
    for i in range(n):
        sid = f"s{i:03d}"
        parts = [
            {"question": f"topic/q{j}", "index": j + 1, "verdict": {
                "part": "a", "variable": f"q{j}_a", "points": 2.0,
                "score": 2.0 if right[i, j] else 0.0,
                "status": "correct" if right[i, j] else "wrong", "misconception": None}}
            for j in range(items)
        ]  # fmt: skip
        results.append({"student_id": sid, "parts": parts, "error": None})
        params[sid] = {
            f"topic/q{j}": {"n_workers": int(workers[i, j]), "d_model": int(widths[i, j]),
                            "gpu": GPUS[gpus[i, j]]}
            for j in range(items)
        }  # fmt: skip
    return results, params


def test_a_planted_unfair_parameter_is_flagged_with_its_sign_and_size():
    rng = np.random.default_rng(7)
    results, params = _cohort(rng, 300, planted=0.35)
    found = attribute(results, params)
    flagged = [e for e in found.effects if e.flagged]
    assert [(e.question, e.parameter) for e in flagged] == [("topic/q0", "n_workers")]
    (effect,) = flagged
    assert effect.scale == "log" and effect.points < 0  # harder with more workers
    # the truth, by Monte Carlo on the same model: the expected points at the 10th and
    # 90th percentile of n_workers (2 and 64), over the ability distribution
    theta = np.random.default_rng(1).normal(size=200_000)

    def expected(workers):
        b = -0.3 + 0.35 * (math.log2(workers) - 3.5)
        return 2.0 * np.mean(1 / (1 + np.exp(-1.7 * (theta - b))))

    truth = expected(effect.high) - expected(effect.low)
    assert (effect.low, effect.high) == pytest.approx((2.0, 64.0))
    # the rest score is a noisy measure of ability: the adjusted effect is close to, and
    # a little smaller than, the marginal truth
    assert effect.points == pytest.approx(truth, rel=0.35)
    spread = found.spread["Q1 q0_a"]
    assert spread[1] - spread[0] > 0.3  # the item's expected share varies across draws
    assert found.gap > 0.5  # points between the hardest and the easiest assignment


def test_fair_questions_are_flagged_no_more_often_than_the_false_alarm_rate():
    rng = np.random.default_rng(11)
    cohorts = 150
    alarms = 0
    for _ in range(cohorts):
        results, params = _cohort(rng, 200)
        found = attribute(results, params)
        assert found.tests == 18  # 6 items x 3 parameters, corrected together
        alarms += any(e.flagged for e in found.effects)
    # Holm's correction bounds the family-wise rate by 5 %: 7.5 expected at most of 150;
    # 15 is past the binomial's 99.9th percentile for a rate of 5 %
    assert alarms <= 15, alarms
    assert FAMILY_ALPHA == 0.05


def test_holm_by_hand():
    # Holm at 5 %: sorted 0.01 <= 0.05/3, 0.02 <= 0.05/2, 0.04 <= 0.05/1: all rejected;
    # with 0.03 second it stops at 0.03 > 0.025
    assert holm([0.04, 0.01, 0.02]) == [True, True, True]
    assert holm([0.01, 0.03, 0.04]) == [True, False, False]
