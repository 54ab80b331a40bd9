"""Checks of the majority vote code part (000 §7.2, Theorem 7.4, Exercise 14).

``probe`` runs in the probe process, beside the student's: it has the student's
``majority_vote(answers, rng)`` called on lists with a single most common answer, N_TIES
times on one list where several answers share the highest count, and N_VOTES times on
simulated runs (each right with probability q, wrong answers never coinciding), with a
generator seeded from the grading seed, in batches, and counts the answers here.
``grade`` runs in the trusted process: it redraws the lists and applies chi-square tests
of uniform tie-breaking (of the answers, and of the pairs of answers of consecutive calls,
so that ties dealt in turn are not taken for random ones) and a binomial test of the
vote's success against P(X ≥ 2) + P(X = 1)/r, each at the false-fail rate FALSE_FAIL.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

N_TIES = 3_000
N_VOTES = 4_000
FALSE_FAIL = 1e-4  # per statistical test: a correct vote fails a test this rarely
RIGHT = "right"
ISOLATED = True  # probe() runs in the probe process; majority_vote, in the student's

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def _clear(rng: np.random.Generator, i: int) -> tuple[list, object]:
    """A shuffled list whose most common answer is unique (a strict majority or not)."""
    labels: list = [str(v) for v in rng.choice(1000, 5, replace=False)]
    if i % 4 == 3:
        labels = [int(v) for v in labels]  # integer answers too
    top = int(rng.integers(2, 6))
    counts = [top] + [int(rng.integers(0, top)) for _ in range(4)]
    answers = [a for a, n in zip(labels, counts, strict=True) for _ in range(n)]
    rng.shuffle(answers)
    return answers, labels[0]


def cases(seed: int) -> dict:
    """Lists with a single winner, one tied list, and the simulated votes' parameters."""
    rng = np.random.default_rng([seed, 51])
    clear = [_clear(rng, i) for i in range(12)]
    tied = [str(v) for v in rng.choice(1000, 5, replace=False)]
    ties = [tied[0], tied[3], tied[1], tied[2], tied[0], tied[1], tied[4]]
    ties += [tied[2], tied[1], tied[0], tied[3], tied[2]]  # 3, 3, 3 (tied) and 2, 1
    n_runs = int(rng.choice([3, 5, 7]))
    q = float(rng.uniform(0.15, 0.4))
    return {
        "clear": clear,
        "ties": ties,
        "tied": tied[:3],
        "n_runs": n_runs,
        "q": q,
        "runs_seed": int(rng.integers(2**62)),
        "stream": int(rng.integers(2**62)),
    }


def _plain_answer(a):
    """The student's answer as JSON data: a str or an int (NumPy's included), else its type."""
    if isinstance(a, str):
        return str(a)
    if isinstance(a, int | np.integer) and not isinstance(a, bool | np.bool_):
        return int(a)
    return {"type": type(a).__name__}


def probe(student, seed: int, params: dict) -> dict:
    """Call ``majority_vote`` on the seed's lists; return answers and counts (plain data)."""
    c = cases(seed)
    rng = np.random.default_rng(c["stream"])  # the generator the vote is given
    out: dict = {"clear": [], "error": None}

    def votes(lists: list, times: int = 0) -> list:
        if times:  # one list, voted on ``times`` times
            answers = student.repeat((lists[0], rng), times)
        else:
            answers = student.map([(answers, rng) for answers in lists])
        for a in answers:
            if isinstance(a, BaseException):  # raised in the student's process
                raise a
        return [_plain_answer(a) for a in answers]

    try:
        student.seed(c["stream"])  # reproducible even if the global generators are used
        out["clear"] = votes([list(answers) for answers, _ in c["clear"]])
        wins: dict = {a: 0 for a in c["tied"]}
        others = 0
        order = []  # which tied answer each call gave, in call order (None: another)
        for a in votes([list(c["ties"])], N_TIES):
            if type(a) is str and a in wins:
                wins[a] += 1
                order.append(c["tied"].index(a))
            else:
                others += 1
                order.append(None)
        out["ties"] = [wins[a] for a in c["tied"]] + [others]
        pairs = [0] * 9  # calls 2i and 2i + 1: which tied answer followed which
        for first, second in zip(order[::2], order[1::2], strict=False):
            if first is not None and second is not None:
                pairs[3 * first + second] += 1
        out["pairs"] = pairs
        runs = np.random.default_rng(c["runs_seed"])
        right = runs.random((N_VOTES, c["n_runs"])) < c["q"]
        lists = [
            [RIGHT if ok else f"wrong-{v}-{j}" for j, ok in enumerate(right[v])]
            for v in range(N_VOTES)
        ]
        out["successes"] = sum(a == RIGHT for a in votes(lists))
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        out["error"] = f"{type(err).__name__}: {err}"[:300]
    return out


# --- grade (trusted) ---------------------------------------------------------------------


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Check the winners, the tie-breaking (chi-square) and the vote's success (binomial)."""
    from autograder.checktools import chi2_test, prop
    from costmodel.agents import plurality_vote_success

    c = cases(seed)
    r = result if isinstance(result, dict) else {}
    error = r.get("error") if isinstance(r.get("error"), str) else None
    props = []

    got = r.get("clear") if isinstance(r.get("clear"), list) else []
    got = (got + [None] * len(c["clear"]))[: len(c["clear"])]
    wrong = [
        (answers, a)
        for (answers, best), a in zip(c["clear"], got, strict=True)
        if not (type(a) is type(best) and a == best)
    ]
    if not wrong:
        msg = "Returns the most common answer, with or without a strict majority."
    else:
        answers, a = wrong[0]
        msg = (
            f"{len(wrong)} of {len(c['clear'])} lists with a single most common answer get "
            f"another result, e.g. {a!r} for {answers}"
            + (f" ({error})" if error and len(got) and got[-1] is None else "")
            + ": return the answer with the highest count, even without a strict majority "
            "(a plurality, Exercise 14)."
        )
    score = 1 - len(wrong) / len(c["clear"])
    props.append(prop("returns the most common answer", 2.0, score, msg))

    ties = r.get("ties")
    name = "ties broken uniformly at random"
    if not (isinstance(ties, list) and len(ties) == 4 and all(type(x) is int for x in ties)):
        why = error or "no counts"
        props.append(prop(name, 2.0, 0, f"Calling it {N_TIES} times on a tied list: {why}."))
    elif ties[3] or sum(ties) != N_TIES:
        msg = (
            f"On a list where three answers share the highest count, {ties[3]} of {N_TIES} "
            "calls returned another answer: only the most common answers may win."
        )
        props.append(prop(name, 2.0, 0, msg))
    else:
        stat, dof, pval = chi2_test(np.array(ties[:3]), np.full(3, 1 / 3))
        test = f"χ² = {stat:.1f} on {dof} degrees of freedom, p-value {pval:.2g}"
        pairs = r.get("pairs")
        if isinstance(pairs, list) and len(pairs) == 9 and all(type(x) is int for x in pairs):
            pair_stat, pair_dof, pair_p = chi2_test(np.array(pairs), np.full(9, 1 / 9))
        else:
            pair_stat, pair_dof, pair_p = math.nan, 8, 0.0
        if pval < FALSE_FAIL:
            msg = (
                f"The three tied answers win {ties[:3]} of {N_TIES} calls ({test} < "
                f"{FALSE_FAIL:g}): break ties uniformly at random with rng, not by order or "
                "value (Exercise 14 breaks ties at random)."
            )
        elif pair_p < FALSE_FAIL:
            msg = (
                f"The three tied answers win {ties[:3]} of {N_TIES} calls, but not at random: "
                f"which answer follows which on consecutive calls is far from uniform ({pairs} "
                f"for the 9 pairs; χ² = {pair_stat:.1f} on {pair_dof} degrees of freedom, "
                f"p-value {pair_p:.2g} < {FALSE_FAIL:g}). Draw each tie-break from rng, "
                "independently of the calls before, instead of dealing the tied answers in turn."
            )
        else:
            msg = f"The three tied answers win {ties[:3]} of {N_TIES} calls ({test})."
        props.append(prop(name, 2.0, min(pval, pair_p) >= FALSE_FAIL, msg))

    succ = r.get("successes")
    name = "plurality vote succeeds with P(X ≥ 2) + P(X = 1)/r"
    if type(succ) is not int or not 0 <= succ <= N_VOTES:
        props.append(prop(name, 1.0, 0, f"The simulated votes did not run: {error or 'no count'}."))
        return props
    p = plurality_vote_success(c["q"], c["n_runs"])
    z = (succ - N_VOTES * p) / math.sqrt(N_VOTES * p * (1 - p))
    z_max = NormalDist().inv_cdf(1 - FALSE_FAIL / 2)
    msg = (
        f"Over {N_VOTES} votes of r = {c['n_runs']} runs, each right with probability "
        f"{c['q']:.3f} and wrong answers never coinciding, the vote was right {succ} times, "
        f"{abs(z):.1f} standard deviations from Exercise 14's P(X ≥ 2) + P(X = 1)/r "
        f"(tolerance {z_max:.2f}, false-fail rate {FALSE_FAIL:g})"
    )
    if abs(z) > z_max:
        msg += (
            ": with a single right run every answer ties at one vote, and the right one must "
            "win 1/r of those ties"
        )
    props.append(prop(name, 1.0, abs(z) <= z_max, msg + "."))
    return props
