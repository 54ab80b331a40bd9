"""Statistical tests for randomized code (samplers, estimators), each at a stated
false-fail rate: an honest implementation fails a property this rarely.

A check states its rate (:data:`FALSE_FAIL`, per test) and passes when the test's p-value
is at least that: ``chi2_test(counts, probs)[2] >= FALSE_FAIL``.  The rate holds per test;
a property made of several tests divides it (Bonferroni): ``FALSE_FAIL / n`` each.
``bench/false_fail_bench.py`` measures the rates of the bank's checks on honest code.
"""

from __future__ import annotations

import math

import numpy as np

FALSE_FAIL = 1e-4  # per test, unless a check states another
MIN_EXPECTED = 5.0  # chi-square cells expecting fewer counts are pooled


def two_sided_p(z: float) -> float:
    """P(|N(0, 1)| > |z|): the p-value of a z-test."""
    return math.erfc(abs(z) / math.sqrt(2))


def chi2_sf(x: float, dof: int) -> float:
    """P(χ²_dof > x): the regularized upper incomplete gamma Q(dof/2, x/2)."""
    if x <= 0:
        return 1.0
    a, x = dof / 2, x / 2
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:  # series for the lower function P
        term = total = 1 / a
        n = a
        for _ in range(10_000):
            n += 1
            term *= x / n
            total += term
            if term < total * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300  # continued fraction for Q (modified Lentz)
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return min(1.0, math.exp(log_front) * h)


def chi2_test(observed: np.ndarray, probs: np.ndarray) -> tuple[float, int, float]:
    """Pearson's χ² of counts against probabilities (cells expecting < 5 pooled): χ², dof, P."""
    total = observed.sum()
    expected = total * probs
    small = expected < MIN_EXPECTED
    obs, exp = list(observed[~small]), list(expected[~small])
    if small.any():
        obs.append(observed[small].sum())
        exp.append(expected[small].sum())
        if exp[-1] < MIN_EXPECTED and len(exp) > 1:  # pool the pool into the smallest cell
            i = int(np.argmin(exp[:-1]))
            obs[i] += obs.pop()
            exp[i] += exp.pop()
    obs_a, exp_a = np.array(obs, dtype=float), np.array(exp, dtype=float)
    stat = float(np.sum((obs_a - exp_a) ** 2 / exp_a))
    dof = len(exp_a) - 1
    return stat, dof, (chi2_sf(stat, dof) if dof > 0 else 1.0)
