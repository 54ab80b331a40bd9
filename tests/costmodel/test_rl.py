"""REINFORCE variance and replay memory (001 §7.2, Ex. 10)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import rl
from costmodel.arguments import ArgumentError

GB = 1e9


def test_exercise_10b_at_sigma_09():
    # 001 Ex. 10(b): Var 0.0009 (no baseline), 0.0576 (b = 0.9), 0 (b* = 0.1);
    # about 11, 711 and 1 rollouts for 10 % relative error; the mean reward costs ×64
    assert rl.reinforce_variance(sigma=0.9, b=0.0) == pytest.approx(0.0009)
    assert rl.reinforce_variance(sigma=0.9, b=0.9) == pytest.approx(0.0576)
    assert rl.reinforce_optimal_baseline(sigma=0.9) == pytest.approx(0.1)
    assert rl.reinforce_variance(sigma=0.9, b=0.1) == pytest.approx(0, abs=1e-15)
    assert rl.reinforce_rollouts(sigma=0.9, b=0.0, rel_err=0.1) == pytest.approx(11.111111)
    assert rl.reinforce_rollouts(sigma=0.9, b=0.9, rel_err=0.1) == pytest.approx(711.11111)
    assert rl.reinforce_rollouts(sigma=0.9, b=0.1, rel_err=0.1) == 1
    ratio = rl.reinforce_variance(sigma=0.9, b=0.9) / rl.reinforce_variance(sigma=0.9, b=0.0)
    assert ratio == pytest.approx(64)


def test_variance_matches_a_simulated_bandit():
    # 001 example 7.6: sample the action, form (R − b)∇log π, compare the sample variance
    rng = np.random.default_rng(0)
    sigma, b = 0.3, 0.2
    action = rng.random(400_000) < sigma  # the rewarded action, R = 1
    grad_log_pi = np.where(action, 1 - sigma, -sigma)
    estimates = (action.astype(float) - b) * grad_log_pi
    assert estimates.mean() == pytest.approx(sigma * (1 - sigma), rel=0.01)
    assert estimates.var() == pytest.approx(rl.reinforce_variance(sigma=sigma, b=b), rel=0.02)


@settings(max_examples=100)
@given(sigma=st.floats(0.01, 0.99), b=st.floats(-2.0, 3.0))
def test_optimal_baseline_minimizes_the_variance_to_zero(sigma, b):
    best = rl.reinforce_optimal_baseline(sigma=sigma)
    assert rl.reinforce_variance(sigma=sigma, b=best) == pytest.approx(0, abs=1e-12)
    assert rl.reinforce_variance(sigma=sigma, b=b) >= -1e-12


def test_halving_the_error_costs_four_times_the_rollouts():
    # 001 §7.2, variance per FLOP: m ∝ 1/error²
    assert rl.rollouts_for_error_factor(error_factor=0.5) == 4


@settings(max_examples=100)
@given(sigma=st.floats(0.05, 0.95), b=st.floats(-1.0, 2.0), r=st.floats(0.01, 0.5))
def test_rollouts_scale_as_one_over_error_squared(sigma, b, r):
    one = rl.reinforce_rollouts(sigma=sigma, b=b, rel_err=r)
    half = rl.reinforce_rollouts(sigma=sigma, b=b, rel_err=r / 2)
    if one > 1:  # away from the floor of one rollout
        assert half == pytest.approx(4 * one)


def test_atari_replay_memory_of_001_section_7_2():
    # 001 §7.2: 4·84·84 = 28 224 bytes per state; 10^6 transitions: 56 GB (s, s′) or 7 GB
    state = rl.state_bytes_of_frames(frames_per_state=4, height=84, width=84)
    assert state == 28_224
    assert rl.replay_buffer_bytes(n_transitions=1e6, state_bytes=state) / GB == pytest.approx(
        56.448
    )
    once = rl.replay_buffer_bytes(n_transitions=1e6, state_bytes=state, frames_once=True)
    assert once / GB == pytest.approx(7.056)


def test_rl_bad_inputs_name_the_argument():
    with pytest.raises(ArgumentError, match="sigma"):
        rl.reinforce_variance(sigma=1.0, b=0.0)
    with pytest.raises(ArgumentError, match="rel_err"):
        rl.reinforce_rollouts(sigma=0.9, b=0.0, rel_err=0.0)
    with pytest.raises(ArgumentError, match="frames_once"):
        rl.replay_buffer_bytes(n_transitions=1e6, state_bytes=28224, frames_once="yes")
