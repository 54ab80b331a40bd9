"""Checks of the majority vote code part (000 §7.2, Theorem 7.4, Exercise 14).

Each call gets a tie-breaker ``choose`` of the probe's, which draws from a generator never
handed over and logs what it is asked, and is judged exactly on the list and the draw it was
served: a law matched at the output (ties dealt in turn, or drawn from the student's own
generator) is not what is measured, and no statistical test is needed.
"""

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


def _shuffled(rng: np.random.Generator, i: int, tied: bool) -> list:
    """A shuffled list whose most common answer is unique (a strict majority or not), or shared
    by two to four answers (1 to 4 votes), beside answers with fewer; ints in every fourth."""
    size = 7 if tied else 5
    labels = [int(v) if i % 4 == 3 else str(v) for v in rng.choice(1000, size, replace=False)]
    n_top = int(rng.integers(2, 5)) if tied else 1
    top = int(rng.integers(1, 5)) if tied else int(rng.integers(2, 6))
    counts = [top] * n_top + [int(rng.integers(0, top)) for _ in range(size - n_top)]
    answers = [a for a, n in zip(labels, counts, strict=True) for _ in range(n)]
    rng.shuffle(answers)
    return answers


def cases(seed: int) -> dict:
    """The lists of each kind, the simulated votes' parameters, the global generators' seed."""
    rng = np.random.default_rng([seed, 51])
    clear = [_shuffled(rng, i, tied=False) for i in range(N_CLEAR)]
    tied = [_shuffled(rng, i, tied=True) for i in range(N_TIED)]
    n_runs, q = int(rng.choice([3, 5, 7])), float(rng.uniform(0.15, 0.4))
    right = np.random.default_rng([seed, 52]).random((N_VOTES, n_runs)) < q
    votes = [
        [RIGHT if ok else f"wrong-{v}-{j}" for j, ok in enumerate(right[v])] for v in range(N_VOTES)
    ]
    stream = int(rng.integers(2**62))
    return dict(clear=clear, tied=tied, votes=votes, n_runs=n_runs, q=q, stream=stream)


def _plain_answer(a):
    """An answer as JSON data: a str or an int (NumPy's too), else its type or what it raised."""
    if isinstance(a, BaseException):  # raised in the student's process
        return {"raised": f"{type(a).__name__}: {a}"[:200]}
    if isinstance(a, str):
        return str(a) if len(a) <= MAX_CHARS else {"type": "str", "chars": len(a)}
    if isinstance(a, int | np.integer) and not isinstance(a, bool | np.bool_):
        return int(a)
    return {"type": type(a).__name__}


class TieBreaker:
    """One vote's ``choose``: one of the answers given, drawn from the probe's generator; logged."""

    def __init__(self, gen: np.random.Generator):
        self._gen = gen
        self._log: list = []  # [answers given, index drawn], or None for a malformed call

    def __call__(self, candidates):
        if len(self._log) >= MAX_ASKS:
            self._log.append(None)
            raise RuntimeError(f"the tie-breaker was asked {MAX_ASKS} times in one vote")
        a_list = isinstance(candidates, list | tuple) and 0 < len(candidates) <= MAX_CANDIDATES
        if not a_list or not all(type(c) in (str, int) for c in candidates):
            self._log.append(None)
            raise TypeError("choose takes a non-empty list of the tied answers")
        i = int(self._gen.integers(len(candidates)))
        self._log.append([[_plain_answer(c) for c in candidates], i])
        return candidates[i]


def probe(student, seed: int, params: dict) -> dict:
    """Each call's answer, and what its tie-breaker (one for each call) was asked."""
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


def _show(x, limit: int = 120) -> str:
    """A recorded value (plain data) for a message, cut to ``limit`` characters."""
    text = repr(x)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _wrong(answers: list, rec: Result) -> str | None:
    """Why the call on ``answers`` (its record ``rec``) is not the vote, or None if it is."""
    counts = Counter(answers)
    tied = [a for a, n in counts.items() if n == max(counts.values())]
    got, asked = rec.get("answer"), rec.get("asked")
    if not isinstance(asked, list):
        return "no record of the call"
    if isinstance(got, dict) and isinstance(got.get("raised"), str):
        return f"raised {_show(got['raised'])}"
    if len(asked) > 1:
        return f"the tie-breaker was asked {len(asked)} times (once per tie)"
    expected, how = tied[0], "the most common answer"
    if asked:  # [answers given, index drawn], as the probe logs it
        given, pick = asked[0] if isinstance(asked[0], list) and len(asked[0]) == 2 else ([], 0)
        answers_given = isinstance(given, list) and all(type(x) in (str, int) for x in given)
        if not answers_given or type(pick) is not int or not 0 <= pick < len(given):
            return "choose was called with something other than a list of answers"
        weights = Counter((type(x).__name__, x) for x in given)
        if set(weights) != {(type(a).__name__, a) for a in tied} or len(set(weights.values())) != 1:
            return f"choose was given {_show(given)}, but the most common answers are {tied}"
        expected, how = given[pick], "the tie-breaker's pick"
    elif len(tied) > 1:
        return f"{len(tied)} answers share the highest count, and choose was never asked"
    if type(got) is not type(expected) or got != expected:
        return f"returned {_show(got, 60)}, not {expected!r}, {how}"
    return None


def _judged(r: Result, c: dict, kind: str) -> tuple[int, str]:
    """How many calls of ``kind`` are not the vote, and the first: "e.g. [list]: why"."""
    recs = zip(c[kind], r.parts(kind, len(c[kind])), strict=True)
    wrong = [(a, why) for a, rec in recs if (why := _wrong(a, rec))]
    error = r.get("error")
    cut = f" (the calls stopped: {error})" if isinstance(error, str) and error else ""
    return len(wrong), f"e.g. {wrong[0][0]}: {wrong[0][1]}{cut}" if wrong else ""


@check("returns the most common answer", 2.0)
def most_common(r: Result, c: dict):
    wrong, eg = _judged(r, c, "clear")
    if not wrong:
        return 1.0, "Returns the most common answer, with or without a strict majority."
    return 1 - wrong / N_CLEAR, (
        f"{wrong} of {N_CLEAR} lists with a single most common answer get another result, "
        f"{eg}. Return the answer with the highest count, even without a strict majority "
        "(a plurality, Exercise 14)."
    )


@check("ties broken by the tie-breaker, among the most common", 2.0)
def ties(r: Result, c: dict):
    wrong, eg = _judged(r, c, "tied")
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

    wrong, eg = _judged(r, c, "votes")
    right = sum(v.get("answer") == RIGHT for v in r.parts("votes")[:N_VOTES])  # JSON: a str
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
    r, c = Result(result), cases(seed)
    return [most_common(r, c), ties(r, c), plurality(r, c)]
