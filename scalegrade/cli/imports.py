"""Bringing an existing course in: `import nbgrader` and `import otter` write another
tool's notebooks into a bank as questions and an assignment (:mod:`generator.imports`)."""

from __future__ import annotations

from pathlib import Path

import click

from scalegrade.cli.common import console, fail


@click.group("import")
def import_group() -> None:
    """Import another tool's assignment notebooks into a bank."""


def _sources(f):
    """The options both readers take."""
    f = click.option(
        "--topic", help="The folder under templates/ [default: the assignment's name]."
    )(f)
    f = click.option(
        "--assignment", help="The assignment to write [default: the first notebook's name]."
    )(f)
    f = click.option("--course", help="The bank's course (its only one if unset).")(f)
    f = click.option(
        "--bank",
        "bank_dir",
        envvar="SCALEGRADE_BANK",
        required=True,
        type=click.Path(path_type=Path, exists=True, file_okay=False),
        help="The bank to write into (`scalegrade new-bank FOLDER` makes one) [$SCALEGRADE_BANK].",
    )(f)
    return click.argument(
        "sources", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False)
    )(f)


@import_group.command("nbgrader")
@_sources
def nbgrader(sources, bank_dir, course, assignment, topic) -> None:
    """Import nbgrader source notebooks (the instructor's versions, with solutions and
    hidden tests), in order, as one assignment: a question per graded part, its tests as
    checks run against the student's notebook, manually graded cells and tasks as parts a
    person grades.  Writes the questions, assignments/COURSE/ASSIGNMENT.yaml and an import
    report of everything not carried over; nothing is written on an error."""
    from generator.imports import nbgrader as reader

    _import("nbgrader", reader, sources, bank_dir, course, assignment, topic)


@import_group.command("otter")
@_sources
def otter(sources, bank_dir, course, assignment, topic) -> None:
    """Import otter-assign source notebooks (format v1: # BEGIN QUESTION blocks), in order,
    as one assignment: a question per otter question, its test cases (as the real `otter
    assign` reads them: hidden flags, points) as checks run against the student's
    notebook, manual questions as parts a person grades.  Writes the questions,
    assignments/COURSE/ASSIGNMENT.yaml and an import report; nothing is written on an
    error."""
    from generator.imports import otter as reader

    _import("otter", reader, sources, bank_dir, course, assignment, topic)


def _import(tool, reader, sources, bank_dir, course, assignment, topic) -> None:
    from generator.imports import SourceError, slug, write

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
            tool=tool,
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
