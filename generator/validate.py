"""Stress-test an assignment: draw N students' variants and check every one of them.

Each variant: finite keys of the right sign, in the author's plausible range, equal to
the sympy closed form; no asked key printed in the student's question, and none that needs
no work (0, 1, a given number) unless its part says why (``guessable``): the draw is made
again when one does, so a failure here is a rule broken (:mod:`generator.leaks`).

Two kinds of guessable answer are counted, not failed, for the author to constrain:

- a small whole number (2 to 12) where the answer is not a count (it has a unit): a
  student who writes a round number is right too often;
- an answer that barely varies across draws: the share of the draws whose key is within
  tolerance of the median draw's key ("fits others"); above one half, one student's
  answer is most others' too, and the per-student numbers protect nothing.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field

from contract import within
from generator.assignment import Assignment
from generator.checks import symbolic_checked, variant_problems
from generator.leaks import is_choice
from generator.variant import VariantError, build, giveaways

VALIDATION_SECRET = b"scalegrade-validate-synthetic-roster"


@dataclass
class AnswerStats:
    id: str
    unit: str
    values: list[float] = field(default_factory=list)
    symbolic: int = 0  # variants whose key was recomputed through a closed form
    guessed: list[str] = field(default_factory=list)  # "student00012: x = 1"
    leaked: list[str] = field(default_factory=list)  # "student00012: x = the derived ..."
    ask: bool = True
    choice: bool = False  # a few whole numbers (yes/no, a stage): guessable by its format
    declared: str | None = None  # the part's own `guessable:` reason, when it has one
    keys: list = field(default_factory=list)  # the drawn keys (contract.Answer)
    small_integer: int = 0  # draws whose key is a whole number 2..12 with a unit
    fits_others: float = 0.0  # share of draws within tolerance of the median draw's key

    def summary(self) -> tuple[float, float, float]:
        return min(self.values), statistics.median(self.values), max(self.values)


@dataclass
class QuestionReport:
    question: str
    variants: int = 0
    distinct: int = 0
    failures: list[str] = field(default_factory=list)
    answers: dict[str, AnswerStats] = field(default_factory=dict)
    misconceptions_hidden: int = 0  # a misconception equal to the key, so it cannot be told apart

    @property
    def ok(self) -> bool:
        return not self.failures


FITS_OTHERS = 0.5  # above this share, one student's answer is most others' too
SMALL_INTEGERS = 0.1  # a round guess right in more than this share of the draws: noted


def barely_varies(keys: list) -> float:
    """The share of the drawn keys within tolerance of the median draw's key (by the
    grader's own rule, :func:`contract.within`)."""
    if not keys:
        return 0.0
    middle = sorted(keys, key=lambda k: k.value)[len(keys) // 2]
    return sum(within(k.value, middle.value, middle) for k in keys) / len(keys)


def validate(assignment: Assignment, n_students: int) -> list[QuestionReport]:
    """Draw ``n_students`` synthetic students' variants of every question and check them."""
    reports = []
    for i, q in enumerate(assignment.questions, start=1):
        report = QuestionReport(q.id)
        fingerprints = set()
        for s in range(n_students):
            try:
                v = build(
                    q,
                    secret=VALIDATION_SECRET,
                    course=assignment.course.id,
                    assignment=assignment.short_id,
                    student=f"student{s:05d}",
                    index=i,
                    default_tolerance=assignment.course.default_tolerance,
                )
            except (VariantError, ValueError) as err:
                report.failures.append(str(err))
                continue
            report.variants += 1
            fingerprints.add(json.dumps(v.params, sort_keys=True))
            report.failures += variant_problems(v)
            given_away = {(aid, kind): why for aid, kind, why in giveaways(q, v)}
            for k in v.answers:
                stats = report.answers.setdefault(k.id, AnswerStats(k.id, k.unit, ask=k.ask))
                stats.values.append(k.display_value)
                stats.symbolic += symbolic_checked(k)
                if not k.ask:
                    continue
                stats.keys.append(k)
                x = k.display_value
                stats.small_integer += bool(k.unit) and 2 <= x <= 12 and abs(x - round(x)) < 1e-9
                if why := given_away.get((k.id, "printed")):
                    stats.leaked.append(f"{v.student_id}: {why}")
                if why := given_away.get((k.id, "no work")):
                    stats.guessed.append(f"{v.student_id}: {why}")
                # within the key's own tolerance: a student with it is graded correct
                report.misconceptions_hidden += sum(
                    within(m.value, k.value, k) for m in k.misconceptions
                )
        report.distinct = len(fingerprints)
        for a in q.spec.answers:
            if a.id in report.answers:
                report.answers[a.id].declared = a.guessable
        for stats in report.answers.values():
            key = next(a for a in v.answers if a.id == stats.id) if report.variants else None
            stats.choice = key is not None and is_choice(stats.values, key)
            stats.fits_others = barely_varies(stats.keys)
            # build() draws again rather than give a part away: one here is a rule broken
            report.failures += [f"templates/{q.id}: {x} (printed)" for x in stats.leaked[:3]]
            report.failures += [f"templates/{q.id}: {x} (no work)" for x in stats.guessed[:3]]
        reports.append(report)
    return reports
