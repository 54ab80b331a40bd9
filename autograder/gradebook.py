"""The gradebook: SQLAlchemy, SQLite by default, PostgreSQL by URL.

One row per (assignment, student) with the content hash of what was graded, the score
and the whole result as JSON; one row per graded part.  Recording a student is one
transaction, so a grader killed mid-batch loses nothing already recorded, and a rerun
skips submissions whose content hash is unchanged.  SQLite runs in WAL mode with
``synchronous=NORMAL``: a commit is not an fsync (26 ms each here), and a grader that
dies still loses nothing committed; only the machine losing power may lose the last ones.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Float,
    ForeignKey,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    insert,
    select,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from autograder.grade import StudentResult


class Base(DeclarativeBase):
    pass


class Submission(Base):
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


def result_to_json(result: StudentResult) -> dict[str, Any]:
    return asdict(result)


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
        Base.metadata.create_all(self.engine)

    def close(self) -> None:
        self.engine.dispose()

    def unchanged(self, assignment: str, student_id: str, content_hash: str) -> bool:
        """Was exactly this content already graded (and recorded) for this student?"""
        with Session(self.engine) as s:
            row = s.scalar(
                select(Submission).where(
                    Submission.assignment == assignment, Submission.student_id == student_id
                )
            )
            return row is not None and row.content_hash == content_hash

    def record(self, assignment: str, result: StudentResult, doc: dict | None = None) -> None:
        """Replace this student's grade for the assignment, atomically (``doc``: the
        result's :func:`result_to_json`, where the caller has made it already)."""
        doc = result_to_json(result) if doc is None else doc
        with Session(self.engine) as s, s.begin():
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
                graded_at=datetime.now(UTC).isoformat(timespec="seconds"),
                result_json=json.dumps(doc, sort_keys=True),
            )
            s.add(row)
            s.flush()  # its id, for the part grades: inserted in one statement
            parts = [
                {
                    "submission_id": row.id,
                    "question": g.question,
                    "part": g.verdict.part,
                    "status": g.verdict.status,
                    "score": g.verdict.score,
                    "points": g.verdict.points,
                    "misconception": g.verdict.misconception,
                }
                for g in result.parts
            ]
            if parts:
                s.execute(insert(PartGrade), parts)

    def results(self, assignment: str) -> list[dict[str, Any]]:
        """Every recorded result of the assignment (as JSON documents), by student id."""
        with Session(self.engine) as s:
            rows = s.scalars(
                select(Submission)
                .where(Submission.assignment == assignment)
                .order_by(Submission.student_id)
            )
            return [json.loads(r.result_json) for r in rows]
