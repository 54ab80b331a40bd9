"""A simulated cohort, graded by the real comparison: is a question fair before anyone
sees a variant?  (`scalegrade validate ASSIGNMENT --cohort N`)

Each simulated student has an ability theta ~ N(0, 1), drawn independently of their
numbers, and answers each asked part right with probability 1 / (1 + exp(-1.7 theta)),
writing the key in the asked unit to three significant figures (a whole number, such as a
count, as it is), as students do.
A wrong answer is one of the part's declared misconceptions when it has any (half the
time), else the other answer of a yes/no, the next whole number of a small count, or the
key off by a factor between 1.5 and 4.  Every answer is graded by
:func:`autograder.grading.grade.grade_harvest`, tolerances, units and carried credit included, and
the cohort's standings go through the item analysis and the per-parameter attribution.
Nothing in the model depends on a parameter, so a part flagged here is unfair by its own
making: a misconception that equals the key for some draws, a tolerance that three
significant figures miss for some, carried credit that some draws make free.

This module knows both sides (the generator's variants and the grader's comparison), as
:mod:`scalegrade.demo` does; neither side imports it.
"""

from __future__ import annotations

import math
import random

from autograder.analysis.item_report import Analysis, analysis
from autograder.grading.grade import StudentResult, grade_harvest
from autograder.semester.gradebook import result_to_json
from contract import Key, Student, unit_factor
from generator.assignment import Assignment
from generator.release import student_key, variants_for

SECRET = b"scalegrade-simulated-cohort"


def _written(value: float) -> float:
    """A value as a student writes it: a whole number as it is (a count, a batch size),
    anything else to three significant figures."""
    if abs(value) < 1e15 and abs(value - round(value)) < 1e-9:
        return float(round(value))
    return float(f"{value:.3g}")


def _wrong(key: float, rng: random.Random) -> float:
    """A wrong answer: the other answer of a yes/no (1/0), the next whole number of a
    small count or stage, else the key off by a factor between 1.5 and 4."""
    if key in (0, 1):
        return 1 - key
    if abs(key - round(key)) < 1e-9 and 0 <= key <= 10:
        return key + rng.choice((-1, 1))
    return key * rng.uniform(1.5, 4)


def answered(
    assignment: Assignment, students: list[Student], *, secret: bytes = SECRET, seed: int = 0
) -> tuple[list[StudentResult], dict[str, Key]]:
    """The students' keys (as a release with ``secret`` makes them) and their answers,
    drawn as the module says and graded by the real comparison."""
    rng = random.Random(seed)
    results, keys = [], {}
    for student in students:
        key = student_key(assignment, student, variants_for(assignment, student, secret))
        keys[student.id] = key
        right = 1 / (1 + math.exp(-1.7 * rng.gauss(0, 1)))
        answers = {}
        for q in key.questions:
            for a in q.answers:
                if not a.ask:
                    continue
                if rng.random() < right:
                    value = a.display_value
                elif a.misconceptions and rng.random() < 0.5:
                    value = rng.choice(a.misconceptions).value / unit_factor(a.unit, a.si_unit)
                else:
                    value = _wrong(a.display_value, rng)
                answers[a.variable] = {"kind": "number", "value": _written(value)}
        results.append(
            grade_harvest(
                key,
                {"answers": answers, "probes": {}, "cells": []},
                policy=assignment.policy,
                checks={},
                reveal=False,
            )
        )
    return results, keys


def simulate(assignment: Assignment, n: int, seed: int = 0) -> Analysis:
    """Release ``assignment`` to ``n`` simulated students (keys only, in memory), answer
    it as the module says, grade it, and analyse it."""
    students = [Student(id=f"sim{i:04d}", name=f"Simulated {i}") for i in range(n)]
    results, keys = answered(assignment, students, seed=seed)
    return analysis([result_to_json(r) for r in results], keys)
