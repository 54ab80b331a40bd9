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
from contract import Checks, CodePart, FreeResponse, Key, Ledger, Release, Student, times
from contract import Question as KeyQuestion
from generator import notebook, sheets
from generator.assignment import Assignment
from generator.checks import variant_problems
from generator.html import markdown
from generator.variant import Variant, build, given_units

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


def variants_for(
    assignment: Assignment, student: Student, secret: bytes, epochs: dict[str, int] | None = None
) -> list[Variant]:
    """Every question's variant for one student, each checked (``epochs``: each question's
    reseed count, from the ledger; none: the first release's numbers)."""
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
            epoch=(epochs or {}).get(q.id, 0),
        )
        problems = variant_problems(v)
        if problems:
            raise ReleaseError("; ".join(problems))
        out.append(v)
    return out


def params_units(assignment: Assignment) -> dict[str, dict[str, str]]:
    """For the given cells: the unit comment of each parameter, by question."""
    return {q.id: given_units(q) for q in assignment.questions}


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
    ledger: Ledger | None = None,
) -> Summary:
    """``otter``: notebooks carry otter-grader public checks (:mod:`generator.otter`).

    ``ledger``: the reseeds to apply (default: those of the release being replaced, from
    ``out/keys/ledger.json``, so that a release again gives the same files)."""
    start = time.perf_counter()
    out = out.resolve()
    if ledger is None:
        try:
            ledger = contract.read_ledger(out / "keys")
        except contract.KeyFileError as err:
            raise ReleaseError(str(err)) from None
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
            assignment, students, secret, tmp, with_solutions, on_student, otter, ledger
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


def released(out: Path, assignment: Assignment, command: str) -> Release:
    """The release in ``out/keys`` of ``assignment``, for a command that changes it
    (rekey, reseed); a sentence naming the folder when it is not that."""
    try:
        info = contract.read_release(out / "keys")
    except contract.KeyFileError as err:
        raise ReleaseError(
            f"{err} ({command} needs the folder `scalegrade generate --out` wrote)"
        ) from None
    if info.assignment != assignment.id:
        raise ReleaseError(f"{out}/keys holds {info.assignment}, not {assignment.id}")
    return info


def due_in_zone(due: datetime | None, zone: str) -> str | None:
    """The due date as written in keys/: with its offset (one written without a zone, in
    the course's), so that every reader reads the same instant."""
    if due is None:
        return None
    return (due if due.tzinfo else due.replace(tzinfo=times.zone(zone))).isoformat()


@dataclass(frozen=True)
class Layout:
    """What every student's files share in one release."""

    assignment: Assignment
    secret: bytes
    ledger: Ledger
    with_solutions: bool
    otter: bool
    browser: Path | None  # chromium, for exam sheets' PDFs
    units: dict[str, dict[str, str]]
    points: list[float]

    @classmethod
    def of(
        cls, assignment: Assignment, secret: bytes, ledger: Ledger, *, solutions: bool, otter: bool
    ) -> Layout:
        return cls(
            assignment=assignment,
            secret=secret,
            ledger=ledger,
            with_solutions=solutions,
            otter=otter,
            browser=sheets.chromium() if assignment.spec.kind == "exam" else None,
            units=params_units(assignment),
            points=[q.points * assignment.scale(i) for i, q in enumerate(assignment.questions)],
        )


def write_student(lay: Layout, student: Student, root: Path, *, check: bool) -> list[Variant]:
    """One student's notebook(s), key (and keys of earlier variant versions), and exam
    sheets under ``root``, at their latest variant version in the ledger."""
    assignment, spec, course = lay.assignment, lay.assignment.spec, lay.assignment.course
    questions = tuple(q.id for q in assignment.questions)
    version = lay.ledger.version(student.id)
    variants = variants_for(
        assignment, student, lay.secret, lay.ledger.epochs(student.id, questions)
    )
    common = dict(
        course_title=course.title,
        assignment_id=assignment.id,
        assignment_title=spec.title,
        student=student,
        params_units=lay.units,
        points=lay.points,
        version=version,
    )
    for folder, solutions in (("release", False), ("solutions", True)):
        if solutions and not lay.with_solutions:
            continue
        # one notebook of each kind is checked against nbformat's schema; the rest have
        # the same structure
        nb = notebook.render(
            variants,
            solutions=solutions,
            check=check,
            otter=f"{spec.notebook}.ipynb" if lay.otter else None,
            **common,
        )
        write_file(root / folder / student.id / f"{spec.notebook}.ipynb", notebook.dumps(nb) + "\n")
    keys = root / "keys"
    write_file(keys / f"{student.id}.json", student_key(assignment, student, variants).to_json())
    for earlier in range(version):  # what submissions before each reseed are graded with
        before = variants_for(
            assignment, student, lay.secret, lay.ledger.epochs(student.id, questions, earlier)
        )
        write_file(
            keys / contract.reseeded_key_file(student.id, earlier),
            student_key(assignment, student, before).to_json(),
        )
    if spec.kind == "exam":
        for folder, page in (
            (
                "sheets",
                sheets.exam_sheet(
                    variants,
                    lay.points,
                    title=spec.title,
                    course=course.title,
                    student=student,
                    duration=spec.duration_minutes,
                ),
            ),
            (
                "ta_keys",
                sheets.ta_key(
                    variants, lay.points, title=spec.title, course=course.title, student=student
                ),
            ),
        ):
            path = root / folder / f"{student.id}.html"
            write_file(path, page)
            if lay.browser and folder == "sheets":
                sheets.to_pdf(path, path.with_suffix(".pdf"), lay.browser)
    return variants


def write_file(path: Path, text: str) -> None:
    """A file written whole or not at all (a reseed rewrites one student's files in place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def _build(
    assignment, students, secret, root: Path, with_solutions, on_student, otter, ledger: Ledger
):
    """Write everything under ``root``; return (PDF made, shared-numbers share per question)."""
    spec, course = assignment.spec, assignment.course
    lay = Layout.of(assignment, secret, ledger, solutions=with_solutions, otter=otter)
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
    if ledger.reseeds:
        (keys / contract.LEDGER_FILE).write_text(ledger.to_json(), encoding="utf-8")
    seen: dict[str, Counter[str]] = {q.id: Counter() for q in assignment.questions}
    for student in students:
        for v in write_student(lay, student, root, check=student is students[0]):
            seen[v.question_id][json.dumps(v.params, sort_keys=True)] += 1
        if on_student:
            on_student(student)
    shared = {
        qid: sum(c for c in counts.values() if c > 1) / len(students)
        for qid, counts in seen.items()
    }
    return lay.browser is not None, shared
