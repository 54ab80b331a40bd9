"""A DDPM sampler on 2-D Gaussian data (001 §7.3, def. 7.10 and 7.13, Ex. 9).

Forward process (def. 7.10): x_t = √ᾱ_t x_0 + √(1 − ᾱ_t) ε, with α_t = 1 − β_t and
ᾱ_t = α_1 α_2 ⋯ α_t.  For data x_0 ~ N(0, s² I) the best noise predictor is linear:

    ε*(x_t, t) = √(1 − ᾱ_t) x_t / (ᾱ_t s² + 1 − ᾱ_t)                       (Ex. 9(a))

Ancestral sampler (def. 7.13), σ_t² = β_t: start from x_T ~ N(0, I), then for t = T, …, 1

    x_{t−1} = (x_t − β_t / √(1 − ᾱ_t) · ε̂(x_t, t)) / √α_t + σ_t z,   z ~ N(0, I),

with no noise at the last step (z = 0 at t = 1): x_0 is the mean of the last step.

Your functions
--------------
``optimal_eps(x_t, alpha_bar_t, s)``: ε* of Ex. 9(a), elementwise on a NumPy array x_t,
for the scalar ᾱ_t and data standard deviation s.

``ddpm_sample(eps_fn, betas, n, rng)``: ``betas`` is a 1-D array of the T values β_1 … β_T
(``betas[t - 1]`` is β_t); ``eps_fn(x_t, t)`` takes the (n, 2) array x_t and the step t
(an int, T down to 1) and returns ε̂(x_t, t), an (n, 2) array.  Call it once per step,
on the whole batch.  Draw x_T and every z from the NumPy generator ``rng``; return x_0,
an (n, 2) array.

The autograder checks ``optimal_eps`` against the closed form; records the x_t your
sampler passes to a test ε̂ to check the mean and the noise of every reverse step
(x_T ~ N(0, I), noise variance β_t, none at t = 1); and runs your sampler with ε* on the
notes' schedule (100 steps, β_t linear from 0.001 to 0.2) for two data stds s of its own,
one below 1 and one above, to test the standard deviation of the samples against the
exact value for that s (Ex. 9(b)) and that the samples are the end of the chain ε* saw
(false-fail rate 1e-4 per test).
"""

from __future__ import annotations

import numpy as np


def optimal_eps(x_t: np.ndarray, alpha_bar_t: float, s: float) -> np.ndarray:
    """ε*(x_t) = E[ε | x_t] = √(1 − ᾱ_t) x_t / (ᾱ_t s² + 1 − ᾱ_t) for data N(0, s² I)."""
    ### BEGIN SOLUTION your optimal noise predictor here
    return np.sqrt(1 - alpha_bar_t) * x_t / (alpha_bar_t * s**2 + 1 - alpha_bar_t)
    ### END SOLUTION


def ddpm_sample(eps_fn, betas: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n samples of the ancestral sampler (def. 7.13) with σ_t² = β_t, as an (n, 2) array."""
    ### BEGIN SOLUTION your DDPM sampler here
    betas = np.asarray(betas, dtype=np.float64)  # betas[t - 1] = β_t
    alphas = 1.0 - betas
    alpha_bars = np.cumprod(alphas)  # ᾱ_t = α_1 ⋯ α_t, not α_t
    x = rng.standard_normal((n, 2))  # x_T ~ N(0, I)
    for t in range(len(betas), 0, -1):  # t = T, …, 1
        beta, alpha, alpha_bar = betas[t - 1], alphas[t - 1], alpha_bars[t - 1]
        eps = eps_fn(x, t)
        x = (x - beta / np.sqrt(1 - alpha_bar) * eps) / np.sqrt(alpha)  # the reverse mean
        if t > 1:  # the last step returns the mean
            x = x + np.sqrt(beta) * rng.standard_normal((n, 2))
    return x
    ### END SOLUTION


if __name__ == "__main__":
    betas = np.linspace(0.001, 0.2, 100)  # Ex. 9(b)
    alpha_bars = np.cumprod(1 - betas)
    rng = np.random.default_rng(0)
    for s in (0.5, 2.0):
        eps_star = lambda x, t, s=s: optimal_eps(x, alpha_bars[t - 1], s)  # noqa: E731
        samples = ddpm_sample(eps_star, betas, 100_000, rng)
        print(s, samples.std())  # about 0.51 and 1.98 (Ex. 9(b))
