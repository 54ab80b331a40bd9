"""What both importers' tests do on ScaleGrade's side: a bank, the CLI, and the imported
assignment released to one student and graded on four notebooks (the solutions, the
blank notebook, and the same with each student's mistakes written in)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from click.testing import CliRunner

from autograder.grading.keys import Keys
from autograder.grading.submission import StudentResult, grade_one
from autograder.sandbox import Limits, Sandbox
from scalegrade.cli import main

STUDENT = "s1"


def cli(*args) -> str:
    """`scalegrade ARGS`, which must succeed; its output."""
    done = CliRunner().invoke(main, [str(a) for a in args])
    assert done.exit_code == 0, done.output
    return done.output


def replaced(nb, is_answer, mistakes: dict) -> nbformat.NotebookNode:
    """``nb`` with each answer cell that defines a function of ``mistakes`` (by its name)
    holding the mistake instead."""
    for cell in nb.cells:
        for name, code in mistakes.items():
            if cell.cell_type == "code" and is_answer(cell) and f"def {name}(" in cell.source:
                cell.source = code
    return nb


def graded(
    tmp: Path, bank: Path, aid: str, students: dict[str, dict], **where
) -> dict[str, StudentResult]:
    """``aid`` (COURSE/ID) released to one student and graded: "right" (the solutions),
    "blank" (the release) and one notebook per entry of ``students`` (kind: mistakes), in
    a warm sandbox on the host, or where ``where`` says (``backend``, ``image``)."""
    short = aid.partition("/")[2]
    roster = tmp / "roster.csv"
    roster.write_text(f"student_id,name,email\n{STUDENT},Sam,s@x\n", encoding="utf-8")
    rel = tmp / "rel"
    (tmp / "secret").write_text("import-test-secret-" + "x" * 32, encoding="utf-8")
    cli("generate", aid, "--bank", bank, "--roster", roster, "--out", rel,
        "--secret-file", tmp / "secret", "--with-solutions")  # fmt: skip
    notebooks = {
        "right": rel / "solutions" / STUDENT / f"{short}.ipynb",
        "blank": rel / "release" / STUDENT / f"{short}.ipynb",
    }
    for kind, mistakes in students.items():
        nb = nbformat.read(notebooks["blank"], as_version=4)
        notebooks[kind] = tmp / "scalegrade" / kind / f"{short}.ipynb"
        notebooks[kind].parent.mkdir(parents=True)
        part = lambda c: "scalegrade" in c.metadata  # noqa: E731
        nbformat.write(replaced(nb, part, mistakes), notebooks[kind])
    keys = Keys(rel / "keys")
    out = {}
    with Sandbox(limits=Limits(wall_seconds=60.0), preload=keys.preload, **where) as box:
        for kind, path in notebooks.items():
            result = grade_one(keys.key(STUDENT), path, keys=keys, runner=box, reveal=False)
            assert not result.check_errors, result.check_errors
            out[kind] = result
    return out
