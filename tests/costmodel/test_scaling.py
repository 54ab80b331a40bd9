"""Scaling laws and compute allocation (000 §1.4, Def 1.6, Thm 1.7, Ex. 15; 001 project 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, scaling
from costmodel._registry import all_derivations
from costmodel.verify import check


def test_published_constants():
    # 000 Def 1.6 (Hoffmann et al. 2022): E 1.69, A 406.4, B 410.7, α 0.34, β 0.28
    assert scaling.loss(n_params=1e30, n_tokens=1e30) == pytest.approx(1.69, abs=1e-5)
    assert scaling.loss(n_params=1, n_tokens=1e30) == pytest.approx(1.69 + 406.4, abs=1e-5)


def test_exercise_15_inference_aware_optimum():
    # 000 Ex. 15 code prints N = 1.46e10, 1.09e10, 6.09e9 for D_inf = 0, 1e12, 1e13 at C = 1e23
    sizes = [
        scaling.inference_optimal(compute=1e23, inference_tokens=d)[0] for d in (0, 1e12, 1e13)
    ]
    assert [float(f"{n:.3g}") for n in sizes] == [1.46e10, 1.09e10, 6.09e9]
    # D_inf = 0 is the compute-optimal model of Thm 1.7
    assert sizes[0] == pytest.approx(scaling.compute_optimal(compute=1e23)[0], rel=1e-9)


def test_exercise_15_against_a_grid():
    # brute force on a fine log grid of N: the bisection's optimum is the grid's minimum
    n_star, d_star = scaling.compute_optimal(compute=1e23)
    target = scaling.loss(n_params=n_star, n_tokens=d_star)
    grid = np.exp(np.linspace(math.log(n_star) - 1.5, math.log(n_star), 20_001))
    gap = target - 1.69 - 406.4 / grid**0.34
    tokens = (410.7 / gap) ** (1 / 0.28)
    cost = 6 * grid * tokens + 2 * grid * 1e13
    n, d = scaling.inference_optimal(compute=1e23, inference_tokens=1e13)
    assert n == pytest.approx(grid[np.argmin(cost)], rel=1e-3)
    assert scaling.loss(n_params=n, n_tokens=d) == pytest.approx(target, rel=1e-12)


def test_twenty_tokens_per_parameter():
    # 001 project 3: about 3, 9 and 20 M parameters at 1e15, 1e16 and 5e16 FLOPs
    sizes = [scaling.fixed_ratio_allocation(compute=c)[0] for c in (1e15, 1e16, 5e16)]
    assert [round(n / 1e6, 2) for n in sizes] == [2.89, 9.13, 20.41]
    # 000 Ex. 2: D = 20N for N = 1.31e9 is 2.62e10 tokens
    assert scaling.chinchilla_tokens(n_params=1_310_359_552) == pytest.approx(2.62e10, rel=1e-3)
    # 001 project 3: six models per budget need 3.66e17 FLOPs (about 4e17)
    sweep = scaling.isoflop_sweep_flops(budgets=[1e15, 1e16, 5e16], models_per_budget=6)
    assert sweep == pytest.approx(3.66e17)


def test_exponents():
    # 000 §1.4: a = β/(α+β) ≈ 0.45, b = α/(α+β) ≈ 0.55 with the published fit; ½ when α = β
    a, b = scaling.compute_optimal_exponents()
    assert (round(a, 2), round(b, 2)) == (0.45, 0.55)
    assert scaling.compute_optimal_exponents(alpha=0.3, beta=0.3) == (0.5, 0.5)


def test_unreachable_loss_is_refused():
    # a 1M-parameter model cannot go below E + A/N^α ≈ 5.4 however long it trains
    with pytest.raises(ArgumentError, match="target_loss"):
        scaling.tokens_for_loss(n_params=1e6, target_loss=3.0)


@pytest.mark.parametrize(("bad", "name"), [({"alpha": 0}, "alpha"), ({"compute": -1}, "compute")])
def test_bad_arguments_are_refused_by_name(bad, name):
    with pytest.raises(ArgumentError, match=name):
        scaling.compute_optimal(**{"compute": 1e23, **bad})


def test_bad_sweep_is_refused():
    with pytest.raises(ArgumentError, match="budgets"):
        scaling.isoflop_sweep_flops(budgets=[1e15, -1.0], models_per_budget=6)


_compute = st.floats(1e18, 1e25)


@settings(max_examples=100)
@given(c=_compute, eps=st.floats(0.01, 0.5))
def test_compute_optimal_spends_the_budget_and_minimises_the_loss(c, eps):
    n, d = scaling.compute_optimal(compute=c)
    assert 6 * n * d == pytest.approx(c)
    best = scaling.loss(n_params=n, n_tokens=d)
    for m in (n * (1 + eps), n / (1 + eps)):  # same budget, other splits
        assert scaling.loss(n_params=m, n_tokens=c / (6 * m)) > best


@settings(max_examples=100)
@given(c=_compute, r=st.floats(1, 1000))
def test_fixed_ratio_spends_the_budget_at_the_ratio(c, r):
    n, d = scaling.fixed_ratio_allocation(compute=c, tokens_per_param=r)
    assert d / n == pytest.approx(r)
    assert 6 * n * d == pytest.approx(c)


@settings(max_examples=100)
@given(n=st.floats(1e6, 1e12), d=st.floats(1e8, 1e13))
def test_tokens_for_loss_inverts_the_loss(n, d):
    target = scaling.loss(n_params=n, n_tokens=d)
    assert scaling.tokens_for_loss(n_params=n, target_loss=target) == pytest.approx(d, rel=1e-6)


@settings(max_examples=30, deadline=None)
@given(c=st.floats(1e20, 1e25), d_inf=st.floats(1e10, 1e14))
def test_serving_more_tokens_favours_smaller_models(c, d_inf):
    # 000 Ex. 15: the optimum moves towards smaller models, trained on more tokens
    n0, d0 = scaling.compute_optimal(compute=c)
    n1, d1 = scaling.inference_optimal(compute=c, inference_tokens=d_inf)
    n2, _ = scaling.inference_optimal(compute=c, inference_tokens=10 * d_inf)
    assert n2 <= n1 <= n0 * (1 + 1e-9)
    assert d1 >= d0 * (1 - 1e-9)


@pytest.mark.parametrize(
    "derivation",
    [d for d in all_derivations() if d.formula.startswith("scaling.")],
    ids=lambda d: d.formula,
)
def test_derivations(derivation):
    result = check(derivation)
    assert result.ok, result.detail
