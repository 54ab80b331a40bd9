"""The platform's own tables, in the gradebook's database: accounts and the grading queue.

They have their own alembic chain (``migrations/``, version table ``server_version``),
so the gradebook's schema (:mod:`autograder.semester.gradebook`) stays the gradebook's:
the CLI reads and writes a served course's gradebook exactly as any other.

- ``accounts``: who may sign in, with one role (student, ta, instructor); a student's
  ``login`` is their roster id, the only id the platform ever grades them as.  A password
  (scrypt) for sign-in on the platform's own page; an LTI identity (issuer, subject)
  for a launch from the LMS.
- ``jobs``: every upload, queued until a worker grades it (:mod:`.queue`).
- ``lti_links`` and ``lti_launch_data``: where each student's score goes back in the LMS
  and what was sent there, and the one-time values of LTI launches (:mod:`.lti`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Column, Float, Index, MetaData, String, Table, Text, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

HEAD = "0002"  # the newest migration under migrations/versions/
VERSION_TABLE = "server_version"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
ROLES = ("student", "ta", "instructor")


class Base(DeclarativeBase):
    pass


_VERSION = Table(VERSION_TABLE, MetaData(), Column("version_num", String(32), primary_key=True))


class Account(Base):
    __tablename__ = "accounts"
    __table_args__ = (Index("accounts_by_lti", "lti_issuer", "lti_subject", unique=True),)

    id: Mapped[int] = mapped_column(primary_key=True)
    login: Mapped[str] = mapped_column(String(200), unique=True)  # a student's roster id
    role: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(400), default="")
    password: Mapped[str | None] = mapped_column(Text, nullable=True)  # scrypt$...; None: LTI
    lti_issuer: Mapped[str | None] = mapped_column(String(400), nullable=True)
    lti_subject: Mapped[str | None] = mapped_column(String(400), nullable=True)
    created_at: Mapped[str] = mapped_column(String(40))


class Job(Base):
    """One upload to grade: queued -> running -> done (or superseded by a newer upload of
    the same student, or failed after ``MAX_TRIES`` workers died on it)."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index("jobs_by_state", "state", "id"),
        Index("jobs_by_student", "assignment", "student_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment: Mapped[str] = mapped_column(String(200))
    student_id: Mapped[str] = mapped_column(String(200))
    upload: Mapped[str] = mapped_column(Text)  # the stored notebook, under the data folder
    sha256: Mapped[str] = mapped_column(String(64))
    submitted_at: Mapped[str] = mapped_column(String(40))  # the server's clock, UTC
    state: Mapped[str] = mapped_column(String(20), default="queued")
    tries: Mapped[int] = mapped_column(default=0)
    worker: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[float | None] = mapped_column(Float, nullable=True)  # epoch seconds
    started_at: Mapped[str | None] = mapped_column(String(40), nullable=True)
    finished_at: Mapped[str | None] = mapped_column(String(40), nullable=True)
    attempt_id: Mapped[int | None] = mapped_column(nullable=True)  # the gradebook's attempt
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class LtiLink(Base):
    """Where a student's score on an assignment goes in the LMS (the AGS line item their
    last launch named) and what was sent there: posted again only when it changes."""

    __tablename__ = "lti_links"
    __table_args__ = (Index("lti_links_by_student", "assignment", "student_id", unique=True),)

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment: Mapped[str] = mapped_column(String(200))
    student_id: Mapped[str] = mapped_column(String(200))
    issuer: Mapped[str] = mapped_column(String(400))
    client_id: Mapped[str] = mapped_column(String(400))
    lti_user: Mapped[str] = mapped_column(String(400))  # the launch's sub: the score's userId
    lineitem: Mapped[str] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(Text)  # the AGS scopes granted, as JSON
    launched_at: Mapped[str] = mapped_column(String(40))
    best_score: Mapped[float | None] = mapped_column(Float, nullable=True)  # best seen
    best_max: Mapped[float | None] = mapped_column(Float, nullable=True)
    best_progress: Mapped[str | None] = mapped_column(String(20), nullable=True)
    posted_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    posted_max: Mapped[float | None] = mapped_column(Float, nullable=True)
    posted_progress: Mapped[str | None] = mapped_column(String(20), nullable=True)
    posted_at: Mapped[str | None] = mapped_column(String(40), nullable=True)
    tries: Mapped[int] = mapped_column(default=0)  # failed posts since the last success
    retry_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # epoch seconds
    error: Mapped[str | None] = mapped_column(Text, nullable=True)


class LtiLaunchData(Base):
    """pylti1p3's launch data, in the database rather than a cookie: the state and nonce
    of each OIDC login (used once), the platforms' cached public keys."""

    __tablename__ = "lti_launch_data"
    __table_args__ = (Index("lti_launch_data_by_expiry", "expires_at"),)

    name: Mapped[str] = mapped_column(String(400), primary_key=True)
    value: Mapped[str] = mapped_column(Text)  # JSON
    expires_at: Mapped[float] = mapped_column(Float)  # epoch seconds


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def migrate(engine: Engine) -> None:
    """Bring the platform's tables to ``HEAD``: made from the models in a new database
    (they and the migrations agree: tests/scalegrade/server/test_store.py), upgraded
    with alembic in an older one."""
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        if VERSION_TABLE in tables:
            current = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
            if current == HEAD:
                return
    if VERSION_TABLE not in tables:
        with engine.begin() as conn:
            Base.metadata.create_all(conn)
            _VERSION.create(conn)
            conn.execute(_VERSION.insert().values(version_num=HEAD))
        return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
