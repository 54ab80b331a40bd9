"""The gradebook on a real PostgreSQL server (a throwaway cluster: tests/postgres.py)."""

from __future__ import annotations

import sqlite3

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text

from autograder.grading.grade import StudentResult
from autograder.semester.gradebook import MIGRATIONS, Gradebook
from tests import postgres
from tests.autograder.test_gradebook import OLD


def test_gradebook_round_trip_on_postgresql(postgres_url):
    book = Gradebook(postgres_url)
    first = StudentResult("ana", 3.0, 10.0, [], content_hash="h1")
    book.record("tdlsm/hw1", first)
    book.record("tdlsm/hw1", StudentResult("ben", 7.5, 10.0, [], content_hash="h2"))
    book.record("tdlsm/hw1", StudentResult("ana", 9.0, 10.0, [], content_hash="h3"))  # regrade
    assert book.unchanged("tdlsm/hw1", "ana", "h3") and not book.unchanged("tdlsm/hw1", "ana", "h1")
    assert [(r["student_id"], r["score"]) for r in book.results("tdlsm/hw1")] == [
        ("ana", 9.0),
        ("ben", 7.5),
    ]
    book.close()


def test_a_gradebook_from_before_migrations_is_upgraded_on_postgresql(postgres_url):
    """The SQLite test's file, loaded into PostgreSQL as that version left it (its tables,
    no alembic_version), then opened: every grade is there, as an attempt too."""
    url = postgres.database(postgres_url, "before_migrations")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = create_engine(url)
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        conn.execute(text("DROP TABLE alembic_version"))
        with sqlite3.connect(OLD) as old:
            for table in ("submissions", "part_grades"):
                cursor = old.execute(f"SELECT * FROM {table}")
                names = [c[0] for c in cursor.description]
                rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
                columns = ", ".join(names)
                values = ", ".join(f":{n}" for n in names)
                conn.execute(text(f"INSERT INTO {table} ({columns}) VALUES ({values})"), rows)
    engine.dispose()
    book = Gradebook(url)
    scores = [(r["student_id"], r["score"]) for r in book.results("tdlsm/hw1")]
    assert len(scores) == 6 and dict(scores)["ana"] == pytest.approx(87.3)
    assert len(book.attempts("tdlsm/hw1", "ana")) == 1
    book.close()
