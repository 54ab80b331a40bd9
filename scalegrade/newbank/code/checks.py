"""Checks of the mean part (TODO: cite the notes' item).

``probe`` runs in the probe process, beside the student's: it calls the student's
``mean_of`` on lists drawn from the grading seed and returns what came back, as plain
data.  ``grade`` runs in the trusted grader: it draws the same lists again and scores
each property.  (What a check can measure: docs/authors.md of ScaleGrade, section
"checks.py".)
"""

from __future__ import annotations

import numpy as np

from autograder.checklib import Result, check, expect_close, notes, share


def lists(seed: int) -> list[list[float]]:
    """The inputs: the same in the probe process and the grader."""
    rng = np.random.default_rng([seed, 1])
    return [rng.normal(size=int(rng.integers(2, 40))).tolist() for _ in range(5)]


def probe(student, seed: int, params: dict) -> dict:
    """Call the student's function on each list (one round trip), and on a list of one
    number; each call's record (its value, or what it raised) goes to the grader."""
    return {
        "random": student.calls([(xs,) for xs in lists(seed)]),
        "one": student.call([3.5]),
    }


@check("the mean of random lists", 2.0)
def random_lists(r: Result, seed: int):
    verdicts = [
        expect_close(rec, np.mean(xs), what=f"list {i + 1} ({len(xs)} values): the mean")
        for i, (xs, rec) in enumerate(zip(lists(seed), r.records("random", 5), strict=True))
    ]
    if all(verdicts):
        return 1.0, "Every list's mean is right."
    return share(verdicts), notes(verdicts) + ": sum the values, divide by their count."


@check("a list of one number", 1.0)
def one_number(r: Result, seed: int):
    v = expect_close(r.record("one"), 3.5, what="the mean of [3.5]")
    return v.ok, "The mean of [3.5] is 3.5." if v else v.why + "."


def grade(result: dict, seed: int, params: dict) -> list:
    """Score the values against the mean, recomputed here."""
    r = Result(result)
    return [random_lists(r, seed), one_number(r, seed)]
