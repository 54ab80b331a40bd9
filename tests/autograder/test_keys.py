"""Grading reads keys/ and nothing else: the checks as released, verified; a checks.py
edited in the bank after release changes no grade until the assignment is re-keyed."""

from __future__ import annotations

import json
import shutil

import pytest

from autograder.grading.checks import Checks
from autograder.grading.keys import Keys, probe_seed
from autograder.grading.submission import grade_one
from autograder.sandbox import Limits, Sandbox
from autograder.sandbox.box import _plan_request
from contract import KeyFileError
from generator.bank import Bank
from generator.release import release
from generator.roster import parse
from tests.banks import copy_bank

CONV = "vision/circular-conv-code"
ZERO = (  # a broken edit of the grade side, after release
    "\n\ndef grade(result, seed, params):  # a broken edit\n"
    '    return [{"name": "x", "weight": 1, "score": 0, "message": "edited"}]\n'
)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("conv")
    mine = copy_bank(root / "bank")
    (mine.assignments / "dl" / "conv.yaml").write_text(
        f"title: Convolution\nkind: homework\nnotebook: conv\nquestions:\n  - question: {CONV}\n"
    )
    roster = parse("student_id,name,email\nana,Ana Lima,ana@x.edu\n")
    release(
        mine.assignment("dl/conv"), roster, secret=b"k" * 32, out=root / "conv", with_solutions=True
    )
    return root, mine


def test_the_plan_carries_the_released_checks(course):
    root, _ = course
    keys = Keys(root / "conv" / "keys")
    key = keys.key("ana")
    (probe,) = keys.plan(key).probes
    released = root / "conv" / "keys" / "checks" / CONV / "checks.py"
    assert probe.source == released.read_text(encoding="utf-8")
    assert probe.id == "q1-conv" and probe.seed == probe_seed(key.questions[0].seed, "conv")
    assert keys.plan(key).variables == tuple(a.variable for a in key.questions[0].answers if a.ask)
    assert probe.preload == ("torch",) == keys.preload  # the sandbox imports it as it starts


def test_the_students_process_gets_the_answer_names_and_nothing_of_the_checks(course):
    """Every code check of the bank runs in the probe process: the request the student's
    process reads holds the answer variables, no probe source, seed or parameter."""
    root, mine = course
    keys = Keys(root / "conv" / "keys")
    plan = keys.plan(keys.key("ana"))
    assert plan.probes and all(p.isolated for p in plan.probes)
    request = json.dumps(_plan_request(plan))
    assert json.loads(request) == {"variables": list(plan.variables), "probes": []}
    for p in plan.probes:
        assert str(p.seed) not in request and p.source[:200] not in request
    parts = [(q, c) for q in mine.all_questions() for c in q.spec.code]
    assert len(parts) == 18  # the bank's code parts: none opts out of the probe process
    assert all(
        Checks.from_source(q.files[c.checks], str(q.folder / c.checks)).isolated for q, c in parts
    )


def test_editing_the_banks_checks_after_release_changes_no_grade(course):
    root, mine = course
    checks = mine.templates / CONV / "checks.py"
    checks.write_text(checks.read_text(encoding="utf-8") + ZERO, encoding="utf-8")
    keys = Keys(root / "conv" / "keys")
    with Sandbox(limits=Limits(wall_seconds=90)) as sandbox:
        notebook = root / "conv" / "solutions" / "ana" / "conv.ipynb"
        result = grade_one(keys.key("ana"), notebook, keys=keys, runner=sandbox, reveal=False)
    (code,) = [g.verdict for g in result.parts if g.verdict.status == "code"]
    assert code.score == code.points and "edited" not in code.feedback
    # re-keying (a new release, read from the bank afresh) picks the edit up
    release(
        Bank(mine.root).assignment("dl/conv"),
        parse("student_id,name,email\nana,A,a@x\n"),
        secret=b"k" * 32,
        out=root / "rekeyed",
    )
    assert (
        "a broken edit" in (root / "rekeyed" / "keys" / "checks" / CONV / "checks.py").read_text()
    )


def test_checks_edited_inside_keys_are_refused(course, tmp_path):
    root, _ = course
    keys = tmp_path / "keys"
    shutil.copytree(root / "conv" / "keys", keys)
    path = keys / "checks" / CONV / "checks.py"
    path.write_text(path.read_text(encoding="utf-8") + ZERO, encoding="utf-8")
    with pytest.raises(KeyFileError, match="changed since release"):
        Keys(keys)


def test_a_key_naming_checks_the_release_does_not_list_is_refused(course, tmp_path):
    root, _ = course
    keys = tmp_path / "keys"
    shutil.copytree(root / "conv" / "keys", keys)
    doc = json.loads((keys / "ana.json").read_text(encoding="utf-8"))
    doc["questions"][0]["code"][0]["checks"]["sha256"] = "0" * 64
    (keys / "ana.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(KeyFileError, match="ana.json: .* does not list with that SHA-256; re-key"):
        Keys(keys).key("ana")
    with pytest.raises(KeyFileError, match="no key for student 'zoe'"):
        Keys(keys).key("zoe")
