"""Checks of the majority vote code part (000 §7.2, Theorem 7.4, Exercise 14).

``probe`` runs in the probe process, beside the student's: it has the student's
``majority_vote(answers, choose)`` called on lists drawn from the grading seed: lists with
a single most common answer (with or without a strict majority), lists where several
answers share the highest count, and N_VOTES simulated votes of Exercise 14 (r runs, each
right with probability q, wrong answers never coinciding).  Each call gets a tie-breaker
``choose`` of its own, an object of the probe's: the student's code calls it with the tied
answers and it returns one of them, drawn uniformly at random from the probe's own
generator (never handed over), logging what it was given and what it gave.

``grade`` runs in the trusted process: it redraws the lists and judges each call on the
list served and the draw served, exactly: the answer returned is the most common one;
where several tie, the tie-breaker was asked once, with exactly those answers, and its
pick is the answer returned.  A law matched at the output (ties dealt in turn, drawn from
a generator of the student's own, randomised only where the check looks) is no longer
what is measured, and no statistical test is needed: the tie-breaker's draws are uniform
by construction, so a vote that uses them succeeds with P(X ≥ 2) + P(X = 1)/r.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from autograder.checklib import Property, Result, check

N_CLEAR = 12  # lists with a single most common answer
N_TIED = 40  # lists where two to four answers share the highest count
N_VOTES = 300  # simulated votes of Exercise 14
RIGHT = "right"
MAX_ASKS = 4  # tie-breaker calls logged per vote; more are refused
MAX_CANDIDATES = 64  # answers the tie-breaker takes at once
MAX_CHARS = 100  # an answer longer than this is recorded by its type only
ISOLATED = True  # probe() runs in the probe process; majority_vote, in the student's

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def _clear(rng: np.random.Generator, i: int) -> list:
    """A shuffled list whose most common answer is unique (a strict majority or not)."""
    labels: list = [str(v) for v in rng.choice(1000, 5, replace=False)]
    if i % 4 == 3:
        labels = [int(v) for v in labels]  # integer answers too
    top = int(rng.integers(2, 6))
    counts = [top] + [int(rng.integers(0, top)) for _ in range(4)]
    answers = [a for a, n in zip(labels, counts, strict=True) for _ in range(n)]
    rng.shuffle(answers)
    return answers


def _tied(rng: np.random.Generator, i: int) -> list:
    """A shuffled list where two to four answers share the highest count (1 to 4 votes),
    beside up to three answers with fewer."""
    labels: list = [str(v) for v in rng.choice(1000, 7, replace=False)]
    if i % 4 == 3:
        labels = [int(v) for v in labels]
    tied, top = int(rng.integers(2, 5)), int(rng.integers(1, 5))
    counts = [top] * tied + [int(rng.integers(0, top)) for _ in range(7 - tied)]
    answers = [a for a, n in zip(labels, counts, strict=True) for _ in range(n)]
    rng.shuffle(answers)
    return answers


def cases(seed: int) -> dict:
    """The lists of each kind, the simulated votes' parameters, and the streams: the
    global generators' seed, and the tie-breaker's (the probe's own)."""
    rng = np.random.default_rng([seed, 51])
    clear = [_clear(rng, i) for i in range(N_CLEAR)]
    tied = [_tied(rng, i) for i in range(N_TIED)]
    n_runs = int(rng.choice([3, 5, 7]))
    q = float(rng.uniform(0.15, 0.4))
    right = np.random.default_rng([seed, 52]).random((N_VOTES, n_runs)) < q
    votes = [
        [RIGHT if ok else f"wrong-{v}-{j}" for j, ok in enumerate(right[v])] for v in range(N_VOTES)
    ]
    return {
        "clear": clear,
        "tied": tied,
        "votes": votes,
        "n_runs": n_runs,
        "q": q,
        "stream": int(rng.integers(2**62)),
    }


def _plain_answer(a):
    """An answer as JSON data: a str or an int (NumPy's included), else its type (or what
    the call raised)."""
    if isinstance(a, BaseException):  # raised in the student's process
        return {"raised": f"{type(a).__name__}: {a}"[:200]}
    if isinstance(a, str):
        return str(a) if len(a) <= MAX_CHARS else {"type": "str", "chars": len(a)}
    if isinstance(a, int | np.integer) and not isinstance(a, bool | np.bool_):
        return int(a)
    return {"type": type(a).__name__}


class TieBreaker:
    """One vote's ``choose``: one of the answers it is given, uniformly at random from the
    probe's generator; it logs what it was given and the index it drew."""

    def __init__(self, gen: np.random.Generator):
        self._gen = gen
        self._log: list = []  # [answers given, index drawn], or None for a malformed call

    def __call__(self, candidates):
        if len(self._log) >= MAX_ASKS:
            self._log.append(None)
            raise RuntimeError(f"the tie-breaker was asked {MAX_ASKS} times in one vote")
        if not (
            isinstance(candidates, list | tuple)
            and 0 < len(candidates) <= MAX_CANDIDATES
            and all(type(c) in (str, int) for c in candidates)
        ):
            self._log.append(None)
            raise TypeError("choose takes a non-empty list of the tied answers")
        given = [_plain_answer(c) for c in candidates]
        i = int(self._gen.integers(len(candidates)))
        self._log.append([given, i])
        return candidates[i]


def probe(student, seed: int, params: dict) -> dict:
    """Call ``majority_vote`` on the seed's lists, each with a tie-breaker of its own;
    return each call's answer and what its tie-breaker was asked (plain data)."""
    c = cases(seed)
    gen = np.random.default_rng([seed, 53])  # the tie-breakers' draws: never handed over
    out: dict = {"error": None}
    try:
        student.seed(c["stream"])  # reproducible even if the global generators are used
        for kind in ("clear", "tied", "votes"):
            breakers = [TieBreaker(gen) for _ in c[kind]]
            answers = student.map([(list(a), b) for a, b in zip(c[kind], breakers, strict=True)])
            out[kind] = [
                {"answer": _plain_answer(a), "asked": b._log}
                for a, b in zip(answers, breakers, strict=True)
            ]
    except Exception as err:  # noqa: BLE001 - the student's process stopped answering
        out["error"] = f"{type(err).__name__}: {err}"[:300]
    return out


# --- grade (trusted) ---------------------------------------------------------------------


def _show(x, limit: int = 120) -> str:
    """A recorded value (plain data) for a message, cut to ``limit`` characters."""
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def _key(a) -> tuple:
    return (type(a).__name__, a)


def _wrong(answers: list, rec: Result) -> str | None:
    """Why the call on ``answers`` (its record ``rec``) is not the vote, or None if it is."""
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    got, asked = rec.get("answer"), rec.get("asked")
    if not isinstance(asked, list):
        return "no record of the call"
    if isinstance(got, dict) and isinstance(got.get("raised"), str):
        return f"raised {_show(got['raised'])}"
    if len(asked) > 1:
        return f"the tie-breaker was asked {len(asked)} times (once per tie)"
    if asked:
        entry = asked[0]
        if not (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], list)
            and entry[0]
            and all(type(x) in (str, int) for x in entry[0])
            and type(entry[1]) is int
            and 0 <= entry[1] < len(entry[0])
        ):
            return "choose was called with something other than a list of answers"
        given, pick = entry
        weights = Counter(_key(x) for x in given)
        if set(weights) != {_key(a) for a in tied} or len(set(weights.values())) != 1:
            return f"choose was given {_show(given)}, but the most common answers are {tied}"
        expected = given[pick]
    elif len(tied) > 1:
        return f"{len(tied)} answers share the highest count, and choose was never asked"
    else:
        expected = tied[0]
    if not _same(got, expected):
        how = "the tie-breaker's pick" if asked else "the most common answer"
        return f"returned {_show(got, 60)}, not {expected!r}, {how}"
    return None


def _judged(r: Result, kind: str, lists: list) -> tuple[int, str]:
    """How many calls of ``kind`` are not the vote, and the first: "e.g. [list]: why"."""
    recs = zip(lists, r.parts(kind, len(lists)), strict=True)
    wrong = [(a, why) for a, rec in recs if (why := _wrong(a, rec))]
    error = r.get("error")
    cut = f" (the calls stopped: {error})" if isinstance(error, str) and error else ""
    return len(wrong), f"e.g. {wrong[0][0]}: {wrong[0][1]}{cut}" if wrong else ""


@check("returns the most common answer", 2.0)
def most_common(r: Result, c: dict):
    wrong, eg = _judged(r, "clear", c["clear"])
    if not wrong:
        return 1.0, "Returns the most common answer, with or without a strict majority."
    return 1 - wrong / N_CLEAR, (
        f"{wrong} of {N_CLEAR} lists with a single most common answer get another result, "
        f"{eg}. Return the answer with the highest count, even without a strict majority "
        "(a plurality, Exercise 14)."
    )


@check("ties broken by the tie-breaker, among the most common", 2.0)
def ties(r: Result, c: dict):
    wrong, eg = _judged(r, "tied", c["tied"])
    if not wrong:
        return True, (
            f"On the {N_TIED} lists where several answers tie, asks the tie-breaker once, with "
            "the tied answers, and returns its pick."
        )
    return False, (
        f"{wrong} of {N_TIED} lists where several answers share the highest count are not "
        f"decided by the tie-breaker, {eg}. Call choose once, with the tied answers, and "
        "return its pick (Exercise 14 breaks ties uniformly at random)."
    )


@check("plurality vote succeeds with P(X ≥ 2) + P(X = 1)/r", 1.0)
def plurality(r: Result, c: dict):
    from costmodel.agents import plurality_vote_success  # grade side only

    wrong, eg = _judged(r, "votes", c["votes"])
    right = sum(_same(v.get("answer"), RIGHT) for v in r.parts("votes")[:N_VOTES])
    p = plurality_vote_success(c["q"], c["n_runs"])
    msg = (
        f"Over {N_VOTES} votes of r = {c['n_runs']} runs, each right with probability "
        f"{c['q']:.3f} and wrong answers never coinciding, the vote was right {right} times "
        f"(Exercise 14's P(X ≥ 2) + P(X = 1)/r = {p:.3f} expects {N_VOTES * p:.0f})"
    )
    if wrong:
        msg += (
            f"; {wrong} votes are not the plurality with the tie-breaker's pick, {eg}. With a "
            "single right run every answer ties at one vote, and the right one must win 1/r "
            "of those ties: ask choose"
        )
    return not wrong, msg + "."


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Judge every call on the list and the tie-breaker's draw it was served."""
    r, c = Result(result), cases(seed)
    return [most_common(r, c), ties(r, c), plurality(r, c)]
