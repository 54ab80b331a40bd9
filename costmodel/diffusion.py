"""DDPM with Gaussian data: the optimal noise predictor, the posterior variance and the
variance of the ancestral sampler (001 §7.3, Ex. 9, written exam Q4).

Forward process (001 def 7.10): x_t = √ᾱ_t x_0 + √(1 − ᾱ_t) ε with ᾱ_t = Π_{s≤t} (1 − β_s).
Sampler (001 def 7.13): x_{t−1} = (x_t − β_t/√(1 − ᾱ_t) ε̂(x_t)) / √α_t + σ_t z.
For data N(0, s²) the best predictor ε* is linear in x_t, so the sampler's variance
follows a deterministic recursion instead of a Monte Carlo run.
"""

from __future__ import annotations

import math

from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError, Domain, amount, count, real, unit_interval

_ALPHA_BAR = unit_interval(
    "ᾱ_t = Π_{s≤t}(1 − β_s), signal kept at step t", low_open=True, sample=(0.01, 0.99)
)
_ALPHA_BAR_PREV = unit_interval(
    "ᾱ_{t−1}, signal kept at the previous step (1 at t = 1)", low_open=True, sample=(0.01, 1.0)
)
_BETA = unit_interval(
    "noise variance β_t added at step t", low_open=True, high_open=True, sample=(1e-4, 0.2)
)
_DATA_STD = amount("standard deviation s of the Gaussian data N(0, s²)", "", (0.1, 10.0))
_X_T = real("noisy sample x_t")


@formula(
    "001 §7.3, def 7.10, Ex. 9(a)",
    "",
    domains={"x_t": _X_T, "alpha_bar": _ALPHA_BAR, "data_std": _DATA_STD},
)
def optimal_noise_prediction(x_t: float, alpha_bar: float, data_std: float) -> float:
    """Best noise predictor for data N(0, s²): ε*(x_t) = √(1 − ᾱ_t) x_t / (ᾱ_t s² + 1 − ᾱ_t).

    The minimizer of E‖ε̂(x_t) − ε‖² is E[ε | x_t], linear since (ε, x_t) is Gaussian.
    """
    return math.sqrt(1 - alpha_bar) * x_t / (alpha_bar * data_std**2 + 1 - alpha_bar)


@derivation(optimal_noise_prediction)
def _(sp):
    """Gaussian conditioning E[ε | x_t] = Cov(ε, x_t)/Var(x_t)·x_t, x_t = √ᾱ·s·z + √(1 − ᾱ)·ε."""
    x_t = sp.symbols("x_t", real=True)
    ab, s = sp.symbols("alpha_bar data_std", positive=True)
    # coordinates on the independent standard normals (z, ε), x_0 = s·z
    x_coef = sp.Matrix([sp.sqrt(ab) * s, sp.sqrt(1 - ab)])
    eps_coef = sp.Matrix([0, 1])
    cov = eps_coef.dot(x_coef)  # Cov(ε, x_t)
    var = x_coef.dot(x_coef)  # Var(x_t)
    return cov / var * x_t, sp.sqrt(1 - ab) * x_t / (ab * s**2 + 1 - ab)


@formula(
    "001 §7.3, Prop 7.12; written exam Q4",
    "",
    domains={"beta_t": _BETA, "alpha_bar_prev": _ALPHA_BAR_PREV},
)
def posterior_variance(beta_t: float, alpha_bar_prev: float) -> float:
    """Variance of q(x_{t−1} | x_t, x_0): β̃_t = (1 − ᾱ_{t−1}) β_t / (1 − ᾱ_t).

    ᾱ_t = ᾱ_{t−1}(1 − β_t); at t = 1 (ᾱ_0 = 1) the posterior is exact, β̃_1 = 0.
    """
    alpha_bar = alpha_bar_prev * (1 - beta_t)
    return (1 - alpha_bar_prev) * beta_t / (1 - alpha_bar)


@derivation(posterior_variance)
def _(sp):
    """The precisions α_t/β_t (from q(x_t | x_{t−1})) and 1/(1 − ᾱ_{t−1}) (from q(x_{t−1} | x_0))
    add; α_t(1 − ᾱ_{t−1}) + β_t = 1 − ᾱ_t."""
    beta, ab_prev = sp.symbols("beta_t alpha_bar_prev", positive=True)
    alpha = 1 - beta
    precision = alpha / beta + 1 / (1 - ab_prev)  # Gaussians in x_{t−1} multiply
    ab = ab_prev * alpha
    return 1 / precision, (1 - ab_prev) * beta / (1 - ab)


@formula(
    "001 §7.3, def 7.13, Ex. 9(b)",
    "",
    domains={"beta_t": _BETA, "alpha_bar": _ALPHA_BAR, "data_std": _DATA_STD},
)
def ddpm_step_gain(beta_t: float, alpha_bar: float, data_std: float) -> float:
    """Gain of one sampler step with ε*: k_t = (1 − β_t/(ᾱ_t s² + 1 − ᾱ_t)) / √(1 − β_t).

    With the linear predictor ε*, a step is x_{t−1} = k_t x_t + σ_t z.
    """
    if alpha_bar > 1 - beta_t:
        raise ArgumentError(
            f"diffusion.ddpm_step_gain: alpha_bar = {alpha_bar} > 1 − beta_t = {1 - beta_t} "
            "(ᾱ_t = ᾱ_{t−1}(1 − β_t) cannot exceed 1 − β_t)"
        )
    return (1 - beta_t / (alpha_bar * data_std**2 + 1 - alpha_bar)) / math.sqrt(1 - beta_t)


@derivation(ddpm_step_gain, where=lambda v: v["alpha_bar"] <= 1 - v["beta_t"])
def _(sp):
    """Put ε* into the sampler's mean (x_t − β_t/√(1 − ᾱ_t)·ε*)/√α_t and read off x_t's factor."""
    x_t = sp.symbols("x_t", real=True)
    beta, ab, s = sp.symbols("beta_t alpha_bar data_std", positive=True)
    eps = sp.sqrt(1 - ab) * x_t / (ab * s**2 + 1 - ab)  # ε*(x_t)
    mean = (x_t - beta / sp.sqrt(1 - ab) * eps) / sp.sqrt(1 - beta)
    return sp.diff(mean, x_t), (1 - beta / (ab * s**2 + 1 - ab)) / sp.sqrt(1 - beta)


@formula(
    "001 §7.3, def 7.13, Ex. 9(b)",
    "",
    domains={
        "data_std": _DATA_STD,
        "n_steps": count("diffusion steps T", sample=(10, 1000)),
        "beta_1": _BETA,
        "beta_T": _BETA,
        "sampler_variance": Domain("choice", "σ_t² of the sampler", choices=("beta", "beta_tilde")),
    },
)
def ddpm_sample_std(
    data_std: float,
    n_steps: int = 100,
    beta_1: float = 0.001,
    beta_T: float = 0.2,
    sampler_variance: str = "beta",
) -> float:
    """Std of DDPM samples with ε* on data N(0, s²), β_t linear from β_1 to β_T.

    Exact variance recursion v_{t−1} = k_t² v_t + σ_t² from v_T = 1 (no noise at t = 1),
    σ_t² = β_t or β̃_t: s = 0.5 gives 0.508 (0.468 with β̃), s = 2 gives 1.976 (1.939).
    """
    betas = [beta_1 + (beta_T - beta_1) * i / max(n_steps - 1, 1) for i in range(n_steps)]
    alpha_bars = []  # ᾱ_1 … ᾱ_T
    for beta in betas:
        alpha_bars.append((alpha_bars[-1] if alpha_bars else 1.0) * (1 - beta))
    var = 1.0  # x_T ~ N(0, 1)
    for t in range(n_steps, 0, -1):  # t = T … 1
        beta, alpha_bar = betas[t - 1], alpha_bars[t - 1]
        gain = ddpm_step_gain(beta_t=beta, alpha_bar=alpha_bar, data_std=data_std)
        if t == 1:
            noise = 0.0  # the last step returns the mean
        elif sampler_variance == "beta":
            noise = beta
        else:
            noise = posterior_variance(beta_t=beta, alpha_bar_prev=alpha_bars[t - 2])
        var = gain**2 * var + noise
    return math.sqrt(var)
