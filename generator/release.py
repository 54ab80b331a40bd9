"""Release an assignment to a roster: notebooks, keys, solutions, exam sheets.

``DIR/release/<student>/<notebook>.ipynb`` — what the student gets (no answers);
``DIR/keys/`` — instructor only: per student the params, answers, tolerances, units,
misconceptions and answer graph (the autograder's contract);
``DIR/solutions/<student>/`` with ``--with-solutions``; for exams
``DIR/sheets/<student>.html`` (and ``.pdf``) and ``DIR/ta_keys/<student>.html``.

Everything is built in a temporary folder beside ``DIR`` and moved into place at the
end, so a failure leaves nothing half-written.  Same inputs, byte-identical files.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from generator import notebook, sheets
from generator.assignment import Assignment
from generator.checks import variant_problems
from generator.html import markdown
from generator.roster import Student
from generator.variant import Variant, build

KEY_SCHEMA_VERSION = 1
OWNED = ("release", "keys", "solutions", "sheets", "ta_keys")


class ReleaseError(RuntimeError):
    """Release refused or failed; nothing was written."""


@dataclass(frozen=True)
class Summary:
    students: int
    questions: int
    seconds: float
    out: Path
    shared_numbers: dict[str, float]  # question -> share of students whose numbers another has
    pdf: bool


def variants_for(assignment: Assignment, student: Student, secret: bytes) -> list[Variant]:
    """Every question's variant for one student, each checked."""
    out = []
    for i, q in enumerate(assignment.questions, start=1):
        v = build(
            q,
            secret=secret,
            course=assignment.course.id,
            assignment=assignment.short_id,
            student=student.id,
            index=i,
            default_tolerance=assignment.course.default_tolerance,
        )
        problems = variant_problems(v)
        if problems:
            raise ReleaseError("; ".join(problems))
        out.append(v)
    return out


def params_units(assignment: Assignment) -> dict[str, dict[str, str]]:
    """For the given cells: the unit comment of each parameter, by question."""
    return {
        q.id: {n: (p.unit or "") for n, p in q.spec.params.items()} for q in assignment.questions
    }


def key_document(assignment: Assignment, student: Student, variants: list[Variant]) -> dict:
    """The instructor's key of one student (plain JSON: the autograder never unpickles)."""
    questions = []
    for i, v in enumerate(variants):
        scale = assignment.scale(i)
        answers = []
        for k in v.answers:
            entry = k.to_json()
            entry["points"] = k.points * scale
            answers.append(entry)
        questions.append(
            {
                "id": v.question_id,
                "index": v.index,
                "title": v.title,
                "source": v.source,
                "points": v.points * scale,
                "seed": v.seed,
                "params": v.params,
                "shown": v.shown,
                "answers": answers,
                "solution": v.solution,
                "solution_html": markdown(v.solution),
                "free_response": [r | {"points": r["points"] * scale} for r in v.free_response],
                "code": [
                    {k: c[k] for k in ("id", "function", "checks")}
                    | {"points": c["points"] * scale}
                    for c in v.code
                ],
            }
        )
    return {
        "schema_version": KEY_SCHEMA_VERSION,
        "course": assignment.course.id,
        "assignment": assignment.id,
        "student": asdict(student),
        "points": assignment.points,
        "questions": questions,
    }


def _write_json(path: Path, doc: Any) -> None:
    # compact: json's C encoder is bypassed when indenting, and keys are read by programs
    path.write_text(json.dumps(doc, sort_keys=True, ensure_ascii=False) + "\n", "utf-8")


def release(
    assignment: Assignment,
    students: list[Student],
    *,
    secret: bytes,
    out: Path,
    with_solutions: bool = False,
    force: bool = False,
    on_student: Callable[[Student], None] | None = None,
    otter: bool = False,
) -> Summary:
    """``otter``: notebooks carry otter-grader public checks (:mod:`generator.otter`)."""
    start = time.perf_counter()
    out = out.resolve()
    if out.exists() and any(out.iterdir()):
        theirs = [p.name for p in out.iterdir() if p.name not in OWNED]
        if not force:
            raise ReleaseError(f"{out}: exists and is not empty; pass --force to replace it")
        if theirs:
            raise ReleaseError(
                f"{out}: holds files ScaleGrade did not write ({', '.join(sorted(theirs)[:5])}); "
                "choose an empty folder"
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        pdf, shared = _build(
            assignment, students, secret, tmp, with_solutions, on_student, otter=otter
        )
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Summary(
        len(students), len(assignment.questions), time.perf_counter() - start, out, shared, pdf
    )


def _build(assignment, students, secret, root: Path, with_solutions, on_student, otter=False):
    """Write everything under ``root``; return (PDF made, shared-numbers share per question)."""
    spec, course = assignment.spec, assignment.course
    units = params_units(assignment)
    points = [q.points * assignment.scale(i) for i, q in enumerate(assignment.questions)]
    is_exam = spec.kind == "exam"
    browser = sheets.chromium() if is_exam else None
    (root / "keys").mkdir()
    _write_json(
        root / "keys" / "assignment.json",
        {
            "schema_version": KEY_SCHEMA_VERSION,
            "assignment": assignment.id,
            "title": spec.title,
            "kind": spec.kind,
            "notebook": f"{spec.notebook}.ipynb",
            "due": spec.due.isoformat() if spec.due else None,
            "policy": asdict(assignment.policy),
            "points": assignment.points,
            "questions": [q.id for q in assignment.questions],
            "students": [s.id for s in students],
        },
    )
    seen: dict[str, Counter[str]] = {q.id: Counter() for q in assignment.questions}
    for student in students:
        variants = variants_for(assignment, student, secret)
        for v in variants:
            seen[v.question_id][json.dumps(v.params, sort_keys=True)] += 1
        common = dict(
            course_title=course.title,
            assignment_id=assignment.id,
            assignment_title=spec.title,
            student=student,
            params_units=units,
            points=points,
        )
        for folder, solutions in (("release", False), ("solutions", True)):
            if solutions and not with_solutions:
                continue
            # one notebook of each kind is checked against nbformat's schema; the rest
            # have the same structure
            first = student is students[0]
            nb = notebook.render(
                variants,
                solutions=solutions,
                check=first,
                otter=f"{spec.notebook}.ipynb" if otter else None,
                **common,
            )
            target = root / folder / student.id / f"{spec.notebook}.ipynb"
            target.parent.mkdir(parents=True)
            target.write_text(notebook.dumps(nb) + "\n", encoding="utf-8")
        _write_json(
            root / "keys" / f"{student.id}.json", key_document(assignment, student, variants)
        )
        if is_exam:
            for folder, page in (
                (
                    "sheets",
                    sheets.exam_sheet(
                        variants,
                        points,
                        title=spec.title,
                        course=course.title,
                        student=student,
                        duration=spec.duration_minutes,
                    ),
                ),
                (
                    "ta_keys",
                    sheets.ta_key(
                        variants, points, title=spec.title, course=course.title, student=student
                    ),
                ),
            ):
                path = root / folder / f"{student.id}.html"
                path.parent.mkdir(exist_ok=True)
                path.write_text(page, encoding="utf-8")
                if browser and folder == "sheets":
                    sheets.to_pdf(path, path.with_suffix(".pdf"), browser)
        if on_student:
            on_student(student)
    shared = {
        qid: sum(c for c in counts.values() if c > 1) / len(students)
        for qid, counts in seen.items()
    }
    return browser is not None, shared
