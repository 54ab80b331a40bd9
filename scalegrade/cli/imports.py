"""Bringing an existing course in: `import nbgrader` writes another tool's notebooks into
a bank as questions and an assignment (:mod:`generator.imports`)."""

from __future__ import annotations

from pathlib import Path

import click

from scalegrade.cli.common import console, fail


@click.group("import")
def import_group() -> None:
    """Import another tool's assignment notebooks into a bank."""


@import_group.command("nbgrader")
@click.argument("sources", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--bank",
    "bank_dir",
    envvar="SCALEGRADE_BANK",
    required=True,
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="The bank to write into (`scalegrade new-bank FOLDER` makes one) [$SCALEGRADE_BANK].",
)
@click.option("--course", help="The bank's course (its only one if unset).")
@click.option("--assignment", help="The assignment to write [default: the first notebook's name].")
@click.option("--topic", help="The folder under templates/ [default: the assignment's name].")
def nbgrader(
    sources: tuple[Path, ...],
    bank_dir: Path,
    course: str | None,
    assignment: str | None,
    topic: str | None,
) -> None:
    """Import nbgrader source notebooks (the instructor's versions, with solutions and
    hidden tests), in order, as one assignment: a question per graded part, its tests as
    checks run against the student's notebook, manually graded cells and tasks as parts a
    person grades.  Writes the questions, assignments/COURSE/ASSIGNMENT.yaml and an import
    report of everything not carried over; nothing is written on an error."""
    from generator.imports import SourceError, slug, write
    from generator.imports import nbgrader as reader

    assignment = assignment or slug(sources[0].stem)
    report: list[str] = []
    try:
        several = len(sources) > 1
        imported = [q for path in sources for q in reader.read(path, report, prefix=several)]
        done = write(
            imported,
            bank=bank_dir,
            course=course,
            assignment=assignment,
            topic=topic or assignment,
            tool="nbgrader",
            sources=[p.name for p in sources],
            report=report,
        )
    except SourceError as err:
        fail(str(err))
    for folder, q in zip(done.folders, imported, strict=True):
        console.print(f"question {folder.relative_to(bank_dir.resolve())}: {q.points:g} pt")
    console.print(f"assignment {done.assignment} ({done.points:g} pt)", highlight=False)
    console.print(f"report {done.report}: {len(report)} thing(s) not carried over", highlight=False)
    for line in report:
        console.print(f"  {line}", highlight=False, markup=False)
    aid = f"{done.assignment.parent.name}/{done.assignment.stem}"
    console.print(f"next: scalegrade validate {aid} --bank {bank_dir}", highlight=False)


COMMANDS = [import_group]
