"""The platform's commands (scalegrade/cli/serve.py): accounts from the rosters, one
account at a time, and `serve` refusing what it cannot serve with one clear line."""

from __future__ import annotations

import csv
import stat
import subprocess
import sys

from click.testing import CliRunner

from scalegrade.cli import main
from scalegrade.server.security import sign_in


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_accounts_for_the_roster_are_made_once_and_written_for_the_instructor_only(
    course, tmp_path, config
):
    out = tmp_path / "passwords.csv"
    done = run("accounts", "roster", "--course", str(course), "--out", str(out))
    assert done.exit_code == 0, done.output
    assert "8 student accounts made" in done.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    rows = list(csv.DictReader(out.open()))
    assert [r["login"] for r in rows] == [f"s{i:02d}" for i in range(8)]
    from autograder.semester.gradebook import Gradebook

    book = Gradebook(config.db_url)
    assert sign_in(book.engine, "s03", rows[3]["password"]).role == "student"
    book.close()
    again = run("accounts", "roster", "--course", str(course), "--out", str(out))
    assert "0 student accounts made (8 had one already)" in again.output


def test_an_account_is_added_with_its_role_and_a_student_must_be_on_a_roster(course):
    done = run("accounts", "add", "--course", str(course), "tess", "--role", "ta")
    assert done.exit_code == 0 and "tess (ta): password" in done.output
    refused = run("accounts", "add", "--course", str(course), "mallory", "--role", "student")
    assert refused.exit_code == 2 and "on no roster" in refused.output


def test_serve_names_a_folder_with_nothing_to_serve(tmp_path):
    done = run("serve", "--course", str(tmp_path))
    assert done.exit_code == 2
    assert "no released assignment" in done.output and "scalegrade generate" in done.output


def test_serve_names_a_broken_lti_file_in_one_line(course):
    (course / "lti.json").write_text("{")
    (course / "serve.toml").write_text('lti = "lti.json"\nworkers = 0\nport = 0\n')
    done = subprocess.run(
        [sys.executable, "-m", "scalegrade.cli", "serve", "--course", str(course)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "lti.json" in done.stderr and "Traceback" not in done.stderr
