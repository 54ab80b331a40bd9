"""REINFORCE with a constant baseline on a two-armed bandit (001 §7.2, example 7.6,
Ex. 10).

The policy plays the rewarded action a = 1 with probability σ = σ(θ) = 1/(1 + e^(−θ)) and
the other action a = 0 with probability 1 − σ; the reward is R = 1 for a = 1, R = 0
otherwise, so J(θ) = σ(θ) and ∇J = σ(1 − σ).  The score of action a is
∂_θ log π_θ(a) = a − σ, and one rollout gives the REINFORCE estimate

    ĝ = (R − b) ∂_θ log π_θ(a)      =  (1 − b)(1 − σ) with probability σ,  bσ otherwise,

unbiased for any constant baseline b, with variance
σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)] (Ex. 10(a)), zero at b* = 1 − σ (Ex. 10(b)).

Your function
-------------
``reinforce_estimates(theta, b, n, rng)`` plays n independent rollouts at parameter θ
and returns their n estimates ĝ as a 1-D array.  Draw every action from the generator
``rng``, one draw per rollout, all n at once (``rng.random(n) < σ``).  The autograder's
``rng`` is its own generator: it serves each draw and records it (it offers ``random``,
``uniform``, ``binomial`` and ``choice``, as a NumPy Generator does, and each call is a
round trip to the autograder: draw n values in one call, not one per rollout).

The autograder calls it with several (θ, b), 20 000 rollouts each, checks that every
estimate is (1 − b)(1 − σ) or bσ and that rollout i follows the i-th draw of rng, and
tests (false-fail rate 1e-4 per test) the mean against σ(1 − σ) and the variance against
Ex. 10(a); it checks that b = 1 − σ makes every estimate equal to σ(1 − σ).
"""

from __future__ import annotations

import math

import numpy as np


def reinforce_estimates(theta: float, b: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n REINFORCE estimates (R − b) ∂_θ log π_θ(a) of the bandit's gradient σ(1 − σ)."""
    ### BEGIN SOLUTION your REINFORCE estimator here
    sigma = 1 / (1 + math.exp(-theta))
    actions = (rng.random(n) < sigma).astype(np.float64)  # a = 1 with probability σ(θ)
    rewards = actions  # R = 1 for the rewarded action, 0 for the other
    score = actions - sigma  # ∂_θ log π_θ(a): 1 − σ for a = 1, −σ for a = 0
    return (rewards - b) * score
    ### END SOLUTION


if __name__ == "__main__":
    theta = math.log(9)  # σ(θ) = 0.9, Ex. 10(b)
    rng = np.random.default_rng(0)
    for b in (0.0, 0.9, 0.1):  # none, the mean reward J(θ), the optimum 1 − σ
        g = reinforce_estimates(theta, b, 100_000, rng)
        print(b, g.mean(), g.var())  # mean 0.09; variance 0.0009, 0.0576, 0
