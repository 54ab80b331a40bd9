"""Checks of the mean part (TODO: cite the notes' item).

``probe`` runs in the probe process, beside the student's: it calls the student's
``mean_of`` on lists drawn from the grading seed and returns what came back, as plain
data.  ``grade`` runs in the trusted grader: it draws the same lists again and scores
each property.  (What a check can measure: docs/authors.md of ScaleGrade, section
"checks.py".)
"""

from __future__ import annotations

import numpy as np

ISOLATED = True  # probe() runs in the probe process; mean_of, in the student's


def lists(seed: int) -> list[list[float]]:
    """The inputs: the same in the probe process and the grader."""
    rng = np.random.default_rng([seed, 1])
    return [rng.normal(size=int(rng.integers(2, 40))).tolist() for _ in range(5)]


def probe(student, seed: int, params: dict) -> dict:
    """Call the student's function on each list, and on a list of one number."""
    out = []
    for xs in [*lists(seed), [3.5]]:
        try:
            out.append(float(student(xs)))
        except Exception as err:  # noqa: BLE001 - what the student's code raised
            out.append(f"{type(err).__name__}: {err}"[:200])
    return {"values": out}


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score the values against the mean, recomputed here."""
    from autograder.checktools import number, prop

    values = result.get("values") if isinstance(result, dict) else None
    values = values if isinstance(values, list) and len(values) == 6 else [None] * 6
    got = [number(v) for v in values]
    expected = [float(np.mean(xs)) for xs in lists(seed)]
    right = [
        g is not None and abs(g - e) <= 1e-9 + 1e-9 * abs(e)
        for g, e in zip(got[:5], expected, strict=True)
    ]
    one = got[5] is not None and got[5] == 3.5
    return [
        prop(
            "the mean of random lists",
            2.0,
            sum(right) / len(right),
            "Every list's mean is right."
            if all(right)
            else f"{len(right) - sum(right)} of {len(right)} lists get a wrong mean "
            f"(first: {values[right.index(False)]!r}): sum the values, divide by their count.",
        ),
        prop(
            "a list of one number",
            1.0,
            float(one),
            "The mean of [3.5] is 3.5." if one else f"The mean of [3.5] gave {values[5]!r}.",
        ),
    ]
