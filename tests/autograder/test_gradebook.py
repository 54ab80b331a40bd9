"""The gradebook on SQLite (the default; PostgreSQL: test_gradebook_postgres.py): each
student's standing with its part grades, every attempt kept, and migrations that carry a
gradebook of an earlier ScaleGrade forward without losing a grade."""

from __future__ import annotations

import shutil
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from autograder.grading.compare import Verdict
from autograder.grading.grade import Graded, StudentResult
from autograder.semester.gradebook import (
    HEAD,
    MIGRATIONS,
    Gradebook,
    GradebookError,
    PartGrade,
    result_to_json,
)
from autograder.semester.lateness import Extension
from autograder.semester.submitted_at import SubmittedAt

# written by `scalegrade demo` at commit 0497d62, before the gradebook had migrations (six
# of its thirty students kept): the file a course graded with that version has
OLD = Path(__file__).resolve().parents[1] / "data" / "gradebook_0497d62.sqlite"


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
    assert book.graded("tdlsm/hw1") == 2 and book.graded("tdlsm/hw2") == 0
    assert book.unchanged("tdlsm/hw1", "ana", "h3") and not book.unchanged("tdlsm/hw1", "ana", "h1")
    assert mode == "wal"  # a commit per student without an fsync each
    book.close()


def test_every_attempt_is_kept_with_its_harvest_time_and_hashes(tmp_path):
    book = Gradebook(f"sqlite:///{tmp_path / 'gradebook.sqlite'}")
    first = replace(
        _result("ana", 1.0, {"a": 1.0, "b": 0.0}, "h1"),
        harvest={"answers": {"q1_a": {"kind": "number", "value": 1.0}}},
    )
    when = SubmittedAt(datetime(2026, 12, 18, 20, 0, tzinfo=UTC), "nbgrader")
    book.record("tdlsm/hw1", first, submitted=when, key_sha256="k" * 64, checks={"c": "d"})
    book.record("tdlsm/hw1", _result("ana", 2.0, {"a": 1.0, "b": 1.0}, "h2"))
    older, newer = book.attempts("tdlsm/hw1", "ana")
    assert (older.content_hash, older.score, newer.content_hash, newer.score) == (
        "h1",
        1.0,
        "h2",
        2.0,
    )
    assert older.harvest_json == '{"answers": {"q1_a": {"kind": "number", "value": 1.0}}}'
    assert older.submitted_at == "2026-12-18T20:00:00+00:00" and older.time_source == "nbgrader"
    assert older.key_sha256 == "k" * 64 and older.checks_json == '{"c": "d"}'
    assert "harvest" not in result_to_json(first)  # the result documents stay plain results
    book.close()


def test_the_migrations_head_is_the_one_the_gradebook_expects():
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD


def test_a_gradebook_from_before_migrations_is_upgraded_and_loses_nothing(tmp_path):
    path = tmp_path / "gradebook.sqlite"
    shutil.copy(OLD, path)
    with sqlite3.connect(path) as db:
        before = db.execute(
            "SELECT student_id, score, result_json FROM submissions ORDER BY student_id"
        ).fetchall()
        parts_before = db.execute("SELECT COUNT(*) FROM part_grades").fetchone()[0]
    assert len(before) == 6 and parts_before == 504
    book = Gradebook(f"sqlite:///{path}")
    with book.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD
        assert {"attempts", "assignments", "extensions", "changes"} <= set(
            inspect(conn).get_table_names()
        )
        assert conn.execute(text("SELECT COUNT(*) FROM part_grades")).scalar() == parts_before
    results = book.results("tdlsm/hw1")
    assert [(r["student_id"], r["score"]) for r in results] == [(s, x) for s, x, _ in before]
    # each old result is its student's first attempt, its time unknown
    (attempt,) = book.attempts("tdlsm/hw1", "ana")
    assert attempt.result_json == dict((s, j) for s, _, j in before)["ana"]
    assert attempt.submitted_at is None and "unknown" in attempt.time_source
    # and a new attempt lands beside it, the old results untouched
    book.record("tdlsm/hw1", _result("ana", 1.0, {"a": 1.0}, "h-new"))
    assert len(book.attempts("tdlsm/hw1", "ana")) == 2
    assert [r["score"] for r in book.results("tdlsm/hw1") if r["student_id"] == "ben"] == [
        pytest.approx(86.0555555555556)
    ]
    book.close()
    Gradebook(f"sqlite:///{path}").close()  # opening it again migrates nothing


def test_an_extension_for_an_unknown_student_or_assignment_records_nothing(tmp_path):
    book = Gradebook(f"sqlite:///{tmp_path / 'gradebook.sqlite'}")
    ext = Extension("zoe", "tdlsm/hw9", None, 2.0, "Ada", "ill", "extensions.csv:2")
    with pytest.raises(GradebookError, match=r"extensions.csv:2: student zoe: no assignment"):
        book.add_extensions([ext])
    assert book.extensions() == {}
    with pytest.raises(GradebookError, match="knows no assignment 'tdlsm/hw9'"):
        book.assignment("tdlsm/hw9")
    book.close()


def test_a_new_gradebook_from_the_models_is_the_one_the_migrations_make(tmp_path):
    """A new gradebook is made from the models at once; an old one is migrated: both
    must be the same schema, or an upgraded course would differ from a new one."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from autograder.semester.gradebook import Base

    migrated = tmp_path / "migrated.sqlite"
    shutil.copy(OLD, migrated)
    for path in (migrated, tmp_path / "new.sqlite"):
        book = Gradebook(f"sqlite:///{path}")
        with book.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD
        book.close()
