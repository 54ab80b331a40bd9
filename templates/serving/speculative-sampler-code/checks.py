"""Checks of the speculative sampler code part (000 §6.4, Theorem 6.11, Exercise 12).

``probe`` runs in the probe process, beside the student's.  It draws N_DRAWS draft tokens
x ~ q itself, from a generator of its own seeded from the grading seed and never handed
over, and calls the student's ``speculative_step(p, q, x, rng)`` once per draft, in
batches, with a generator ``rng`` for the step's own random numbers (the accept test and
the residual draw; its state tells nothing of the drafts to come).  It records each step
as one character: the token, and whether the draft was kept.  ``grade`` runs in the
trusted process: it redraws p, q and the drafts from the seed and judges each step GIVEN
ITS DRAFT, as Theorem 6.11's proof does: a kept draft is the token returned (exactly); the
drafts of each token x are kept at the rate min(1, p(x)/q(x)) (a binomial test per x, and
never a rejection where p(x) ≥ q(x)); after a rejection the token follows (p − q)₊
normalised (a chi-square test, and never a token where p ≤ q); then the output tokens
follow p.

Output marginals alone can be forged: the joint law of (token, accepted) can be sampled
without drafting or verifying anything (Bernoulli(α), then min(p, q)/α or the residual),
and counts can be dealt in turn or by low-discrepancy numbers so that every marginal comes
out right.  So the drafts are the probe's, the acceptance is judged per draft, and the
decisions and residual tokens are tested for independence too: pairs of consecutive
decisions (on the same drafted token, and on consecutive calls, per pair of drafted
tokens), pairs of consecutive residual tokens, and the spread of their counts in blocks of
consecutive draws (dealt counts are too even to be random).  The output's law is judged
only once the step keeps its draft, at the right rate, and samples the residual: it is the
theorem's conclusion, not a law to aim at.  (A batch's drafts reach the student's process
together; knowing the next ones tells a step nothing about how to decide on its own.)

Each property holds a correct sampler to a false-fail rate of at most FALSE_FAIL at the
fixed grading seed (its tests share it equally), so the same submission gets the same grade.
"""

from __future__ import annotations

import math
import operator
import re
import time

import numpy as np

from autograder.checklib import FALSE_FAIL, Property, Result, check, chi2_sf, chi2_test

N_DRAWS = 15_000  # steps, one per draft: about 0.5 s for a plain NumPy implementation
# FALSE_FAIL (1e-4) is per property here: a correct sampler fails a property this rarely
SLOW_SECONDS = 25.0  # a sampler slower than this for N_DRAWS steps is stopped
BATCH = 1000  # steps per round trip to the student's process
ISOLATED = True  # probe() runs in the probe process; the sampler, in the student's
REJECTED = "abcdefgh"  # a step's record: "0"…"7" a kept draft, "a"…"h" a residual token
INVALID = "?"  # a call that did not return (token, accepted)
BLOCK_COUNT = 10  # dispersion tests: the rarest outcome expected this often per block
MIN_BLOCK = 20  # and at least this many draws per block

# --- inputs: the same functions in the sandbox (probe) and the trusted process (grade) ----


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
    """The probe's N_DRAWS draft tokens x ~ q, from a stream of the grading seed that no
    argument of the student's reveals."""
    return np.random.default_rng([seed, 22]).choice(len(q), size=N_DRAWS, p=q)


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
    """Call ``speculative_step`` on each of the probe's drafts; return the steps (plain data).

    Each call gets its own copies of p and q (a step that changes them in place changes
    nothing for the next) and its draft; the generator is kept in the student's process
    (``hold``) and passed to every call by reference.
    """
    p, q = dists(seed)
    v = len(p)
    xs = drafts(seed, q)
    stream = int(np.random.default_rng([seed, 21]).integers(2**62))
    out = {"vocab": v, "steps": "", "invalid": 0, "invalid_example": None, "error": None}
    steps: list[str] = []
    start = time.monotonic()
    try:
        student.seed(stream)  # reproducible even if the sampler uses the global generators
        rng = student.hold(np.random.default_rng(stream))  # the step's own random numbers
        while len(steps) < N_DRAWS and out["error"] is None:
            batch = xs[len(steps) : len(steps) + BATCH]
            answers = student.map([(p, q, int(x), rng) for x in batch], seconds=SLOW_SECONDS)
            for answer in answers:
                if isinstance(answer, BaseException):
                    out["error"] = f"{type(answer).__name__}: {answer}"[:300]
                    break
                res = _parse(answer, v)
                if isinstance(res, str):
                    out["invalid"] += 1
                    out["invalid_example"] = out["invalid_example"] or res
                    steps.append(INVALID)
                else:
                    steps.append(str(res[0]) if res[1] else REJECTED[res[0]])
            if out["error"] is None and time.monotonic() - start > SLOW_SECONDS:
                out["error"] = f"stopped after {len(steps)} steps in {SLOW_SECONDS:g} s: too slow"
    except Exception as err:  # noqa: BLE001 - the student's process stopped answering
        out["error"] = f"{type(err).__name__}: {err}"[:300]
    out["steps"] = "".join(steps)
    return out


# --- grade (trusted) ---------------------------------------------------------------------

_STEPS = re.compile(rf"[0-7{REJECTED}{re.escape(INVALID)}]*")


def _steps(r: Result, v: int) -> tuple[np.ndarray, np.ndarray] | str:
    """(tokens, kept) of the N_DRAWS steps the probe recorded, or why there are none."""
    steps = r.get("steps")
    if not (isinstance(steps, str) and len(steps) <= N_DRAWS and _STEPS.fullmatch(steps)):
        return "The sampler's probe returned no usable record of the steps."
    error = r.get("error") if isinstance(r.get("error"), str) else None
    invalid = steps.count(INVALID)
    if error or invalid or len(steps) < N_DRAWS:
        example = r.get("invalid_example")
        example = example if isinstance(example, str) else "?"
        why = error or f"{invalid} of {N_DRAWS} calls: {example}"
        return f"speculative_step must return (token, accepted) on every call; {why}"
    codes = np.frombuffer(steps.encode("ascii"), dtype=np.uint8).astype(np.int64)
    kept = codes < ord(REJECTED[0])
    tokens = np.where(kept, codes - ord("0"), codes - ord(REJECTED[0]))
    if tokens.max() >= v:
        return "The sampler's probe recorded tokens outside the vocabulary."
    return tokens, kept


def _pairs(first: np.ndarray, second: np.ndarray, k: int) -> np.ndarray:
    """Counts of the k × k cells (first[i], second[i])."""
    return np.bincount(first * k + second, minlength=k * k)


# the p-value of independent chi-square statistics summed
def _combined(tests: list[tuple[float, int]]) -> tuple[float, int, float]:
    """Independent chi-square statistics summed: (χ², degrees of freedom, upper p-value)."""
    stat, dof = sum(s for s, _ in tests), sum(d for _, d in tests)
    return stat, dof, (chi2_sf(stat, dof) if dof > 0 else 1.0)


def _too_regular(tests: list[tuple[float, int]]) -> float:
    """The lower p-value of independent chi-square statistics summed: how rarely counts
    drawn at random vary as little as these (low-discrepancy numbers and counts dealt in
    turn keep every block of draws at its expected counts)."""
    stat, dof, upper = _combined(tests)
    return 1.0 if dof == 0 else max(0.0, 1.0 - upper)


def _blocks(size: int, rarest: float) -> int:
    """Draws per block of a dispersion test: enough for the rarest outcome to be expected
    BLOCK_COUNT times, and at least MIN_BLOCK."""
    return max(MIN_BLOCK, math.ceil(BLOCK_COUNT / rarest)) if rarest > 0 else size + 1


def _dispersion(outcomes: np.ndarray, probs: np.ndarray) -> tuple[float, int]:
    """Pearson's χ² of the counts in consecutive blocks of ``outcomes`` (indices into
    ``probs``), summed over the blocks: (χ², degrees of freedom)."""
    size = _blocks(len(outcomes), float(probs.min()))
    n = len(outcomes) // size
    stat, dof = 0.0, 0
    for block in outcomes[: n * size].reshape(n, size):
        s, d, _ = chi2_test(np.bincount(block, minlength=len(probs)), probs)
        stat, dof = stat + s, dof + d
    return stat, dof


def _keep_tests(xs: np.ndarray, kept: np.ndarray, keep: np.ndarray) -> list[tuple[str, float]]:
    """(what, p-value) of the tests of the acceptance given the drafts: the rate per
    drafted token; consecutive decisions on the same drafted token, and in consecutive
    calls (per pair of drafted tokens); the spread of the rejections in blocks."""
    rate, same, spread = [], [], []
    for x in np.flatnonzero(keep < 1):
        d = kept[xs == x].astype(np.int64)  # 1 kept, 0 rejected
        if not d.size:
            continue
        a = keep[x]
        law = np.array([1 - a, a])
        rate.append(((d.sum() - d.size * a) ** 2 / (d.size * a * (1 - a)), 1))
        m = d.size // 2 * 2
        if m:
            stat, dof, _ = chi2_test(_pairs(d[0:m:2], d[1:m:2], 2), np.outer(law, law).ravel())
            same.append((stat, dof))
        spread.append(_dispersion(d, law))
    calls = []  # steps 2i and 2i + 1, for each pair of drafted tokens that may be rejected
    x1, x2 = xs[0:-1:2], xs[1::2]
    d1, d2 = kept[0:-1:2].astype(np.int64), kept[1::2].astype(np.int64)
    for u in np.flatnonzero(keep < 1):
        for w in np.flatnonzero(keep < 1):
            both = (x1 == u) & (x2 == w)
            if both.sum() >= 2:
                law_u, law_w = np.array([1 - keep[u], keep[u]]), np.array([1 - keep[w], keep[w]])
                cells = _pairs(d1[both], d2[both], 2)
                stat, dof, _ = chi2_test(cells, np.outer(law_u, law_w).ravel())
                calls.append((stat, dof))
    return [
        ("the rate per drafted token", _combined(rate)[2]),
        ("consecutive decisions on the same drafted token", _combined(same)[2]),
        ("the decisions of consecutive calls", _combined(calls)[2]),
        ("the spread of the rejections (too regular to be random)", _too_regular(spread)),
    ]


def _residual_tests(rejected: np.ndarray, residual: np.ndarray) -> list[tuple[str, float]]:
    """(what, p-value) of the residual tokens' law, of consecutive residual tokens, and of
    their spread in blocks."""
    support = np.flatnonzero(residual > 0)
    where = np.full(len(residual), -1)
    where[support] = np.arange(len(support))
    r = residual[support]
    k = len(support)
    tokens = where[rejected]
    law = chi2_test(np.bincount(tokens, minlength=k), r)[2]
    if k == 1:  # a single token: nothing to deal
        return [("their law", law)]
    m = len(tokens) // 2 * 2
    pairs = chi2_test(_pairs(tokens[0:m:2], tokens[1:m:2], k), np.outer(r, r).ravel())[2]
    return [
        ("their law", law),
        ("consecutive residual tokens", pairs),
        ("their spread (too regular to be random)", _too_regular([_dispersion(tokens, r)])),
    ]


def _failed(tests: list[tuple[str, float]]) -> str | None:
    """The tests (sharing FALSE_FAIL) a correct sampler would pass but these steps fail."""
    level = FALSE_FAIL / len(tests)
    bad = [f"{what} (p-value {pval:.2g})" for what, pval in tests if pval < level]
    return None if not bad else f"{', '.join(bad)} below {level:.2g}"


def _judged(result, seed: int) -> dict:
    """The seed's p, q and drafts, the steps recorded, and why they cannot be judged
    (``gate``: no usable record, or a kept draft that is not the token returned)."""
    p, q = dists(seed)
    residual = np.maximum(p - q, 0.0)
    s = {"p": p, "q": q, "xs": drafts(seed, q), "residual": residual / residual.sum()}
    s.update(keep=np.minimum(1.0, p / q), alpha=float(np.minimum(p, q).sum()))
    steps = _steps(Result(result), len(p))
    if isinstance(steps, str):
        return {**s, "unread": steps, "gate": steps}
    s["tokens"], s["kept"] = steps
    s["swapped"] = np.flatnonzero(s["kept"] & (s["tokens"] != s["xs"]))
    gate = (
        "Not judged: a step decides about the probe's draft x, and must first return it "
        "when it keeps it."
    )
    return {**s, "unread": None, "gate": gate if s["swapped"].size else None}


@check("a kept draft is the token returned", 1.0)
def kept_returned(s: dict):
    """Exactly, on every step."""
    if s["unread"]:
        return 0, s["unread"]
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
    """Each draft x kept with probability min(1, p(x)/q(x)), independently."""
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
    """After a rejection: the residual, independently."""
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
    """Theorem 6.11's conclusion, once its premises (the two properties above) hold."""
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
