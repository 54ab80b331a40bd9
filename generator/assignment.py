"""An assignment: ``assignments/<course>/<id>.yaml`` lists questions, points and policy."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from course_config import COURSES, Course, Policy
from generator.question import Question, QuestionError, load_by_id

ASSIGNMENTS = Path(__file__).resolve().parent.parent / "assignments"


class AssignmentError(ValueError):
    """An assignment file that does not follow the format, or names a missing question."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Item(_Model):
    question: str  # folder under templates/
    points: float | None = Field(default=None, gt=0)  # scales the parts' points to this total


class PolicySpec(_Model):
    ecf: bool | None = None
    ecf_credit: float | None = Field(default=None, ge=0, le=1)
    late_penalty_per_day: float | None = Field(default=None, ge=0, le=1)
    late_days_max: int | None = Field(default=None, ge=0)
    solutions_after_due: bool | None = None


class AssignmentSpec(_Model):
    title: str
    kind: Literal["homework", "exam", "selftest"]
    notebook: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    due: datetime | None = None
    duration_minutes: int | None = Field(default=None, gt=0)
    policy: PolicySpec = Field(default_factory=PolicySpec)
    questions: list[Item] = Field(min_length=1)


class Assignment:
    def __init__(self, aid: str, course: Course, spec: AssignmentSpec, questions: list[Question]):
        self.id = aid  # "tdlsm/hw1"
        self.course = course
        self.spec = spec
        self.questions = questions
        overrides = spec.policy.model_dump(exclude_none=True)
        self.policy: Policy = replace(course.policy, **overrides)

    @property
    def short_id(self) -> str:
        return self.id.split("/", 1)[1]

    def scale(self, index: int) -> float:
        """Factor applied to question ``index``'s part points (1 unless the YAML sets points)."""
        item, q = self.spec.questions[index], self.questions[index]
        return item.points / q.points if item.points else 1.0

    @property
    def points(self) -> float:
        return sum(q.points * self.scale(i) for i, q in enumerate(self.questions))


def load(aid: str, root: Path = ASSIGNMENTS) -> Assignment:
    """Load ``course/id`` (e.g. ``tdlsm/hw1``) and every question it lists."""
    course_id, sep, short = aid.partition("/")
    if not sep or not short or "/" in short:
        raise AssignmentError(f"{aid!r}: name an assignment as COURSE/ID, e.g. tdlsm/hw1")
    if course_id not in COURSES:
        raise AssignmentError(
            f"{aid!r}: unknown course {course_id!r} (courses: {', '.join(COURSES)})"
        )
    path = root / course_id / f"{short}.yaml"
    if not path.is_file():
        have = sorted(p.stem for p in (root / course_id).glob("*.yaml"))
        raise AssignmentError(
            f"{path}: no such assignment (course {course_id} has: {', '.join(have) or 'none'})"
        )
    try:
        spec = AssignmentSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise AssignmentError(f"{path}: {loc}: {first['msg']}") from None
    except yaml.YAMLError as err:
        raise AssignmentError(f"{path}: not valid YAML ({err})") from None
    questions = []
    for i, item in enumerate(spec.questions):
        try:
            questions.append(load_by_id(item.question))
        except QuestionError as err:
            raise AssignmentError(f"{path}: questions.{i}: {err}") from None
    return Assignment(aid, COURSES[course_id], spec, questions)


def all_ids(root: Path = ASSIGNMENTS) -> list[str]:
    return sorted(f"{p.parent.name}/{p.stem}" for p in root.glob("*/*.yaml"))
