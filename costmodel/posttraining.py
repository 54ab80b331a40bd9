"""Post-training: the KL-regularized optimum and direct preference optimization (000 ch. 5).

RLHF maximizes E_π[r] − β KL(π‖π_ref); its optimum is π_ref reweighted by e^(r/β)
(000 Thm 5.6).  DPO fits that optimum from preference pairs (y_w preferred to y_l)
through the implicit reward r̂ = β log(π/π_ref), with no reward model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError, Domain, amount, real, unit_interval

_BETA = amount("KL weight β of the regularized objective", "", (0.05, 0.5))
_LOGP = Domain(
    "real", "log-probability of an answer (sum over its tokens)", high=0.0, sample=(-5.0, -0.1)
)
_DPO = {"logp_w": _LOGP, "logp_l": _LOGP, "ref_logp_w": _LOGP, "ref_logp_l": _LOGP, "beta": _BETA}
_MARGIN = real("implicit reward margin u = r̂(y_w) − r̂(y_l)", sample=(-5.0, 5.0))


@formula(
    "000 §5.4, Thm 5.6",
    "",
    domains={
        "pi_ref": Domain("distribution", "reference policy π_ref over the candidate answers"),
        "reward": Domain("reals", "reward r of each candidate answer"),
        "beta": _BETA,
    },
)
def kl_regularized_optimal_policy(
    pi_ref: Sequence[float], reward: Sequence[float], beta: float
) -> tuple[float, ...]:
    """Maximizer of E_π[r] − β KL(π‖π_ref): π*(y) = π_ref(y)·e^(r(y)/β) / Z."""
    if len(pi_ref) != len(reward):
        raise ArgumentError(
            f"posttraining.kl_regularized_optimal_policy: pi_ref has {len(pi_ref)} answers "
            f"and reward {len(reward)} (give one reward per answer)"
        )
    top = max(reward)  # shift the exponents: e^((r − max r)/β) ≤ 1, Z unchanged in ratio
    weights = [p * math.exp((r - top) / beta) for p, r in zip(pi_ref, reward, strict=True)]
    z = math.fsum(weights)
    return tuple(w / z for w in weights)


def _pi_ref_from_weights(values: dict) -> list[float]:
    w = [values["w1"], values["w2"], values["w3"]]
    return [x / sum(w) for x in w]


@derivation(
    kl_regularized_optimal_policy,
    domains={
        "ref1": unit_interval(
            "reference probability of the first answer", low_open=True, high_open=True
        ),
        "r1": real("reward of the first answer"),
        "r2": real("reward of the second answer"),
    },
    call=lambda f, v: f(
        pi_ref=[v["ref1"], 1 - v["ref1"]], reward=[v["r1"], v["r2"]], beta=v["beta"]
    ),
)
def _(sp):
    """Lagrange on two answers: ∂/∂π_i [E_π r − β KL(π‖π_ref) + λ(Σπ − 1)] = 0, then Σπ = 1."""
    beta, q = sp.symbols("beta ref1", positive=True)
    lam = sp.symbols("lambda", real=True)
    mu = sp.symbols("mu", positive=True)  # e^(λ/β)
    r = sp.symbols("r1:3", real=True)
    pi = sp.symbols("pi1:3", positive=True)
    log_pi = sp.symbols("l1:3", real=True)  # π_i = e^(l_i)
    ref = (q, 1 - q)
    lagrangian = (
        sum(pi[i] * r[i] for i in range(2))
        - beta * sum(pi[i] * sp.log(pi[i] / ref[i]) for i in range(2))
        + lam * (sum(pi) - 1)
    )
    grad = [sp.diff(lagrangian, pi[i]).subs(pi[i], sp.exp(log_pi[i])) for i in range(2)]
    (stationary,) = sp.solve(grad, log_pi, dict=True)  # linear in the log-probabilities
    # π_i as a multiple of μ = e^(λ/β); the normalization Σπ = 1 is linear in μ
    pis = [
        sp.expand(sp.exp(stationary[x].subs(lam, beta * sp.log(mu))), power_exp=True)
        for x in log_pi
    ]
    (mu_star,) = sp.solve(sum(pis) - 1, mu)
    z = q * sp.exp(r[0] / beta) + (1 - q) * sp.exp(r[1] / beta)
    return tuple(x.subs(mu, mu_star) for x in pis), tuple(
        ref[i] * sp.exp(r[i] / beta) / z for i in range(2)
    )


@formula("000 §5.5, Thm 5.9", "", domains=_DPO)
def dpo_reward_margin(
    logp_w: float, logp_l: float, ref_logp_w: float, ref_logp_l: float, beta: float
) -> float:
    """Implicit reward margin u = β[(log π − log π_ref)(y_w) − (log π − log π_ref)(y_l)]."""
    return beta * ((logp_w - ref_logp_w) - (logp_l - ref_logp_l))


@formula("000 §5.5, Thm 5.9", "", domains=_DPO)
def dpo_loss(
    logp_w: float, logp_l: float, ref_logp_w: float, ref_logp_l: float, beta: float
) -> float:
    """DPO loss of one pair: −log σ(u), u the implicit reward margin (log 2 at π = π_ref).

    Computed as the softplus log(1 + e^(−u)) = max(−u, 0) + log1p(e^(−|u|)), which
    neither overflows nor rounds to 0 for large |u|.
    """
    u = dpo_reward_margin(logp_w, logp_l, ref_logp_w, ref_logp_l, beta)
    return max(-u, 0.0) + math.log1p(math.exp(-abs(u)))


@formula("000 §5.5, Ex. 11", "", domains={"margin": _MARGIN})
def dpo_pair_weight(margin: float) -> float:
    """Weight of a pair in the DPO gradient: σ(r̂_l − r̂_w) = σ(−u); ½ at π = π_ref (Ex. 11(b))."""
    if margin >= 0:  # σ(−u) = e^(−u) / (1 + e^(−u)) without overflow
        e = math.exp(-margin)
        return e / (1 + e)
    return 1 / (1 + math.exp(margin))


@derivation(dpo_pair_weight)
def _(sp):
    """Ex. 11(a): d/du[−log σ(u)] = −σ(−u); the weight is minus this derivative."""
    u = sp.symbols("margin", real=True)
    sigmoid = 1 / (1 + sp.exp(-u))
    return -sp.diff(-sp.log(sigmoid), u), 1 / (1 + sp.exp(u))
