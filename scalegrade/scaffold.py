"""A bank of one's own, and a question in it, that validate, generate and grade as they stand.

``scalegrade new-bank DIR`` writes a minimal bank (:func:`new_bank`): ``courses.yaml`` for
one course, its notes' index, a numeric question, a code question and an assignment
listing both.  ``scalegrade new TOPIC/NAME`` adds a question to a bank
(:func:`new_question`), numeric or, with ``--code``, a code part with its marked
``solution.py`` and its ``checks.py``.  What the author is to change is marked TODO; the
files come from ``scalegrade/newbank/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

FILES = Path(__file__).resolve().parent / "newbank"
QUESTION_ID = re.compile(r"^[a-z0-9][a-z0-9_-]*/[a-z0-9][a-z0-9_-]*$")
EXAMPLES = {
    "example/training-compute": ("numeric", "Exercise 1"),
    "example/mean-code": ("code", "Exercise 2"),
}


class ScaffoldError(ValueError):
    """A folder that exists already, a bad id, or a bank without the named course."""


def _fill(text: str, **values: str) -> str:
    for name, value in values.items():
        text = text.replace(f"__{name.upper()}__", value)
    return text


def _cite(bank: Path, course: str | None) -> tuple[str, str]:
    """(course id, its notes' cite_as) of the bank's course ``course`` (its only one when
    None)."""
    path = bank / "courses.yaml"
    try:
        courses = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ScaffoldError(f"{path}: cannot be read ({err}); is {bank} a bank?") from None
    if course is None and len(courses) == 1:
        course = next(iter(courses))
    if course not in courses:
        raise ScaffoldError(
            f"{path}: no course {course!r} (the bank's: {', '.join(courses)}); pass --course"
        )
    return course, str(courses[course].get("cite_as", course))


def new_question(
    bank: Path,
    qid: str,
    *,
    code: bool = False,
    course: str | None = None,
    ref: str = "§1",
    assignment: str | None = None,
) -> Path:
    """Write the question folder ``bank/templates/QID`` (numeric, or with a code part);
    ``assignment``: also list it in ``assignments/COURSE/ASSIGNMENT.yaml``."""
    if not QUESTION_ID.match(qid):
        raise ScaffoldError(
            f"{qid!r}: a question id is TOPIC/NAME, lower-case letters, digits, - and _"
        )
    folder = bank / "templates" / qid
    if folder.exists():
        raise ScaffoldError(f"{folder}: exists already; choose another id")
    course, cite = _cite(bank, course)
    listing = bank / "assignments" / course / f"{assignment}.yaml" if assignment else None
    if listing is not None and not listing.is_file():
        raise ScaffoldError(f"{listing}: no such assignment; write it first, or leave it out")
    source = FILES / ("code" if code else "numeric")
    folder.mkdir(parents=True)
    for file in sorted(f for f in source.iterdir() if f.is_file()):  # not a __pycache__
        text = file.read_text(encoding="utf-8")
        (folder / file.name).write_text(_fill(text, cite=cite, ref=ref), encoding="utf-8")
    if listing is not None:
        text = listing.read_text(encoding="utf-8").rstrip("\n")
        listing.write_text(f"{text}\n  - question: {qid}\n", encoding="utf-8")
    return folder


def new_bank(root: Path, *, course: str = "course", title: str = "My course") -> Path:
    """Write a minimal bank in the new folder ``root``: one course, its notes' index, a
    numeric and a code question, and ``assignments/COURSE/hw1.yaml`` listing both."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", course):
        raise ScaffoldError(f"{course!r}: a course id is lower-case letters, digits, - and _")
    if root.exists() and any(root.iterdir()):
        raise ScaffoldError(f"{root}: exists and is not empty; choose a new folder")
    cite = course
    root.mkdir(parents=True, exist_ok=True)
    (root / "courses.yaml").write_text(
        _fill(
            (FILES / "courses.yaml").read_text(encoding="utf-8"),
            course=course,
            title=title,
            cite=cite,
        ),  # fmt: skip
        encoding="utf-8",
    )
    (root / "notes").mkdir()
    (root / "notes" / f"{cite}.yaml").write_text(
        _fill((FILES / "notes.yaml").read_text(encoding="utf-8"), cite=cite), encoding="utf-8"
    )
    for qid, (kind, ref) in EXAMPLES.items():
        new_question(root, qid, code=kind == "code", course=course, ref=ref)
    listed = "".join(f"  - question: {qid}\n" for qid in EXAMPLES)
    (root / "assignments" / course).mkdir(parents=True)
    (root / "assignments" / course / "hw1.yaml").write_text(
        _fill((FILES / "assignment.yaml").read_text(encoding="utf-8"), questions=listed.rstrip()),
        encoding="utf-8",
    )
    return root
