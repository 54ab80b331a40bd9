"""The KL-regularized optimum and DPO (000 ch. 5)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import posttraining
from costmodel.arguments import ArgumentError

logps = st.floats(-20.0, -0.01)


def _objective(pi, pi_ref, reward, beta):
    """E_π[r] − β KL(π‖π_ref)."""
    kl = sum(p * math.log(p / q) for p, q in zip(pi, pi_ref, strict=True) if p > 0)
    return sum(p * r for p, r in zip(pi, reward, strict=True)) - beta * kl


def test_optimum_of_the_000_section_5_5_code():
    # 000 §5.5 code: K = 6, β = 0.5, target = π_ref·e^(r/β) / Z (Theorem 5.6)
    rng = np.random.default_rng(0)
    r = rng.standard_normal(6)
    pi_ref = rng.dirichlet(np.ones(6))
    target = pi_ref * np.exp(r / 0.5)
    target /= target.sum()
    got = posttraining.kl_regularized_optimal_policy(
        pi_ref=pi_ref.tolist(), reward=r.tolist(), beta=0.5
    )
    assert got == pytest.approx(target.tolist(), rel=1e-12)


@settings(max_examples=100)
@given(
    w=st.lists(st.floats(0.05, 1.0), min_size=3, max_size=3),
    reward=st.lists(st.floats(-3, 3), min_size=3, max_size=3),
    other=st.lists(st.floats(0.01, 1.0), min_size=3, max_size=3),
    beta=st.floats(0.05, 2.0),
)
def test_optimum_beats_any_other_policy(w, reward, other, beta):
    # Theorem 5.6: π* maximizes E_π[r] − β KL(π‖π_ref)
    pi_ref = [x / sum(w) for x in w]
    pi = [x / sum(other) for x in other]
    best = posttraining.kl_regularized_optimal_policy(pi_ref=pi_ref, reward=reward, beta=beta)
    assert _objective(best, pi_ref, reward, beta) >= _objective(pi, pi_ref, reward, beta) - 1e-12


def test_optimum_limits_and_large_rewards():
    pi_ref = [0.2, 0.3, 0.5]
    same = posttraining.kl_regularized_optimal_policy(pi_ref=pi_ref, reward=[1, 1, 1], beta=0.1)
    assert same == pytest.approx(pi_ref)  # equal rewards: stay at the reference
    greedy = posttraining.kl_regularized_optimal_policy(
        pi_ref=pi_ref, reward=[0, 1000, 0], beta=0.01
    )  # e^(10^5) would overflow without the shift
    assert greedy == pytest.approx([0, 1, 0])


def test_dpo_at_the_reference_policy():
    # 000 Ex. 11(b): π = π_ref makes u = 0, the weight σ(0) = ½ and the loss log 2
    assert posttraining.dpo_pair_weight(margin=0.0) == 0.5
    loss = posttraining.dpo_loss(logp_w=-3, logp_l=-5, ref_logp_w=-3, ref_logp_l=-5, beta=0.1)
    assert loss == pytest.approx(math.log(2))


def test_dpo_loss_is_stable_for_large_margins():
    # u = ±1000: −log σ(u) is ≈ e^(−1000) and ≈ 1000, with no overflow
    big = dict(ref_logp_w=-1.0, ref_logp_l=-1.0, beta=1.0)
    assert posttraining.dpo_loss(logp_w=-1.0, logp_l=-1001.0, **big) == pytest.approx(0, abs=1e-300)
    assert posttraining.dpo_loss(logp_w=-1001.0, logp_l=-1.0, **big) == pytest.approx(1000)
    assert posttraining.dpo_pair_weight(margin=-1000.0) == 1.0
    assert posttraining.dpo_pair_weight(margin=1000.0) == pytest.approx(0, abs=1e-300)


@settings(max_examples=100)
@given(lw=logps, ll=logps, rw=logps, rl=logps, beta=st.floats(0.01, 1.0))
def test_dpo_loss_is_bradley_terry_on_implicit_rewards(lw, ll, rw, rl, beta):
    # 000 §5.5: r̂ = β log π/π_ref, P(y_w ≻ y_l) = e^r̂_w / (e^r̂_w + e^r̂_l)
    r_w, r_l = beta * (lw - rw), beta * (ll - rl)
    nll = -math.log(math.exp(r_w) / (math.exp(r_w) + math.exp(r_l)))
    got = posttraining.dpo_loss(logp_w=lw, logp_l=ll, ref_logp_w=rw, ref_logp_l=rl, beta=beta)
    assert got == pytest.approx(nll, rel=1e-9, abs=1e-12)


@settings(max_examples=100)
@given(u=st.floats(-8.0, 8.0))
def test_pair_weight_is_minus_the_loss_derivative(u):
    # 000 Ex. 11(a): d/du[−log σ(u)] = −σ(−u), by central finite differences
    def loss(margin):  # u = β(logp_w − 0) with β = 1 and log-ratios chosen to give `margin`
        return posttraining.dpo_loss(
            logp_w=-10 + margin / 2,
            logp_l=-10 - margin / 2,
            ref_logp_w=-10,
            ref_logp_l=-10,
            beta=1.0,
        )

    h = 1e-5
    slope = (loss(u + h) - loss(u - h)) / (2 * h)
    assert -slope == pytest.approx(posttraining.dpo_pair_weight(margin=u), abs=1e-8)


def test_posttraining_bad_inputs_name_the_argument():
    with pytest.raises(ArgumentError, match="reward"):
        posttraining.kl_regularized_optimal_policy(pi_ref=[0.5, 0.5], reward=[1.0], beta=0.1)
    with pytest.raises(ArgumentError, match="beta"):
        posttraining.kl_regularized_optimal_policy(pi_ref=[0.5, 0.5], reward=[1, 2], beta=0)
    with pytest.raises(ArgumentError, match="logp_w"):
        posttraining.dpo_loss(logp_w=0.5, logp_l=-1, ref_logp_w=-1, ref_logp_l=-1, beta=0.1)
