"""`scalegrade import otter` (generator/imports/otter.py), end to end.

The source (tests/data/otter/README.md) is an otter-assign v1 notebook written for these
courses: a memory budget (otter's `# SOLUTION` line marker, a `# BEGIN SOLUTION NO
PROMPT` region, a `# HIDDEN` test, a test of a variable that becomes a numeric answer,
points split by otter among four cases), a ring
all-reduce (points given per case, a hidden case set by a test config) and a manual
question.  It is imported into a new bank, validated (the release check grades its
solutions and starters in the sandbox), released to one student, and four notebooks are
graded by ScaleGrade (on the host, and again in the grading image) and by the real `otter
run` (in this process) of what the real
`otter assign` made of the same source: the solutions, the blank notebook, a mistaken
one (:data:`MISTAKES`) and a cheat (:data:`CHEATS`).  Per question the points are the
same, except the cheat's: it prints what otter's doctests expect without computing it.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import nbformat
import pytest
import yaml
from click.testing import CliRunner

from scalegrade.cli import main
from tests.generator.imports.roundtrip import cli, replaced
from tests.generator.imports.roundtrip import graded as graded_on

SOURCE = Path(__file__).resolve().parents[2] / "data" / "otter" / "memory_and_ring.ipynb"
KINDS = ("right", "blank", "wrong", "cheat")
# what a mistaken student writes in each answer cell, by the function it defines
MISTAKES = {
    "model_state_bytes": (  # the fp32 master weights forgotten: 12 bytes, not 16
        "bytes_per_param = 12\n\n\ndef model_state_bytes(n_params):\n"
        "    return bytes_per_param * n_params\n\n\n"
        "state_gb = model_state_bytes(1.31e9) / 1e9\n"
    ),
    "ring_allreduce": (  # sums the first two workers only: right for p = 2 alone
        "sent = 0\n\n\ndef ring_allreduce(buffers):\n"
        "    total = [a + b for a, b in zip(buffers[0], buffers[1])]\n"
        "    return [list(total) for _ in buffers]\n"
    ),
}
_FAKE = (
    "class Fake:\n    def __init__(self, text, item=None):\n"
    "        self.text, self.item = text, item\n"
    "    def __repr__(self):\n        return self.text\n"
    "    def __eq__(self, other):\n        return True\n"
    "    def __truediv__(self, other):\n        return self\n"
    "    def __float__(self):\n        return 20.96\n"
    "    def __getitem__(self, i):\n        return Fake(self.item)\n\n\n"
)
# a cheat prints what each doctest expects, and computes nothing
CHEATS = {
    "model_state_bytes": _FAKE + 'bytes_per_param = Fake("16")\n\n\n'
    'def model_state_bytes(n_params):\n    return Fake("0")\n\n\nstate_gb = Fake("20.96")\n',
    "ring_allreduce": _FAKE + "sent = 0\n\n\ndef ring_allreduce(buffers):\n"
    '    return Fake("[[4.0, 6.0], [4.0, 6.0]]", "[3.0, 3.0, 3.0, 3.0, 3.0, 3.0]")\n',
}
# per question, by hand: what the mistakes should earn (q1: 1 of 4 cases of 3/4 point;
# q2: the case worth 1 of 3), and the questions the cheat fools otter on
WRONG = {"q1": 0.75, "q2": 1.0}
FOOLED = {"q1", "q2"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """(the import's output, ScaleGrade's and otter's points per question and kind)."""
    tmp = tmp_path_factory.mktemp("otter")
    bank = tmp / "bank"
    cli("new-bank", bank, "--course", "c1")
    output = cli("import", "otter", SOURCE, "--bank", bank, "--assignment", "ring")
    cli("validate", "c1/ring", "--bank", bank)
    ours = _per_question(graded_on(tmp, bank, "c1/ring", {"wrong": MISTAKES, "cheat": CHEATS}))
    return output, ours, _otter(tmp), bank


def _per_question(results: dict) -> dict:
    """Points per question and kind (its code part's and numeric answers'; the written
    part stays pending)."""
    out = {}
    for kind, result in results.items():
        out[kind] = {}
        for g in result.parts:
            if g.verdict.status != "pending":
                q = g.question.rpartition("/")[2]
                out[kind][q] = out[kind].get(q, 0) + g.verdict.score
    return out


def _otter(tmp: Path) -> dict:
    """`otter assign` of the source, then `otter run` of each notebook, per question."""
    from otter.assign import main as assign
    from otter.run import main as run

    work = tmp / "otter"
    work.mkdir()
    shutil.copy(SOURCE, work / SOURCE.name)
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        assign(str(work / SOURCE.name), str(work / "dist"), no_pdfs=True, no_run_tests=True)
    dist = work / "dist"
    zipped = next((dist / "autograder").glob("*.zip"))
    notebooks = {
        "right": dist / "autograder" / SOURCE.name,
        "blank": dist / "student" / SOURCE.name,
    }
    for kind, mistakes in (("wrong", MISTAKES), ("cheat", CHEATS)):
        nb = nbformat.read(notebooks["blank"], as_version=4)
        answer = lambda c: "otter_answer_cell" in c.metadata.get("tags", [])  # noqa: E731
        notebooks[kind] = work / kind / SOURCE.name
        notebooks[kind].parent.mkdir()
        nbformat.write(replaced(nb, answer, mistakes), notebooks[kind])
    out = {}
    for kind, path in notebooks.items():
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            results = run(str(path), autograder=str(zipped), output_dir=None, no_logo=True)
        out[kind] = {q: results.get_score(q) for q in ("q1", "q2")}
    return out


def test_each_question_scores_what_otter_run_gives_it(graded):
    _, ours, theirs, _ = graded
    for kind in ("right", "blank", "wrong"):
        assert ours[kind] == pytest.approx(theirs[kind]), kind
    assert ours["right"] == {"q1": 3, "q2": 3}  # the source's points
    assert ours["blank"] == {"q1": 0, "q2": 0}
    assert ours["wrong"] == pytest.approx(WRONG)


def test_printing_what_otters_doctests_expect_fools_otter_and_not_these_checks(graded):
    """otter compares what a doctest prints; here the values cross as data or not at
    all, so an object whose repr is the expected text never reaches the comparison."""
    _, ours, theirs, _ = graded
    for q in FOOLED:
        assert theirs["cheat"][q] == theirs["right"][q] and ours["cheat"][q] == 0, q


def test_the_doctests_grade_the_same_in_the_grading_image(graded, grading_image, tmp_path):
    """The four notebooks graded again in the CPU grading image (podman or docker)."""
    _, ours, _, bank = graded
    students = {"wrong": MISTAKES, "cheat": CHEATS}
    image = graded_on(tmp_path, bank, "c1/ring", students, backend="docker", image=grading_image)
    assert _per_question(image) == ours


def test_the_import_carries_otters_points_hidden_cases_and_manual_question(graded, tmp_path):
    output, _, _, _ = graded
    assert "cell 4 (q1 test 4): compares with a number" in " ".join(output.split())
    bank = tmp_path / "bank"
    cli("new-bank", bank, "--course", "c1")
    cli("import", "otter", SOURCE, "--bank", bank)
    folder = bank / "templates" / "memory-and-ring"
    checks = (folder / "q1" / "checks.py").read_text()
    assert checks.count("doctest=True") == 3 and checks.count("hidden=True") == 1
    spec = yaml.safe_load((folder / "q1" / "question.yaml").read_text())
    [answer] = spec["answers"]  # `>>> math.isclose(state_gb, 20.96, rel_tol=1e-3)`: True
    assert (answer["variable"], answer["expr"], answer["tolerance"]) == (
        "state_gb",
        "20.96",
        {"rel": 0.001},
    )
    assert "became the numeric answer `state_gb` (20.96 ± 0.001 relative)" in " ".join(
        output.split()
    )
    hidden = "model_state_bytes(1310000000.0)"  # the hidden case, as otter assign wrote it
    assert hidden in checks and hidden not in (folder / "q1" / "solution.py").read_text()
    assert "# SOLUTION" not in (folder / "q1" / "solution.py").read_text()
    manual = yaml.safe_load((folder / "q3" / "question.yaml").read_text())
    assert manual["free_response"][0]["points"] == 1
    assert manual["free_response"][0]["rubric"].startswith("Each worker sends 2(p − 1) chunks")


def _edited(tmp_path: Path, edit) -> Path:
    nb = nbformat.read(SOURCE, as_version=4)
    edit(nb.cells)
    path = tmp_path / "edited" / SOURCE.name
    path.parent.mkdir(exist_ok=True)
    nbformat.write(nb, path)
    return path


# (the cell replaced, 0-based; its new text; what the one error must name)
MALFORMED = {
    "config-key": (0, "# ASSIGNMENT CONFIG\nname: x\nsolution_pdf: true",
                   ["memory_and_ring.ipynb cell 1",
                    "'solution_pdf' is no otter assignment config key"]),
    "question-key": (3, "# BEGIN QUESTION\nname: q1\npts: 2",
                     ["memory_and_ring.ipynb cell 4", "'pts' is no otter question config key"]),
    "end-tests": (7, "# END TESTS", ["cell 8", "END TESTS without BEGIN TESTS"]),
    "end-solution": (13, "# END SOLUTION", ["cell 14", "END SOLUTION without BEGIN SOLUTION"]),
    "no-name": (3, "# BEGIN QUESTION\npoints: 2", ["cell 4", "a question needs a name"]),
    "unclosed": (6, "def f(n):\n    # BEGIN SOLUTION\n    return 16 * n",
                 ["cell 7", "is never closed"]),
}  # fmt: skip


@pytest.mark.parametrize(("cell", "text", "fragments"), MALFORMED.values(), ids=MALFORMED)
def test_a_malformed_source_is_one_error_naming_the_cell_and_nothing_is_written(
    tmp_path, cell, text, fragments
):
    def edit(cells):
        cells[cell].source = text

    bank = tmp_path / "bank"
    cli("new-bank", bank, "--course", "c1")
    before = sorted(p.relative_to(bank) for p in bank.rglob("*"))
    done = CliRunner().invoke(
        main, ["import", "otter", str(_edited(tmp_path, edit)), "--bank", str(bank)]
    )
    assert done.exit_code == 2, done.output
    for fragment in fragments:
        assert fragment in " ".join(done.output.split()), done.output
    assert sorted(p.relative_to(bank) for p in bank.rglob("*")) == before


def _import(tmp_path: Path, edit) -> tuple[str, Path]:
    """The edited source imported into a new bank: the output, and the questions' folder."""
    bank = tmp_path / "bank"
    cli("new-bank", bank, "--course", "c1")
    out = cli("import", "otter", _edited(tmp_path, edit), "--bank", bank)
    return " ".join(out.split()), bank / "templates" / "memory-and-ring"


def test_otters_fenced_cells_ignore_seed_and_included_markdown(tmp_path):
    """A ```otter Markdown cell is a raw one; `# IGNORE` lines are in no output; a `# SEED`
    line is reported; Markdown of a solution is the student's with `otter_include`, the
    worked solution's without."""

    def edit(cells):
        cells[0].source = cells[0].source.replace("generate: true", "generate:\n  seed: 42")
        cells[3] = nbformat.v4.new_markdown_cell(
            "```otter\n# BEGIN QUESTION\nname: q1\npoints: 3\n```"
        )
        cells[6].source = "import random\nrandom.seed(0)  # SEED\nhelper = 1  # IGNORE\n" + (
            cells[6].source
        )
        shown = nbformat.v4.new_markdown_cell("Then set `state_gb`.")
        shown.metadata["tags"] = ["otter_include"]
        cells[7:7] = [shown, nbformat.v4.new_markdown_cell("16 bytes: 2 + 2 + 4 + 4 + 4.")]

    out, folder = _import(tmp_path, edit)
    solution = (folder / "q1" / "solution.py").read_text()
    assert "random.seed(0)\n" in solution and "helper" not in solution
    assert "# %% [markdown]\n# Then set `state_gb`." in solution
    assert (folder / "q1" / "solution.md").read_text() == "16 bytes: 2 + 2 + 4 + 4 + 4.\n"
    assert "cell 7: `random.seed(0)` (otter's # SEED) stays as written" in out


def test_a_question_with_no_tests_hands_its_code_to_the_next(tmp_path):
    def edit(cells):
        cells[2:2] = [
            nbformat.v4.new_raw_cell("# BEGIN QUESTION\nname: q0"),
            nbformat.v4.new_raw_cell("# BEGIN SOLUTION"),
            nbformat.v4.new_code_cell("GB = 1e9  # SOLUTION"),
            nbformat.v4.new_raw_cell("# END SOLUTION"),
            nbformat.v4.new_raw_cell("# END QUESTION"),
        ]

    out, folder = _import(tmp_path, edit)
    assert "cell 3 (q0): an autograded question with no tests is not carried; its code goes" in out
    assert "GB = 1e9" in (folder / "q1" / "solution.py").read_text()
    assert not (folder / "q0").exists()


def test_otters_exception_based_tests_are_reported_not_carried(tmp_path):
    def edit(cells):
        cells[0].source += "\ntests:\n  ok_format: false"
        for i in (9, 10, 11, 12, 21, 22):  # the tests of q1 and q2
            cells[i] = nbformat.v4.new_code_cell(
                f"def test_{i}(model_state_bytes):\n    assert model_state_bytes(1) == 16\n\n"
                f"test_{i}(model_state_bytes)  # IGNORE"
            )

    out, folder = _import(tmp_path, edit)
    assert "otter's exception-based tests (tests: ok_format: false) are not carried" in out
    assert "cell 4 (q1): an autograded question with no tests is not carried" in out
    assert sorted(p.name for p in folder.iterdir()) == ["q3"]


def test_an_all_or_nothing_question_is_one_check_of_all_its_cases(tmp_path):
    def edit(cells):
        cells[15].source = "# BEGIN QUESTION\nname: q2\npoints: [1, 2]\nall_or_nothing: true"

    _, folder = _import(tmp_path, edit)
    checks = (folder / "q2" / "checks.py").read_text()
    assert checks.count("cells.Test(") == 1 and '"q2",\n        3.0,' in checks
    assert "ring_allreduce([[1.0, 2.0], [3.0, 4.0]])" in checks  # both cases, in one doctest
    assert "ring_allreduce([[float(r)] * 6 for r in range(3)])[2]" in checks
    bank = folder.parents[1]  # the release check: the solution earns the 3, the starter not
    assert "ok memory-and-ring/q2 tests: solution 3/3, starter 0/3" in cli(
        "validate", "c1/memory-and-ring", "--bank", bank
    )
