"""The platform: `serve` (the web application and its grading workers), `work` (more
workers, on another machine) and `accounts` (who may sign in)."""

from __future__ import annotations

import csv
import secrets
from pathlib import Path

import click

from scalegrade.cli.common import console, fail


def _config(course: Path | None, config_file: Path | None, **given):
    from scalegrade.server.config import ConfigError, load

    try:
        return load(course, config_file, **given)
    except ConfigError as err:
        fail(str(err))


def _needs_the_extra() -> None:
    try:
        import python_multipart  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as err:
        fail(f"the platform needs the serve extra: pip install 'scalegrade[serve]' ({err})")


course_option = click.option(
    "--course",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="The folder of released assignments (each COURSE/NAME/keys/, COURSE/NAME/release/).",
)
config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="A serve.toml [default: COURSE/serve.toml, if there]; docs/platform.md.",
)


def _open(config):
    """The platform's gradebook, with its tables; the course, checked."""
    from autograder.semester.gradebook import Gradebook
    from scalegrade.server import store
    from scalegrade.server.course import Course, CourseError

    try:
        course = Course(config.course)
    except CourseError as err:
        fail(str(err))
    config.data_dir.mkdir(parents=True, exist_ok=True)
    book = Gradebook(config.db_url)
    store.migrate(book.engine)
    return book, course


@click.command()
@course_option
@config_option
@click.option("--host", help="Address to listen on [default: 127.0.0.1].")
@click.option("--port", type=int, help="Port [default: 8000].")
@click.option("--workers", type=click.IntRange(min=0), help="Grading workers [default: 2].")
@click.option("--db", help="Gradebook URL [default: sqlite in COURSE/server].")
def serve(course: Path | None, config_file: Path | None, **given) -> None:
    """Serve COURSE's released assignments: students sign in, upload and get their verdict;
    TAs mark; instructors watch the gradebook.  Until Ctrl-C."""
    _needs_the_extra()
    config = _config(course, config_file, **given)
    book, _course = _open(config)
    try:
        first = _first_instructor(book.engine)
    finally:
        book.close()
    from scalegrade.server.config import ConfigError
    from scalegrade.server.run import serve as run

    def ready() -> None:
        console.print(
            f"ScaleGrade serves {config.course} on [bold]{config.url}[/] with "
            f"{config.workers} grading workers; Ctrl-C stops it.",
            highlight=False,
        )
        if first:
            console.print(
                f"First start: sign in as [bold]instructor[/] with password [bold]{first}[/] "
                "(shown once; `scalegrade accounts` adds TAs and students).",
                highlight=False,
            )

    try:
        run(config, on_ready=ready)
    except KeyboardInterrupt:
        pass
    except ConfigError as err:  # the LTI tool's file, read as the app starts
        fail(str(err))


def _first_instructor(engine) -> str | None:
    """On a platform without an instructor, make one (login ``instructor``); its password."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from scalegrade.server.security import add_account
    from scalegrade.server.store import Account

    with Session(engine) as s:
        if s.scalar(select(Account.id).where(Account.role == "instructor")) is not None:
            return None
    password = secrets.token_urlsafe(12)
    add_account(engine, "instructor", "instructor", name="Instructor", password=password)
    return password


@click.command()
@course_option
@config_option
@click.option("--name", help="This worker's name in the queue [default: HOST:PID].")
def work(course: Path | None, config_file: Path | None, name: str | None) -> None:
    """One more grading worker for a served course, here: it shares the server's queue
    through its gradebook (a PostgreSQL --db, in serve.toml or $SCALEGRADE_SERVE_DB)."""
    from scalegrade.server.worker import main

    config = _config(course, config_file)
    main(config, name)


@click.group()
def accounts() -> None:
    """Who may sign in to a served course: students, TAs and instructors."""


@accounts.command("add")
@course_option
@config_option
@click.argument("login")
@click.option("--role", required=True, type=click.Choice(["student", "ta", "instructor"]))
@click.option("--name", default="", help="The name shown on the pages.")
def accounts_add(course, config_file, login: str, role: str, name: str) -> None:
    """Make LOGIN an account (a student's login is their roster id), or change its role
    and name; prints a new password."""
    from scalegrade.server.security import AccountError, add_account

    book, served = _open(_config(course, config_file))
    try:
        if role == "student" and login not in served.students():
            fail(f"{login} is on no roster of {served.root}: a student's login is their roster id")
        password = secrets.token_urlsafe(12)
        add_account(book.engine, login, role, name=name, password=password)
    except AccountError as err:
        fail(str(err))
    finally:
        book.close()
    console.print(f"{login} ({role}): password [bold]{password}[/]", highlight=False)


@accounts.command("roster")
@course_option
@config_option
@click.option("--out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The CSV of logins and passwords to write (for your mail merge).")  # fmt: skip
def accounts_roster(course, config_file, out: Path) -> None:
    """An account for every student on the course's rosters who has none, with a new
    password each, written to OUT (readable by you only)."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from scalegrade.server.security import add_account
    from scalegrade.server.store import Account

    book, served = _open(_config(course, config_file))
    rows = []
    try:
        with Session(book.engine) as s:
            have = set(s.scalars(select(Account.login)))
        people = {}
        for a in served.assignments.values():
            for sid in a.release.students:
                people.setdefault(sid, a.keys.key(sid).student)
        for sid, student in sorted(people.items()):
            if sid in have:
                continue
            password = secrets.token_urlsafe(12)
            add_account(book.engine, sid, "student", name=student.name, password=password)
            rows.append((sid, student.name, student.email, password))
    finally:
        book.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.touch(mode=0o600)
    with out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["login", "name", "email", "password"])
        w.writerows(rows)
    console.print(
        f"{len(rows)} student accounts made ({len(have)} had one already); their passwords: {out}",
        highlight=False,
    )


# Registered on `scalegrade` by scalegrade/cli/__init__.py.
COMMANDS = (serve, work, accounts)
