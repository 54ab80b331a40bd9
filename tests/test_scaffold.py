"""A bank of one's own from nothing (scalegrade/scaffold.py): `scalegrade new-bank`, then
`scalegrade new --code`, validate, generate and grade with no edit, through the CLI and the
real sandbox."""

from __future__ import annotations

import csv
import io
import shutil

from click.testing import CliRunner

from generator import bank as banks
from scalegrade.cli import main


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_new_bank_and_a_new_code_question_validate_generate_and_grade(tmp_path):
    bank = tmp_path / "bank"
    done = _cli("new-bank", bank, "--course", "ml101", "--title", "ML systems 101")
    assert done.exit_code == 0, done.output
    done = _cli("new", "mine/second-code", "--code", "--bank", bank, "--assignment", "hw1")
    assert done.exit_code == 0, done.output
    listed = (bank / "assignments" / "ml101" / "hw1.yaml").read_text()
    assert listed.rstrip().endswith("- question: mine/second-code")

    done = _cli("validate", "ml101/hw1", "--bank", bank, "--students", "20")
    assert done.exit_code == 0, done.output
    assert "release check of 2 code parts" in done.output  # the example's and the new one
    assert "FAIL" not in done.output

    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,a@x\nben,Ben,b@x\n", encoding="utf-8")
    (tmp_path / "secret").write_text("s" * 40)
    done = _cli("generate", "ml101/hw1", "--bank", bank, "--roster", roster, "--out",
                tmp_path / "hw1", "--secret-file", tmp_path / "secret", "--with-solutions",
                "--selfcheck-seeds", "0")  # fmt: skip
    assert done.exit_code == 0, done.output
    subs = tmp_path / "subs"
    shutil.copytree(tmp_path / "hw1" / "solutions", subs)
    shutil.copytree(tmp_path / "hw1" / "release" / "ben", subs / "ben", dirs_exist_ok=True)
    done = _cli("grade", "ml101/hw1", subs, "--keys", tmp_path / "hw1" / "keys", "--out",
                tmp_path / "grades", "--no-reveal")  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = {
        r["student_id"]: r
        for r in csv.DictReader(io.StringIO((tmp_path / "grades" / "summary.csv").read_text()))
    }
    # ana's solutions earn every point: 2 + 3 + 3 (the scaffolds' question.yaml: two numeric
    # parts of 1; a numeric part of 1 and a code part of 2, twice); ben's untouched notebook
    # none
    assert float(rows["ana"]["total"]) == float(rows["ana"]["max"]) == 8.0
    assert float(rows["ben"]["total"]) == 0.0


def test_new_refuses_what_exists_and_names_the_fix(tmp_path):
    bank = tmp_path / "bank"
    assert _cli("new-bank", bank).exit_code == 0
    done = _cli("new-bank", bank)
    assert done.exit_code == 2 and "exists and is not empty" in done.output
    done = _cli("new", "example/mean-code", "--bank", bank)
    assert done.exit_code == 2 and "exists already; choose another id" in done.output
    done = _cli("new", "Bad Id", "--bank", bank)
    assert done.exit_code == 2 and "a question id is TOPIC/NAME" in done.output
    done = _cli("new", "mine/q", "--bank", bank, "--assignment", "hw9")
    assert done.exit_code == 2 and "hw9.yaml: no such assignment" in done.output
    assert not (bank / "templates" / "mine").exists()


def test_a_question_copied_from_another_bank_says_to_declare_its_notes(tmp_path):
    bank = tmp_path / "bank"
    assert _cli("new-bank", bank, "--course", "ml101").exit_code == 0
    shutil.copytree(
        banks.load().templates / "budgets" / "model-budget", bank / "templates" / "x" / "y"
    )
    done = _cli("bank", "--bank", bank)
    assert done.exit_code == 2
    assert "source.notes: '000' is no course's cite_as" in done.output
    assert "declare the notes it covers here (source.notes and source.ref)" in done.output
