"""Reading the keys the generator wrote: the contract between generator and autograder.

``keys/<student>.json`` is plain JSON (schema_version 1): per question the parameters,
the answers in SI units with their tolerance, unit, misconceptions and answer graph
(formula and argument expressions), the free-response and code parts.  Nothing here
imports the generator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUPPORTED_SCHEMA = 1


class KeyFileError(ValueError):
    """A key folder or file that cannot be used; the message names the file."""


@dataclass(frozen=True)
class Misconception:
    name: str
    value: float
    feedback: str
    credit: float


@dataclass(frozen=True)
class Answer:
    id: str
    variable: str
    prompt: str
    points: float
    ask: bool
    value: float  # SI
    display_value: float  # in ``unit``
    si_unit: str
    unit: str
    tolerance: dict[str, float]
    sign: str
    formula: str | None
    output: int | None
    expr: str | None
    args: dict[str, Any]
    depends_on: tuple[str, ...]
    misconceptions: tuple[Misconception, ...]


@dataclass(frozen=True)
class CodePart:
    id: str
    function: str
    checks: str | None
    points: float


@dataclass(frozen=True)
class FreeResponse:
    id: str
    prompt: str
    points: float
    rubric: str


@dataclass(frozen=True)
class Question:
    id: str
    index: int
    title: str
    points: float
    seed: str
    params: dict[str, Any]
    answers: tuple[Answer, ...]
    free_response: tuple[FreeResponse, ...]
    code: tuple[CodePart, ...]
    solution: str  # Markdown
    solution_html: str  # the same, rendered by the generator (MathML, no script)


@dataclass(frozen=True)
class Key:
    assignment: str
    student_id: str
    student_name: str
    student_email: str
    points: float
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class AssignmentInfo:
    assignment: str
    title: str
    kind: str
    notebook: str
    due: str | None
    policy: dict[str, Any]
    points: float
    students: tuple[str, ...]


def _answer(doc: dict[str, Any]) -> Answer:
    return Answer(
        id=doc["id"],
        variable=doc["variable"],
        prompt=doc["prompt"],
        points=float(doc["points"]),
        ask=bool(doc["ask"]),
        value=float(doc["value"]),
        display_value=float(doc["display_value"]),
        si_unit=doc["si_unit"],
        unit=doc["unit"],
        tolerance=dict(doc["tolerance"]),
        sign=doc["sign"],
        formula=doc["formula"],
        output=doc["output"],
        expr=doc["expr"],
        args=dict(doc["args"]),
        depends_on=tuple(doc["depends_on"]),
        misconceptions=tuple(
            Misconception(m["name"], float(m["value"]), m["feedback"], float(m["credit"]))
            for m in doc["misconceptions"]
        ),
    )


def parse(doc: dict[str, Any], where: str) -> Key:
    if doc.get("schema_version") != SUPPORTED_SCHEMA:
        raise KeyFileError(
            f"{where}: key schema {doc.get('schema_version')!r}, this grader reads "
            f"{SUPPORTED_SCHEMA} (regenerate the keys with this version of ScaleGrade)"
        )
    try:
        questions = tuple(
            Question(
                id=q["id"],
                index=int(q["index"]),
                title=q["title"],
                points=float(q["points"]),
                seed=q["seed"],
                params=dict(q["params"]),
                answers=tuple(_answer(a) for a in q["answers"]),
                free_response=tuple(
                    FreeResponse(r["id"], r["prompt"], float(r["points"]), r["rubric"])
                    for r in q["free_response"]
                ),
                code=tuple(
                    CodePart(c["id"], c["function"], c["checks"], float(c["points"]))
                    for c in q["code"]
                ),
                solution=q["solution"],
                solution_html=q["solution_html"],
            )
            for q in doc["questions"]
        )
        student = doc["student"]
        return Key(
            assignment=doc["assignment"],
            student_id=student["id"],
            student_name=student["name"],
            student_email=student["email"],
            points=float(doc["points"]),
            questions=questions,
        )
    except (KeyError, TypeError, ValueError) as err:
        raise KeyFileError(f"{where}: malformed key ({type(err).__name__}: {err})") from None


def load(path: Path) -> Key:
    try:
        return parse(json.loads(path.read_text(encoding="utf-8")), str(path))
    except OSError as err:
        raise KeyFileError(f"{path}: cannot read the key ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise KeyFileError(f"{path}: not valid JSON ({err})") from None


def load_info(keys_dir: Path) -> AssignmentInfo:
    path = keys_dir / "assignment.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise KeyFileError(
            f"{path}: missing; --keys must be the keys/ folder `scalegrade generate` wrote"
        ) from None
    return AssignmentInfo(
        assignment=doc["assignment"],
        title=doc["title"],
        kind=doc["kind"],
        notebook=doc["notebook"],
        due=doc["due"],
        policy=dict(doc["policy"]),
        points=float(doc["points"]),
        students=tuple(doc["students"]),
    )


def load_all(keys_dir: Path) -> dict[str, Key]:
    """Every student's key, by student id."""
    info = load_info(keys_dir)
    return {sid: load(keys_dir / f"{sid}.json") for sid in info.students}
