"""One pipeline per submission (grade_one): the notebook is graded as the student who
submitted it, never as the id its metadata names; a mismatch is recorded and shown."""

from __future__ import annotations

import shutil

import pytest

from autograder.grading.keys import Keys
from autograder.grading.submission import grade_one, released_to
from autograder.sandbox import Limits, Sandbox
from autograder.semester import outputs
from autograder.semester.batch import grade_batch
from autograder.semester.gradebook import result_to_json
from generator.release import release
from generator.roster import parse
from tests.banks import copy_bank


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("one")
    mine = copy_bank(root / "bank", link_templates=True)
    (mine.assignments / "tdlsm" / "one.yaml").write_text(
        "title: One question\nkind: homework\nnotebook: one\n"
        "questions:\n  - question: budgets/model-budget\n"
    )
    roster = parse("student_id,name,email\nana,Ana Lima,ana@x.edu\nben,Ben O,ben@x.edu\n")
    release(
        mine.assignment("tdlsm/one"),
        roster,
        secret=b"i" * 32,
        out=root / "one",
        with_solutions=True,
    )
    keys = Keys(root / "one" / "keys")
    with Sandbox(limits=Limits(wall_seconds=60), hide=[root / "one"]) as sandbox:
        yield root, keys, sandbox


def _solutions(root, student):
    return root / "one" / "solutions" / student / "one.ipynb"


def test_an_honest_notebook_is_graded_against_its_own_key(course):
    root, keys, sandbox = course
    result = grade_one(
        keys.key("ana"), _solutions(root, "ana"), keys=keys, runner=sandbox, reveal=False
    )
    auto = [g.verdict for g in result.parts if g.verdict.score is not None]
    assert auto and all(v.status == "correct" for v in auto)
    assert result.released_to is None and len(result.content_hash) == 64 and not result.error


def test_a_notebook_released_to_another_student_is_graded_as_its_submitter(course):
    root, keys, sandbox = course
    bens = _solutions(root, "ben")  # ben's notebook, ben's right answers, handed in by ana
    assert released_to(bens) == "ben"
    result = grade_one(
        keys.key("ana"), bens, keys=keys, runner=sandbox, reveal=False, others=keys.all()
    )
    assert result.student_id == "ana" and result.released_to == "ben"
    wrong = [g.verdict for g in result.parts if g.verdict.status == "wrong"]
    assert wrong  # ben's numbers are not ana's answers
    assert any("ben's answer" in s for s in result.copy_signals)
    doc = result_to_json(result)
    note = "This notebook was released to another student (ben)"
    assert note in outputs.gradescope(doc, reveal=False)["output"]
    assert note in outputs.feedback_html(doc, title="one", solutions=None)
    report = outputs.instructor_report([doc], title="one", signals={})
    assert "ana submitted the notebook released to ben (graded with ana&#x27;s numbers)" in report


def test_nothing_submitted_is_a_zero_with_the_reason(course):
    _, keys, sandbox = course
    result = grade_one(keys.key("ana"), None, keys=keys, runner=sandbox, reveal=False)
    assert result.score == 0 and result.error == "no one.ipynb submitted"
    assert any(g.verdict.status == "pending" for g in result.parts)  # free response waits


def test_the_batch_grades_the_folders_student_and_reports_the_swap(course):
    root, keys, sandbox = course
    subs = root / "subs"
    (subs / "ana").mkdir(parents=True)
    shutil.copy(_solutions(root, "ben"), subs / "ana" / "one.ipynb")
    (subs / "ben").mkdir()
    shutil.copy(_solutions(root, "ben"), subs / "ben" / "one.ipynb")
    summary = grade_batch(keys, subs, root / "grades", sandbox=sandbox, reveal=False)
    by_id = {r["student_id"]: r for r in summary.results}
    assert by_id["ana"]["released_to"] == "ben" and by_id["ben"]["released_to"] is None
    assert by_id["ben"]["score"] > by_id["ana"]["score"]
    report = (root / "grades" / "report.html").read_text(encoding="utf-8")
    assert "ana submitted the notebook released to ben" in report
    feedback = (root / "grades" / "ana" / "feedback.html").read_text(encoding="utf-8")
    assert "released to another student (ben)" in feedback
