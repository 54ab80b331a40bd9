"""Reliability arithmetic of agents: chains, verifiers, votes, pass@k (000 ch. 7)."""

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import agents
from costmodel.arguments import ArgumentError


def test_chain_and_verifier_of_000_section_7_2():
    # 000 §7.2: p = 0.95, n = 20 → 0.36; two attempts per step → 0.9975^20 ≈ 0.95
    assert agents.chain_success(p=0.95, n=20) == pytest.approx(0.3584859224)
    assert agents.verified_step_success(p=0.95, attempts=2) == pytest.approx(0.9975)
    assert agents.verified_chain_success(p=0.95, n=20, attempts=2) == pytest.approx(0.95117, 1e-4)


def test_majority_of_15_of_000_section_7_2():
    # 000 §7.2 / §7.3 code: p = 0.7, k = 15 → exact 0.05, Hoeffding bound 0.301
    assert agents.majority_vote_error(p=0.7, k=15) == pytest.approx(0.0500125400537)
    assert agents.majority_vote_error_bound(p=0.7, k=15) == pytest.approx(0.3011942119)


def test_exercise_14_verify_or_vote():
    # 000 Exercise 14: n = 10, p = 0.8
    assert agents.verified_chain_success(p=0.8, n=10, attempts=2) == pytest.approx(0.66483, 1e-4)
    q = agents.chain_success(p=0.8, n=10)  # one run, 0.107
    assert agents.binomial_tail(p=q, n=5, k=2) == pytest.approx(0.09247, 1e-3)
    assert agents.plurality_vote_success(p=q, n_runs=5) == pytest.approx(0.16064, 1e-3)
    # (b) false accepts 0.1: 0.8 + 0.2·0.9·0.8 = 0.944 per step, 0.56 per task
    step = agents.verified_step_success(p=0.8, attempts=2, false_accept=0.1)
    assert step == pytest.approx(0.944)
    assert agents.verified_chain_success(
        p=0.8, n=10, attempts=2, false_accept=0.1
    ) == pytest.approx(0.944**10)
    # (c) about 12 calls with the verifier (11.8 with false accepts), 50 for the vote
    assert agents.verifier_model_calls(p=0.8, n=10) == pytest.approx(12)
    assert agents.verifier_model_calls(p=0.8, n=10, false_accept=0.1) == pytest.approx(11.8)
    assert agents.vote_model_calls(n=10, n_runs=5) == 50


@settings(max_examples=100)
@given(p=st.floats(0.0, 1.0), k=st.integers(1, 8))
def test_perfect_verifier_is_one_minus_all_attempts_wrong(p, k):
    # 000 Prop 7.3 with a verifier: 1 − (1 − p)^k, the f → 0 limit of the general formula
    general = agents.verified_step_success(p=p, attempts=k, false_accept=1e-12)
    assert general == pytest.approx(1 - (1 - p) ** k, abs=1e-9)


@settings(max_examples=100)
@given(p=st.floats(0.0, 1.0), f=st.floats(0.0, 1.0), k=st.integers(1, 6))
def test_verified_step_by_enumerating_attempts(p, f, k):
    # Attempt j is made iff the j − 1 before were wrong and rejected; stop at the first accept
    success, reach = 0.0, 1.0
    for _ in range(k):
        success += reach * p
        reach *= (1 - p) * (1 - f)
    got = agents.verified_step_success(p=p, attempts=k, false_accept=f)
    assert got == pytest.approx(success, abs=1e-12)


@settings(max_examples=100)
@given(p=st.floats(0.51, 0.99), k=st.integers(1, 61))
def test_hoeffding_bounds_the_exact_majority_error(p, k):
    # 000 Thm 7.4
    assert agents.majority_vote_error(p=p, k=k) <= agents.majority_vote_error_bound(p=p, k=k)


@settings(max_examples=100)
@given(p=st.floats(0.0, 1.0), r=st.integers(1, 7))
def test_plurality_by_enumerating_all_runs(p, r):
    # 000 Ex. 14(a): every outcome of r runs, wrong answers all distinct, random tie-break
    total = 0.0
    for right in itertools.product([True, False], repeat=r):
        x = sum(right)
        prob = p**x * (1 - p) ** (r - x)
        best_wrong = 1 if x < r else 0
        win = 1.0 if x > best_wrong else (1 / r if x == best_wrong == 1 else 0.0)
        total += prob * win
    assert agents.plurality_vote_success(p=p, n_runs=r) == pytest.approx(total, abs=1e-12)


def test_pass_at_k_of_chen_et_al():
    # 000 §7.3 code (Chen et al. 2021): 1 − C(n − c, k)/C(n, k), 1 if n − c < k
    assert agents.pass_at_k(n=20, c=0, k=5) == 0
    assert agents.pass_at_k(n=20, c=16, k=5) == 1
    assert agents.pass_at_k(n=20, c=3, k=5) == pytest.approx(
        1 - math.comb(17, 5) / math.comb(20, 5)
    )
    assert agents.pass_at_k(n=10, c=3, k=1) == pytest.approx(0.3)  # pass@1 = c/n


@settings(max_examples=100)
@given(n=st.integers(1, 300), data=st.data())
def test_pass_at_k_equals_the_exact_ratio_of_binomials(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert agents.pass_at_k(n=n, c=c, k=k) == pytest.approx(float(exact), abs=1e-12)


def test_pass_at_k_is_stable_for_large_n():
    # C(10^6, 100) overflows a float; the product form does not
    got = agents.pass_at_k(n=1_000_000, c=1000, k=100)
    assert got == pytest.approx(1 - (1 - 1000 / 1_000_000) ** 100, rel=1e-3)
    assert 0 < got < 1


def test_agents_bad_inputs_name_the_argument():
    with pytest.raises(ArgumentError, match="c = 5 > n = 3"):
        agents.pass_at_k(n=3, c=5, k=1)
    with pytest.raises(ArgumentError, match="k = 4 > n = 3"):
        agents.pass_at_k(n=3, c=1, k=4)
    with pytest.raises(ArgumentError, match="p"):
        agents.chain_success(p=1.5, n=3)
    with pytest.raises(ArgumentError, match="p = 0.4"):
        agents.majority_vote_error_bound(p=0.4, k=15)
    with pytest.raises(ArgumentError, match="attempts"):
        agents.verified_step_success(p=0.8, attempts=0)
    with pytest.raises(ArgumentError, match="false_accept"):
        agents.verified_step_success(p=0.8, attempts=2, false_accept=-0.1)
