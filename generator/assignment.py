"""An assignment: ``assignments/<course>/<id>.yaml`` of a bank lists questions, points, policy."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contract import Policy
from generator.course import Course
from generator.question import Question, QuestionError, shown_path


class AssignmentError(ValueError):
    """An assignment file that does not follow the format, or names a missing question."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Item(_Model):
    question: str  # folder under templates/
    points: float | None = Field(default=None, gt=0)  # scales the parts' points to this total


class AssignmentSpec(_Model):
    title: str
    kind: Literal["homework", "exam", "selftest"]
    notebook: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    due: datetime | None = None
    duration_minutes: int | None = Field(default=None, gt=0)
    policy: dict[str, Any] = Field(default_factory=dict)  # overrides the course's Policy
    questions: list[Item] = Field(min_length=1)


class Assignment:
    def __init__(
        self,
        aid: str,
        course: Course,
        spec: AssignmentSpec,
        questions: list[Question],
        policy: Policy,
    ):
        self.id = aid  # "tdlsm/hw1"
        self.course = course
        self.spec = spec
        self.questions = questions
        self.policy: Policy = policy

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


def _first_error(err: ValidationError, prefix: str = "") -> str:
    first = err.errors()[0]
    return f"{prefix}{'.'.join(str(x) for x in first['loc'])}: {first['msg']}"


def load(aid: str, path: Path, course: Course, question: Callable[[str], Question]) -> Assignment:
    """Load the assignment ``aid`` (``tdlsm/hw1``) of ``course`` from ``path``, each question
    it lists through ``question`` (the bank's loader)."""
    where = shown_path(path)
    try:
        spec = AssignmentSpec.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    except ValidationError as err:
        raise AssignmentError(f"{where}: {_first_error(err)}") from None
    except yaml.YAMLError as err:
        raise AssignmentError(f"{where}: not valid YAML ({err})") from None
    try:
        policy = Policy.model_validate(course.policy.model_dump() | spec.policy)
    except ValidationError as err:
        raise AssignmentError(f"{where}: {_first_error(err, 'policy.')}") from None
    questions = []
    for i, item in enumerate(spec.questions):
        try:
            questions.append(question(item.question))
        except QuestionError as err:
            raise AssignmentError(f"{where}: questions.{i}: {err}") from None
    return Assignment(aid, course, spec, questions, policy)
