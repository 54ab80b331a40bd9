"""Reliability arithmetic of agents: chains, verifiers, votes and pass@k (000 ch. 7).

An agent's task is n steps, each right with probability p, independently (000 Prop
7.3).  A verifier retries a step; a vote runs the whole task several times; pass@k
measures how often one of k samples is right (000 Prop 7.5, Chen et al. 2021).
"""

from __future__ import annotations

import math

from costmodel._derive import general_branch
from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError, count, register_arguments, unit_interval

register_arguments(
    {
        "attempts": count("attempts per step allowed by a verifier", sample=(1, 5)),
        "false_accept": unit_interval(
            "probability that the verifier accepts a wrong step f", sample=(0.0, 0.5)
        ),
        "n_runs": count("independent complete runs r that vote", sample=(1, 15)),
    }
)


def _retry_ratio(p: float, false_accept: float) -> float:
    """r = (1 − p)(1 − f): a step is attempted again iff its attempt is wrong and rejected."""
    return (1 - p) * (1 - false_accept)


def _geometric(r: float, terms: int) -> float:
    """Σ_{j=0}^{terms−1} r^j."""
    return float(terms) if r == 1 else (1 - r**terms) / (1 - r)


@formula("000 §7.2, Prop 7.3", "")
def chain_success(p: float, n: int) -> float:
    """Success of n independent steps each right with probability p: pⁿ (0.95²⁰ = 0.36)."""
    return p**n


@derivation(chain_success)
def _(sp):
    """The product of the n independent step successes."""
    p = sp.symbols("p", positive=True)
    n = sp.symbols("n", integer=True, positive=True)
    i = sp.symbols("i", integer=True, positive=True)
    return sp.Product(p, (i, 1, n)).doit(), p**n


@formula("000 §7.2, Prop 7.3; Ex. 14(b)", "")
def verified_step_success(p: float, attempts: int, false_accept: float = 0.0) -> float:
    """Step success with a verifier and k attempts: p·Σ_{j<k} ((1 − p)(1 − f))^j.

    Without false accepts (f = 0) this is 1 − (1 − p)^k; with two attempts it is
    p + (1 − p)(1 − f)p (Ex. 14(b): 0.944).
    """
    if false_accept == 0:
        return 1 - (1 - p) ** attempts
    return p * _geometric(_retry_ratio(p, false_accept), attempts)


@derivation(verified_step_success, where=lambda v: v["p"] > 0)
def _(sp):
    """Attempt j + 1 is made and right iff the j before were wrong and rejected: Σ r^j p."""
    p, f = sp.symbols("p false_accept", positive=True)
    k = sp.symbols("attempts", integer=True, positive=True)
    j = sp.symbols("j", integer=True, nonnegative=True)
    r = (1 - p) * (1 - f)
    derived = general_branch(sp, sp.summation(r**j * p, (j, 0, k - 1)))
    return derived, p * (1 - ((1 - p) * (1 - f)) ** k) / (1 - (1 - p) * (1 - f))


@derivation(verified_step_success, fixed={"false_accept": 0.0}, where=lambda v: v["p"] > 0)
def _(sp):
    """With a perfect verifier the step fails only if all k attempts are wrong."""
    p = sp.symbols("p", positive=True)
    k = sp.symbols("attempts", integer=True, positive=True)
    j = sp.symbols("j", integer=True, nonnegative=True)
    derived = general_branch(sp, sp.summation((1 - p) ** j * p, (j, 0, k - 1)))
    return derived, 1 - (1 - p) ** k


@formula("000 §7.2, Prop 7.3; Ex. 14(a)", "")
def verified_chain_success(p: float, n: int, attempts: int, false_accept: float = 0.0) -> float:
    """Task success of n steps with a per-step verifier: (1 − (1 − p)^k)ⁿ when f = 0."""
    step = verified_step_success(p=p, attempts=attempts, false_accept=false_accept)
    return chain_success(p=step, n=n)


@derivation(verified_chain_success, fixed={"false_accept": 0.0}, where=lambda v: v["p"] > 0)
def _(sp):
    """n independent verified steps, each failing only if all k attempts are wrong."""
    p = sp.symbols("p", positive=True)
    n, k = sp.symbols("n attempts", integer=True, positive=True)
    i, j = sp.symbols("i j", integer=True, nonnegative=True)
    step = general_branch(sp, sp.summation((1 - p) ** j * p, (j, 0, k - 1)))
    return sp.Product(step, (i, 1, n)).doit(), (1 - (1 - p) ** k) ** n


@formula("000 §7.2, Ex. 14(c)", "")
def verifier_model_calls(p: float, n: int, attempts: int = 2, false_accept: float = 0.0) -> float:
    """Expected model calls of a verified task: n·Σ_{j<k} ((1 − p)(1 − f))^j.

    Two attempts give n(1 + (1 − p)) = 12 calls for n = 10, p = 0.8 (11.8 with f = 0.1).
    """
    return n * _geometric(_retry_ratio(p, false_accept), attempts)


@derivation(verifier_model_calls, where=lambda v: v["p"] > 0)
def _(sp):
    """Attempt j + 1 happens iff the first j were wrong and rejected, with probability r^j."""
    p, f = sp.symbols("p false_accept", positive=True)
    n, k = sp.symbols("n attempts", integer=True, positive=True)
    j = sp.symbols("j", integer=True, nonnegative=True)
    r = (1 - p) * (1 - f)
    per_step = general_branch(sp, sp.summation(r**j, (j, 0, k - 1)))
    return n * per_step, n * (1 - ((1 - p) * (1 - f)) ** k) / (1 - (1 - p) * (1 - f))


@formula("000 §7.2, Ex. 14(c)", "")
def vote_model_calls(n: int, n_runs: int) -> int:
    """Model calls of a vote over r complete runs of n steps: r·n."""
    return n_runs * n


def _binomial_pmf(p: float, n: int, x: int) -> float:
    return math.comb(n, x) * p**x * (1 - p) ** (n - x)


@formula("000 §7.2, Thm 7.4; Ex. 14(a)", "")
def binomial_tail(p: float, n: int, k: int) -> float:
    """Probability that at least k of n independent runs are right: P(Bin(n, p) ≥ k)."""
    return math.fsum(_binomial_pmf(p, n, x) for x in range(k, n + 1))


@formula("000 §7.2, Thm 7.4", "")
def majority_vote_error(p: float, k: int) -> float:
    """Probability that the right answer has no strict majority of k votes: P(Bin(k, p) ≤ k/2).

    p = 0.7, k = 15 gives 0.050, against the Hoeffding bound 0.30.
    """
    return math.fsum(_binomial_pmf(p, k, x) for x in range(k // 2 + 1))


@formula("000 §7.2, Thm 7.4", "")
def majority_vote_error_bound(p: float, k: int) -> float:
    """Hoeffding bound on the majority of k votes being wrong: e^(−2k(p − ½)²), for p > ½."""
    if p <= 0.5:
        raise ArgumentError(
            f"agents.majority_vote_error_bound: p = {p} must exceed 1/2 "
            "(a vote only helps when each answer is right more often than not)"
        )
    return math.exp(-2 * k * (p - 0.5) ** 2)


@derivation(majority_vote_error_bound, where=lambda v: v["p"] > 0.5)
def _(sp):
    """Chernoff: P(p − X̄ ≥ t) ≤ e^(−λkt + kλ²/8) (Hoeffding's lemma); best λ = 4t, t = p − ½."""
    p = sp.symbols("p", positive=True)
    k, lam, t = sp.symbols("k lambda t", positive=True)
    exponent = -lam * k * t + k * lam**2 / 8  # log of the bound at one λ
    (best,) = sp.solve(sp.diff(exponent, lam), lam)  # λ* = 4t
    derived = sp.exp(exponent.subs(lam, best).subs(t, p - sp.Rational(1, 2)))
    return derived, sp.exp(-2 * k * (p - sp.Rational(1, 2)) ** 2)


@formula("000 §7.2, Ex. 14(a)", "")
def plurality_vote_success(p: float, n_runs: int) -> float:
    """Plurality vote over r runs when wrong answers never coincide: P(X ≥ 2) + P(X = 1)/r.

    X ~ Bin(r, p) counts the right runs; one right answer ties with the r − 1 wrong
    ones and wins the random tie-break with probability 1/r.
    """
    return binomial_tail(p=p, n=n_runs, k=2) + _binomial_pmf(p, n_runs, 1) / n_runs


@derivation(plurality_vote_success, fixed={"n_runs": 5})
def _(sp):
    """Five runs: sum over the count x of right runs of P(X = x)·P(win | x)."""
    p = sp.symbols("p", positive=True)
    r = 5

    def win(x: int):  # x right runs agree; each of the r − x wrong runs has its own answer
        wrong_top = 1 if x < r else 0  # votes of the best wrong answer
        if x > wrong_top:
            return 1
        if x == wrong_top == 1:  # a tie of the right answer with the r − 1 wrong ones
            return sp.Rational(1, r)
        return 0

    derived = sum(sp.binomial(r, x) * p**x * (1 - p) ** (r - x) * win(x) for x in range(r + 1))
    closed = 1 - (1 - p) ** r - r * p * (1 - p) ** (r - 1) + p * (1 - p) ** (r - 1)
    return derived, closed


@formula("000 §7.3, Prop 7.5 (Chen et al. 2021)", "")
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c right: 1 − C(n − c, k)/C(n, k); 1 if n − c < k.

    Computed as the product 1 − Π_{i=n−c+1}^{n} (1 − k/i), stable for large n.
    """
    if c > n:
        raise ArgumentError(f"agents.pass_at_k: c = {c} > n = {n} (c counts right samples of n)")
    if k > n:
        raise ArgumentError(f"agents.pass_at_k: k = {k} > n = {n} (draw at least k samples)")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1 - k / i for i in range(n - c + 1, n + 1))


@derivation(pass_at_k, fixed={"k": 3}, where=lambda v: v["n"] - v["c"] >= 3)
def _(sp):
    """k = 3 draws without replacement: all wrong with probability Π_j (n − c − j)/(n − j)."""
    n, c = sp.symbols("n c", integer=True, nonnegative=True)
    all_wrong = sp.Mul(*[(n - c - j) / (n - j) for j in range(3)])  # sequential draws
    return 1 - all_wrong, 1 - sp.binomial(n - c, 3) / sp.binomial(n, 3)
