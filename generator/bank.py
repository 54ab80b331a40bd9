"""The question bank against the notes: which question covers which exercise and exam question.

The notes' items are read from the notes themselves (their "Exercises" and "Written exam
(proposal)" sections), and each question's ``source.ref`` names the items it covers in the
notes' words ("Exercise 13", "written exam Q2").  An item no question covers must have its
reason in ``templates/coverage.yaml``; `scalegrade bank --coverage` prints the table and
fails on an item left without either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from course_config import COURSES, Course, notes_path
from generator import assignment as assignments
from generator.question import TEMPLATES, Question, discover, load

REASONS_FILE = TEMPLATES / "coverage.yaml"
EXERCISE, EXAM = "Exercise", "written exam"

_ITEM = re.compile(r"^(\d+)\.\s+(.*)$")
_EXERCISE_TITLE = re.compile(r"^★+\s+(.+?)(?:\.\s|\.$|\?\s)")
_EXAM_TITLE = re.compile(r"^Question \((\d+) points?\)\.\s+(.*)$")
_CITES_EXERCISE = re.compile(r"\bExercises? (\d+)", re.IGNORECASE)
_CITES_EXAM = re.compile(r"\bwritten exam Q(\d+)", re.IGNORECASE)


class BankError(ValueError):
    """Notes that cannot be read, or a reasons file that is not what it should be."""


@dataclass(frozen=True)
class NotesItem:
    """One exercise or written-exam question of the notes."""

    notes: str  # "000" or "001", as questions cite them
    kind: str  # EXERCISE or EXAM
    number: int
    title: str
    points: int | None = None  # exam questions only

    @property
    def label(self) -> str:
        return (
            f"Exercise {self.number}" if self.kind == EXERCISE else f"written exam Q{self.number}"
        )

    @property
    def key(self) -> str:
        return f"{self.notes} {self.label}"


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


_LATEX = {r"\times": "×", r"\Phi": "Φ", r"\omega": "ω", r"\mathcal{C}": "𝒞", "^{": "^", "}": ""}


def _title(text: str, limit: int = 70) -> str:
    """The item's first words, its LaTeX written as plain text for a terminal table."""
    text = text.strip()
    for tex, plain in _LATEX.items():
        text = text.replace(tex, plain)
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def notes_items(course: Course) -> list[NotesItem]:
    """The exercises and written-exam questions of ``course``'s notes, in order."""
    path = notes_path(course)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise BankError(
            f"{path}: cannot read the notes of {course.id} ({err.strerror}); "
            "set $SCALEGRADE_NOTES to the folder holding them"
        ) from None
    items = []
    for line in _section(lines, "Exercises", ("Projects and assessment",)):
        m = _ITEM.match(line)  # indented numbers are the parts of a solution, not exercises
        if m:
            t = _EXERCISE_TITLE.match(m.group(2))
            title = t.group(1) if t else m.group(2)
            items.append(NotesItem(course.cite_as, EXERCISE, int(m.group(1)), _title(title)))
    for line in _section(
        lines, "Written exam (proposal)", ("Grading rubric (proposal)", "References")
    ):
        m = _ITEM.match(line)
        t = _EXAM_TITLE.match(m.group(2)) if m else None
        if t:
            items.append(
                NotesItem(
                    course.cite_as, EXAM, int(m.group(1)), _title(t.group(2)), int(t.group(1))
                )
            )
    if not any(i.kind == EXERCISE for i in items):
        raise BankError(f"{path}: no 'Exercises' section with numbered exercises found")
    return items


def cited(ref: str) -> set[tuple[str, int]]:
    """The items a ``source.ref`` names: {(EXERCISE, 6), (EXAM, 1)}."""
    return {(EXERCISE, int(n)) for n in _CITES_EXERCISE.findall(ref)} | {
        (EXAM, int(n)) for n in _CITES_EXAM.findall(ref)
    }


def reasons(path: Path = REASONS_FILE) -> dict[str, str]:
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

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows) and not self.unknown and not self.stale_reasons


def _assignments_by_question() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for aid in assignments.all_ids():
        for q in assignments.load(aid).questions:
            out.setdefault(q.id, []).append(aid)
    return out


def coverage(
    questions: list[Question] | None = None,
    courses: list[Course] | None = None,
    why: dict[str, str] | None = None,
) -> Coverage:
    """Every exercise and exam question of the notes with the questions covering it."""
    questions = questions if questions is not None else [load(f) for f in discover()]
    courses = courses if courses is not None else list(COURSES.values())
    why = why if why is not None else reasons()
    used_in = _assignments_by_question()
    items = [i for c in courses for i in notes_items(c)]
    by_key = {(i.notes, i.kind, i.number): i for i in items}
    covering: dict[str, list[Question]] = {i.key: [] for i in items}
    unknown = []
    for q in questions:
        for kind, number in sorted(cited(q.spec.source.ref)):
            item = by_key.get((q.spec.source.notes, kind, number))
            if item is None:
                label = NotesItem(q.spec.source.notes, kind, number, "").key
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
        f"{REASONS_FILE.name}: {key!r} " + ("is covered" if covering.get(key) else "is not an item")
        for key in why
        if key not in covering or covering[key]
    ]
    return Coverage(rows, unknown, stale)
