"""Checks of the pass@k code part (000 §7.3, Proposition 7.5).

``probe`` runs in the probe process, beside the student's: it has the student's
``pass_at_k(n, c, k)`` called on triples drawn from the seed (moderate n, edge cases, n
up to 20 000 with k up to 1000, and every c = 0..n for one (n, k)), in one batch, and
keeps the values as floats.  ``grade`` runs in the trusted
process: it recomputes 1 − C(n − c, k)/C(n, k) exactly with Python's integers and checks
the unbiasedness of the sweep over c against 1 − (1 − p)^k.

The properties are separated on purpose: the moderate triples avoid the edge cases, and
the large ones are checked apart, so that a float overflow of C(n, k) costs only the
large-n property.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.checklib import Property, Record, Result, check, listed

RTOL, ATOL = 1e-7, 1e-10
HUGE_RTOL, HUGE_ATOL = 1e-6, 1e-9
BIAS_ATOL = 1e-9
ISOLATED = True  # probe() runs in the probe process; pass_at_k, in the student's

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def cases(seed: int) -> dict:
    """The (n, c, k) triples of one grading seed, and the (n, k, p) of the unbiasedness sweep."""
    rng = np.random.default_rng([seed, 50])
    values = []
    for _ in range(16):  # interior: 1 <= c, n − c >= k
        n = int(rng.integers(6, 201))
        k = int(rng.integers(1, n // 2 + 1))
        c = int(rng.integers(1, n - k + 1))
        values.append((n, c, k))
    n = int(rng.integers(10, 60))
    k = int(rng.integers(2, 6))
    edges = [
        (n, 0, k),  # no right sample: 0
        (n, 0, n),  # 0
        (n, n, k),  # all right: 1
        (n, n - k + 1, k),  # n − c = k − 1 < k: 1
        (n, n - 1, k),  # 1
        (n, 1, n),  # k = n: every draw takes the right one: 1
        (k, 1, k),  # n = k: 1
    ]
    huge = []
    for _ in range(6):
        n = int(rng.integers(2_000, 20_001))
        k = int(rng.integers(200, 1_001))
        c = int(rng.choice([rng.integers(1, 6), rng.integers(6, 60), rng.integers(60, n - k + 1)]))
        huge.append((n, c, k))
    sweep_n, sweep_k = int(rng.integers(15, 31)), int(rng.integers(2, 7))
    ps = [float(rng.uniform(0.02, 0.1)), float(rng.uniform(0.2, 0.5))]
    return {"values": values, "edges": edges, "huge": huge, "sweep": (sweep_n, sweep_k, ps)}


def probe(student, seed: int, params: dict) -> dict:
    """Call ``pass_at_k`` on the seed's triples, in one batch; a record of each call."""
    c = cases(seed)
    n, k, _ = c["sweep"]
    groups = {name: c[name] for name in ("values", "edges", "huge")}
    groups["sweep"] = [(n, ci, k) for ci in range(n + 1)]
    recs = iter(student.calls([t for triples in groups.values() for t in triples]))
    return {name: [next(recs) for _ in triples] for name, triples in groups.items()}


# --- grade (trusted) ---------------------------------------------------------------------


def exact(n: int, c: int, k: int) -> float:
    """1 − C(n − c, k)/C(n, k) from exact integers (math.comb is 0 when n − c < k)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)  # int / int: correctly rounded


def _float(rec: Record) -> float | str:
    """float() of the value the call returned, or the exception float() raises on it."""
    v = rec.as_float()
    if v is not None:
        return v
    return {"int": "OverflowError", "Tensor": "ValueError"}.get(rec.type, "TypeError")


def _why(rec: Record, x: float | str | None) -> str:
    """What the call gave instead of the exact value."""
    if rec.missing:
        return "no value"
    if not rec.ok:
        return rec.error[:200]
    if rec.type == "str":
        return "returned a str, not a number"
    return f"returned {x:.10g}" if type(x) is float else f"returned {rec.type}, not a number ({x})"


def _check(
    r: Result, cs: dict, group: str, tol: tuple[float, float], good: str, advice: str
) -> tuple[float, str]:
    """The share of the student's values on ``group`` that match within ``tol`` (rtol,
    atol); ``good``, or a few lines saying which do not, then ``advice``."""
    rtol, atol = tol
    hits, notes = 0, []
    for rec, (n, c, k) in zip(r.records(group, len(cs[group])), cs[group], strict=True):
        x = _float(rec) if rec.ok else None
        if type(x) is float and math.isclose(x, exact(n, c, k), rel_tol=rtol, abs_tol=atol):
            hits += 1
        else:
            notes.append(f"n = {n}, c = {c}, k = {k}: {_why(rec, x)}")
    return hits / len(cs[group]), listed(notes) + "." + advice if notes else good


@check("equals 1 − C(n − c, k)/C(n, k)", 2.0)
def values(r: Result, c: dict):
    return _check(
        r, c, "values", (RTOL, ATOL),
        "Matches 1 − C(n − c, k)/C(n, k) on random (n, c, k).",
        " The unbiased estimator is 1 − C(n − c, k)/C(n, k), the probability that k of the n "
        "samples drawn without replacement hold a right one (Proposition 7.5), not "
        "1 − (1 − c/n)^k.",
    )  # fmt: skip


@check("edge cases: 0 when c = 0, 1 when n − c < k", 1.0)
def edges(r: Result, c: dict):
    return _check(
        r, c, "edges", (0.0, 1e-12),
        "0 when c = 0; 1 when n − c < k (every k-subset holds a right sample).",
        " With c = 0 no draw succeeds (0); when n − c < k every k-subset holds a right sample "
        "(1): return 1.0 before taking any logarithm or factor that vanishes (Proposition 7.5).",
    )  # fmt: skip


@check("large n without overflow", 1.0)
def huge(r: Result, c: dict):
    return _check(
        r, c, "huge", (HUGE_RTOL, HUGE_ATOL),
        "Accurate for n up to 20 000 and k up to 1000.",
        " C(n, k) exceeds the largest float (about 10^308) for such n and k: compute the ratio "
        "as the product Π (1 − k/i) over i = n − c + 1..n, or with exact integers, never "
        "through floats of factorials.",
    )  # fmt: skip


@check("unbiased: averages to 1 − (1 − p)^k", 1.0)
def unbiased(r: Result, c: dict):
    n, k, ps = c["sweep"]
    est = [_float(rec) if rec.ok else None for rec in r.records("sweep")]
    if len(est) != n + 1 or not all(type(x) is float and math.isfinite(x) for x in est):
        return 0, (
            f"Sweeping c = 0..{n} with n = {n}, k = {k}: some calls return no finite number, "
            "so the estimator cannot be averaged."
        )
    pmfs = [
        np.array([math.comb(n, ci) * p**ci * (1 - p) ** (n - ci) for ci in range(n + 1)])
        for p in ps
    ]
    means = [float(pmf @ np.array(est)) for pmf in pmfs]
    truth = [1 - (1 - p) ** k for p in ps]
    oks = [abs(m - t) <= BIAS_ATOL for m, t in zip(means, truth, strict=True)]
    if all(oks):
        return 1.0, (
            f"Over c ~ Binomial({n}, p), the estimator averages to 1 − (1 − p)^{k} "
            f"(p = {ps[0]:.3f} and {ps[1]:.3f}): it is unbiased."
        )
    bias = max(abs(m - t) for m, t in zip(means, truth, strict=True))
    return sum(oks) / 2, (
        f"Over c ~ Binomial({n}, p) (p = {ps[0]:.3f}, {ps[1]:.3f}), your estimator "
        f"averages to within {bias:.2g} of 1 − (1 − p)^{k}, not exactly: it is biased. "
        "The plug-in 1 − (1 − c/n)^k is biased; 1 − C(n − c, k)/C(n, k) is not "
        "(Proposition 7.5)."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score the values against exact binomial ratios recomputed from the seed."""
    r, c = Result(result), cases(seed)
    return [values(r, c), edges(r, c), huge(r, c), unbiased(r, c)]
