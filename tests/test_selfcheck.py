"""The release check (scalegrade/selfcheck.py) and what grading does with a check that fails:
a broken check is the batch's error, never a student's silent 0.

The bank is a copy of the repository's, with one assignment holding the ring all-reduce
code part (templates/collectives/ring-allreduce-code) and a budget question, and a bug
written into the copy's checks.py."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from scalegrade.cli import main
from scalegrade.selfcheck import selfcheck
from tests.banks import copy_bank

RING = "collectives/ring-allreduce-code"
ASSIGNMENT = """title: The ring
kind: homework
notebook: ring
policy: {ecf: true, ecf_credit: 0.8}
questions:
  - question: budgets/model-budget
  - question: collectives/ring-allreduce-code
"""


def _bank(root: Path, bug: tuple[str, str] | None = None):
    """The bank copy with tdlsm/ring; ``bug``: (a line of the ring's checks.py, what to
    put before it, at its indentation; or ``def NAME(``: what to make the first statement
    of that function)."""
    b = copy_bank(root / "bank")
    (b.root / "assignments" / "tdlsm" / "ring.yaml").write_text(ASSIGNMENT, encoding="utf-8")
    if bug is not None:
        path = b.root / "templates" / RING / "checks.py"
        lines = path.read_text(encoding="utf-8").splitlines()
        anchor, inserted = bug
        [at] = [i for i, line in enumerate(lines) if line.startswith(anchor)]
        if anchor.startswith("def "):  # after the signature, which may span lines
            at = next(i for i in range(at, len(lines)) if lines[i].rstrip().endswith(":")) + 1
            inserted = f"    {inserted}"
        else:
            inserted = anchor[: len(anchor) - len(anchor.lstrip())] + inserted
        lines.insert(at, inserted)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return b


def _cli(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args])


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# grade()'s first line: every result, the solution's too, meets the bug
GRADE_BUG = ("def grade(", "undefined_helper(result)")
# only a wrong ring meets it: the solution earns every point, a student's mistake fails it
WRONG_ONLY_BUG = ("    bad = [r for r in range(p) if not good[r]]", "missing_name + 1")
# probe(): in the probe process, before the student's function is called
# (its message in brackets, which the terminal must print as they are, not as markup)
PROBE_BUG = ("def probe(", "raise KeyError('[a typo] in probe')")


def test_the_bank_code_parts_grade_their_own_solutions(tmp_path):
    """Every code part of the ring assignment: the reference earns every point for every
    seed, the starter does not (the question's points: question.yaml)."""
    found = selfcheck(_bank(tmp_path).assignment("tdlsm/ring"), seeds=2)
    [part] = found.parts
    assert (part.question, part.part, part.points) == (RING, "ring", 4.0)
    assert part.solution == (4.0, 4.0) and max(part.starter) < 4.0
    assert found.problems == []


def test_validate_and_generate_refuse_a_check_that_raises(tmp_path):
    b = _bank(tmp_path, GRADE_BUG)
    checks = b.root / "templates" / RING / "checks.py"
    line = _line_of(checks, "undefined_helper(result)")
    done = _cli("validate", "tdlsm/ring", "--bank", b.root, "--students", "3")
    assert done.exit_code == 1, done.output
    flat = " ".join(done.output.split())  # rich wraps long lines
    assert f"line {line}, in grade: NameError: name 'undefined_helper' is not defined" in flat
    assert "checks/collectives/ring-allreduce-code/checks.py: grade() failed (seed" in flat
    assert "FAIL collectives/ring-allreduce-code ring" in flat

    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,a@x\n", encoding="utf-8")
    (tmp_path / "secret").write_text("s" * 40)
    done = _cli("generate", "tdlsm/ring", "--bank", b.root, "--roster", roster,
                "--out", tmp_path / "out", "--secret-file", tmp_path / "secret")  # fmt: skip
    assert done.exit_code == 2, done.output
    assert "nothing released: a code part cannot grade its own solution" in done.output
    assert not (tmp_path / "out").exists()


def test_validate_names_a_probe_that_raises(tmp_path):
    b = _bank(tmp_path, PROBE_BUG)
    line = _line_of(b.root / "templates" / RING / "checks.py", "[a typo] in probe")
    done = _cli("validate", "tdlsm/ring", "--bank", b.root, "--students", "3")
    assert done.exit_code == 1, done.output
    flat = " ".join(done.output.split())
    assert f"probe() failed: line {line}, in probe: KeyError: '[a typo] in probe'" in flat


DPO = "posttraining/dpo-loss-code"


def test_a_known_wrong_variant_graded_otherwise_than_declared_is_a_warning(tmp_path):
    """question.yaml's known_wrong: DPO's sum over the batch loses only the reduction
    property, 1 of the checks' 8 weights (checks.py), so it earns 3.5 of 4 points;
    declared at 4, the release check warns that the checks are harsher than declared."""
    b = copy_bank(tmp_path / "bank")
    spec = b.root / "templates" / DPO / "question.yaml"
    text = spec.read_text(encoding="utf-8")
    assert text.count("earns: 3.5") == 1
    spec.write_text(text.replace("earns: 3.5", "earns: 4"), encoding="utf-8")
    only_dpo = ASSIGNMENT.replace("  - question: budgets/model-budget\n", "").replace(RING, DPO)
    (b.root / "assignments" / "tdlsm" / "dpo.yaml").write_text(only_dpo, encoding="utf-8")
    found = selfcheck(b.assignment("tdlsm/dpo"), seeds=1)
    assert found.problems == []
    [warning] = found.warnings
    assert "the checks are harsher than declared" in warning
    assert "'the sum over the batch, not the mean' earns 3.5 of 4 points" in warning
    assert "Your loss is the sum over the batch" in warning  # the student's feedback


def test_a_known_wrong_variant_whose_text_is_not_in_the_reference_is_refused(tmp_path):
    b = copy_bank(tmp_path / "bank")
    spec = b.root / "templates" / DPO / "question.yaml"
    text = spec.read_text(encoding="utf-8")
    spec.write_text(text.replace('"logsigmoid(u).mean()":', '"no such text":'), encoding="utf-8")
    done = _cli("validate", "tdlsm/hw2", "--bank", b.root, "--students", "2")
    assert done.exit_code != 0
    flat = " ".join(done.output.split())
    assert "question.yaml: code.0.known_wrong.0.replace: 'no such text' is found 0 times" in flat


def _release_and_submit(tmp_path: Path, b, wrong: dict[str, str]) -> Path:
    """tdlsm/ring released (bank ``b``) to ana, ben and cem with solutions; their solution
    notebooks as submissions, each cell source of ``wrong`` (student -> replacement of
    the ring's solution cell) swapped in."""
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,A,a@x\nben,B,b@x\ncem,C,c@x\n", encoding="utf-8")
    (tmp_path / "secret").write_text("s" * 40)
    done = _cli("generate", "tdlsm/ring", "--bank", b.root, "--roster", roster, "--out",
                tmp_path / "rel", "--secret-file", tmp_path / "secret", "--with-solutions",
                "--selfcheck-seeds", "0")  # fmt: skip
    assert done.exit_code == 0, done.output
    subs = tmp_path / "subs"
    for sid in ("ana", "ben", "cem"):
        shutil.copytree(tmp_path / "rel" / "solutions" / sid, subs / sid)
        path = subs / sid / "ring.ipynb"
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            source = "".join(cell["source"])
            if sid in wrong and "def ring_allreduce(" in source and cell["cell_type"] == "code":
                cell["source"] = wrong[sid]
        path.write_text(json.dumps(nb), encoding="utf-8")
    return subs


SUM_RING = """import numpy as np

def ring_allreduce(x, rank, world, comm):
    return np.asarray(x) * world  # not a ring: no message, and not the sum
"""


def test_a_check_that_fails_at_grade_time_is_the_batch_error_not_a_zero(tmp_path):
    """The bug shows only on a wrong ring: ana's honest ring earns every point, ben's wrong
    ring leaves the part pending (not 0), and the batch says so: exit 1, the report's
    section, the summary's error column."""
    b = _bank(tmp_path, WRONG_ONLY_BUG)
    subs = _release_and_submit(tmp_path, b, {"ben": SUM_RING})
    out = tmp_path / "grades"
    done = _cli("grade", "tdlsm/ring", subs, "--keys", tmp_path / "rel" / "keys", "--out", out,
                "--no-reveal")  # fmt: skip
    assert done.exit_code == 1, done.output
    assert "1 code parts were not graded because their check failed" in done.output
    results = {sid: json.loads((out / sid / "results.json").read_text()) for sid in ("ana", "ben")}
    ring = {
        sid: next(t for t in r["tests"] if "ring_allreduce" in t["name"])
        for sid, r in results.items()
    }
    assert ring["ana"]["score"] == 4.0
    assert "score" not in ring["ben"]  # pending, not 0
    assert "the grader's check of this part failed" in ring["ben"]["output"]
    assert "NameError" not in ring["ben"]["output"]  # the instructor's bug is not the student's
    rows = {
        r["student_id"]: r for r in csv.DictReader(io.StringIO((out / "summary.csv").read_text()))
    }
    assert "NameError: name 'missing_name' is not defined" in rows["ben"]["error"]
    assert rows["ana"]["error"] == ""
    report = (out / "report.html").read_text()
    section = report.split("<h2>Checks that failed")[1].split("<h2>")[0]
    assert "missing_name" in section and "1 submission;" in section


RAISING_CELL = "import numpy as np\nnp.zeros(3)[7]  # IndexError, after the function\n"


def test_a_cell_that_raised_shows_in_the_summary_and_the_report(tmp_path):
    """cem's notebook has an extra cell that raises: everything else is graded (what ana's
    same solution earns), and the instructor sees the cell in summary.csv and the report."""
    b = _bank(tmp_path)
    subs = _release_and_submit(tmp_path, b, {})
    path = subs / "cem" / "ring.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"].append(
        {"cell_type": "code", "metadata": {}, "source": RAISING_CELL, "outputs": [],
         "execution_count": None}
    )  # fmt: skip
    path.write_text(json.dumps(nb), encoding="utf-8")
    out = tmp_path / "grades"
    done = _cli("grade", "tdlsm/ring", subs, "--keys", tmp_path / "rel" / "keys", "--out", out,
                "--no-reveal")  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = {
        r["student_id"]: r for r in csv.DictReader(io.StringIO((out / "summary.csv").read_text()))
    }
    assert rows["cem"]["total"] == rows["ana"]["total"]  # the raising cell cost nothing
    assert "raised in cell" in rows["cem"]["error"] and "IndexError" in rows["cem"]["error"]
    report = (out / "report.html").read_text()
    section = report.split("<h2>Cells that raised an error</h2>")[1].split("<h2>")[0]
    assert "cem (" in section and "IndexError" in section


def test_a_known_wrong_variant_earns_points_or_a_range_of_them():
    """A variant whose points depend on the seed declares [low, high] (pass@k's plug-in)."""
    import pytest
    from pydantic import ValidationError

    from generator.question import KnownWrong

    one = KnownWrong(name="x", replace={"a": "b"}, earns=3.5)
    assert one.range == (3.5, 3.5) and one.shown() == "3.5"
    some = KnownWrong(name="x", replace={"a": "b"}, earns=[0.9, 1.4])
    assert some.range == (0.9, 1.4) and some.shown() == "0.9 to 1.4"
    for bad in ([1.4, 0.9], -1, [-1, 2]):
        with pytest.raises(ValidationError):
            KnownWrong(name="x", replace={"a": "b"}, earns=bad)
