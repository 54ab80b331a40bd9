"""Gradescope results.json, feedback pages, CSV exports and the instructor report."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import pytest

import contract
from autograder.grading.grade import grade_harvest
from autograder.semester import outputs
from autograder.semester.gradebook import Gradebook, result_to_json
from contract import Key, Policy
from generator import bank
from generator.release import release
from generator.roster import parse

POLICY = Policy(ecf=True, ecf_credit=0.8)


@pytest.fixture(scope="module")
def keyset(tmp_path_factory) -> dict[str, Key]:
    out = tmp_path_factory.mktemp("hw1") / "out"
    roster = parse("student_id,name,email\nana,Ana Lima,ana@x.edu\nben,Ben O,ben@x.edu\n")
    release(bank.load().assignment("tdlsm/hw1"), roster, secret=b"s" * 32, out=out)
    return contract.read_keys(out / "keys")


def _result(key, wrong: bool = False):
    answers = {
        a.variable: {"kind": "number", "value": a.display_value * (3 if wrong else 1)}
        for q in key.questions
        for a in q.answers
        if a.ask
    }
    return result_to_json(
        grade_harvest(key, {"answers": answers}, policy=POLICY, checks={}, reveal=False)
    )


def test_results_json_follows_the_gradescope_specification(keyset):
    doc = outputs.gradescope(_result(keyset["ana"]), reveal=False)
    assert set(doc) >= {"score", "max_score", "output", "tests"}
    assert 0 < doc["score"] <= doc["max_score"]
    for test in doc["tests"]:
        assert set(test) <= {"score", "max_score", "name", "output", "visibility", "status"}
        assert test["visibility"] in ("hidden", "after_due_date", "after_published", "visible")
        assert isinstance(test["name"], str) and test["max_score"] >= 0
        if "score" in test:
            assert 0 <= test["score"] <= test["max_score"] + 1e-9
        else:
            assert test["output"].startswith("Pending")
    assert sum(t.get("score", 0) for t in doc["tests"]) == pytest.approx(doc["score"])


def test_hidden_expected_values_do_not_leak_before_the_policy_reveals_them(keyset):
    key = keyset["ana"]
    doc = outputs.gradescope(_result(key, wrong=True), reveal=False)
    text = " ".join(t["output"] for t in doc["tests"])
    assert "Expected" not in text
    revealed = result_to_json(
        grade_harvest(key, {"answers": {}}, policy=POLICY, checks={}, reveal=True)
    )
    assert "Expected:" in " ".join(
        t["output"] for t in outputs.gradescope(revealed, reveal=True)["tests"]
    )


def test_feedback_page_names_the_mistake(keyset):
    key = keyset["ana"]
    budget = next(q for q in key.questions if q.id == "budgets/model-budget")
    states = next(a for a in budget.answers if a.id == "states_gb")
    answers = {states.variable: {"kind": "number", "value": states.value / 2**30}}
    doc = result_to_json(
        grade_harvest(key, {"answers": answers}, policy=POLICY, checks={}, reveal=False)
    )
    page = outputs.feedback_html(doc, title="hw1 — ana", solutions=None)
    assert "GiB" in page and "class=misconception" in page and "Worked solution" not in page
    page = outputs.feedback_html(
        doc, title="hw1", solutions={q.id: q.solution_html for q in key.questions}
    )
    assert "Worked solution" in page and "<math" in page and "<strong>" in page


def test_canvas_and_moodle_csvs_round_trip(keyset):
    results = [_result(keyset["ana"]), _result(keyset["ben"], wrong=True)]
    roster = {
        "ana": {"name": "Ana Lima", "email": "ana@x.edu"},
        "ben": {"name": "Ben O", "email": "ben@x.edu"},
    }
    canvas = list(csv.DictReader(io.StringIO(outputs.canvas_csv(results, roster, "Homework 1"))))
    # Canvas's gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, then the
    # assignment; the first row holds the points possible
    assert list(canvas[0]) == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "Homework 1",
    ]
    assert canvas[0]["Student"] == "Points Possible"
    assert (
        canvas[1]["SIS User ID"] == "ana" and float(canvas[1]["Homework 1"]) == results[0]["score"]
    )
    moodle = list(csv.DictReader(io.StringIO(outputs.moodle_csv(results, roster, "Homework 1"))))
    # Moodle's export columns (tests/autograder/test_lms.py reads them back)
    assert moodle[1]["Email address"] == "ben@x.edu" and moodle[1]["ID number"] == "ben"
    assert moodle[1]["Homework 1 (Real)"] == f"{results[1]['score']:g}"


def test_summary_has_a_column_per_question_and_the_report_draws_plots(keyset):
    results = [_result(keyset["ana"]), _result(keyset["ben"], wrong=True)]
    rows = list(csv.DictReader(io.StringIO(outputs.summary_csv(results))))
    assert [r["student_id"] for r in rows] == ["ana", "ben"]
    assert "Q1" in rows[0] and "Q10" in rows[0]
    report = outputs.instructor_report(results, title="hw1", signals={"ben": ["copied"]})
    assert report.count("<svg") >= 3 and "copied" in report and "http" not in report


def test_gradebook_is_idempotent_and_survives_a_restart(keyset, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'gradebook.sqlite'}"
    book = Gradebook(url)
    result = grade_harvest(keyset["ana"], {"answers": {}}, policy=POLICY, checks={}, reveal=False)
    result = replace(result, content_hash="abc")
    book.record("tdlsm/hw1", result)
    book.record("tdlsm/hw1", result)  # a rerun replaces, never duplicates
    book.close()
    reopened = Gradebook(url)  # what a killed grader left is all there
    assert reopened.unchanged("tdlsm/hw1", "ana", "abc")
    assert not reopened.unchanged("tdlsm/hw1", "ana", "changed")
    assert not reopened.unchanged("tdlsm/hw1", "ben", "abc")
    assert [r["student_id"] for r in reopened.results("tdlsm/hw1")] == ["ana"]
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    from autograder.semester.gradebook import PartGrade

    with Session(reopened.engine) as s:
        assert s.scalar(select(func.count()).select_from(PartGrade)) == len(result.parts)
    reopened.close()


def test_solutions_are_revealed_after_the_due_date_only():
    from autograder.semester.batch import reveal_now

    policy = Policy(solutions_after_due=True)
    assert reveal_now("2020-01-01T00:00:00+01:00", policy)
    assert reveal_now("2020-01-01T00:00:00", policy)  # no zone: read as UTC
    assert not reveal_now("2999-01-01T00:00:00+00:00", policy)
    assert not reveal_now(None, policy)
    assert not reveal_now("2020-01-01T00:00:00", Policy(solutions_after_due=False))
