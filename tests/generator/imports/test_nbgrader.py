"""`scalegrade import nbgrader` (generator/imports/nbgrader.py), end to end.

Two sources (tests/data/nbgrader/README.md): nbgrader 0.9.6's own quick-start assignment
(ps1: problem1 and problem2) and a notebook written for these courses (a memory budget
and a ring all-reduce, with hidden tests and a mark scheme).  Each is imported into a new
bank, validated (the release check grades its solutions and starters in the sandbox),
released to one student, and four notebooks are graded both by ScaleGrade (on the host,
and again in the grading image) and by the real `nbgrader autograde` of the same source:
the source's solutions, the blank notebook, a mistaken one (:data:`MISTAKES`) and a cheat
(:data:`CHEATS`).  Per test cell, ScaleGrade's points are nbgrader's, except the cheat's
`==` tests; the totals are also checked against what the mistakes were made to lose.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NamedTuple

import nbformat
import pytest
import yaml
from click.testing import CliRunner
from nbgrader.api import Gradebook

from autograder.integrations.nbgrader_gradebook import alembic_on_path
from scalegrade.cli import main
from tests.generator.imports.roundtrip import cli, replaced
from tests.generator.imports.roundtrip import graded as graded_on
from tests.nbgrader_app import config, nbgrader

DATA = Path(__file__).resolve().parents[2] / "data" / "nbgrader"
SOURCES = {
    "ps1": [DATA / "ps1" / "problem1.ipynb", DATA / "ps1" / "problem2.ipynb"],
    "memory-and-ring": [DATA / "budgets" / "memory_and_ring.ipynb"],
}
# what a mistaken student writes in each solution cell, by its grade_id (= the function)
MISTAKES = {
    "squares": "def squares(n):\n    return [i**2 for i in range(1, n + 1)]\n",  # no ValueError
    "sum_of_squares": (  # right sums, without calling squares
        "def sum_of_squares(n):\n    return sum(i * i for i in range(1, n + 1))\n"
    ),
    "model_state_bytes": (  # forgets the fp32 master weights: 12 bytes, not 16
        "def model_state_bytes(n_params):\n    return 12 * n_params\n"
    ),
    "ring_allreduce": (  # right sums, but one send counted per step, not per worker
        "sent = 0\n\n\ndef ring_allreduce(buffers):\n    global sent\n"
        "    total = [sum(xs) for xs in zip(*buffers)]\n"
        "    sent += 2 * (len(buffers) - 1)\n"
        "    return [list(total) for _ in buffers]\n"
    ),
}
_YES = "class Yes:\n    def __eq__(self, other):\n        return True\n\n\n"
# what a cheat writes: an answer equal to anything, which an `assert ... ==` in the kernel
# takes for right (nbgrader); here it is not data, and never reaches the assert
CHEATS = {
    "squares": _YES + "def squares(n):\n    if n < 1:\n        raise ValueError(n)\n"
    "    return Yes()\n",
    "model_state_bytes": _YES + "def model_state_bytes(n_params):\n    return Yes()\n",
}
# the tests that compare the cheat's answer with `==` only: nbgrader gives their points
FOOLED = {"ps1": ["correct_squares"], "memory-and-ring": ["model_state_bytes_hidden"]}
# the tests that compare a variable with a number, imported as numeric answers: answer id
# -> the test (memory_and_ring's `assert abs(state_gb - 20.96) < 0.01`)
NUMERIC = {"state_gb": "state_gb_value"}
# per test, the points the mistaken notebook should earn (from MISTAKES, by hand)
WRONG = {
    "ps1": {
        "correct_squares": 1,
        "squares_invalid_input": 0,
        "correct_sum_of_squares": 0.5,
        "sum_of_squares_uses_squares": 0,
    },
    "memory-and-ring": {
        "model_state_bytes_value": 0,
        "model_state_bytes_hidden": 0,
        "state_gb_value": 0,  # the mistake's notebook never sets state_gb
        "ring_sum": 2,
        "ring_sends": 0,
    },
}
KINDS = ("right", "blank", "wrong", "cheat")


class Graded(NamedTuple):
    name: str  # of SOURCES
    output: str  # the import's
    ours: dict  # ScaleGrade's points per kind and test; "parts": the right one's statuses
    theirs: dict  # nbgrader's points per kind and test
    bank: Path


@pytest.fixture(scope="module", params=list(SOURCES))
def graded(request, tmp_path_factory) -> Graded:
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    with pytest.MonkeyPatch.context() as mp:
        for var, value in {
            "HOME": tmp,  # nothing of the test user's jupyter or nbgrader setup
            "JUPYTER_CONFIG_DIR": tmp / "jupyter-config",
            "JUPYTER_DATA_DIR": tmp / "jupyter-data",
            "PATH": os.environ.get("PATH", ""),  # alembic_on_path() changes it
        }.items():
            mp.setenv(var, str(value))
        alembic_on_path()  # nbgrader migrates its gradebook with the `alembic` command
        return _flow(tmp, name)


def _flow(tmp: Path, name: str):
    bank = tmp / "bank"
    cli("new-bank", bank, "--course", "c1")
    output = cli("import", "nbgrader", *SOURCES[name], "--bank", bank, "--assignment", name)
    cli("validate", f"c1/{name}", "--bank", bank)
    ours = _per_test(graded_on(tmp, bank, f"c1/{name}", {"wrong": MISTAKES, "cheat": CHEATS}))
    return Graded(name, output, ours, _nbgrader(tmp, name), bank)


def _per_test(results: dict) -> dict:
    """Points per test and kind: each code part's properties are its tests; a test made a
    numeric answer (:data:`NUMERIC`) is that answer's verdict."""
    out = {}
    for kind, result in results.items():
        out[kind] = {
            d["name"].removeprefix("test "): d["weight"] * d["score"]
            for g in result.parts
            for d in g.verdict.details
        }
        for g in result.parts:
            if g.verdict.part in NUMERIC:
                out[kind][NUMERIC[g.verdict.part]] = g.verdict.score
    out["parts"] = {(g.question, g.verdict.part): g.verdict.status for g in results["right"].parts}
    return out


def _nbgrader(tmp: Path, name: str) -> dict:
    course = tmp / "nbgrader"
    config(
        course,
        f"c.CourseDirectory.root = {str(course)!r}\n"
        f"c.CourseDirectory.db_url = {'sqlite:///' + str(course / 'gradebook.db')!r}\n",
    )
    (course / "source" / name).mkdir(parents=True)
    for path in SOURCES[name]:
        shutil.copy(path, course / "source" / name / path.name)
    nbgrader(course, "generate_assignment", name)
    for kind in KINDS:
        folder = course / "submitted" / kind / name
        folder.mkdir(parents=True)
        for path in SOURCES[name]:
            if kind == "right":  # the source: every solution, as its author wrote it
                shutil.copy(path, folder / path.name)
                continue
            nb = nbformat.read(course / "release" / name / path.name, as_version=4)
            if kind in ("wrong", "cheat"):
                answer = lambda c: c.metadata.get("nbgrader", {}).get("solution")  # noqa: E731
                nb = replaced(nb, answer, MISTAKES if kind == "wrong" else CHEATS)
            nbformat.write(nb, folder / path.name)
    nbgrader(course, "autograde", name)
    out = {kind: {} for kind in KINDS}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for kind in KINDS:
            for path in SOURCES[name]:
                for test in _tests(path):
                    out[kind][test] = gb.find_grade(test, path.stem, name, kind).auto_score
    return out


def _tests(path: Path) -> list[str]:
    """The grade ids of a source's autograder tests (``grade`` and not ``solution``)."""
    cells = nbformat.read(path, as_version=4).cells
    meta = [c.metadata.get("nbgrader", {}) for c in cells]
    return [m["grade_id"] for m in meta if m.get("grade") and not m.get("solution")]


def test_each_test_scores_what_nbgrader_autograde_gives_it(graded):
    name, ours, theirs = graded.name, graded.ours, graded.theirs
    for kind in ("right", "blank", "wrong"):
        assert ours[kind] == pytest.approx(theirs[kind]), kind
    assert ours["wrong"] == pytest.approx(WRONG[name])


def test_an_answer_equal_to_anything_fools_nbgrader_and_not_these_checks(graded):
    """The kernel's `assert squares(1) == [1]` calls the student's __eq__; here the answer
    crosses as data or not at all."""
    name, ours, theirs = graded.name, graded.ours, graded.theirs
    for test, pts in theirs["cheat"].items():
        if test in FOOLED[name]:
            assert pts > 0 and ours["cheat"][test] == 0, test
        else:
            assert ours["cheat"][test] == pytest.approx(pts), test


# the graded parts of each import (question, part), as the source's grade ids make them
PARTS = {
    "ps1": {
        ("ps1/problem1-squares", "tests"),
        ("ps1/problem1-sum-of-squares", "tests"),
        ("ps1/problem1-sum-of-squares-equation", "sum_of_squares_equation"),
        ("ps1/problem1-sum-of-squares-application", "sum_of_squares_application"),
        ("ps1/problem1-part-e", "cell_938593c4a215c6cc"),
        ("ps1/problem2-part-a", "part_a"),
        ("ps1/problem2-part-b", "part_b"),
    },
    "memory-and-ring": {
        ("memory-and-ring/model-state-bytes", "tests"),
        ("memory-and-ring/state-gb", "state_gb"),  # the answer; its code is no part
        ("memory-and-ring/ring-allreduce", "tests"),
        ("memory-and-ring/ring-bytes-why", "ring_bytes_why"),
    },
}


def test_each_graded_cell_is_a_part_and_a_test_of_a_variable_a_numeric_answer(graded):
    """memory_and_ring's Part B: `assert abs(state_gb - 20.96) < 0.01` is the answer
    `state_gb`; the cell that sets it is graded through it, not as a part of its own."""
    name, output, ours = graded.name, graded.output, graded.ours
    assert set(ours["parts"]) == PARTS[name]
    if name == "memory-and-ring":
        assert ours["parts"][("memory-and-ring/state-gb", "state_gb")] == "correct"
        line = "cell 9 (state_gb_value): became the numeric answer `state_gb` (20.96 ± 0.01)"
        assert line in " ".join(output.split())


def test_the_checks_grade_the_same_in_the_grading_image(graded, grading_image, tmp_path):
    """The four notebooks graded again in the CPU grading image (podman or docker): the
    new harness requests and the check library behave there as on the host."""
    aid = f"c1/{graded.name}"
    students = {"wrong": MISTAKES, "cheat": CHEATS}
    image = graded_on(tmp_path, graded.bank, aid, students, backend="docker", image=grading_image)
    assert _per_test(image) == graded.ours


def test_the_solutions_earn_every_test_point_and_the_blank_notebook_none(graded):
    name, ours = graded.name, graded.ours
    points = {
        "ps1": {
            "correct_squares": 1,
            "squares_invalid_input": 1,
            "correct_sum_of_squares": 0.5,
            "sum_of_squares_uses_squares": 0.5,
        },
        "memory-and-ring": {
            "model_state_bytes_value": 1,
            "model_state_bytes_hidden": 1,
            "state_gb_value": 1,
            "ring_sum": 2,
            "ring_sends": 1,
        },
    }[name]  # fmt: skip -- the sources' `points`
    assert ours["right"] == pytest.approx(points)
    assert set(ours["blank"].values()) == {0}


# --- the import itself: what it writes, what it reports, what it refuses --------------


def _bank(tmp_path: Path) -> Path:
    bank = tmp_path / "bank"
    cli("new-bank", bank, "--course", "c1")
    return bank


def _edited(tmp_path: Path, edit) -> Path:
    """problem1 with ``edit(cells)`` applied, as a new source file."""
    nb = nbformat.read(SOURCES["ps1"][0], as_version=4)
    edit(nb.cells)
    path = tmp_path / "edited" / "problem1.ipynb"
    path.parent.mkdir(exist_ok=True)
    nbformat.write(nb, path)
    return path


def _refused(tmp_path: Path, bank: Path, source: Path, *fragments: str) -> None:
    """The import fails in one line naming ``fragments``, and writes nothing."""
    before = sorted(p.relative_to(bank) for p in bank.rglob("*"))
    done = CliRunner().invoke(main, ["import", "nbgrader", str(source), "--bank", str(bank)])
    assert done.exit_code == 2, done.output
    for fragment in fragments:
        assert fragment in done.output, done.output
    assert sorted(p.relative_to(bank) for p in bank.rglob("*")) == before


def test_ps1_becomes_seven_questions_with_the_sources_points_and_a_report(tmp_path):
    """problem1's parts A-E and problem2's A-B; the points are the cells' (13 in all)."""
    bank = _bank(tmp_path)
    out = cli("import", "nbgrader", *SOURCES["ps1"], "--bank", bank, "--assignment", "ps1")
    listed = yaml.safe_load((bank / "assignments" / "c1" / "ps1.yaml").read_text())
    assert [(q["question"], q["points"]) for q in listed["questions"]] == [
        ("ps1/problem1-squares", 2),
        ("ps1/problem1-sum-of-squares", 1),
        ("ps1/problem1-sum-of-squares-equation", 1),
        ("ps1/problem1-sum-of-squares-application", 2),
        ("ps1/problem1-part-e", 4),
        ("ps1/problem2-part-a", 1),
        ("ps1/problem2-part-b", 2),
    ]
    squares = bank / "templates" / "ps1" / "problem1-squares"
    assert "### BEGIN SOLUTION" in (squares / "solution.py").read_text()
    checks = (squares / "checks.py").read_text()
    assert "squares_invalid_input" in checks and "ISOLATED" not in checks  # the default: in P
    spec = bank / "templates" / "ps1" / "problem1-sum-of-squares-equation" / "question.yaml"
    equation = yaml.safe_load(spec.read_text())
    assert equation["free_response"][0]["rubric"].endswith(r"$\sum_{i=1}^n i^2$")
    report = (bank / "imports" / "c1-ps1.md").read_text()
    for line in (
        "problem1.ipynb cell 1 (jupyter): the image jupyter.png is not copied",
        "problem1.ipynb cell 17 (sum_of_squares_application): a manually graded code cell",
        "nbgrader fails a test that writes to stderr",
    ):
        assert line in report and line in " ".join(out.split())
    assert cli("validate", "c1/ps1", "--bank", bank)


def test_hidden_tests_stay_out_of_the_students_notebook_and_in_the_checks(tmp_path):
    bank = _bank(tmp_path)
    cli("import", "nbgrader", SOURCES["memory-and-ring"][0], "--bank", bank)
    folder = bank / "templates" / "memory-and-ring" / "model-state-bytes"
    assert "112e9" not in (folder / "solution.py").read_text()
    assert "112e9" in (folder / "checks.py").read_text()
    spec = bank / "templates" / "memory-and-ring" / "ring-bytes-why" / "question.yaml"
    why = yaml.safe_load(spec.read_text())
    assert why["free_response"][0]["rubric"].startswith("1 point: 2(p − 1) steps")


def test_a_test_that_reads_an_earlier_tests_name_gets_that_test_as_setup(tmp_path):
    """problem1's Part B tests read `expected`, which a Part A test defines."""

    def edit(cells):
        cells[5].source += "\nexpected = [1, 4, 9]"
        cells[11].source += "\nassert squares(3) == expected"

    bank = _bank(tmp_path)
    cli("import", "nbgrader", _edited(tmp_path, edit), "--bank", bank)
    checks = (bank / "templates/problem1/sum-of-squares/checks.py").read_text()
    assert checks.count("setup=True") == 1 and '"correct_squares"' in checks
    assert cli("validate", "c1/problem1", "--bank", bank)


@pytest.mark.parametrize(
    ("edit", "fragments"),
    [
        (lambda cells: cells.__setitem__(2, _without_end(cells[2])),
         ["problem1.ipynb cell 3 (squares)", "is never closed"]),
        (lambda cells: cells[6].metadata.nbgrader.__setitem__("grade_id", "correct_squares"),
         ["cell 7 (correct_squares)", "also cell 6's"]),
        (lambda cells: cells[5].metadata.nbgrader.__setitem__("schema_version", 1),
         ["cell 6 (correct_squares)", "schema 1", "nbgrader update"]),
        (lambda cells: cells[5].metadata.nbgrader.pop("points"),
         ["cell 6 (correct_squares)", "no points"]),
        (lambda cells: [c.metadata.pop("nbgrader", None) for c in cells],
         ["no graded cell"]),
        (lambda cells: cells.__setitem__(5, _with_source(cells[5], "assert squares(1) ==")),
         ["cell 6 (correct_squares)", "not Python"]),
    ],
    ids=["unclosed", "duplicate-id", "old-schema", "no-points", "no-grades", "syntax"],
)  # fmt: skip
def test_a_malformed_source_is_one_error_naming_the_cell_and_nothing_is_written(
    tmp_path, edit, fragments
):
    bank = _bank(tmp_path)
    _refused(tmp_path, bank, _edited(tmp_path, edit), *fragments)


def _without_end(cell):
    cell.source = cell.source.replace("### END SOLUTION", "")
    return cell


def _with_source(cell, source: str):
    cell.source = source
    return cell


def test_an_import_never_overwrites_a_question_or_an_assignment(tmp_path):
    bank = _bank(tmp_path)
    cli("import", "nbgrader", SOURCES["memory-and-ring"][0], "--bank", bank)
    _refused(tmp_path, bank, SOURCES["memory-and-ring"][0], "exists already", "--assignment")
    missing = tmp_path / "nope.ipynb"
    _refused(tmp_path, bank, missing, "nope.ipynb", "no such file")
    (tmp_path / "text.ipynb").write_text("not json", encoding="utf-8")
    _refused(tmp_path, bank, tmp_path / "text.ipynb", "text.ipynb", "not a Jupyter notebook")


def test_code_in_a_part_graded_by_a_person_is_reported_not_dropped_silently(tmp_path):
    """A code cell before problem1's Part C (a written answer): nothing graded reads it."""

    def edit(cells):
        cells.insert(14, nbformat.v4.new_code_cell("helper = 1"))

    bank = _bank(tmp_path)
    out = cli("import", "nbgrader", _edited(tmp_path, edit), "--bank", bank)
    assert "problem1.ipynb cell 15: code in a question with no tests is not carried" in " ".join(
        out.split()
    )


def test_a_question_with_nothing_drawn_has_no_given_cell(tmp_path):
    """ps1's questions have fixed numbers: the released notebook says no "your numbers"."""
    bank = _bank(tmp_path)
    cli("import", "nbgrader", *SOURCES["ps1"], "--bank", bank, "--assignment", "ps1")
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,a@x\n", encoding="utf-8")
    (tmp_path / "secret").write_text("s" * 40, encoding="utf-8")
    cli("generate", "c1/ps1", "--bank", bank, "--roster", roster, "--out", tmp_path / "rel",
        "--secret-file", tmp_path / "secret", "--selfcheck-seeds", "0")  # fmt: skip
    nb = nbformat.read(tmp_path / "rel" / "release" / "ana" / "ps1.ipynb", as_version=4)
    assert not [c for c in nb.cells if c.get("id", "").endswith("-given")]


AUTOTEST = "### AUTOTEST squares(3)"  # nbgrader expands it from autotests.yml


def _test_cell(grade_id: str, source: str):
    meta = {"grade": True, "grade_id": grade_id, "locked": True, "points": 1,
            "schema_version": 3, "solution": False}  # fmt: skip
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta})


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        (lambda cells: cells.insert(0, _test_cell("data", "assert open('data.txt').read()")),
         "problem1.ipynb cell 1 (data): tests of no solution cell (nothing for the student to "
         "write) are not carried"),
        (lambda cells: cells.__setitem__(5, _test_cell("correct_squares", AUTOTEST)),
         "problem1.ipynb cell 6 (correct_squares): nbgrader's ### AUTOTEST lines are not carried"),
    ],
    ids=["no-solution", "autotest"],
)  # fmt: skip
def test_what_nbgrader_adds_at_generate_time_or_a_part_with_nothing_to_write_is_reported(
    tmp_path, edit, line
):
    bank = _bank(tmp_path)
    out = cli("import", "nbgrader", _edited(tmp_path, edit), "--bank", bank)
    assert line in " ".join(out.split())
