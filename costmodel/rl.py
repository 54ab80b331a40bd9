"""What deep RL costs: variance per rollout and replay memory (001 §7.2, Ex. 10).

The bandit of 001 example 7.6: one action, taken with probability σ = σ(θ), earns
reward 1, the other 0.  The REINFORCE estimator (R − b)∇log π has mean σ(1 − σ); its
variance sets how many rollouts buy a given precision.
"""

from __future__ import annotations

from costmodel._registry import derivation, formula
from costmodel.arguments import Domain, amount, count, real, register_arguments, unit_interval

register_arguments(
    {
        "n_transitions": amount("transitions kept in a replay buffer", "", (1e4, 1e7)),
        "state_bytes": amount("bytes of one stored state", "byte", (1e2, 1e6)),
        "frames_per_state": count("frames stacked into one state", sample=(1, 8)),
    }
)

_SIGMA = unit_interval("σ(θ), probability of the rewarded action", low_open=True, high_open=True)
_BASELINE = real("constant baseline b subtracted from the reward", sample=(-1.0, 2.0))
_REL_ERR = amount("target standard error relative to the mean gradient", "", (0.01, 0.5))
_BANDIT = {"sigma": _SIGMA, "b": _BASELINE}


@formula("001 §7.2, Ex. 10(a)", "", domains=_BANDIT)
def reinforce_variance(sigma: float, b: float) -> float:
    """Variance of the bandit REINFORCE estimator: σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)]."""
    return _variance(sigma, b)


def _variance(sigma, b):
    """The notes' closed form (numbers or sympy symbols)."""
    return sigma * (1 - sigma) * ((1 - sigma) * (1 - b) ** 2 + sigma * b**2 - sigma * (1 - sigma))


def _two_point(sp, sigma, b):
    """E[X] and E[X²] of the estimator: (1 − b)(1 − σ) w.p. σ, bσ w.p. 1 − σ."""
    rewarded = (1 - b) * (1 - sigma)  # R = 1, ∇log π = 1 − σ
    other = (0 - b) * (0 - sigma)  # R = 0, ∇log π = −σ
    mean = sigma * rewarded + (1 - sigma) * other
    second = sigma * rewarded**2 + (1 - sigma) * other**2
    return sp.expand(mean), second


@derivation(reinforce_variance)
def _(sp):
    """E[X²] − E[X]² over the two-point distribution of the estimator (mean σ(1 − σ))."""
    sigma, b = sp.symbols("sigma b", real=True)
    mean, second = _two_point(sp, sigma, b)
    return second - mean**2, _variance(sigma, b)


@formula("001 §7.2, Ex. 10(b)", "", domains={"sigma": _SIGMA})
def reinforce_optimal_baseline(sigma: float) -> float:
    """Variance-optimal constant baseline b* = 1 − σ: it makes the estimator constant."""
    return 1 - sigma


@derivation(reinforce_optimal_baseline)
def _(sp):
    """Solve d Var / db = 0 for b."""
    sigma, b = sp.symbols("sigma b", real=True)
    mean, second = _two_point(sp, sigma, b)
    (best,) = sp.solve(sp.diff(second - mean**2, b), b)
    return best, 1 - sigma


@formula("001 §7.2, Ex. 10(b)", "", domains={**_BANDIT, "rel_err": _REL_ERR})
def reinforce_rollouts(sigma: float, b: float, rel_err: float) -> float:
    """Rollouts for a standard error of rel_err × the mean μ = σ(1 − σ): Var/(rel_err·μ)², ≥ 1.

    Not rounded up: σ = 0.9 gives 11.1 rollouts without baseline, 711.1 with b = 0.9.
    """
    mean = sigma * (1 - sigma)
    return max(1.0, reinforce_variance(sigma, b) / (rel_err * mean) ** 2)


def _at_least_one_rollout(v: dict) -> bool:
    mean = v["sigma"] * (1 - v["sigma"])
    return reinforce_variance(v["sigma"], v["b"]) >= (v["rel_err"] * mean) ** 2


@derivation(reinforce_rollouts, where=_at_least_one_rollout)
def _(sp):
    """Solve √(Var/m) = rel_err·μ for m (the mean of m rollouts has variance Var/m)."""
    sigma, b = sp.symbols("sigma b", real=True)
    rel_err, m = sp.symbols("rel_err m", positive=True)
    mean, second = _two_point(sp, sigma, b)
    var = second - mean**2
    (rollouts,) = sp.solve(sp.Eq(var / m, (rel_err * mean) ** 2), m)
    return rollouts, _variance(sigma, b) / (rel_err * sigma * (1 - sigma)) ** 2


@formula(
    "001 §7.2 (variance per FLOP)",
    "",
    domains={"error_factor": amount("new standard error / old one", "", (0.05, 2.0))},
)
def rollouts_for_error_factor(error_factor: float) -> float:
    """Factor on the rollouts to scale the standard error by e: 1/e² (halving costs ×4)."""
    return 1 / error_factor**2


@derivation(rollouts_for_error_factor)
def _(sp):
    """Solve √(V/m₂) = e·√(V/m₁) for m₂/m₁."""
    e, var, m1, m2 = sp.symbols("error_factor V m1 m2", positive=True)
    (m2_star,) = sp.solve(sp.Eq(sp.sqrt(var / m2), e * sp.sqrt(var / m1)), m2)
    return m2_star / m1, 1 / e**2


@formula(
    "001 §7.2 (replay memory)",
    "byte",
    domains={
        "height": count("frame height in pixels", sample=(32, 256)),
        "width": count("frame width in pixels", sample=(32, 256)),
        "bytes_per_pixel": amount("bytes per pixel (1 for uint8 grey)", "byte", (1, 4), log=False),
    },
)
def state_bytes_of_frames(
    frames_per_state: int, height: int, width: int, bytes_per_pixel: float = 1
) -> float:
    """Bytes of a state of stacked frames: frames·H·W·bytes (Atari 4·84·84 = 28 224)."""
    return frames_per_state * height * width * bytes_per_pixel


@formula(
    "001 §7.2 (replay memory)",
    "byte",
    domains={"frames_once": Domain("bool", "store each frame once, rebuilding states by index")},
)
def replay_buffer_bytes(
    n_transitions: float, state_bytes: float, frames_per_state: int = 4, frames_once: bool = False
) -> float:
    """Replay buffer bytes: 2·n·state storing s and s′, n·state/frames storing each frame once.

    A million Atari transitions take 56 GB the naive way and 7 GB when consecutive
    states share their frames (each transition adds one new frame).
    """
    if frames_once:
        return n_transitions * state_bytes / frames_per_state
    return 2 * n_transitions * state_bytes
