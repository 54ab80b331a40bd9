"""The bank against the notes: which question covers which exercise and exam question.

The notes' items come from the bank's index, ``notes/<cite_as>.yaml`` (number, section,
a short title), and each question's ``source.ref`` names the items it covers in the
notes' words ("Exercise 13", "written exam Q2").  An item no question covers must have its
reason in ``templates/coverage.yaml``; `scalegrade bank --coverage` prints the table and
fails on an item left without either.  Where ``$SCALEGRADE_NOTES`` holds the notes
themselves (the course's ``notes_file``), the index is also checked against them: an
item the notes have and the index lacks, or the other way round, is a failure too.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from generator.bank import Bank, BankError
from generator.course import Course
from generator.question import Question

NOTES_ENV = "SCALEGRADE_NOTES"  # a folder holding the courses' notes files
REASONS_FILE = "coverage.yaml"  # under templates/
EXERCISE, EXAM = "Exercise", "written exam"

_ITEM = re.compile(r"^(\d+)\.\s+(.*)$")
_EXAM_ITEM = re.compile(r"^Question \((\d+) points?\)\.")
_CITES_EXERCISE = re.compile(r"\bExercises? (\d+)", re.IGNORECASE)
_CITES_EXAM = re.compile(r"\bwritten exam Q(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class NotesItem:
    """One exercise or written-exam question of the notes."""

    notes: str  # the course's cite_as, as questions cite it: "000"
    kind: str  # EXERCISE or EXAM
    number: int
    title: str = ""
    section: str = ""
    points: int | None = None  # exam questions only

    @property
    def label(self) -> str:
        return (
            f"Exercise {self.number}" if self.kind == EXERCISE else f"written exam Q{self.number}"
        )

    @property
    def key(self) -> str:
        return f"{self.notes} {self.label}"


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    number: int = Field(ge=1)
    section: str
    title: str
    points: int | None = Field(default=None, ge=1)


class _Index(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    exercises: list[_Entry] = Field(min_length=1)
    exam: list[_Entry] = Field(default_factory=list)


def index_items(bank: Bank, course: Course) -> list[NotesItem]:
    """The items of ``course``'s notes from the bank's index, in order."""
    path = bank.notes / f"{course.cite_as}.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        index = _Index.model_validate(raw)
    except OSError as err:
        raise BankError(
            f"{path}: cannot read the index of {course.id}'s notes ({err.strerror}); a bank "
            "lists each notes' exercises and exam questions in notes/<cite_as>.yaml"
        ) from None
    except yaml.YAMLError as err:
        raise BankError(f"{path}: not valid YAML ({err})") from None
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise BankError(f"{path}: {loc}: {first['msg']}") from None
    items = [
        NotesItem(course.cite_as, kind, e.number, e.title, e.section, e.points)
        for kind, entries in ((EXERCISE, index.exercises), (EXAM, index.exam))
        for e in entries
    ]
    keys = [i.key for i in items]
    for key in sorted({k for k in keys if keys.count(k) > 1}):
        raise BankError(f"{path}: {key} is listed twice")
    return items


def _section(lines: list[str], start: str, stops: tuple[str, ...]) -> list[str]:
    """The lines after the line equal to ``start``, up to the first line in ``stops``."""
    try:
        first = lines.index(start) + 1
    except ValueError:
        return []
    out = []
    for line in lines[first:]:
        if line.strip() in stops:
            break
        out.append(line)
    return out


def notes_items(path: Path, cite_as: str) -> list[NotesItem]:
    """The exercises and written-exam questions of the notes' own text (no titles)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise BankError(
            f"{path}: cannot read the notes ({err.strerror}); ${NOTES_ENV} must be the "
            "folder holding each course's notes_file"
        ) from None
    items = []
    for line in _section(lines, "Exercises", ("Projects and assessment",)):
        m = _ITEM.match(line)  # indented numbers are the parts of a solution, not exercises
        if m:
            items.append(NotesItem(cite_as, EXERCISE, int(m.group(1))))
    for line in _section(
        lines, "Written exam (proposal)", ("Grading rubric (proposal)", "References")
    ):
        m = _ITEM.match(line)
        t = _EXAM_ITEM.match(m.group(2)) if m else None
        if t:
            items.append(NotesItem(cite_as, EXAM, int(m.group(1)), points=int(t.group(1))))
    if not any(i.kind == EXERCISE for i in items):
        raise BankError(f"{path}: no 'Exercises' section with numbered exercises found")
    return items


def index_problems(index: list[NotesItem], notes: list[NotesItem], where: str) -> list[str]:
    """Where the bank's index and the notes themselves disagree."""
    ours = {i.key: i for i in index}
    theirs = {i.key: i for i in notes}
    problems = [f"{where}: {k} is in the notes but not in the index" for k in theirs.keys() - ours]
    problems += [f"{where}: {k} is in the index but not in the notes" for k in ours.keys() - theirs]
    problems += [
        f"{where}: {k} is worth {theirs[k].points} points in the notes, {ours[k].points} here"
        for k in ours.keys() & theirs.keys()
        if ours[k].points != theirs[k].points
    ]
    return sorted(problems)


def cited(ref: str) -> set[tuple[str, int]]:
    """The items a ``source.ref`` names: {(EXERCISE, 6), (EXAM, 1)}."""
    return {(EXERCISE, int(n)) for n in _CITES_EXERCISE.findall(ref)} | {
        (EXAM, int(n)) for n in _CITES_EXAM.findall(ref)
    }


def reasons(path: Path) -> dict[str, str]:
    """Why an item has no question: {"001 Exercise 11": "..."}, from templates/coverage.yaml."""
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise BankError(f"{path}: not valid YAML ({err})") from None
    out = data.get("uncovered") or {}
    if not isinstance(out, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in out.items()
    ):
        raise BankError(f'{path}: uncovered must map "000 Exercise 7" to a written reason')
    return out


@dataclass
class CoverageRow:
    item: NotesItem
    questions: list[str]
    assignments: list[str]
    reproduced: bool  # a covering question reproduces the notes' numbers (notes_example)
    reason: str | None

    @property
    def ok(self) -> bool:
        return bool(self.questions) or bool(self.reason)


@dataclass
class Coverage:
    rows: list[CoverageRow]
    unknown: list[str]  # "templates/x: cites 000 Exercise 99, which the notes do not have"
    stale_reasons: list[str]  # reasons for items that do not exist or are covered
    index_problems: list[str]  # the index against the notes ($SCALEGRADE_NOTES)
    checked_against: list[Path]  # the notes files the index was checked against

    @property
    def ok(self) -> bool:
        return (
            all(r.ok for r in self.rows)
            and not self.unknown
            and not self.stale_reasons
            and not self.index_problems
        )


def _assignments_by_question(bank: Bank) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for aid in bank.assignment_ids():
        for q in bank.assignment(aid).questions:
            out.setdefault(q.id, []).append(aid)
    return out


def coverage(
    bank: Bank,
    questions: list[Question] | None = None,
    why: dict[str, str] | None = None,
    notes_dir: Path | None = None,
) -> Coverage:
    """Every exercise and exam question of the bank's notes with the questions covering it.

    ``notes_dir`` (default ``$SCALEGRADE_NOTES``): the folder of the notes themselves,
    to check the index against.
    """
    questions = questions if questions is not None else bank.all_questions()
    why = why if why is not None else reasons(bank.templates / REASONS_FILE)
    notes_dir = notes_dir or (Path(os.environ[NOTES_ENV]) if os.environ.get(NOTES_ENV) else None)
    used_in = _assignments_by_question(bank)
    items: list[NotesItem] = []
    problems: list[str] = []
    checked: list[Path] = []
    for course in bank.courses.values():
        indexed = index_items(bank, course)
        items += indexed
        if notes_dir is not None and course.notes_file:
            path = notes_dir / course.notes_file
            where = str(bank.notes / f"{course.cite_as}.yaml")
            problems += index_problems(indexed, notes_items(path, course.cite_as), where)
            checked.append(path)
    by_key = {(i.notes, i.kind, i.number): i for i in items}
    covering: dict[str, list[Question]] = {i.key: [] for i in items}
    unknown = []
    for q in questions:
        for kind, number in sorted(cited(q.spec.source.ref)):
            item = by_key.get((q.spec.source.notes, kind, number))
            if item is None:
                label = NotesItem(q.spec.source.notes, kind, number).key
                unknown.append(f"templates/{q.id}: cites {label}, which the notes do not have")
            else:
                covering[item.key].append(q)
    rows = []
    for i in items:
        qs = covering[i.key]
        rows.append(
            CoverageRow(
                item=i,
                questions=[q.id for q in qs],
                assignments=sorted({a for q in qs for a in used_in.get(q.id, [])}),
                reproduced=any(q.spec.notes_example is not None for q in qs),
                reason=None if qs else why.get(i.key),
            )
        )
    stale = [
        f"{REASONS_FILE}: {key!r} " + ("is covered" if covering.get(key) else "is not an item")
        for key in why
        if key not in covering or covering[key]
    ]
    return Coverage(rows, unknown, stale, problems, checked)
