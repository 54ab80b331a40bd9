"""A question bank is a folder: its courses, the index of their notes, questions, assignments.

::

    BANK/
      courses.yaml                     the courses: id, title, citation key, default
                                       tolerance and policy
      notes/<cite_as>.yaml             each notes' exercises and written-exam questions
      templates/<topic>/<question>/    one folder = one question (docs/authors.md)
      templates/coverage.yaml          why an item of the notes has no question (optional)
      assignments/<course>/<id>.yaml   homework, exams and self-tests

ScaleGrade's own bank is the repository's top level; a wheel installs the same files as
``scalegrade/bank/``.  ``--bank DIR`` or ``$SCALEGRADE_BANK`` chooses another: an
instructor's bank of their own needs no change to the engine, and a question is added by
copying one folder.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from generator import assignment as assignments
from generator import question as questions
from generator.course import Course

BANK_ENV = "SCALEGRADE_BANK"
COURSES_FILE = "courses.yaml"
_HERE = Path(__file__).resolve().parent


class BankError(ValueError):
    """A folder that is not a bank, or a courses.yaml that does not follow the format."""


class Bank:
    """A loaded bank: its courses now, its questions and assignments when asked (cached)."""

    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        path = self.root / COURSES_FILE
        if not path.is_file():
            raise BankError(
                f"{self.root}: not a question bank (no {COURSES_FILE}); a bank holds "
                f"{COURSES_FILE}, templates/ and assignments/ (--bank DIR, ${BANK_ENV})"
            )
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            raise BankError(f"{path}: not valid YAML ({err})") from None
        if not isinstance(raw, dict) or not raw:
            raise BankError(f"{path}: must map each course id to its title, cite_as, ...")
        self.courses: dict[str, Course] = {}
        for cid, fields in raw.items():
            try:
                self.courses[str(cid)] = Course.model_validate({**(fields or {}), "id": cid})
            except ValidationError as err:
                first = err.errors()[0]
                loc = ".".join(str(x) for x in first["loc"])
                raise BankError(f"{path}: {cid}.{loc}: {first['msg']}") from None
        cites = [c.cite_as for c in self.courses.values()]
        if len(set(cites)) != len(cites):
            raise BankError(f"{path}: two courses share a cite_as ({', '.join(cites)})")
        self._questions: dict[str, questions.Question] = {}

    def __repr__(self) -> str:
        return f"Bank({str(self.root)!r})"

    @property
    def templates(self) -> Path:
        return self.root / "templates"

    @property
    def assignments(self) -> Path:
        return self.root / "assignments"

    @property
    def notes(self) -> Path:
        return self.root / "notes"

    def course_citing(self, cite_as: str) -> Course | None:
        return next((c for c in self.courses.values() if c.cite_as == cite_as), None)

    def question(self, qid: str) -> questions.Question:
        """A question by its folder under ``templates/`` (``"budgets/model-budget"``)."""
        if qid not in self._questions:
            folder = self.templates / qid
            if not (folder / questions.SPEC_FILE).is_file():
                raise questions.QuestionError(
                    f"{questions.shown_path(folder)}: no such question (no {questions.SPEC_FILE})"
                )
            self._questions[qid] = self._checked(questions.load(folder, self.templates))
        return self._questions[qid]

    def all_questions(self) -> list[questions.Question]:
        """Every question folder of the bank, loaded and checked."""
        return [self.question(f.relative_to(self.templates).as_posix()) for f in self.folders()]

    def folders(self) -> list[Path]:
        return questions.discover(self.templates)

    def _checked(self, q: questions.Question) -> questions.Question:
        cite = q.spec.source.notes
        if self.course_citing(cite) is None:
            known = ", ".join(repr(c.cite_as) for c in self.courses.values())
            raise questions.QuestionError(
                f"{questions.shown_path(q.folder / questions.SPEC_FILE)}: source.notes: "
                f"{cite!r} is no course's cite_as in {self.root / COURSES_FILE} ({known}): "
                "a question copied from another bank cites that bank's notes; declare the "
                "notes it covers here (source.notes and source.ref)"
            )
        return q

    def assignment(self, aid: str) -> assignments.Assignment:
        """``course/id`` (``tdlsm/hw1``) with every question it lists."""
        course_id, sep, short = aid.partition("/")
        if not sep or not short or "/" in short:
            raise assignments.AssignmentError(
                f"{aid!r}: name an assignment as COURSE/ID, e.g. tdlsm/hw1"
            )
        if course_id not in self.courses:
            raise assignments.AssignmentError(
                f"{aid!r}: unknown course {course_id!r} (the bank {self.root} has: "
                f"{', '.join(self.courses)})"
            )
        path = self.assignments / course_id / f"{short}.yaml"
        if not path.is_file():
            have = sorted(p.stem for p in (self.assignments / course_id).glob("*.yaml"))
            raise assignments.AssignmentError(
                f"{questions.shown_path(path)}: no such assignment (course {course_id} has: "
                f"{', '.join(have) or 'none'})"
            )
        return assignments.load(aid, path, self.courses[course_id], self.question)

    def assignment_ids(self) -> list[str]:
        return sorted(
            f"{p.parent.name}/{p.stem}"
            for p in self.assignments.glob("*/*.yaml")
            if p.parent.name in self.courses
        )


def default_root() -> Path:
    """``$SCALEGRADE_BANK``, else the bank installed with ScaleGrade: ``scalegrade/bank/``
    beside this package in a wheel, the repository's top level in a checkout."""
    if os.environ.get(BANK_ENV):
        return Path(os.environ[BANK_ENV])
    installed = _HERE.parent / "scalegrade" / "bank"
    return installed if (installed / COURSES_FILE).is_file() else _HERE.parent


@cache
def _load(root: Path) -> Bank:
    return Bank(root)


def load(root: Path | str | None = None, *, fresh: bool = False) -> Bank:
    """The bank at ``root`` (default: :func:`default_root`), loaded once per folder
    (``fresh``: read again, as `scalegrade rekey` does after the bank was edited)."""
    path = Path(root or default_root()).resolve()
    return Bank(path) if fresh else _load(path)
