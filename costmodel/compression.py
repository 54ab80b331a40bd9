"""Communication-efficient distributed optimisation (000 ch. 4).

Compressed gradients (random-k, top-k with error feedback, ternary codes), local SGD,
gossip averaging on a ring and a torus, and the step-size limit of asynchronous SGD.
A compressor C on d coordinates is ω-unbiased when E C(x) = x and
E‖C(x) − x‖² ≤ ω‖x‖² (000 Def. 4.4), and δ-contractive when ‖C(x) − x‖² ≤ (1 − δ)‖x‖².
"""

from __future__ import annotations

import math

from costmodel._numeric import ceil
from costmodel._registry import derivation, formula
from costmodel.arguments import (
    ArgumentError,
    Domain,
    amount,
    count,
    nonnegative,
    register_arguments,
    unit_interval,
)

register_arguments(
    {
        "total_steps": count("optimizer steps T of a run", sample=(100, 1_000_000), log=True),
        "inner_steps": count("local steps H between two averagings", sample=(1, 1000), log=True),
    }
)

_D = count("coordinates d of the compressed vector", sample=(100, 10_000_000), log=True)
_K = count("coordinates k kept by the compressor", sample=(1, 100), log=True)
_OMEGA = nonnegative("variance parameter ω of an unbiased compressor", "", (0, 10_000))
_DELTA = unit_interval("contraction δ of a biased compressor", low_open=True, sample=(1e-3, 1.0))
_ETA = amount("step size η", "", (1e-4, 1.0))
_G = amount("bound G on the gradient norm", "", (0.1, 100.0))
_LAM = unit_interval(
    "second-largest eigenvalue modulus λ of the gossip matrix",
    low_open=True,
    high_open=True,
    sample=(0.05, 0.999),
)
_EPS = unit_interval(
    "target ratio ε of final to initial disagreement",
    low_open=True,
    high_open=True,
    sample=(1e-9, 0.5),
)
_Q = count("side q of the q×q torus", low=3, sample=(3, 64))
_TAU = count("staleness τ of the applied gradients (steps)", low=0, sample=(0, 64))
_TARGET = Domain(
    "real", "admissible penalty factor (> 1)", low=1.0, low_open=True, sample=(1.1, 10.0)
)
_LEVELS = count("quantization levels per coordinate", low=2, sample=(2, 256))


def _check_k(where: str, d: int, k: int) -> None:
    if k > d:
        raise ArgumentError(f"compression.{where}: k = {k} exceeds d = {d} (keep k <= d)")


# --- unbiased compression: random-k -------------------------------------------------------


@formula("000 §4.2, Prop 4.5", "", domains={"d": _D, "k": _K})
def random_k_omega(d: int, k: int) -> float:
    """Variance parameter of random-k sparsification scaled by d/k: ω = d/k − 1."""
    _check_k("random_k_omega", d, k)
    return d / k - 1


@derivation(random_k_omega)
def _(sp):
    """ω = d/k − 1 from E(C(x)_i − x_i)²: coordinate kept w.p. k/d and scaled by d/k."""
    d, k, x = sp.symbols("d k x", positive=True)
    kept = k / d
    error_sq = kept * (d / k * x - x) ** 2 + (1 - kept) * (0 - x) ** 2  # E(C(x)_i − x_i)²
    unbiased = sp.simplify(kept * (d / k * x) - x)  # E C(x)_i − x_i = 0
    assert unbiased == 0
    return sp.simplify(error_sq / x**2), d / k - 1


@formula("000 Ex. 9(a)", "", domains={"d": _D, "k": _K})
def sparsification_saving(d: int, k: int) -> float:
    """Communication saved by sending k of d coordinates: d/k (index or seed costs ignored)."""
    _check_k("sparsification_saving", d, k)
    return d / k


@formula("000 §4.2, Thm 4.6", "", domains={"omega": _OMEGA})
def compressed_sgd_penalty(omega: float, n_workers: int = 1) -> float:
    """Step-size and noise penalty of compressed SGD: 1 + ω, or 1 + ω/p over p workers.

    p workers compress independently and the server averages: the compression variances
    add and the average divides them by p², so ω becomes ω/p.
    """
    return 1 + omega / n_workers


@derivation(compressed_sgd_penalty)
def _(sp):
    """1 + ω/p: the variance of an average of p independent compression errors."""
    omega, p, g2 = sp.symbols("omega n_workers g2", positive=True)  # g2 = ‖g‖²
    i = sp.symbols("i", integer=True)
    per_worker = omega * g2  # E‖C_i(g) − g‖² ≤ ω‖g‖²
    variance_of_mean = sp.summation(per_worker, (i, 1, p)) / p**2  # independent: variances add
    second_moment = g2 + variance_of_mean  # E‖mean‖² = ‖g‖² + Var (unbiased)
    return sp.simplify(second_moment / g2), 1 + omega / p


@formula("000 Ex. 9(b)", "", domains={"omega": _OMEGA, "target_penalty": _TARGET})
def workers_for_penalty(omega: float, target_penalty: float = 2.0) -> int:
    """Workers needed for 1 + ω/p ≤ target: p = ⌈ω/(target − 1)⌉ (p ≥ ω for a factor 2)."""
    return max(1, ceil(omega / (target_penalty - 1)))


@derivation(
    workers_for_penalty,
    domains={
        "omega": count("ω (whole numbers, so the ceiling is exact)", sample=(1, 10_000)),
        "target_penalty": Domain("choice", "target penalty", choices=(2, 3, 5)),
    },
    where=lambda v: v["omega"] % (v["target_penalty"] - 1) == 0,
)
def _(sp):
    """Solve 1 + ω/p = target for p (the smallest whole p above it is the answer)."""
    omega, p, target = sp.symbols("omega p target_penalty", positive=True)
    boundary = sp.solve(sp.Eq(1 + omega / p, target), p)[0]  # where the penalty is exactly met
    return sp.ceiling(boundary), sp.ceiling(omega / (target - 1))


# --- biased compression: top-k with error feedback ----------------------------------------


@formula("000 §4.2, Ex. 9(c)", "", domains={"d": _D, "k": _K})
def top_k_delta(d: int, k: int) -> float:
    """Contraction of top-k: δ = k/d (‖top_k(x) − x‖² ≤ (1 − k/d)‖x‖²)."""
    _check_k("top_k_delta", d, k)
    return k / d


@derivation(top_k_delta)
def _(sp):
    """δ = k/d: the worst case has equal magnitudes, and top-k drops d − k of them."""
    d, k, x = sp.symbols("d k x", positive=True)
    i = sp.symbols("i", integer=True)
    total = sp.summation(x**2, (i, 1, d))  # ‖x‖², all |x_i| equal
    dropped = sp.summation(x**2, (i, k + 1, d))  # the d − k coordinates not sent
    return sp.simplify(1 - dropped / total), k / d


@formula(
    "000 §4.2, Thm 4.8; Stich, Cordonnier & Jaggi 2018, Lemma 3.2",
    "",
    domains={"delta": _DELTA, "eta": _ETA, "grad_bound": _G},
)
def error_feedback_memory_bound(delta: float, eta: float = 1.0, grad_bound: float = 1.0) -> float:
    """Bound on the error-feedback memory: E‖e_t‖² ≤ 4(1 − δ)η²G²/δ².

    With the default η = G = 1 it is the coefficient of η²G² (000 Ex. 9(c)).
    """
    return 4 * (1 - delta) * eta**2 * grad_bound**2 / delta**2


@derivation(error_feedback_memory_bound)
def _(sp):
    """Fixed point of e' = (1 − δ)‖e + ηg‖², split by Young's inequality with γ = δ/(2(1 − δ))."""
    delta, eta, G, gamma, E = sp.symbols("delta eta grad_bound gamma E", positive=True)
    # ‖e + ηg‖² ≤ (1 + γ)‖e‖² + (1 + 1/γ)η²G²; choose γ so the memory contracts by 1 − δ/2
    gamma_star = sp.solve(sp.Eq((1 - delta) * (1 + gamma), 1 - delta / 2), gamma)[0]
    noise = sp.factor((1 - delta) * (1 + 1 / gamma_star))  # (1 − δ)(2 − δ)/δ
    noise_bound = sp.factor(noise + (1 - delta))  # (2 − δ) ≤ 2: 2(1 − δ)/δ
    fixed = sp.solve(sp.Eq(E, (1 - delta / 2) * E + noise_bound * eta**2 * G**2), E)[0]
    return fixed, 4 * (1 - delta) * eta**2 * G**2 / delta**2


@formula("000 §4.2 (ternary code, QSGD)", "bit", domains={"levels": _LEVELS})
def bits_per_coordinate(levels: int = 3) -> float:
    """Bits per coordinate of a code with s equally likely levels: log₂ s (ternary ≈ 1.6)."""
    return math.log2(levels)


@derivation(bits_per_coordinate)
def _(sp):
    """log₂ s: the entropy of a uniform choice among s levels."""
    s = sp.symbols("levels", positive=True, integer=True)
    i = sp.symbols("i", integer=True)
    entropy = sp.summation(-(1 / s) * sp.log(1 / s, 2), (i, 1, s))
    return sp.expand_log(entropy, force=True), sp.log(s, 2)


# --- local SGD -----------------------------------------------------------------------------


@formula("000 §4.3 (local SGD code)", "")
def local_sgd_rounds(total_steps: int, inner_steps: int) -> int:
    """Communication rounds of local SGD: ⌊T/H⌋ (one averaging every H local steps)."""
    return total_steps // inner_steps


@formula("000 §4.3 (DiLoCo, Douillard et al. 2023)", "")
def local_sgd_communication_reduction(inner_steps: int) -> float:
    """Communication saved by local SGD (DiLoCo) over mini-batch SGD: T/(T/H) = H."""
    return float(inner_steps)


@derivation(local_sgd_communication_reduction)
def _(sp):
    """H: T rounds of mini-batch SGD against T/H rounds of local SGD."""
    T, H = sp.symbols("total_steps inner_steps", positive=True)
    minibatch_rounds = T  # an all-reduce every step
    local_rounds = T / H  # an averaging every H steps
    return minibatch_rounds / local_rounds, H


# --- gossip --------------------------------------------------------------------------------


@formula("000 §4.4, Example 4.15, Ex. 10", "")
def gossip_ring_lambda(n_workers: int) -> float:
    """Second-largest eigenvalue modulus of the ring with weights 1/3.

    λ = max_{k≠0} |(1 + 2cos(2πk/p))/3| = (1 + 2cos(2π/p))/3 for p ≥ 3.
    """
    if n_workers < 3:
        raise ArgumentError(
            f"compression.gossip_ring_lambda: n_workers = {n_workers}: a ring needs at least "
            "3 workers (use 3 or more; with 2 both neighbours are the same worker)"
        )
    p = n_workers
    return max(abs((1 + 2 * math.cos(2 * math.pi * k / p)) / 3) for k in range(1, p))


@derivation(gossip_ring_lambda)
def _(sp):
    """The circulant W = (I + S + S⁻¹)/3 has the DFT mode k as eigenvector; k = 1 is largest."""
    p = sp.symbols("n_workers", positive=True, integer=True)
    j, k = sp.symbols("j k", integer=True)

    def mode(idx):  # (v_k)_idx, the k-th Fourier mode
        return sp.exp(2 * sp.pi * sp.I * k * idx / p)

    w_mode = (mode(j - 1) + mode(j) + mode(j + 1)) / 3  # (W v_k)_j: self and two neighbours
    eigenvalue = sp.simplify(sp.expand_complex(sp.simplify(w_mode / mode(j))))
    return eigenvalue.subs(k, 1), (1 + 2 * sp.cos(2 * sp.pi / p)) / 3


@formula("000 §4.4, Ex. 10", "", domains={"q": _Q})
def gossip_torus_lambda(q: int) -> float:
    """Second-largest eigenvalue modulus of the q×q torus with weights 1/5.

    Eigenvalues (1 + 2cos(2πa/q) + 2cos(2πb/q))/5; the largest modulus with
    (a, b) ≠ (0, 0) is (3 + 2cos(2π/q))/5 (0.6 for q = 4).
    """
    cos = [2 * math.cos(2 * math.pi * a / q) for a in range(q)]
    return max(
        abs((1 + cos[a] + cos[b]) / 5) for a in range(q) for b in range(q) if (a, b) != (0, 0)
    )


@derivation(gossip_torus_lambda)
def _(sp):
    """The torus matrix is a sum of two ring matrices: its eigenvalues are sums of theirs."""
    q = sp.symbols("q", positive=True, integer=True)
    i, j, a, b = sp.symbols("i j a b", integer=True)

    def mode(x, y):  # the (a, b) Fourier mode at node (x, y)
        return sp.exp(2 * sp.pi * sp.I * (a * x + b * y) / q)

    stencil = [(0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)]  # self and four neighbours
    w_mode = sum(mode(i + di, j + dj) for di, dj in stencil) / 5
    eigenvalue = sp.simplify(sp.expand_complex(sp.simplify(w_mode / mode(i, j))))
    return eigenvalue.subs({a: 0, b: 1}), (3 + 2 * sp.cos(2 * sp.pi / q)) / 5


@formula("000 §4.4, Prop 4.14", "", domains={"lam": _LAM, "epsilon": _EPS})
def gossip_rounds(lam: float, epsilon: float) -> int:
    """Gossip rounds to divide the disagreement by 1/ε: ⌈ln(1/ε)/ln(1/λ)⌉."""
    return ceil(math.log(1 / epsilon) / math.log(1 / lam))


@derivation(gossip_rounds)
def _(sp):
    """The disagreement shrinks by λ per round: the smallest t with λᵗ ≤ ε."""
    lam, eps, t = sp.symbols("lam epsilon t", positive=True)
    continuous = sp.solve(sp.Eq(lam**t, eps), t)[0]  # λᵗ = ε
    return sp.ceiling(continuous), sp.ceiling(sp.log(1 / eps) / sp.log(1 / lam))


# --- asynchrony ----------------------------------------------------------------------------


@formula("000 §4.5 (stability code); Levin & May 1976", "", domains={"tau": _TAU})
def async_stability_threshold(tau: int) -> float:
    """Largest stable a = ηL of x_{t+1} = x_t − a·x_{t−τ}: a < 2 sin(π/(2(2τ + 1))).

    The roots of z^(τ+1) − z^τ + a stay in the unit disk below this value
    (2 for τ = 0, 1 for τ = 1, ≈ π/(2τ + 1) for large τ).
    """
    return 2 * math.sin(math.pi / (2 * (2 * tau + 1)))


@derivation(async_stability_threshold)
def _(sp):
    """A root z = e^{iθ} on the unit circle: z^τ(z − 1) = e^{iθ(τ+½)}·2i sin(θ/2) = −a."""
    tau, theta = sp.symbols("tau theta", positive=True)
    z = sp.exp(sp.I * theta)
    factored = sp.exp(sp.I * theta / 2) * 2 * sp.I * sp.sin(theta / 2)  # = z − 1
    assert sp.simplify(sp.expand_complex(z - 1 - factored)) == 0
    # −a < 0 is real: the phase θ(τ + ½) + π/2 of z^τ(z − 1) must equal π
    theta_star = sp.solve(sp.Eq(theta * (tau + sp.Rational(1, 2)) + sp.pi / 2, sp.pi), theta)[0]
    modulus = 2 * sp.sin(theta / 2)  # |z^τ(z − 1)| = |e^{iθ(τ+½)}|·2 sin(θ/2), 0 < θ < π
    return modulus.subs(theta, theta_star), 2 * sp.sin(sp.pi / (2 * (2 * tau + 1)))


@derivation(async_stability_threshold, fixed={"tau": 0})
def _(sp):
    """τ = 0: the root of z − 1 + a is 1 − a; it leaves the unit disk at z = −1, a = 2."""
    z, a = sp.symbols("z a", real=True)
    root = sp.solve(z - 1 + a, z)[0]
    return sp.solve(sp.Eq(root, -1), a)[0], 2 * sp.sin(sp.pi / 2)


@derivation(async_stability_threshold, fixed={"tau": 1})
def _(sp):
    """τ = 1: for a > 1/4 the roots of z² − z + a are conjugate, |z|² = their product = a."""
    z, a = sp.symbols("z a", positive=True)
    r1, r2 = sp.solve(z**2 - z + a, z)
    modulus_sq = sp.simplify(r1 * r2)  # conjugate roots: z·z̄ = |z|²
    return sp.solve(sp.Eq(modulus_sq, 1), a)[0], 2 * sp.sin(sp.pi / 6)
