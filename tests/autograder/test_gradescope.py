"""`scalegrade export gradescope`: the autograder zip, run for real in a simulated /autograder.

The zip is unpacked the way Gradescope does it (``/autograder/source``, ``run_autograder``
copied to ``/autograder``, the submission and its ``submission_metadata.json`` beside it);
``run_autograder`` runs as a subprocess with this virtual environment's Python standing in
for the one setup.sh installs, and results.json is validated against the schema below,
written from Gradescope's autograder specification ("Autograder Specifications": output
format, test cases, visibility options, output string formats).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import jsonschema
import nbformat
import pytest
from click.testing import CliRunner

import contract
from autograder.grading.submission import released_to
from autograder.integrations import gradescope
from generator import bank
from generator.release import release
from generator.roster import parse
from scalegrade.cli import main

VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
FORMAT = {"enum": ["text", "html", "simple_format", "md", "ansi"]}
NUMBER = {"type": "number"}
STRING = {"type": "string"}
TEST_CASE = {
    "type": "object",
    "properties": {
        "score": NUMBER,
        "max_score": NUMBER,
        "status": {"enum": ["passed", "failed"]},
        "name": STRING,
        "name_format": FORMAT,
        "number": STRING,
        "output": STRING,
        "output_format": FORMAT,
        "tags": {"type": "array", "items": STRING},
        "visibility": VISIBILITY,
        "extra_data": {"type": "object"},
    },
    "additionalProperties": False,
}
RESULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "score": NUMBER,
        "execution_time": NUMBER,
        "output": STRING,
        "output_format": FORMAT,
        "test_output_format": FORMAT,
        "test_name_format": FORMAT,
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": TEST_CASE},
        "leaderboard": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "value"],
                "properties": {
                    "name": STRING,
                    "value": {"type": ["number", "string"]},
                    "order": {"enum": ["asc", "desc"]},
                },
            },
        },
    },
    "additionalProperties": False,
    # "score": optional, but required if not on each test case
    "anyOf": [
        {"required": ["score"]},
        {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}},
    ],
}


def validate(doc: dict) -> None:
    jsonschema.validate(doc, RESULTS_SCHEMA)
    for test in doc.get("tests", []):
        if "score" in test:
            assert 0 <= test["score"] <= test["max_score"] + 1e-9, test
    scored = [t["score"] for t in doc.get("tests", []) if "score" in t]
    if scored:
        assert sum(scored) == pytest.approx(doc["score"])


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("gradescope")
    roster = parse("student_id,name,email\nana,Ana Lima,ana@x.edu\nben,Ben O,ben@x.edu\n")
    release(
        bank.load().assignment("dl/hw1"),
        roster,
        secret=b"g" * 32,
        out=root / "hw1",
        with_solutions=True,
    )
    out = root / "autograder.zip"
    result = CliRunner().invoke(
        main,
        ["export", "gradescope", "dl/hw1", "--keys", str(root / "hw1" / "keys"), "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    return root


def _honest(root: Path, student: str) -> nbformat.NotebookNode:
    """The student's solutions notebook with every answer exactly the key's (in its unit)."""
    nb = nbformat.read(root / "hw1" / "solutions" / student / "hw1.ipynb", as_version=4)
    key = json.loads((root / "hw1" / "keys" / f"{student}.json").read_text(encoding="utf-8"))
    values = {a["variable"]: a["display_value"] for q in key["questions"] for a in q["answers"]}
    for cell in nb.cells:
        variable = cell.metadata.get("scalegrade", {}).get("variable")
        if variable in values:
            cell.source = f"{variable} = {values[variable]!r}"
    return nb


def _autograder_tree(root: Path, tmp: Path, notebook, users: list[dict]) -> Path:
    """A Gradescope container's /autograder, with the package unpacked as Gradescope does."""
    tree = tmp / "autograder"
    with zipfile.ZipFile(root / "autograder.zip") as zf:
        zf.extractall(tree / "source")
    shutil.copy2(tree / "source" / "run_autograder", tree / "run_autograder")
    (tree / "submission").mkdir()
    if notebook is not None:
        nbformat.write(notebook, tree / "submission" / "hw1.ipynb")
    metadata = {
        "id": 123456,
        "created_at": "2026-12-01T14:22:32.365935-07:00",
        "assignment": {"title": "Homework 1", "total_points": "56.0", "group_submission": False},
        "submission_method": "upload",
        "users": users,
        "previous_submissions": [],
    }
    (tree / "submission_metadata.json").write_text(json.dumps(metadata), encoding="utf-8")
    (tree / "results").mkdir()
    return tree


def test_the_zip_has_gradescope_layout(course):
    with zipfile.ZipFile(course / "autograder.zip") as zf:
        names = set(zf.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        setup = zf.read("setup.sh").decode()
        run_script = zf.read("run_autograder").decode()
        wheel = next(n for n in names if n.endswith(".whl"))
        zf.extract(wheel, course / "wheel")
    # setup.sh and run_autograder at the root of the archive, executable
    assert {"setup.sh", "run_autograder"} <= names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert {
        "scalegrade/config.json",
        "scalegrade/roster.csv",
        "scalegrade/keys/assignment.json",
        "scalegrade/keys/ana.json",
        "scalegrade/keys/ben.json",
        "scalegrade/keys/checks/vision/circular-conv-code/checks.py",  # keys/ as released
    } <= names
    assert not any("solution" in n for n in names)  # checks only, no reference code
    # setup.sh installs torch's CPU build first, then the shipped wheel; it parses
    assert setup.index("torch==2.13.0") < setup.index("dist/*.whl")
    assert subprocess.run(["bash", "-n", "-c", setup]).returncode == 0
    assert "SCALEGRADE_GRADESCOPE_ROOT" in run_script and "/autograder" in run_script
    with zipfile.ZipFile(course / "wheel" / wheel) as whl:
        assert {
            "autograder/sandbox/inside/harness.py",
            "autograder/integrations/gradescope.py",
            "costmodel/units.py",
        } <= set(whl.namelist())
    assert (course / "autograder.zip").stat().st_size < 5 * 2**20


def test_run_autograder_grades_the_submitter_with_their_own_numbers(course, tmp_path):
    users = [{"email": "ANA@x.edu", "id": 9001, "name": "Ana Lima"}]  # Gradescope's case
    tree = _autograder_tree(course, tmp_path, _honest(course, "ana"), users)
    env = {
        **os.environ,
        gradescope.ROOT_ENV: str(tree),
        "SCALEGRADE_PYTHON": sys.executable,  # what setup.sh would have installed
    }
    start = time.perf_counter()
    done = subprocess.run(
        ["bash", str(tree / "run_autograder")],
        cwd=tree,  # Gradescope runs it in /autograder
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads((tree / "results" / "results.json").read_text(encoding="utf-8"))
    validate(doc)
    assert doc["extra_data"]["student_id"] == "ana"
    assert "Ana Lima" in doc["output"] and "email ANA@x.edu" in doc["output"]
    graded = [t for t in doc["tests"] if "score" in t]
    pending = [t for t in doc["tests"] if "score" not in t]
    assert graded and pending  # free-response parts wait for a person
    failed = [(t["name"], t["output"]) for t in graded if t["status"] != "passed"]
    assert not failed
    assert doc["score"] == pytest.approx(sum(t["max_score"] for t in graded))
    assert any(t["name"].endswith("circular_conv2d") for t in graded)  # the code check ran
    print(f"run_autograder: {seconds:.1f} s (sandbox {doc['extra_data']['sandbox_seconds']} s)")


def test_a_notebook_released_to_someone_else_is_graded_as_the_submitter(course, tmp_path):
    # ana's account hands in ben's notebook: ana's numbers grade it, and she is told why
    users = [{"email": "ana@x.edu", "id": 9001, "name": "Ana Lima"}]
    tree = _autograder_tree(course, tmp_path, _honest(course, "ben"), users)
    assert gradescope.run(tree) == 0
    doc = json.loads((tree / "results" / "results.json").read_text(encoding="utf-8"))
    validate(doc)
    assert doc["extra_data"]["student_id"] == "ana"
    assert "This notebook was released to another student (ben)" in doc["output"]
    assert any(t.get("status") == "failed" for t in doc["tests"])  # ben's numbers, not ana's


def test_a_stranger_or_a_missing_notebook_gets_a_clear_zero(course, tmp_path):
    tree = _autograder_tree(course, tmp_path / "a", None, [{"email": "eve@x.edu", "id": 1}])
    assert gradescope.run(tree) == 0
    doc = json.loads((tree / "results" / "results.json").read_text(encoding="utf-8"))
    validate(doc)
    assert doc["score"] == 0 and "eve@x.edu" in doc["output"] and "roster" in doc["output"]
    tree = _autograder_tree(course, tmp_path / "b", None, [{"email": "ben@x.edu", "id": 2}])
    assert gradescope.run(tree) == 0
    doc = json.loads((tree / "results" / "results.json").read_text(encoding="utf-8"))
    validate(doc)
    assert doc["score"] == 0 and "hw1.ipynb" in doc["output"]


def test_the_submitter_is_found_by_email_then_student_id():
    roster = {"ana": {"name": "A", "email": "Ana@X.edu"}, "s-2": {"name": "B", "email": ""}}
    assert gradescope.identify({"users": [{"email": " ana@x.EDU "}]}, roster)[0] == "ana"
    assert gradescope.identify({"users": [{"email": "b@y", "sid": "s-2"}]}, roster)[0] == "s-2"
    group = {"users": [{"email": "nobody@x"}, {"email": "ana@x.edu"}]}
    assert gradescope.identify(group, roster)[0] == "ana"
    sid, why = gradescope.identify({"users": []}, roster)
    assert sid is None and "roster" in why


def test_a_notebook_released_to_someone_else_is_named(course, tmp_path):
    path = course / "hw1" / "release" / "ben" / "hw1.ipynb"
    assert released_to(path) == "ben"
    assert gradescope.find_notebook(path.parent, "hw1.ipynb") == path
    (tmp_path / "x.ipynb").write_text("not json")
    assert released_to(tmp_path / "x.ipynb") is None


def test_a_late_submission_is_charged_from_gradescope_created_at(course, tmp_path):
    """created_at 2026-12-01T21:22:32Z against a deadline of 2026-11-30T12:00Z: 1 d 9 h
    late, two started days at the course's 10 % a day; an extension shipped in the zip
    moves the deadline past it."""
    users = [{"email": "ana@x.edu", "id": 9001, "name": "Ana Lima"}]
    tree = _autograder_tree(course, tmp_path, _honest(course, "ana"), users)
    release_file = tree / "source" / "scalegrade" / "keys" / "assignment.json"
    doc = json.loads(release_file.read_text(encoding="utf-8"))
    release_file.write_text(json.dumps({**doc, "due": "2026-11-30T12:00:00+00:00"}))
    assert gradescope.run(tree) == 0
    late = json.loads((tree / "results" / "results.json").read_text(encoding="utf-8"))
    full = sum(t["score"] for t in late["tests"] if "score" in t)
    assert late["score"] == pytest.approx(0.8 * full, abs=1e-3)
    assert "1 d 9 h 23 min late: 2 started days charged, 20 % off" in late["output"]
    (tree / "source" / "scalegrade" / "extensions.csv").write_text(
        "student_id,assignment,extra_days,granted_by,reason\nana,dl/hw1,2,Prof. Ada,ill\n"
    )
    assert gradescope.run(tree) == 0
    extended = json.loads((tree / "results" / "results.json").read_text(encoding="utf-8"))
    assert extended["score"] == pytest.approx(full, abs=1e-3)
    assert "Extension: 2 more days, granted by Prof. Ada (ill)." in extended["output"]
    assert "on time" in extended["output"]


def test_the_zip_ships_only_extensions_of_its_assignment_and_roster(course, tmp_path):
    path = tmp_path / "extensions.csv"
    path.write_text(
        "student_id,assignment,extra_days,granted_by,reason\n"
        "ana,dl/hw1,2,Ada,ill\nzoe,dl/hw1,2,Ada,ill\nben,dl/hw2,1,Ada,ill\n"
    )
    info = contract.read_release(course / "hw1" / "keys")
    with pytest.raises(gradescope.PackageError) as err:
        gradescope._extensions_for(path, info)
    assert str(err.value).splitlines() == [
        f"{path}:3: student zoe: not on the roster of dl/hw1",
        f"{path}:4: student ben: an extension of dl/hw2, not dl/hw1",
    ]
