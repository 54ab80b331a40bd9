"""`demo`: the whole flow on the embedded sample course, through authoring's release
and grading's batch."""

from __future__ import annotations

from pathlib import Path

import click

from scalegrade.cli.authoring import _release
from scalegrade.cli.common import _load_assignment, bank_option, console
from scalegrade.cli.grading import _grade


@click.command()
@bank_option
@click.option("--out", default="out/demo", show_default=True, type=click.Path(path_type=Path))
def demo(bank_dir: Path | None, out: Path) -> None:
    """The whole flow on the embedded sample course: release, submissions, grading, report."""
    import shutil

    from generator.roster import read
    from generator.secret import DEMO_SECRET
    from scalegrade.demo import simulate

    roster = Path(__file__).resolve().parent.parent / "sample" / "roster.csv"
    if out.exists():
        shutil.rmtree(out)
    console.rule("1. release tdlsm/hw1 to the 30 students of the sample course")
    hw1 = _load_assignment("tdlsm/hw1", bank_dir)
    _release(hw1, read(roster), DEMO_SECRET, out / "hw1", True, True)
    console.rule("2. simulated submissions: honest work, classic mistakes, a cheat")
    played = simulate(out / "hw1" / "release", out / "hw1" / "keys", out / "submissions")
    for student, scenario in played.items():
        if scenario != "honest":
            console.print(f"  {student}: {scenario}")
    console.rule("3. grade in the sandbox")
    _grade(
        "tdlsm/hw1",
        out / "submissions",
        out / "hw1" / "keys",
        out / "grades",
        jobs=2,
        backend="auto",
        image=None,
        gpus=None,
        db_url=None,
        timeout=60.0,
        reveal=True,
        regrade=False,
    )
    console.print(f"instructor report: {(out / 'grades' / 'report.html').resolve()}")
    console.print(f"as a platform: scalegrade serve --course {out}", highlight=False)


# Registered on `scalegrade` by scalegrade/cli/__init__.py.
COMMANDS = (demo,)
