"""Compression, error feedback, local SGD, gossip and asynchrony (000 ch. 4, Ex. 9–10)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, compression

# --- random-k, penalty, workers (000 Prop 4.5, Thm 4.6, Ex. 9) ------------------------------


def test_exercise_9_random_k():
    # 000 Ex. 9(a): ω = 10⁶/10³ − 1 = 999, step and noise factor 1000 = the saving d/k
    omega = compression.random_k_omega(d=10**6, k=10**3)
    assert omega == 999
    assert compression.compressed_sgd_penalty(omega=omega) == 1000
    assert compression.sparsification_saving(d=10**6, k=10**3) == 1000
    # 000 Ex. 9(b): p ≥ ω = 999 workers make 1 + ω/p at most 2
    assert compression.workers_for_penalty(omega=omega) == 999
    assert compression.compressed_sgd_penalty(omega=omega, n_workers=999) == 2


@pytest.mark.parametrize(("d", "k"), [(4, 1), (5, 2), (6, 3), (7, 7)])
def test_random_k_variance_by_enumerating_every_subset(d, k):
    # Prop 4.5: E‖C(x) − x‖² = (d/k − 1)‖x‖², and E C(x) = x, over all C(d, k) subsets
    x = np.arange(1.0, d + 1)
    outputs = []
    for kept in itertools.combinations(range(d), k):
        c = np.zeros(d)
        c[list(kept)] = x[list(kept)] * d / k
        outputs.append(c)
    outputs = np.array(outputs)
    assert np.allclose(outputs.mean(axis=0), x)
    variance = np.mean(np.sum((outputs - x) ** 2, axis=1))
    assert variance == pytest.approx(compression.random_k_omega(d=d, k=k) * x @ x)


@settings(max_examples=100)
@given(omega=st.floats(0, 1e5), p=st.integers(1, 10_000))
def test_penalty_falls_with_workers_towards_one(omega, p):
    penalty = compression.compressed_sgd_penalty(omega=omega, n_workers=p)
    assert 1 <= penalty <= compression.compressed_sgd_penalty(omega=omega)
    assert compression.compressed_sgd_penalty(omega=omega, n_workers=p + 1) <= penalty


@settings(max_examples=100)
@given(omega=st.floats(0.01, 1e5), target=st.floats(1.01, 20))
def test_workers_for_penalty_is_the_smallest_that_meets_the_target(omega, target):
    p = compression.workers_for_penalty(omega=omega, target_penalty=target)
    assert compression.compressed_sgd_penalty(omega=omega, n_workers=p) <= target * (1 + 1e-12)
    if p > 1:
        assert compression.compressed_sgd_penalty(omega=omega, n_workers=p - 1) > target


# --- top-k and error feedback (000 Thm 4.8, Ex. 9(c)) ----------------------------------------


def _top_k(v: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros_like(v)
    idx = np.argsort(np.abs(v))[-k:]
    out[idx] = v[idx]
    return out


def test_exercise_9c_top_k_and_memory_bound():
    # 000 Ex. 9(c): δ = k/d = 10⁻³ and E‖e‖² ≤ 4·10⁶ η²G² (4(1 − δ)/δ² = 3 996 000)
    delta = compression.top_k_delta(d=10**6, k=10**3)
    assert delta == 1e-3
    assert compression.error_feedback_memory_bound(delta=delta) == pytest.approx(3.996e6)
    assert f"{compression.error_feedback_memory_bound(delta=delta):.0e}" == "4e+06"


@settings(max_examples=100)
@given(
    x=st.lists(st.floats(-1e3, 1e3, allow_subnormal=False), min_size=2, max_size=40),
    data=st.data(),
)
def test_top_k_contracts_by_one_minus_k_over_d(x, data):
    v = np.array(x)
    k = data.draw(st.integers(1, len(x)))
    delta = compression.top_k_delta(d=len(x), k=k)
    assert np.sum((_top_k(v, k) - v) ** 2) <= (1 - delta) * (v @ v) * (1 + 1e-12) + 1e-12


@pytest.mark.parametrize(("d", "k"), [(50, 5), (100, 1), (20, 10)])
def test_error_feedback_memory_stays_under_the_bound(d, k):
    # Stich et al. 2018, Lemma 3.2: e' = v − top_k(v), v = e + ηg, ‖g‖ ≤ G
    rng = np.random.default_rng(0)
    eta, G = 0.1, 2.0
    bound = compression.error_feedback_memory_bound(
        delta=compression.top_k_delta(d=d, k=k), eta=eta, grad_bound=G
    )
    e, worst = np.zeros(d), 0.0
    for _ in range(2000):
        g = rng.standard_normal(d)
        g *= G / np.linalg.norm(g)
        v = e + eta * g
        e = v - _top_k(v, k)
        worst = max(worst, e @ e)
    assert 0 < worst <= bound


@settings(max_examples=100)
@given(delta=st.floats(1e-4, 1.0), eta=st.floats(1e-4, 1.0))
def test_memory_bound_vanishes_with_the_step_and_for_no_compression(delta, eta):
    b = compression.error_feedback_memory_bound(delta=delta, eta=eta)
    assert b == pytest.approx(compression.error_feedback_memory_bound(delta=delta) * eta**2)
    assert compression.error_feedback_memory_bound(delta=1.0, eta=eta) == 0


def test_ternary_code_bits():
    # 000 §4.2: log₂ 3 ≈ 1.6 bits per coordinate instead of 16 or 32
    assert round(compression.bits_per_coordinate(), 1) == 1.6
    assert compression.bits_per_coordinate(levels=256) == 8


# --- local SGD (000 §4.3) ------------------------------------------------------------------


def test_local_sgd_rounds_of_the_notes_code():
    # 000 §4.3 code: T = 2000 steps gives 2000, 200, 20 rounds for H = 1, 10, 100
    rounds = [compression.local_sgd_rounds(total_steps=2000, inner_steps=h) for h in (1, 10, 100)]
    assert rounds == [2000, 200, 20]


def test_diloco_communicates_500_times_less():
    # 000 §4.3: DiLoCo with H = 500 inner steps communicates 500 times less
    assert compression.local_sgd_communication_reduction(inner_steps=500) == 500
    t = 10**6
    ratio = compression.local_sgd_rounds(total_steps=t, inner_steps=1) / (
        compression.local_sgd_rounds(total_steps=t, inner_steps=500)
    )
    assert ratio == 500


# --- gossip (000 §4.4, Prop 4.14, Ex. 10) ----------------------------------------------------


def _gossip_lambda(adj: np.ndarray) -> float:
    """The notes' Ex. 10 code: weights 1/(degree + 1), second largest eigenvalue modulus."""
    w = (adj + np.eye(len(adj))) / (adj.sum(axis=1, keepdims=True) + 1)
    return float(np.sort(np.abs(np.linalg.eigvalsh(w)))[-2])


def _ring(p: int) -> np.ndarray:
    adj = np.zeros((p, p))
    for i in range(p):
        adj[i, (i + 1) % p] = adj[(i + 1) % p, i] = 1
    return adj


def _torus(q: int) -> np.ndarray:
    adj = np.zeros((q * q, q * q))
    for i in range(q):
        for j in range(q):
            for v in [q * ((i + 1) % q) + j, q * i + (j + 1) % q]:
                adj[q * i + j, v] = adj[v, q * i + j] = 1
    return adj


def test_exercise_10_lambda_and_rounds():
    # 000 Ex. 10: λ = 0.949 (ring of 16) against 0.6 (4 × 4 torus): 133 rounds against 14
    ring, torus = compression.gossip_ring_lambda(n_workers=16), compression.gossip_torus_lambda(q=4)
    assert round(ring, 3) == 0.949
    assert torus == pytest.approx(0.6)
    assert compression.gossip_rounds(lam=ring, epsilon=1e-3) == 133
    assert compression.gossip_rounds(lam=torus, epsilon=1e-3) == 14


@pytest.mark.parametrize("p", [3, 4, 5, 8, 16, 31])
def test_ring_lambda_matches_the_eigenvalues_of_the_matrix(p):
    assert compression.gossip_ring_lambda(n_workers=p) == pytest.approx(
        _gossip_lambda(_ring(p)), abs=1e-12
    )


@pytest.mark.parametrize("q", [3, 4, 5, 6])
def test_torus_lambda_matches_the_eigenvalues_of_the_matrix(q):
    assert compression.gossip_torus_lambda(q=q) == pytest.approx(
        _gossip_lambda(_torus(q)), abs=1e-12
    )


@settings(max_examples=100)
@given(lam=st.floats(0.01, 0.999), eps=st.floats(1e-9, 0.5))
def test_gossip_rounds_is_the_first_round_under_epsilon(lam, eps):
    t = compression.gossip_rounds(lam=lam, epsilon=eps)
    assert lam**t <= eps * (1 + 1e-9)
    assert lam ** (t - 1) > eps * (1 - 1e-9)


@settings(max_examples=50)
@given(p=st.integers(3, 500))
def test_larger_rings_mix_more_slowly(p):
    lam = compression.gossip_ring_lambda(n_workers=p)
    assert lam <= compression.gossip_ring_lambda(n_workers=p + 1) < 1


# --- asynchrony (000 §4.5) -------------------------------------------------------------------


def _spectral_radius(a: float, tau: int) -> float:
    """The notes' §4.5 code: largest root modulus of z^(τ+1) − z^τ + a."""
    coeffs = np.zeros(tau + 2)
    coeffs[0], coeffs[1], coeffs[-1] = 1.0, -1.0, a
    return float(np.abs(np.roots(coeffs)).max()) if tau > 0 else abs(1 - a)


@pytest.mark.parametrize(("tau", "stated"), [(0, 2.0), (1, 1.0), (2, 0.618), (4, 0.3473)])
def test_async_threshold_against_bisection(tau, stated):
    # 000 §4.5 code: bisection on the roots equals 2 sin(π/(2(2τ + 1))) to 4 decimals
    lo, hi = 0.0, 2.5
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _spectral_radius(mid, tau) < 1 else (lo, mid)
    a = compression.async_stability_threshold(tau=tau)
    assert round(lo, 4) == round(a, 4)
    assert a == pytest.approx(stated, abs=5e-4)


@settings(max_examples=50)
@given(tau=st.integers(0, 10_000))
def test_async_threshold_shrinks_like_pi_over_2tau(tau):
    a = compression.async_stability_threshold(tau=tau)
    assert compression.async_stability_threshold(tau=tau + 1) < a <= 2
    assert a <= math.pi / (2 * tau + 1)  # 2 sin(x/2) <= x
    if tau >= 5:
        assert a == pytest.approx(math.pi / (2 * tau + 1), rel=0.005)


# --- bad inputs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: compression.random_k_omega(d=10, k=11), "k"),
        (lambda: compression.random_k_omega(d=0, k=1), "d"),
        (lambda: compression.top_k_delta(d=10, k=0), "k"),
        (lambda: compression.compressed_sgd_penalty(omega=-1.0), "omega"),
        (lambda: compression.workers_for_penalty(omega=10.0, target_penalty=1.0), "target"),
        (lambda: compression.error_feedback_memory_bound(delta=0.0), "delta"),
        (lambda: compression.error_feedback_memory_bound(delta=1.5), "delta"),
        (lambda: compression.gossip_ring_lambda(n_workers=2), "n_workers"),
        (lambda: compression.gossip_torus_lambda(q=2), "q"),
        (lambda: compression.gossip_rounds(lam=1.0, epsilon=1e-3), "lam"),
        (lambda: compression.gossip_rounds(lam=0.5, epsilon=0.0), "epsilon"),
        (lambda: compression.async_stability_threshold(tau=-1), "tau"),
        (lambda: compression.bits_per_coordinate(levels=1), "levels"),
        (lambda: compression.local_sgd_rounds(total_steps=100, inner_steps=0), "inner_steps"),
    ],
)
def test_bad_inputs_name_the_argument(call, name):
    with pytest.raises(ArgumentError, match=name):
        call()


def test_workers_for_penalty_does_not_snap_a_real_fraction_to_a_whole_number():
    # found by hypothesis: ω/(target − 1) = 7 868 101.0078 must round up, not down
    p = compression.workers_for_penalty(omega=78681.01007868067, target_penalty=1.01)
    assert compression.compressed_sgd_penalty(omega=78681.01007868067, n_workers=p) <= 1.01
