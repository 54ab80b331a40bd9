"""The demo's tdlsm/hw1 course, for the tests that grade it end to end (batch, Dask, the
warm sandbox service): a release with solutions, the demo's scenario notebooks
(scalegrade/demo.py), and `scalegrade grade` on them read back from the gradebook."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import CliRunner

from autograder.semester.gradebook import Gradebook
from generator import bank
from generator.release import release
from generator.roster import parse
from scalegrade.cli import main
from scalegrade.demo import simulate

# four submissions: a misconception (GiB read as GB), a code mistake (a sum() ring), the
# cheating notebook and an honest one
PICKED = {"s00": "GiB read as GB", "s03": "sum() ring", "s06": "cheating notebook"}
HONEST = "s07"


def release_hw1(root: Path, students: int) -> None:
    """tdlsm/hw1 released with solutions to s00, s01, ... into ROOT/hw1."""
    roster = parse(
        "student_id,name,email\n" + "".join(f"s{i:02d},S {i},s{i}@x\n" for i in range(students))
    )
    release(
        bank.load().assignment("tdlsm/hw1"),
        roster,
        secret=b"k" * 32,
        out=root / "hw1",
        with_solutions=True,
    )


def picked_course(root: Path) -> Path:
    """Eight students' release, and PICKED and HONEST's notebooks in ROOT/subs."""
    release_hw1(root, 8)
    played = simulate(root / "hw1" / "release", root / "hw1" / "keys", root / "all")
    assert {s: played[s] for s in PICKED} == PICKED and played[HONEST] == "honest"
    for student in [*PICKED, HONEST]:
        shutil.copytree(root / "all" / student, root / "subs" / student)
    return root


def grade_cli(root: Path, out: str, *extra: str) -> list[dict]:
    """`scalegrade grade` of ROOT/subs into ROOT/OUT; the gradebook's results."""
    args = ["grade", "tdlsm/hw1", str(root / "subs"), "--keys", str(root / "hw1" / "keys")]
    done = CliRunner().invoke(main, [*args, "--out", str(root / out), "--no-reveal", *extra])
    assert done.exit_code == 0, done.output
    book = Gradebook(f"sqlite:///{root / out / 'gradebook.sqlite'}")
    try:
        return book.results("tdlsm/hw1")
    finally:
        book.close()
