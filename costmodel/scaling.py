"""Scaling laws: the loss fit and how to spend a compute budget (000 §1.4, Ex. 15; 001 ch. 1).

The fit of Hoffmann et al. (2022), L(N, D) = E + A/N^α + B/D^β, with C = 6ND, gives the
compute-optimal split N* = G (C/6)^(β/(α+β)), D* = C/(6N*) (000 Def 1.6, Thm 1.7).
"""

from __future__ import annotations

import math

from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError, Domain, amount, count, nonnegative

# The published fit (Hoffmann et al. 2022, eq. 10), as quoted in 000 Def 1.6.
E_FIT, A_FIT, B_FIT, ALPHA_FIT, BETA_FIT = 1.69, 406.4, 410.7, 0.34, 0.28


def _exponent(meaning: str) -> Domain:
    return Domain("real", meaning, low=0.0, low_open=True, sample=(0.2, 0.6))


_FIT = {
    "E": Domain("real", "irreducible loss E of the fit (nats/token)", low=0.0, sample=(1.0, 2.5)),
    "A": amount("coefficient A of the model-size term", "", (100, 1000)),
    "B": amount("coefficient B of the data term", "", (100, 1000)),
    "alpha": _exponent("model-size exponent α of the loss fit"),
    "beta": _exponent("data exponent β of the loss fit"),
}
_RATIO = {"tokens_per_param": amount("training tokens per parameter D/N", "", (1, 1000))}
_TARGET = {"target_loss": Domain("real", "loss to reach (nats/token)", low=0.0, sample=(1.8, 4))}
_INFERENCE = {"inference_tokens": nonnegative("tokens served at inference D_inf", "", (0, 1e14))}


@formula("000 §1.4, Def 1.6; Hoffmann et al. 2022 (eq. 10)", "", domains=_FIT)
def loss(
    n_params: float,
    n_tokens: float,
    E: float = E_FIT,
    A: float = A_FIT,
    B: float = B_FIT,
    alpha: float = ALPHA_FIT,
    beta: float = BETA_FIT,
) -> float:
    """Final loss predicted by the Chinchilla fit: L(N, D) = E + A/N^α + B/D^β."""
    return E + A / n_params**alpha + B / n_tokens**beta


@formula("000 §1.4, Thm 1.7; Hoffmann et al. 2022", "", domains=_FIT)
def compute_optimal(
    compute: float,
    E: float = E_FIT,
    A: float = A_FIT,
    B: float = B_FIT,
    alpha: float = ALPHA_FIT,
    beta: float = BETA_FIT,
) -> tuple[float, float]:
    """Compute-optimal (N*, D*): N* = G (C/6)^(β/(α+β)), G = (αA/(βB))^(1/(α+β)), D* = C/(6N*).

    E shifts the loss, not the minimiser; it is accepted so that a fit passes whole.
    """
    G = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    n_params = G * (compute / 6) ** (beta / (alpha + beta))
    return n_params, compute / (6 * n_params)


@derivation(compute_optimal)
def _(sp):
    """Minimise L(N, C/(6N)): N·∂L/∂N = −αA/N^α + βB(6N/C)^β = 0, solved in log N."""
    N, C, A, B, a, b = sp.symbols("n_params compute A B alpha beta", positive=True)
    x = sp.symbols("x", real=True)  # log N
    loss_on_budget = A / N**a + B / (C / (6 * N)) ** b  # E dropped: it does not move the argmin
    grad = sp.expand(N * sp.diff(loss_on_budget, N))
    shrink, grow = sorted(sp.Add.make_args(grad), key=lambda t: not t.could_extract_minus_sign())
    balance = sp.Eq(*(sp.expand_log(sp.log(t), force=True) for t in (-shrink, grow)))
    n_star = sp.exp(sp.solve(balance.subs(sp.log(N), x), x)[0])
    G = (a * A / (b * B)) ** (1 / (a + b))
    closed = G * (C / 6) ** (b / (a + b))
    return (n_star, C / (6 * n_star)), (closed, C / (6 * closed))


@formula("000 §1.4, after Thm 1.7 (a, b depend only on α, β)", "", domains=_FIT)
def compute_optimal_exponents(
    alpha: float = ALPHA_FIT, beta: float = BETA_FIT
) -> tuple[float, float]:
    """Exponents of N* ∝ C^a and D* ∝ C^b: a = β/(α+β), b = α/(α+β) (a + b = 1)."""
    return beta / (alpha + beta), alpha / (alpha + beta)


@derivation(compute_optimal_exponents)
def _(sp):
    """a = d log N*/d log C and b = d log D*/d log C on the closed forms of Thm 1.7."""
    C, A, B, a, b = sp.symbols("compute A B alpha beta", positive=True)
    n_star = (a * A / (b * B)) ** (1 / (a + b)) * (C / 6) ** (b / (a + b))
    d_star = C / (6 * n_star)
    elasticity = [
        sp.simplify(C * sp.diff(sp.expand_log(sp.log(q), force=True), C)) for q in (n_star, d_star)
    ]
    return tuple(elasticity), (b / (a + b), a / (a + b))


@formula("000 Ex. 2 (D = 20N); 000 §1.4 (Chinchilla: 1.4T tokens for 70B)", "", domains=_RATIO)
def chinchilla_tokens(n_params: float, tokens_per_param: float = 20.0) -> float:
    """Training tokens at a fixed tokens-per-parameter ratio: D = r·N (r ≈ 20)."""
    return tokens_per_param * n_params


@formula("001 group project 3 (3, 9 and 20 M at 20 tokens per parameter)", "", domains=_RATIO)
def fixed_ratio_allocation(compute: float, tokens_per_param: float = 20.0) -> tuple[float, float]:
    """(N, D) spending C at D = rN: N = sqrt(C/(6r)), D = rN (r ≈ 20, Chinchilla's ratio)."""
    n_params = math.sqrt(compute / (6 * tokens_per_param))
    return n_params, tokens_per_param * n_params


@derivation(fixed_ratio_allocation)
def _(sp):
    """N = sqrt(C/(6r)): solve C = 6N·D with D = rN for N > 0."""
    N, C, r = sp.symbols("n_params compute tokens_per_param", positive=True)
    n = sp.solve(sp.Eq(C, 6 * N * (r * N)), N)[0]
    return (n, r * n), (sp.sqrt(C / (6 * r)), r * sp.sqrt(C / (6 * r)))


@formula("000 Ex. 15 (tokens needed at a fixed loss)", "", domains={**_FIT, **_TARGET})
def tokens_for_loss(
    n_params: float,
    target_loss: float,
    E: float = E_FIT,
    A: float = A_FIT,
    B: float = B_FIT,
    alpha: float = ALPHA_FIT,
    beta: float = BETA_FIT,
) -> float:
    """Tokens D(N) that bring a model of N parameters to a loss L: (B/(L − E − A/N^α))^(1/β)."""
    gap = target_loss - E - A / n_params**alpha  # what the data term may still contribute
    if gap <= 0:
        raise ArgumentError(
            f"scaling.tokens_for_loss: target_loss = {target_loss} is out of reach of "
            f"n_params = {n_params:.3g} (its floor E + A/N^alpha is {target_loss - gap:.4g}; "
            "use a larger model or a higher target)"
        )
    return (B / gap) ** (1 / beta)


def _reachable(v: dict) -> bool:
    return v["target_loss"] > v["E"] + v["A"] / v["n_params"] ** v["alpha"]


@derivation(tokens_for_loss, where=_reachable)
def _(sp):
    """(B/(L − E − A/N^α))^(1/β): solve E + A/N^α + B·u = L for u = D^(−β)."""
    N, Lt, E, A, B, a, b, u = sp.symbols("n_params target_loss E A B alpha beta u", positive=True)
    u_star = sp.solve(sp.Eq(E + A / N**a + B * u, Lt), u)[0]  # u = D^(−β)
    return (1 / u_star) ** (1 / b), (B / (Lt - E - A / N**a)) ** (1 / b)  # D = (1/u)^(1/β), u > 0


@formula("000 Ex. 15; Sardana et al. 2024", "", domains={**_FIT, **_INFERENCE})
def inference_optimal(
    compute: float,
    inference_tokens: float,
    E: float = E_FIT,
    A: float = A_FIT,
    B: float = B_FIT,
    alpha: float = ALPHA_FIT,
    beta: float = BETA_FIT,
) -> tuple[float, float]:
    """(N, D) of least total cost 6N·D(N) + 2N·D_inf at the loss of the compute-optimal model for C.

    D(N) is :func:`tokens_for_loss`.  On log N, the slope of the cost is
    6D(1 − αA/(βN^α·gap)) + 2D_inf (gap = L − E − A/N^α): −∞ where the loss becomes out of
    reach, 2D_inf ≥ 0 at N* (Thm 1.7), so the optimum lies in between and is found by
    bisection; it is N* itself for D_inf = 0.
    """
    fit = {"E": E, "A": A, "B": B, "alpha": alpha, "beta": beta}
    n_star, d_star = compute_optimal(compute, **fit)
    target = loss(n_star, d_star, **fit)

    def slope(log_n: float) -> float:  # d cost / d log N, divided by N
        n = math.exp(log_n)
        gap = target - E - A / n**alpha
        tokens = (B / gap) ** (1 / beta)
        return 6 * tokens * (1 - alpha * A / (beta * n**alpha * gap)) + 2 * inference_tokens

    n_floor = (A / (target - E)) ** (1 / alpha)  # the smallest model that can reach the loss
    lo, hi = math.log(n_floor) + 1e-9, math.log(n_star)
    while hi - lo > 1e-13 * abs(hi):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if slope(mid) < 0 else (lo, mid)
    n_params = math.exp(hi)
    return n_params, tokens_for_loss(n_params, target, **fit)


_SWEEP = {
    "budgets": Domain("reals", "compute budget of each IsoFLOP curve (FLOPs)", "FLOP"),
    "models_per_budget": count("models trained at each budget", sample=(2, 10)),
}


@formula("001 group project 3 (about 4e17 FLOPs for the sweep)", "FLOP", domains=_SWEEP)
def isoflop_sweep_flops(budgets: list[float], models_per_budget: int) -> float:
    """FLOPs of an IsoFLOP sweep: m·Σ C_j (m models trained at each budget C_j)."""
    if min(budgets) <= 0:
        raise ArgumentError(
            f"scaling.isoflop_sweep_flops: budgets = {budgets!r} holds a budget <= 0 "
            "(give each compute budget in FLOPs, e.g. 1e15)"
        )
    return models_per_budget * math.fsum(budgets)
