"""Release an assignment to a roster: notebooks, keys, solutions, exam sheets.

``DIR/release/<student>/<notebook>.ipynb`` — what the student gets (no answers);
``DIR/keys/`` — instructor only: per student the params, answers, tolerances, units,
misconceptions and answer graph, and the code parts' checks (the whole contract the
autograder reads, :mod:`contract.key`);
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
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import contract
from contract import Checks, CodePart, FreeResponse, Key, Release, Student, times
from contract import Question as KeyQuestion
from generator import notebook, sheets
from generator.assignment import Assignment
from generator.checks import variant_problems
from generator.html import markdown
from generator.variant import Variant, build

OWNED = ("release", "keys", "solutions", "sheets", "ta_keys")
HISTORY = "keys-history"  # keys replaced by `scalegrade rekey`: kept across a release


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
    return {q.id: notebook.given_units(q) for q in assignment.questions}


def released_checks(assignment: Assignment) -> dict[str, str]:
    """Each code part's checks as release writes them to ``keys/``: file -> source."""
    return {
        contract.checks_file(q.id, c.checks): q.files[c.checks]
        for q in assignment.questions
        for c in q.spec.code
        if c.checks is not None
    }


def checks_digests(assignment: Assignment) -> dict[str, str]:
    """The SHA-256 of each released checks file, by its file under ``keys/``."""
    return {file: contract.sha256(source) for file, source in released_checks(assignment).items()}


def student_key(assignment: Assignment, student: Student, variants: list[Variant]) -> Key:
    """The instructor's key of one student: what grading reads, and all it reads."""
    digests = checks_digests(assignment)

    def checks(v: Variant, part: dict) -> Checks | None:
        if part["checks"] is None:
            return None
        file = contract.checks_file(v.question_id, part["checks"])
        return Checks(file=file, sha256=digests[file])

    questions = []
    for i, v in enumerate(variants):
        scale = assignment.scale(i)
        questions.append(
            KeyQuestion(
                id=v.question_id,
                index=v.index,
                title=v.title,
                source=v.source,
                points=v.points * scale,
                seed=v.seed,
                params=v.params,
                shown=v.shown,
                answers=tuple(a.model_copy(update={"points": a.points * scale}) for a in v.answers),
                solution=v.solution,
                solution_html=markdown(v.solution),
                free_response=tuple(
                    FreeResponse(**(r | {"points": r["points"] * scale})) for r in v.free_response
                ),
                code=tuple(
                    CodePart(
                        id=c["id"],
                        function=c["function"],
                        points=c["points"] * scale,
                        checks=checks(v, c),
                    )
                    for c in v.code
                ),
            )
        )
    return Key(
        course=assignment.course.id,
        assignment=assignment.id,
        student=student,
        points=assignment.points,
        questions=tuple(questions),
    )


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
        theirs = [p.name for p in out.iterdir() if p.name not in (*OWNED, HISTORY)]
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
        if (out / HISTORY).is_dir():
            (out / HISTORY).rename(tmp / HISTORY)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Summary(
        len(students), len(assignment.questions), time.perf_counter() - start, out, shared, pdf
    )


def due_in_zone(due: datetime | None, zone: str) -> str | None:
    """The due date as written in keys/: with its offset (one written without a zone, in
    the course's), so that every reader reads the same instant."""
    if due is None:
        return None
    return (due if due.tzinfo else due.replace(tzinfo=times.zone(zone))).isoformat()


def _build(assignment, students, secret, root: Path, with_solutions, on_student, otter=False):
    """Write everything under ``root``; return (PDF made, shared-numbers share per question)."""
    spec, course = assignment.spec, assignment.course
    units = params_units(assignment)
    points = [q.points * assignment.scale(i) for i, q in enumerate(assignment.questions)]
    is_exam = spec.kind == "exam"
    browser = sheets.chromium() if is_exam else None
    keys = root / "keys"
    keys.mkdir()
    for file, source in released_checks(assignment).items():
        (keys / file).parent.mkdir(parents=True, exist_ok=True)
        (keys / file).write_text(source, encoding="utf-8")
    info = Release(
        course=course.id,
        assignment=assignment.id,
        title=spec.title,
        kind=spec.kind,
        notebook=f"{spec.notebook}.ipynb",
        due=due_in_zone(spec.due, course.timezone),
        timezone=course.timezone,
        policy=assignment.policy,
        points=assignment.points,
        questions=tuple(q.id for q in assignment.questions),
        students=tuple(s.id for s in students),
        checks=checks_digests(assignment),
    )
    (keys / contract.RELEASE_FILE).write_text(info.to_json(), encoding="utf-8")
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
        key = student_key(assignment, student, variants)
        (keys / f"{student.id}.json").write_text(key.to_json(), encoding="utf-8")
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
