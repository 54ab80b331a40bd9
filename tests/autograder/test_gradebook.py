"""The gradebook on SQLite (the default; PostgreSQL: test_gradebook_postgres.py): one row
per student and assignment, its part grades beside it, a regrade replacing both."""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from autograder.compare import Verdict
from autograder.grade import Graded, StudentResult
from autograder.gradebook import Gradebook, PartGrade, result_to_json


def _result(student: str, score: float, parts: dict[str, float], digest: str) -> StudentResult:
    graded = [
        Graded("q1-memory", 1, "Memory", Verdict(p, p, 1.0, s, "correct" if s else "wrong", ""))
        for p, s in parts.items()
    ]
    return StudentResult(student, score, float(len(parts)), graded, content_hash=digest)


def test_a_regrade_replaces_the_student_and_their_part_grades(tmp_path):
    book = Gradebook(f"sqlite:///{tmp_path / 'gradebook.sqlite'}")
    book.record("tdlsm/hw1", _result("ana", 1.0, {"a": 1.0, "b": 0.0}, "h1"))
    book.record("tdlsm/hw1", _result("ben", 2.0, {"a": 1.0, "b": 1.0}, "h2"))
    again = _result("ana", 2.0, {"a": 1.0, "b": 1.0, "c": 0.0}, "h3")
    book.record("tdlsm/hw1", again, result_to_json(again))  # the document the batch made
    with Session(book.engine) as s:
        parts = s.execute(select(PartGrade.part, PartGrade.score)).all()
        mode = s.execute(text("PRAGMA journal_mode")).scalar()
    assert sorted(parts) == [("a", 1.0), ("a", 1.0), ("b", 1.0), ("b", 1.0), ("c", 0.0)]
    assert [(r["student_id"], r["score"]) for r in book.results("tdlsm/hw1")] == [
        ("ana", 2.0),
        ("ben", 2.0),
    ]
    assert book.unchanged("tdlsm/hw1", "ana", "h3") and not book.unchanged("tdlsm/hw1", "ana", "h1")
    assert mode == "wal"  # a commit per student without an fsync each
    book.close()
