"""The gradebook: SQLAlchemy, SQLite by default, PostgreSQL by URL; alembic migrations.

Tables (``autograder/semester/migrations/versions/`` makes them, and upgrades an older file):

- ``attempts``: every graded attempt, never overwritten: the harvest (what the sandbox
  returned), the raw result, the key's and the checks' SHA-256, the policy, the
  submission time and where it came from, when it was graded;
- ``submissions`` and ``part_grades``: each student's current standing per assignment,
  made from their latest attempt and the late policy (:mod:`autograder.semester.standing`): what
  every export reads;
- ``assignments``: each assignment's deadline, zone and policy, as released and as the
  instructor changed them since, and where its keys and results are;
- ``extensions``: every extension, with who granted it and why;
- ``marks``: every mark a person gave, with who, when, and the answer it marked; a
  regrade never loses one;
- ``changes``: who changed a deadline or a policy, when and why.

Recording an attempt is one transaction, so a grader killed mid-batch loses nothing
already recorded, and a rerun skips submissions whose content hash is unchanged.
SQLite runs in WAL mode with ``synchronous=NORMAL``: a commit is not an fsync (26 ms
each here), and a grader that dies still loses nothing committed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import (
    Column,
    Float,
    ForeignKey,
    Index,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    func,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from autograder.grading.grade import StudentResult
from autograder.semester import lateness
from autograder.semester.lateness import Entry, Extension
from autograder.semester.marks import Mark
from autograder.semester.standing import standing
from autograder.semester.submitted_at import SubmittedAt
from contract import KeyFileError, Policy, Release, read_release

HEAD = "0002"  # the newest migration under migrations/versions/
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class Base(DeclarativeBase):
    pass


# alembic's own table, as alembic makes it: a new gradebook is stamped at HEAD with it
_VERSION = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), primary_key=True),
)


class AssignmentRow(Base):
    __tablename__ = "assignments"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    course: Mapped[str] = mapped_column(String(200))
    title: Mapped[str] = mapped_column(String(400))
    timezone: Mapped[str] = mapped_column(String(64))
    due: Mapped[str | None] = mapped_column(String(40), nullable=True)  # as released
    due_override: Mapped[str | None] = mapped_column(String(40), nullable=True)
    policy_json: Mapped[str] = mapped_column(Text)  # as released
    policy_override_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    max_score: Mapped[float] = mapped_column(Float)
    keys_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    out_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    reveal: Mapped[bool | None] = mapped_column(nullable=True)  # None: by the policy
    recorded_at: Mapped[str] = mapped_column(String(40))

    @property
    def due_in_force(self) -> datetime | None:
        due = self.due_override or self.due
        return None if due is None else datetime.fromisoformat(due)

    @property
    def policy(self) -> Policy:
        changed = json.loads(self.policy_override_json or "{}")
        return Policy.model_validate(json.loads(self.policy_json) | changed)


class Attempt(Base):
    __tablename__ = "attempts"
    __table_args__ = (Index("attempts_by_student", "assignment", "student_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment: Mapped[str] = mapped_column(String(200))
    student_id: Mapped[str] = mapped_column(String(200))
    content_hash: Mapped[str] = mapped_column(String(64))
    notebook: Mapped[str | None] = mapped_column(Text, nullable=True)  # the file graded
    submitted_at: Mapped[str | None] = mapped_column(String(40), nullable=True)
    time_source: Mapped[str] = mapped_column(String(200))
    time_warning: Mapped[str | None] = mapped_column(Text, nullable=True)
    graded_at: Mapped[str] = mapped_column(String(40))
    key_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    checks_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    policy_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    harvest_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    result_json: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class Submission(Base):
    """A student's current standing on an assignment (their latest attempt, after lateness)."""

    __tablename__ = "submissions"
    __table_args__ = (UniqueConstraint("assignment", "student_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment: Mapped[str] = mapped_column(String(200))
    student_id: Mapped[str] = mapped_column(String(200))
    content_hash: Mapped[str] = mapped_column(String(64))
    score: Mapped[float] = mapped_column(Float)
    max_score: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    graded_at: Mapped[str] = mapped_column(String(40))
    result_json: Mapped[str] = mapped_column(Text)
    attempt_id: Mapped[int | None] = mapped_column(nullable=True)
    submitted_at: Mapped[str | None] = mapped_column(String(40), nullable=True)
    earned: Mapped[float | None] = mapped_column(Float, nullable=True)
    late_penalty: Mapped[float] = mapped_column(Float, default=0.0)
    parts: Mapped[list[PartGrade]] = relationship(
        back_populates="submission", cascade="all, delete-orphan"
    )


class PartGrade(Base):
    __tablename__ = "part_grades"

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"))
    question: Mapped[str] = mapped_column(String(200))
    part: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(40))
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    points: Mapped[float] = mapped_column(Float)
    misconception: Mapped[str | None] = mapped_column(String(200), nullable=True)
    submission: Mapped[Submission] = relationship(back_populates="parts")


class ExtensionRow(Base):
    __tablename__ = "extensions"

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment: Mapped[str] = mapped_column(String(200))
    student_id: Mapped[str] = mapped_column(String(200))
    due: Mapped[str | None] = mapped_column(String(40), nullable=True)
    extra_days: Mapped[float | None] = mapped_column(Float, nullable=True)
    granted_by: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text)
    granted_at: Mapped[str] = mapped_column(String(40))


class MarkRow(Base):
    __tablename__ = "marks"
    __table_args__ = (Index("marks_by_student", "assignment", "student_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment: Mapped[str] = mapped_column(String(200))
    student_id: Mapped[str] = mapped_column(String(200))
    question: Mapped[str] = mapped_column(String(200))
    part: Mapped[str] = mapped_column(String(200))
    score: Mapped[float] = mapped_column(Float)
    comment: Mapped[str] = mapped_column(Text)
    marker: Mapped[str] = mapped_column(String(200))
    answer_sha256: Mapped[str] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(Text)
    marked_at: Mapped[str] = mapped_column(String(40))


class ChangeRow(Base):
    __tablename__ = "changes"

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(40))  # due | policy | extension
    detail_json: Mapped[str] = mapped_column(Text)
    by: Mapped[str] = mapped_column(String(200))
    why: Mapped[str] = mapped_column(Text)
    at: Mapped[str] = mapped_column(String(40))


@dataclass(frozen=True)
class Moved:
    """One student's standing that a restatement changed (its score, or only its note)."""

    assignment: str
    student_id: str
    old: float
    new: float
    why: str  # the late note now


class GradebookError(ValueError):
    """A change the gradebook refuses (unknown assignment or student): nothing changed."""


def result_to_json(result: StudentResult) -> dict[str, Any]:
    """The raw result document of an attempt (the harvest is kept apart)."""
    doc = asdict(replace(result, harvest=None))
    del doc["harvest"]
    return doc


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _sqlite_wal(connection, _record) -> None:
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class Gradebook:
    def __init__(self, url: str):
        self.engine = create_engine(url)
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_wal)
        self.migrate()

    def migrate(self) -> None:
        """Bring the schema to ``HEAD``.  A new gradebook is made from the models at once
        (they and the migrations agree: tests/autograder/test_gradebook.py); an existing
        one is upgraded with alembic, and one written before migrations existed (tables,
        no ``alembic_version``) is stamped at 0001 first."""
        with self.engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            if "alembic_version" in tables:
                if conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD:
                    return
        if not tables:
            with self.engine.begin() as conn:
                Base.metadata.create_all(conn)
                _VERSION.create(conn)
                conn.execute(_VERSION.insert().values(version_num=HEAD))
            return
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self.engine.begin() as conn:
            config.attributes["connection"] = conn
            if "submissions" in tables and "alembic_version" not in tables:
                command.stamp(config, "0001")
            command.upgrade(config, "head")

    def close(self) -> None:
        self.engine.dispose()

    # --- assignments ------------------------------------------------------------------

    def record_release(
        self, release: Release, keys_dir: Path, out_dir: Path | None, *, reveal: bool | None
    ) -> None:
        """What an assignment was released with, where its keys and results are, and whether
        the grade run chose to reveal solutions; the instructor's later changes (deadline,
        policy) are kept over it."""
        with Session(self.engine) as s, s.begin():
            row = s.scalar(select(AssignmentRow).where(AssignmentRow.name == release.assignment))
            if row is None:
                row = AssignmentRow(name=release.assignment)
                s.add(row)
            due = release.due_at()
            row.course = release.course
            row.title = release.title
            row.timezone = release.timezone
            row.due = due.isoformat() if due else None
            row.policy_json = release.policy.model_dump_json()
            row.max_score = release.points
            row.keys_dir = str(Path(keys_dir).resolve())
            row.out_dir = str(Path(out_dir).resolve()) if out_dir is not None else row.out_dir
            row.reveal = reveal
            row.recorded_at = _now()

    def assignment(self, name: str) -> AssignmentRow:
        with Session(self.engine) as s:
            row = s.scalar(select(AssignmentRow).where(AssignmentRow.name == name))
        if row is None:
            known = ", ".join(self.assignments()) or "none"
            raise GradebookError(
                f"the gradebook knows no assignment {name!r} (it has: {known}); grade it first"
            )
        return row

    def assignments(self) -> list[str]:
        with Session(self.engine) as s:
            return list(s.scalars(select(AssignmentRow.name).order_by(AssignmentRow.name)))

    def change(
        self, name: str, *, by: str, why: str, due: datetime | None = None, policy: dict | None
    ) -> None:
        """Move an assignment's deadline and/or change its policy, with who and why."""
        if not by.strip() or not why.strip():
            raise GradebookError("say who changes it and why (--by NAME --why TEXT)")
        current = self.assignment(name)
        if policy:
            try:
                valid = Policy.model_validate(current.policy.model_dump() | policy).model_dump()
            except ValidationError as err:
                first = err.errors()[0]
                raise GradebookError(
                    f"{name}: policy {'.'.join(str(x) for x in first['loc'])}: {first['msg']}"
                ) from None
            policy = {k: valid[k] for k in policy}
        with Session(self.engine) as s, s.begin():
            row = s.scalar(select(AssignmentRow).where(AssignmentRow.name == name))
            detail: dict[str, Any] = {}
            if due is not None:
                detail["due"] = [row.due_override or row.due, due.isoformat()]
                row.due_override = due.isoformat()
            if policy:
                before = json.loads(row.policy_override_json or "{}")
                detail["policy"] = [{k: row.policy.model_dump()[k] for k in policy}, policy]
                row.policy_override_json = json.dumps(before | policy, sort_keys=True)
            kind = "+".join(k for k in ("due", "policy") if k in detail)
            self.log(name, kind, detail, by=by, why=why, session=s)

    def log(
        self,
        name: str,
        kind: str,
        detail: dict[str, Any],
        *,
        by: str,
        why: str,
        session: Session | None = None,
    ) -> None:
        """Record a change to an assignment (a deadline, the policy, a regrade)."""
        row = ChangeRow(
            assignment=name, kind=kind, detail_json=json.dumps(detail), by=by, why=why, at=_now()
        )
        if session is not None:
            session.add(row)
            return
        with Session(self.engine) as s, s.begin():
            s.add(row)

    def changes(self, name: str) -> list[dict[str, Any]]:
        with Session(self.engine) as s:
            rows = s.scalars(
                select(ChangeRow).where(ChangeRow.assignment == name).order_by(ChangeRow.id)
            )
            return [
                {
                    "kind": r.kind,
                    "detail": json.loads(r.detail_json),
                    "by": r.by,
                    "why": r.why,
                    "at": r.at,
                }
                for r in rows
            ]

    # --- extensions ---------------------------------------------------------------------

    def rosters(self) -> dict[str, set[str]]:
        """Each recorded assignment's students, from its released keys."""
        out = {}
        with Session(self.engine) as s:
            rows = list(s.scalars(select(AssignmentRow)))
        for row in rows:
            try:
                out[row.name] = set(read_release(Path(row.keys_dir or "")).students)
            except KeyFileError as err:
                raise GradebookError(f"{row.name}: {err}") from None
        return out

    def add_extensions(self, extensions: list[Extension]) -> None:
        """Record extensions.  One for an unknown assignment or a student not on its
        roster refuses the whole list, one line each, and records nothing."""
        roster = self.rosters()
        problems = []
        for e in extensions:
            if e.assignment not in roster:
                problems.append(
                    f"{e.source}: student {e.student_id}: no assignment {e.assignment!r} in the "
                    f"gradebook (it has: {', '.join(sorted(roster)) or 'none'})"
                )
            elif e.student_id not in roster[e.assignment]:
                problems.append(
                    f"{e.source}: student {e.student_id} is not on the roster of {e.assignment}"
                )
        if problems:
            raise GradebookError("\n".join(problems))
        with Session(self.engine) as s, s.begin():
            s.add_all(ExtensionRow(**asdict(e), granted_at=_now()) for e in extensions)

    def extensions(self) -> dict[tuple[str, str], Extension]:
        """The extension in force per (assignment, student): the latest granted."""
        with Session(self.engine) as s:
            return _extensions(s)

    # --- marks ------------------------------------------------------------------------------

    def add_marks(self, marks: list[Mark]) -> list[Moved]:
        """Record marks (each kept, with who and when) and make those standings again."""
        now = _now()
        with Session(self.engine) as s, s.begin():
            s.add_all(MarkRow(**asdict(m), marked_at=now) for m in marks)
            s.flush()
            return self._restate(s, {m.student_id for m in marks})

    def marks(self, assignment: str, student_id: str) -> list[MarkRow]:
        """Every mark given to a student's parts, oldest first (the history)."""
        with Session(self.engine) as s:
            return list(
                s.scalars(
                    select(MarkRow)
                    .where(MarkRow.assignment == assignment, MarkRow.student_id == student_id)
                    .order_by(MarkRow.id)
                )
            )

    # --- attempts and standings ----------------------------------------------------------

    def unchanged(
        self, assignment: str, student_id: str, content_hash: str, key_sha256: str | None = None
    ) -> bool:
        """Was exactly this content already graded (and recorded) for this student, with
        this key (``key_sha256``, when given: a reseed or a re-key is a change)?"""
        with Session(self.engine) as s:
            row = s.execute(
                select(Submission.content_hash, Attempt.key_sha256)
                .outerjoin(Attempt, Attempt.id == Submission.attempt_id)
                .where(Submission.assignment == assignment, Submission.student_id == student_id)
            ).first()
        if row is None or row[0] != content_hash:
            return False
        return key_sha256 is None or row[1] == key_sha256

    def record(
        self,
        assignment: str,
        result: StudentResult,
        doc: dict | None = None,
        *,
        submitted: SubmittedAt | None = None,
        notebook: Path | None = None,
        key_sha256: str | None = None,
        checks: dict[str, str] | None = None,
        policy: Policy | None = None,
        within: Callable[[Session, int], None] | None = None,
    ) -> tuple[dict[str, Any], list[Moved]]:
        """Append the attempt and make it the student's current result.  Return their
        standing, and what changed of their other standings (a late-day pool spent
        anew); ``doc``: the result's :func:`result_to_json`, where made already.

        ``within(session, attempt_id)`` runs in the same transaction once the attempt has
        its id: what else must be written with it or not at all (the platform's queue
        marks its job done there); an exception from it records nothing."""
        doc = result_to_json(result) if doc is None else doc
        raw = json.dumps(doc, sort_keys=True)
        now = _now()
        with Session(self.engine) as s, s.begin():
            attempt = Attempt(
                assignment=assignment,
                student_id=result.student_id,
                content_hash=result.content_hash,
                notebook=str(Path(notebook).resolve()) if notebook is not None else None,
                submitted_at=submitted.at.isoformat() if submitted else None,
                time_source=submitted.source if submitted else "not submitted",
                time_warning=submitted.warning if submitted else None,
                graded_at=now,
                key_sha256=key_sha256,
                checks_json=json.dumps(checks, sort_keys=True) if checks is not None else None,
                policy_json=policy.model_dump_json() if policy is not None else None,
                harvest_json=(
                    json.dumps(result.harvest, sort_keys=True)
                    if result.harvest is not None
                    else None
                ),
                result_json=raw,
                score=result.score,
                error=result.error,
            )
            s.add(attempt)
            s.flush()
            if within is not None:
                within(s, attempt.id)
            old = s.scalar(
                select(Submission.id).where(
                    Submission.assignment == assignment,
                    Submission.student_id == result.student_id,
                )
            )
            if old is not None:
                s.execute(delete(PartGrade).where(PartGrade.submission_id == old))
                s.execute(delete(Submission).where(Submission.id == old))
            row = Submission(
                assignment=assignment,
                student_id=result.student_id,
                content_hash=result.content_hash,
                score=result.score,
                max_score=result.max_score,
                error=result.error,
                graded_at=now,
                result_json=raw,
                attempt_id=attempt.id,
                submitted_at=attempt.submitted_at,
                earned=result.score,
                late_penalty=0.0,
            )
            s.add(row)
            s.flush()
            parts = _part_rows(row.id, doc)
            if parts:
                s.execute(insert(PartGrade), parts)
            moved = self._restate(s, {result.student_id})
        elsewhere = [m for m in moved if m.assignment != assignment]
        return self.result(assignment, result.student_id), elsewhere

    def restate(self, students: set[str] | None = None) -> list[Moved]:
        """Make the standings again from the attempts, extensions, deadlines and policies
        (no notebook runs); return each standing whose score changed."""
        with Session(self.engine) as s, s.begin():
            return self._restate(s, students)

    def _restate(self, s: Session, students: set[str] | None) -> list[Moved]:
        assignments = {a.name: a for a in s.scalars(select(AssignmentRow))}
        query = select(Submission)
        if students is not None:
            query = query.where(Submission.student_id.in_(students))
        current = list(s.scalars(query))
        raws = {
            a.id: a
            for a in s.scalars(
                select(Attempt).where(Attempt.id.in_([c.attempt_id for c in current]))
            )
        }
        extensions = _extensions(s)
        marks = _marks(s, {c.student_id for c in current} if students is not None else None)
        entries = []
        for c in current:
            a, attempt = assignments.get(c.assignment), raws.get(c.attempt_id)
            if a is None or attempt is None:
                continue  # graded before assignments were recorded: as it was
            ext = extensions.get((c.assignment, c.student_id))
            entries.append(
                Entry(
                    course=a.course,
                    assignment=c.assignment,
                    student_id=c.student_id,
                    due=ext.moves(a.due_in_force) if ext else a.due_in_force,
                    submitted_at=(
                        datetime.fromisoformat(attempt.submitted_at)
                        if attempt.submitted_at
                        else None
                    ),
                    time_source=attempt.time_source,
                    policy=a.policy,
                    extension=ext.note(a.timezone) if ext else None,
                    warning=attempt.time_warning,
                )
            )
        decided = lateness.spend_pool(entries)
        moved = []
        for c in current:
            late = decided.get((c.assignment, c.student_id))
            if late is None:
                continue
            zone = assignments[c.assignment].timezone
            doc = standing(
                json.loads(raws[c.attempt_id].result_json),
                late,
                zone,
                marks.get((c.assignment, c.student_id)),
            )
            text_ = json.dumps(doc, sort_keys=True)
            if text_ == c.result_json:
                continue
            moved.append(
                Moved(c.assignment, c.student_id, c.score, doc["score"], doc["late"]["note"])
            )
            c.result_json = text_
            c.score = doc["score"]
            c.earned = doc["earned"]
            c.late_penalty = late.penalty
            s.execute(delete(PartGrade).where(PartGrade.submission_id == c.id))
            parts = _part_rows(c.id, doc)
            if parts:
                s.execute(insert(PartGrade), parts)
        return moved

    def result(self, assignment: str, student_id: str) -> dict[str, Any] | None:
        """The student's standing on the assignment (None: nothing graded yet)."""
        with Session(self.engine) as s:
            raw = s.scalar(
                select(Submission.result_json).where(
                    Submission.assignment == assignment, Submission.student_id == student_id
                )
            )
        return None if raw is None else json.loads(raw)

    def results(self, assignment: str) -> list[dict[str, Any]]:
        """Every student's standing on the assignment (as JSON documents), by student id."""
        with Session(self.engine) as s:
            rows = s.scalars(
                select(Submission.result_json)
                .where(Submission.assignment == assignment)
                .order_by(Submission.student_id)
            )
            return [json.loads(r) for r in rows]

    def graded(self, assignment: str) -> int:
        """How many students have a standing on the assignment (one count, no document
        read: the instructor's course page asks it on every load)."""
        with Session(self.engine) as s:
            query = select(func.count()).where(Submission.assignment == assignment)
            return int(s.scalar(query.select_from(Submission)) or 0)

    def latest(self, assignment: str) -> list[tuple[dict[str, Any], Attempt | None]]:
        """Every student's standing on the assignment with the attempt it was made from."""
        with Session(self.engine) as s:
            rows = list(
                s.execute(
                    select(Submission.result_json, Attempt)
                    .outerjoin(Attempt, Attempt.id == Submission.attempt_id)
                    .where(Submission.assignment == assignment)
                    .order_by(Submission.student_id)
                )
            )
        return [(json.loads(doc), attempt) for doc, attempt in rows]

    def attempts(self, assignment: str, student_id: str) -> list[Attempt]:
        """Every graded attempt of a student, oldest first."""
        with Session(self.engine) as s:
            return list(
                s.scalars(
                    select(Attempt)
                    .where(Attempt.assignment == assignment, Attempt.student_id == student_id)
                    .order_by(Attempt.id)
                )
            )


def _extensions(s: Session) -> dict[tuple[str, str], Extension]:
    rows = s.scalars(select(ExtensionRow).order_by(ExtensionRow.id))
    return {(r.assignment, r.student_id): _as(Extension, r) for r in rows}


def _marks(
    s: Session, students: set[str] | None
) -> dict[tuple[str, str], dict[tuple[str, str], Mark]]:
    """The mark in force per (assignment, student), by (question, part): the latest given."""
    query = select(MarkRow).order_by(MarkRow.id)
    if students is not None:
        query = query.where(MarkRow.student_id.in_(students))
    out: dict[tuple[str, str], dict[tuple[str, str], Mark]] = {}
    for r in s.scalars(query):
        out.setdefault((r.assignment, r.student_id), {})[(r.question, r.part)] = _as(Mark, r)
    return out


def _as(kind: type, row: Base) -> Any:
    """A row as the dataclass whose fields are its columns (what was recorded from it)."""
    return kind(**{f.name: getattr(row, f.name) for f in fields(kind)})


def _part_rows(submission_id: int, doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "submission_id": submission_id,
            "question": g["question"],
            "part": g["verdict"]["part"],
            "status": g["verdict"]["status"],
            "score": g["verdict"]["score"],
            "points": g["verdict"]["points"],
            "misconception": g["verdict"]["misconception"],
        }
        for g in doc["parts"]
    ]
