"""Checks of the speculative sampler code part (000 §6.4, Theorem 6.11, Exercise 12).

Each step is judged GIVEN ITS DRAFT, drawn by the probe from a stream no argument reveals:
output marginals alone can be forged (the joint law of (token, kept) sampled without drafting,
counts dealt in turn), so decisions and residual tokens are tested for independence and too
even a spread as well, and the output's law (the theorem's conclusion) once its premises hold.
"""

import itertools
import math
import operator
import re
import time

import numpy as np

from autograder.checklib import FALSE_FAIL, Property, Result, check, chi2_sf, chi2_test

N_DRAWS = 15_000  # steps, one per draft: about 0.5 s for a plain NumPy implementation
SLOW_SECONDS = 25.0  # a sampler slower than this for N_DRAWS steps is stopped
BATCH = 1000  # steps per round trip to the student's process
REJECTED = "abcdefgh"  # a step's record: "0"…"7" a kept draft, "a"…"h" a residual token
INVALID = "?"  # a call that did not return (token, accepted)
_STEPS = re.compile(rf"[0-7{REJECTED}{re.escape(INVALID)}]*")
BLOCK_COUNT = 10  # dispersion tests: the rarest outcome expected this often per block
MIN_BLOCK = 20  # and at least this many draws per block


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


def drafts(seed: int, q: np.ndarray) -> np.ndarray:
    """The N_DRAWS drafts x ~ q, from a stream no argument of the student's reveals."""
    return np.random.default_rng([seed, 22]).choice(len(q), size=N_DRAWS, p=q)


def _step(res, v: int) -> tuple[str, str | None]:
    """A step's record from what the student returned, or INVALID and why it is not that."""
    if not isinstance(res, tuple | list) or len(res) != 2:
        return INVALID, f"returned {type(res).__name__}, not a (token, accepted) pair"
    token, accepted = res
    if isinstance(token, bool | np.bool_):
        return INVALID, "the token is a bool"
    try:
        token = operator.index(token)
    except TypeError:
        return INVALID, f"the token is a {type(token).__name__}, not an int"
    if not 0 <= token < v:
        return INVALID, f"token {token} outside the vocabulary 0..{v - 1}"
    if not isinstance(accepted, bool | np.bool_):
        return INVALID, f"accepted is a {type(accepted).__name__}, not a bool"
    return (str(token) if accepted else REJECTED[token]), None


def probe(student, seed: int, params: dict) -> dict:
    """Call ``speculative_step`` on each draft, with its own copies of p and q and the
    generator kept in the student's process (``hold``); return the steps as plain data."""
    p, q = dists(seed)
    xs = drafts(seed, q)
    stream = int(np.random.default_rng([seed, 21]).integers(2**62))
    steps, example, error, start = [], None, None, time.monotonic()
    try:
        student.seed(stream)  # reproducible even if the sampler uses the global generators
        rng = student.hold(np.random.default_rng(stream))  # the step's own random numbers
        while len(steps) < N_DRAWS and error is None:
            batch = xs[len(steps) : len(steps) + BATCH]
            answers = student.map([(p, q, int(x), rng) for x in batch], seconds=SLOW_SECONDS)
            for answer in answers:
                if isinstance(answer, BaseException):
                    error = f"{type(answer).__name__}: {answer}"[:300]
                    break
                step, why = _step(answer, len(p))
                steps.append(step)
                example = example or why
            if error is None and time.monotonic() - start > SLOW_SECONDS:
                error = f"stopped after {len(steps)} steps in {SLOW_SECONDS:g} s: too slow"
    except Exception as err:  # noqa: BLE001 - the student's process stopped answering
        error = f"{type(err).__name__}: {err}"[:300]
    return {"steps": "".join(steps), "invalid_example": example, "error": error}


def _pair_test(first: np.ndarray, second: np.ndarray, law1, law2) -> tuple[float, int, float]:
    """Pearson's χ² of the pairs (first[i], second[i]) against independent draws of the laws."""
    cells = np.bincount(first * len(law2) + second, minlength=len(law1) * len(law2))
    return chi2_test(cells, np.outer(law1, law2).ravel())


def _p(tests: list[tuple[float, int]], regular: bool = False) -> float:
    """The upper p-value of independent χ² statistics summed; with ``regular``, the lower: how
    rarely random counts vary as little (dealt or low-discrepancy counts are too even)."""
    stat, dof = sum(s for s, _ in tests), sum(d for _, d in tests)
    upper = chi2_sf(stat, dof) if dof > 0 else 1.0
    lower = 1.0 if dof == 0 else max(0.0, 1.0 - upper)
    return lower if regular else upper


def _dispersion(outcomes: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    """Pearson's χ² summed over consecutive blocks of ``outcomes`` (indices into ``probs``) in
    which the rarest outcome is expected BLOCK_COUNT times (and MIN_BLOCK draws at least)."""
    rarest = float(probs.min())
    size = max(MIN_BLOCK, math.ceil(BLOCK_COUNT / rarest)) if rarest > 0 else len(outcomes) + 1
    blocks = outcomes[: len(outcomes) // size * size].reshape(-1, size)
    tests = [chi2_test(np.bincount(block, minlength=len(probs)), probs) for block in blocks]
    return sum(t[0] for t in tests), sum(t[1] for t in tests)


def _keep_tests(xs: np.ndarray, kept: np.ndarray, keep: np.ndarray) -> list[tuple[str, float]]:
    """(what, p-value) of the acceptance given the drafts: the rate per drafted token, pairs of
    decisions on one drafted token and in consecutive calls, the rejections' spread in blocks."""
    laws = {x: np.array([1 - keep[x], keep[x]]) for x in np.flatnonzero(keep < 1)}
    rate, same, spread = [], [], []
    for x, law in laws.items():
        d = kept[xs == x].astype(np.int64)  # 1 kept, 0 rejected
        if d.size:
            rate.append(((d.sum() - d.size * law[1]) ** 2 / (d.size * law[1] * law[0]), 1))
            if d.size > 1:
                same.append(_pair_test(d[0:-1:2], d[1::2], law, law)[:2])
            spread.append(_dispersion(d, law))
    calls = []  # steps 2i and 2i + 1, for each pair of drafted tokens that may be rejected
    d1, d2 = kept[0:-1:2].astype(np.int64), kept[1::2].astype(np.int64)
    for u, w in itertools.product(laws, laws):
        both = (xs[0:-1:2] == u) & (xs[1::2] == w)
        if both.sum() >= 2:
            calls.append(_pair_test(d1[both], d2[both], laws[u], laws[w])[:2])
    return [
        ("the rate per drafted token", _p(rate)),
        ("consecutive decisions on the same drafted token", _p(same)),
        ("the decisions of consecutive calls", _p(calls)),
        ("the spread of the rejections (too regular to be random)", _p(spread, regular=True)),
    ]


def _residual_tests(rejected: np.ndarray, residual: np.ndarray) -> list[tuple[str, float]]:
    """(what, p-value) of the residual tokens' law, of consecutive ones, and of their spread."""
    support = np.flatnonzero(residual > 0)
    r, tokens = residual[support], np.searchsorted(support, rejected)
    law = chi2_test(np.bincount(tokens, minlength=len(r)), r)[2]
    if len(r) == 1:  # a single token: nothing to deal
        return [("their law", law)]
    return [
        ("their law", law),
        ("consecutive residual tokens", _pair_test(tokens[0:-1:2], tokens[1::2], r, r)[2]),
        ("their spread (too regular to be random)", _p([_dispersion(tokens, r)], regular=True)),
    ]


def _failed(tests: list[tuple[str, float]]) -> str | None:
    """The tests (sharing FALSE_FAIL) a correct sampler would pass but these steps fail."""
    level = FALSE_FAIL / len(tests)
    bad = [f"{what} (p-value {pval:.2g})" for what, pval in tests if pval < level]
    return None if not bad else f"{', '.join(bad)} below {level:.2g}"


def _judged(result, seed: int) -> dict:
    """The seed's p, q and drafts, the steps recorded, and ``gate``: why they cannot be judged."""
    p, q = dists(seed)
    residual = np.maximum(p - q, 0.0)
    s = {"p": p, "q": q, "xs": drafts(seed, q), "residual": residual / residual.sum()}
    s.update(keep=np.minimum(1.0, p / q), alpha=float(np.minimum(p, q).sum()))
    r = Result(result)
    steps, error, example = r.get("steps"), r.get("error"), r.get("invalid_example")
    if not (isinstance(steps, str) and len(steps) <= N_DRAWS and _STEPS.fullmatch(steps)):
        return s | {"gate": "The sampler's probe returned no usable record of the steps."}
    error, invalid = error if isinstance(error, str) else "", steps.count(INVALID)
    if error or invalid or len(steps) < N_DRAWS:
        example = example if isinstance(example, str) else "?"
        why = error or f"{invalid} of {N_DRAWS} calls: {example}"
        return s | {"gate": f"speculative_step must return (token, accepted) on every call; {why}"}
    codes = np.frombuffer(steps.encode("ascii"), dtype=np.uint8).astype(np.int64)
    kept = codes < ord(REJECTED[0])
    tokens = np.where(kept, codes - ord("0"), codes - ord(REJECTED[0]))
    if tokens.max() >= len(p):
        return s | {"gate": "The sampler's probe recorded tokens outside the vocabulary."}
    swapped = np.flatnonzero(kept & (tokens != s["xs"]))
    gate = "Not judged: a step decides about the probe's draft x, and must first return it "
    gate = gate + "when it keeps it." if swapped.size else None
    return s | {"tokens": tokens, "kept": kept, "swapped": swapped, "gate": gate}


@check("a kept draft is the token returned", 1.0)
def kept_returned(s: dict):
    if "swapped" not in s:
        return 0, s["gate"]
    swapped, kept = s["swapped"], s["kept"]
    if not swapped.size:
        return 1, f"All {int(kept.sum())} kept drafts are the tokens returned."
    i = int(swapped[0])
    return 0, (
        f"{swapped.size} of the {int(kept.sum())} steps that keep their draft return another "
        f"token, e.g. the draft {int(s['xs'][i])} kept and the token {int(s['tokens'][i])} "
        "returned: a kept draft is the output (Theorem 6.11), whatever law the tokens follow."
    )


@check("a draft x is kept with probability min(1, p(x)/q(x))", 2.0)
def keep_rate(s: dict):
    if s["gate"]:
        return 0, s["gate"]
    p, q, xs, kept, keep = s["p"], s["q"], s["xs"], s["kept"], s["keep"]
    never = np.flatnonzero(~kept & (keep[xs] >= 1))
    if never.size:
        x = int(xs[never[0]])
        return False, (
            f"{never.size} drafts rejected where p(x) ≥ q(x), e.g. token {x} (p = {p[x]:.3f}, "
            f"q = {q[x]:.3f}): min(1, p(x)/q(x)) = 1 keeps it always."
        )
    n = int(kept.sum())
    rate = f"{n} of {N_DRAWS} drafts kept ({n / N_DRAWS:.3f}; 1 − TV(p, q) = {s['alpha']:.3f})"
    failed = _failed(_keep_tests(xs, kept, keep))
    return failed is None, f"Given each draft x, {rate}: " + (
        "the rate per drafted token and the independence of consecutive decisions pass."
        if failed is None
        else f"fails {failed}. Keep the draft x with probability min(1, p(x)/q(x)), "
        "with a fresh uniform from rng at each step."
    )


@check("after a rejection, tokens follow the residual (p − q)₊ normalised", 2.0)
def residual_law(s: dict):
    """Independently from one rejection to the next."""
    if s["gate"]:
        return 0, s["gate"]
    rejected = s["tokens"][~s["kept"]]
    stray = int((s["residual"][rejected] == 0).sum())
    if not rejected.size:
        return False, "No draft was ever rejected."
    if stray:
        return False, (
            f"{stray} of the {rejected.size} tokens sampled after a rejection are tokens with "
            "p ≤ q, which the residual (p − q)₊ never gives."
        )
    failed = _failed(_residual_tests(rejected, s["residual"]))
    return failed is None, f"The {rejected.size} tokens sampled after a rejection " + (
        "follow (p − q)₊ normalised, independently from one rejection to the next."
        if failed is None
        else f"fail {failed}: after a rejection, sample from (p − q)₊ divided by its sum "
        "1 − α (Theorem 6.11), with fresh numbers from rng."
    )


@check("output tokens follow the target p", 3.0)
def output_law(s: dict, premises: bool):
    """Theorem 6.11's conclusion, once its premises (the rate and the residual) hold."""
    if s["gate"] or not premises:
        return 0, s["gate"] or (
            "Not judged: the output's law is what keeping each draft at the rate min(1, "
            "p(x)/q(x)) and sampling the residual after a rejection give (Theorem 6.11); "
            "those properties fail."
        )
    stat, dof, pval = chi2_test(np.bincount(s["tokens"], minlength=len(s["p"])), s["p"])
    test = f"χ² = {stat:.1f} on {dof} degrees of freedom, p-value {pval:.2g}"
    ok = pval >= FALSE_FAIL
    return ok, f"The {N_DRAWS} output tokens " + (
        f"pass the chi-square test against p ({test} ≥ {FALSE_FAIL:g})."
        if ok
        else f"fail the chi-square test against p ({test} < {FALSE_FAIL:g}): speculative "
        "sampling must reproduce the target exactly (Theorem 6.11)."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Judge each step given its draft (redrawn from the seed), then the output's law."""
    s = _judged(result, seed)
    rate, residual = keep_rate(s), residual_law(s)
    return [output_law(s, rate.score == residual.score == 1), rate, kept_returned(s), residual]
