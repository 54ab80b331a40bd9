"""Checks of the speculative sampler code part (000 §6.4, Theorem 6.11, Exercise 12).

``probe`` runs in the probe process, beside the student's: it has the student's
``speculative_step(p, q, rng)`` called N_DRAWS times on one target p and draft q drawn
from the seed, with a generator seeded from the grading seed (so the same submission
always gets the same grade), and counts here the output tokens, the accepted drafts and
the tokens sampled after a rejection.  ``grade`` runs in the trusted process: it redraws
p and q and applies chi-square tests and a binomial test, each at the false-fail rate FALSE_FAIL.
"""

from __future__ import annotations

import math
import operator
import time
from statistics import NormalDist

import numpy as np

N_DRAWS = 15_000  # about 1 s for a plain NumPy implementation
FALSE_FAIL = 1e-4  # per statistical test: a correct sampler fails a test this rarely
SLOW_SECONDS = 25.0  # a sampler slower than this for N_DRAWS draws is stopped
BATCH = 1000  # calls per round trip to the student's process
ISOLATED = True  # probe() runs in the probe process; the sampler, in the student's

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def dists(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Target p and draft q on V in 4..8 tokens, every probability >= 0.3/V, α in [0.55, 0.85]."""
    rng = np.random.default_rng([seed, 20])
    while True:
        v = int(rng.integers(4, 9))
        p = 0.7 * rng.dirichlet(np.ones(v)) + 0.3 / v
        q = 0.7 * rng.dirichlet(np.ones(v)) + 0.3 / v
        p, q = p / p.sum(), q / q.sum()
        if 0.55 <= np.minimum(p, q).sum() <= 0.85:
            return p, q


def _parse(res, v: int) -> tuple[int, bool] | str:
    """(token, accepted) from what the student returned, or why it is not that."""
    if not isinstance(res, tuple | list) or len(res) != 2:
        return f"returned {type(res).__name__}, not a (token, accepted) pair"
    token, accepted = res
    if isinstance(token, bool | np.bool_):
        return "the token is a bool"
    try:
        token = operator.index(token)
    except TypeError:
        return f"the token is a {type(token).__name__}, not an int"
    if not 0 <= token < v:
        return f"token {token} outside the vocabulary 0..{v - 1}"
    if not isinstance(accepted, bool | np.bool_):
        return f"accepted is a {type(accepted).__name__}, not a bool"
    return token, bool(accepted)


def probe(student, seed: int, params: dict) -> dict:
    """Call ``speculative_step`` N_DRAWS times; return token counts (plain data).

    This runs in the probe process: the student's sampler runs in theirs, in batches of
    BATCH calls, and only the (token, accepted) pairs it returns come back to be counted.
    """
    p, q = dists(seed)
    v = len(p)
    stream = int(np.random.default_rng([seed, 21]).integers(2**62))
    rng = np.random.default_rng(stream)  # the generator the sampler is given
    student.seed(stream)  # reproducible even if the sampler uses the global generators
    output, accepted, rejected = np.zeros(v, int), np.zeros(v, int), np.zeros(v, int)
    invalid, example, error = 0, None, None
    start = time.monotonic()
    draws = 0
    while draws < N_DRAWS and error is None:
        batch = min(BATCH, N_DRAWS - draws)
        try:
            answers = student.repeat((p, q, rng), batch, seconds=SLOW_SECONDS)
        except Exception as err:  # noqa: BLE001 - the student's process stopped answering
            error = f"{type(err).__name__}: {err}"[:300]
            break
        for answer in answers:
            draws += 1
            if isinstance(answer, BaseException):
                error = f"{type(answer).__name__}: {answer}"[:300]
                break
            res = _parse(answer, v)
            if isinstance(res, str):
                invalid += 1
                example = example or res
            else:
                output[res[0]] += 1
                (accepted if res[1] else rejected)[res[0]] += 1
        if time.monotonic() - start > SLOW_SECONDS:
            error = f"stopped after {draws} draws in {SLOW_SECONDS:g} s: too slow"
    return {
        "vocab": v,
        "draws": draws,
        "output": output.tolist(),
        "accepted": accepted.tolist(),
        "rejected": rejected.tolist(),
        "invalid": invalid,
        "invalid_example": example,
        "error": error,
    }


# --- grade (trusted) ---------------------------------------------------------------------


def _counts(x, v: int) -> np.ndarray | None:
    if not (isinstance(x, list) and len(x) == v and all(type(c) is int and c >= 0 for c in x)):
        return None
    return np.array(x, dtype=np.int64)


def _verdict(what: str, observed: np.ndarray, probs: np.ndarray, rule: str) -> tuple[bool, str]:
    from autograder.checktools import chi2_test

    stat, dof, pval = chi2_test(observed, probs)
    ok = pval >= FALSE_FAIL
    test = f"χ² = {stat:.1f} on {dof} degrees of freedom, p-value {pval:.2g}"
    if ok:
        return True, f"{what} pass the chi-square test ({test} ≥ {FALSE_FAIL:g})."
    return False, f"{what} fail the chi-square test ({test} < {FALSE_FAIL:g}): {rule}"


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Test the counts against p, min(p, q)/α, the residual and α, redrawn from the seed."""
    from autograder.checktools import prop as _prop

    p, q = dists(seed)
    v = len(p)
    alpha = float(np.minimum(p, q).sum())
    names = [
        ("output tokens follow the target p", 3.0),
        ("acceptance rate is 1 − TV(p, q)", 2.0),
        ("accepted drafts follow min(p, q)/α", 1.0),
        ("after a rejection, tokens follow the residual (p − q)₊ normalised", 2.0),
    ]
    r = result if isinstance(result, dict) else {}
    out, acc, rej = (_counts(r.get(k), v) for k in ("output", "accepted", "rejected"))
    if out is None or acc is None or rej is None or not np.array_equal(out, acc + rej):
        return [_prop(n, w, 0, "The sampler's probe returned no usable counts.") for n, w in names]
    n = int(out.sum())
    error = r.get("error") if isinstance(r.get("error"), str) else None
    invalid = r.get("invalid") if type(r.get("invalid")) is int else 0
    if error or invalid or n < N_DRAWS:
        why = error or f"{invalid} of {N_DRAWS} calls: {r.get('invalid_example')}"
        msg = f"speculative_step must return (token, accepted) on every call; {why}"
        return [_prop(name, w, 0, msg) for name, w in names]
    props = []
    ok, msg = _verdict(
        f"The {n} output tokens",
        out,
        p,
        "speculative sampling must reproduce the target distribution exactly (Theorem 6.11).",
    )
    props.append(_prop(*names[0], ok, msg))

    a = int(acc.sum())
    z = (a - n * alpha) / math.sqrt(n * alpha * (1 - alpha))
    z_max = NormalDist().inv_cdf(1 - FALSE_FAIL / 2)
    msg = (
        f"The measured acceptance rate {a / n:.3f} over {n} draws is {abs(z):.1f} standard "
        f"deviations from 1 − TV(p, q) (tolerance {z_max:.2f}, false-fail rate {FALSE_FAIL:g})"
    )
    if abs(z) > z_max:
        msg += ": keep the draft x ~ q with probability min(1, p(x)/q(x))"
    props.append(_prop(*names[1], abs(z) <= z_max, msg + "."))

    if a == 0:
        props.append(_prop(*names[2], 0, "No draft was ever accepted."))
    else:
        ok, msg = _verdict(
            f"The {a} accepted drafts",
            acc,
            np.minimum(p, q) / alpha,
            "a draft x ~ q kept with probability min(1, p(x)/q(x)) follows min(p, q)/α.",
        )
        props.append(_prop(*names[2], ok, msg))

    residual = np.maximum(p - q, 0.0)
    residual /= residual.sum()
    k = int(rej.sum())
    stray = int(rej[residual == 0].sum())
    if k == 0:
        props.append(_prop(*names[3], 0, "No draft was ever rejected."))
    elif stray:
        props.append(
            _prop(
                *names[3],
                0,
                f"{stray} of the {k} tokens sampled after a rejection are tokens with p ≤ q, which "
                "the residual (p − q)₊ never gives.",
            )
        )
    else:
        ok, msg = _verdict(
            f"The {k} tokens sampled after a rejection",
            rej[residual > 0],
            residual[residual > 0],
            "after a rejection, sample from (p − q)₊ divided by its sum 1 − α (Theorem 6.11).",
        )
        props.append(_prop(*names[3], ok, msg))
    return props
