"""Checks of the pass@k code part (000 §7.3, Proposition 7.5).

The moderate triples avoid the edge cases, and the large ones (n up to 20 000, k up to 1000)
are checked apart, so that a float overflow of C(n, k) costs only the large-n property; the
sweep over c = 0..n for one (n, k) checks unbiasedness against 1 − (1 − p)^k.
"""

import math

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, check, notes, share

BIAS_ATOL = 1e-9
MATCHED = {  # the triples judged one by one: property, weight, (rtol, atol), good, advice
    "values": (
        "equals 1 − C(n − c, k)/C(n, k)",
        2.0,
        (1e-7, 1e-10),
        "Matches 1 − C(n − c, k)/C(n, k) on random (n, c, k).",
        " The unbiased estimator is 1 − C(n − c, k)/C(n, k), the probability that k of the n "
        "samples drawn without replacement hold a right one (Proposition 7.5), not "
        "1 − (1 − c/n)^k.",
    ),
    "edges": (
        "edge cases: 0 when c = 0, 1 when n − c < k",
        1.0,
        (0.0, 1e-12),
        "0 when c = 0; 1 when n − c < k (every k-subset holds a right sample).",
        " With c = 0 no draw succeeds (0); when n − c < k every k-subset holds a right sample "
        "(1): return 1.0 before taking any logarithm or factor that vanishes (Proposition 7.5).",
    ),
    "huge": (
        "large n without overflow",
        1.0,
        (1e-6, 1e-9),
        "Accurate for n up to 20 000 and k up to 1000.",
        " C(n, k) exceeds the largest float (about 10^308) for such n and k: compute the ratio "
        "as the product Π (1 − k/i) over i = n − c + 1..n, or with exact integers, never "
        "through floats of factorials.",
    ),
}


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


def exact(n: int, c: int, k: int) -> float:
    """1 − C(n − c, k)/C(n, k) from exact integers (math.comb is 0 when n − c < k)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)  # int / int: correctly rounded


def _why(rec: Record) -> str:
    """What the call gave instead of the exact value (float() raises on a value not a number)."""
    if rec.missing:
        return "no value"
    if not rec.ok:
        return rec.error[:200]
    if rec.type == "str":
        return "returned a str, not a number"
    if (x := rec.as_float()) is not None:
        return f"returned {x:.10g}"
    raised = {"int": "OverflowError", "Tensor": "ValueError"}.get(rec.type, "TypeError")
    return f"returned {rec.type}, not a number ({raised})"


def matched(r: Result, cs: dict, group: str) -> Property:
    """The share of the student's values on ``group`` that match ``exact`` within tolerance;
    its good message, or a few lines saying which do not, then its advice."""
    name, weight, (rtol, atol), good, advice = MATCHED[group]
    verdicts = []
    for rec, (n, c, k) in zip(r.records(group, len(cs[group])), cs[group], strict=True):
        x = rec.as_float()
        ok = x is not None and math.isclose(x, exact(n, c, k), rel_tol=rtol, abs_tol=atol)
        verdicts.append(Verdict(ok, f"n = {n}, c = {c}, k = {k}: {_why(rec)}"))
    message = good if all(verdicts) else notes(verdicts, sep="; ") + "." + advice
    return Property(name, weight, share(verdicts), message)


@check("unbiased: averages to 1 − (1 − p)^k", 1.0)
def unbiased(r: Result, c: dict):
    n, k, ps = c["sweep"]
    est = [rec.as_float() for rec in r.records("sweep")]
    if len(est) != n + 1 or not all(x is not None and math.isfinite(x) for x in est):
        return 0, (
            f"Sweeping c = 0..{n} with n = {n}, k = {k}: some calls return no finite number, "
            "so the estimator cannot be averaged."
        )
    gaps = []  # |E[estimate] − (1 − (1 − p)^k)| over c ~ Binomial(n, p), for each p
    for p in ps:
        pmf = np.array([math.comb(n, ci) * p**ci * (1 - p) ** (n - ci) for ci in range(n + 1)])
        gaps.append(abs(float(pmf @ np.array(est)) - (1 - (1 - p) ** k)))
    if all(gap <= BIAS_ATOL for gap in gaps):
        return 1.0, (
            f"Over c ~ Binomial({n}, p), the estimator averages to 1 − (1 − p)^{k} "
            f"(p = {ps[0]:.3f} and {ps[1]:.3f}): it is unbiased."
        )
    return share(gap <= BIAS_ATOL for gap in gaps), (
        f"Over c ~ Binomial({n}, p) (p = {ps[0]:.3f}, {ps[1]:.3f}), your estimator "
        f"averages to within {max(gaps):.2g} of 1 − (1 − p)^{k}, not exactly: it is biased. "
        "The plug-in 1 − (1 − c/n)^k is biased; 1 − C(n − c, k)/C(n, k) is not "
        "(Proposition 7.5)."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    r, c = Result(result), cases(seed)
    return [matched(r, c, group) for group in MATCHED] + [unbiased(r, c)]
