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


def _value(v):
    """What the student's pass@k returned, as a float (or "nan"/"inf"), or {"error": ...}."""
    if isinstance(v, BaseException):  # raised in the student's process
        return {"error": f"{type(v).__name__}: {v}"[:200]}
    if isinstance(v, str | bytes):
        return {"error": f"returned a {type(v).__name__}, not a number"}
    try:
        x = float(v)
    except BaseException as err:  # noqa: BLE001
        return {"error": f"returned {type(v).__name__}, not a number ({type(err).__name__})"}
    return x if math.isfinite(x) else str(x)


def probe(student, seed: int, params: dict) -> dict:
    """Call ``pass_at_k`` on the seed's triples; return the values (plain data)."""
    c = cases(seed)
    n, k, _ = c["sweep"]
    groups = {
        "values": c["values"],
        "edges": c["edges"],
        "huge": c["huge"],
        "sweep": [(n, ci, k) for ci in range(n + 1)],
    }
    calls = [t for triples in groups.values() for t in triples]
    try:
        answers = iter(student.map(calls))
    except Exception as err:  # noqa: BLE001 - the student's process stopped answering
        answers = iter([err] * len(calls))
    return {name: [_value(next(answers)) for _ in triples] for name, triples in groups.items()}


# --- grade (trusted) ---------------------------------------------------------------------


def exact(n: int, c: int, k: int) -> float:
    """1 − C(n − c, k)/C(n, k) from exact integers (math.comb is 0 when n − c < k)."""
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)  # int / int: correctly rounded


def _check(recs, triples: list, rtol: float, atol: float) -> tuple[int, list[str]]:
    """How many of the student's values match; a few lines saying which do not."""
    recs = recs if isinstance(recs, list) else []
    recs = (recs + [None] * len(triples))[: len(triples)]
    hits, notes = 0, []
    for rec, (n, c, k) in zip(recs, triples, strict=True):
        if type(rec) is float and math.isclose(rec, exact(n, c, k), rel_tol=rtol, abs_tol=atol):
            hits += 1
            continue
        if isinstance(rec, dict) and isinstance(rec.get("error"), str):
            why = rec["error"]
        elif isinstance(rec, str):
            why = f"returned {rec}"
        elif type(rec) is float:
            why = f"returned {rec:.10g}"
        else:
            why = "no value"
        notes.append(f"n = {n}, c = {c}, k = {k}: {why}")
    return hits, notes


def _listed(notes: list[str]) -> str:
    more = f" (and {len(notes) - 3} more)" if len(notes) > 3 else ""
    return "; ".join(notes[:3]) + more + "."


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score the values against exact binomial ratios recomputed from the seed."""
    from autograder.checktools import prop

    c = cases(seed)
    result = result if isinstance(result, dict) else {}
    props = []

    hits, notes = _check(result.get("values"), c["values"], RTOL, ATOL)
    msg = (
        "Matches 1 − C(n − c, k)/C(n, k) on random (n, c, k)."
        if not notes
        else _listed(notes) + " The unbiased estimator is 1 − C(n − c, k)/C(n, k), the "
        "probability that k of the n samples drawn without replacement hold a right one "
        "(Proposition 7.5), not 1 − (1 − c/n)^k."
    )
    props.append(prop("equals 1 − C(n − c, k)/C(n, k)", 2.0, hits / len(c["values"]), msg))

    hits, notes = _check(result.get("edges"), c["edges"], 0.0, 1e-12)
    msg = (
        "0 when c = 0; 1 when n − c < k (every k-subset holds a right sample)."
        if not notes
        else _listed(notes) + " With c = 0 no draw succeeds (0); when n − c < k every "
        "k-subset holds a right sample (1): return 1.0 before taking any logarithm or "
        "factor that vanishes (Proposition 7.5)."
    )
    props.append(prop("edge cases: 0 when c = 0, 1 when n − c < k", 1.0, hits / 7, msg))

    hits, notes = _check(result.get("huge"), c["huge"], HUGE_RTOL, HUGE_ATOL)
    msg = (
        "Accurate for n up to 20 000 and k up to 1000."
        if not notes
        else _listed(notes) + " C(n, k) exceeds the largest float (about 10^308) for such "
        "n and k: compute the ratio as the product Π (1 − k/i) over i = n − c + 1..n, "
        "or with exact integers, never through floats of factorials."
    )
    props.append(prop("large n without overflow", 1.0, hits / len(c["huge"]), msg))

    n, k, ps = c["sweep"]
    recs = result.get("sweep") if isinstance(result.get("sweep"), list) else []
    ok = len(recs) == n + 1 and all(type(v) is float for v in recs)
    if not ok:
        msg = (
            f"Sweeping c = 0..{n} with n = {n}, k = {k}: some calls return no finite number, "
            "so the estimator cannot be averaged."
        )
        props.append(prop("unbiased: averages to 1 − (1 − p)^k", 1.0, 0, msg))
        return props
    est = np.array(recs, dtype=np.float64)
    pmfs = [
        np.array([math.comb(n, ci) * p**ci * (1 - p) ** (n - ci) for ci in range(n + 1)])
        for p in ps
    ]
    means = [float(pmf @ est) for pmf in pmfs]
    truth = [1 - (1 - p) ** k for p in ps]
    oks = [abs(m - t) <= BIAS_ATOL for m, t in zip(means, truth, strict=True)]
    if all(oks):
        msg = (
            f"Over c ~ Binomial({n}, p), the estimator averages to 1 − (1 − p)^{k} "
            f"(p = {ps[0]:.3f} and {ps[1]:.3f}): it is unbiased."
        )
    else:
        bias = max(abs(m - t) for m, t in zip(means, truth, strict=True))
        msg = (
            f"Over c ~ Binomial({n}, p) (p = {ps[0]:.3f}, {ps[1]:.3f}), your estimator "
            f"averages to within {bias:.2g} of 1 − (1 − p)^{k}, not exactly: it is biased. "
            "The plug-in 1 − (1 − c/n)^k is biased; 1 − C(n − c, k)/C(n, k) is not "
            "(Proposition 7.5)."
        )
    props.append(prop("unbiased: averages to 1 − (1 − p)^k", 1.0, sum(oks) / 2, msg))
    return props
