"""DDPM on Gaussian data (001 §7.3, Ex. 9, written exam Q4)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import diffusion
from costmodel.arguments import ArgumentError


def test_eps_star_is_the_regression_of_noise_on_x_t():
    # 001 Ex. 9(a): E[ε | x_t] by least squares on simulated pairs (ε, x_t)
    rng = np.random.default_rng(0)
    s, alpha_bar = 2.0, 0.3
    x0, eps = s * rng.standard_normal(400_000), rng.standard_normal(400_000)
    x_t = math.sqrt(alpha_bar) * x0 + math.sqrt(1 - alpha_bar) * eps
    slope = (eps @ x_t) / (x_t @ x_t)
    got = diffusion.optimal_noise_prediction(x_t=1.0, alpha_bar=alpha_bar, data_std=s)
    assert got == pytest.approx(slope, rel=0.01)


def test_eps_star_with_unit_variance_data_is_sqrt_one_minus_alpha_bar():
    # s = 1: Var x_t = 1, so ε* = √(1 − ᾱ) x_t
    got = diffusion.optimal_noise_prediction(x_t=2.0, alpha_bar=0.64, data_std=1.0)
    assert got == pytest.approx(1.2)


@settings(max_examples=100)
@given(beta=st.floats(1e-4, 0.5), ab_prev=st.floats(0.01, 1.0))
def test_posterior_variance_from_the_precisions(beta, ab_prev):
    # 001 written exam Q4: 1/β̃ = α_t/β_t + 1/(1 − ᾱ_{t−1}), and β̃_t ≤ β_t
    got = diffusion.posterior_variance(beta_t=beta, alpha_bar_prev=ab_prev)
    if ab_prev < 1:
        assert 1 / got == pytest.approx((1 - beta) / beta + 1 / (1 - ab_prev))
    assert 0 <= got <= beta


def test_posterior_variance_vanishes_at_the_first_step():
    # ᾱ_0 = 1: at t = 1, x_{t−1} is x_0 itself, known given x_0
    assert diffusion.posterior_variance(beta_t=0.001, alpha_bar_prev=1.0) == 0


@pytest.mark.parametrize(
    ("s", "sampler_variance", "std"),
    [  # 001 Ex. 9(b): about 0.51 and 1.98 (0.47 and 1.94 with β̃_t)
        (0.5, "beta", 0.5077163398557594),
        (2.0, "beta", 1.9759440035681832),
        (0.5, "beta_tilde", 0.46821770421369047),
        (2.0, "beta_tilde", 1.9389928394964533),
    ],
)
def test_sampler_std_of_exercise_9b(s, sampler_variance, std):
    got = diffusion.ddpm_sample_std(data_std=s, sampler_variance=sampler_variance)
    assert got == pytest.approx(std, rel=1e-9)


def test_variance_recursion_matches_the_sampler_run():
    # Run the ancestral sampler of 001 def 7.13 with ε* on 50 000 draws (seed 0)
    rng = np.random.default_rng(0)
    s, steps = 2.0, 100
    betas = np.linspace(0.001, 0.2, steps)
    alpha_bars = np.cumprod(1 - betas)
    x = rng.standard_normal(50_000)
    for t in range(steps, 0, -1):
        beta, ab = betas[t - 1], alpha_bars[t - 1]
        eps = diffusion.optimal_noise_prediction(x_t=1.0, alpha_bar=ab, data_std=s) * x
        x = (x - beta / math.sqrt(1 - ab) * eps) / math.sqrt(1 - beta)
        if t > 1:
            x += math.sqrt(beta) * rng.standard_normal(x.size)
    assert x.std() == pytest.approx(diffusion.ddpm_sample_std(data_std=s), rel=0.01)


def test_diffusion_bad_inputs_name_the_argument():
    with pytest.raises(ArgumentError, match="alpha_bar"):
        diffusion.ddpm_step_gain(beta_t=0.2, alpha_bar=0.9, data_std=1.0)
    with pytest.raises(ArgumentError, match="sampler_variance"):
        diffusion.ddpm_sample_std(data_std=1.0, sampler_variance="sigma")
    with pytest.raises(ArgumentError, match="data_std"):
        diffusion.optimal_noise_prediction(x_t=1.0, alpha_bar=0.5, data_std=0.0)
