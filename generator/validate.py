"""Stress-test an assignment: draw N students' variants and check every one of them.

Each variant: finite keys of the right sign, in the author's plausible range, equal to
the sympy closed form; no asked key printed in the student's question, and none that needs
no work (0, 1, a given number) unless its part says why (``guessable``): the draw is made
again when one does, so a failure here is a rule broken (:mod:`generator.leaks`).
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
                if why := given_away.get((k.id, "printed")):
                    stats.leaked.append(f"{v.student_id}: {why}")
                if why := given_away.get((k.id, "no work")):
                    stats.guessed.append(f"{v.student_id}: {why}")
                # within the key's own tolerance: a student with it is graded correct
                report.misconceptions_hidden += sum(
                    within(m.value, k.value, k) for m in k.misconceptions
                )
        report.distinct = len(fingerprints)
        for stats in report.answers.values():
            key = next(a for a in v.answers if a.id == stats.id) if report.variants else None
            stats.choice = key is not None and is_choice(stats.values, key)
            # build() draws again rather than give a part away: one here is a rule broken
            report.failures += [f"templates/{q.id}: {x} (printed)" for x in stats.leaked[:3]]
            report.failures += [f"templates/{q.id}: {x} (no work)" for x in stats.guessed[:3]]
        reports.append(report)
    return reports
