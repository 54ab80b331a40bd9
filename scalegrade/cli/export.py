"""`export`: an assignment handed to Gradescope (an autograder zip), Canvas or Moodle
(a gradebook CSV)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from scalegrade.cli.common import _gradebook, console, fail, keys_option


@click.group()
def export() -> None:
    """Hand an assignment to where instructors already are: Gradescope, Canvas, Moodle."""


@export.command("gradescope")
@click.argument("assignment")
@keys_option
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Zip to write.")
@click.option(
    "--wheel",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="ScaleGrade wheel to ship (default: built from this checkout).",
)
@click.option("--timeout", default=120.0, show_default=True, help="Wall seconds per submission.")
@click.option(
    "--torch-index",
    default="https://download.pytorch.org/whl/cpu",
    show_default=True,
    help="Package index setup.sh installs torch's CPU build from.",
)
@click.option(
    "--extensions",
    "extensions_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="extensions.csv to ship: each submission's late penalty then counts from its "
    "student's extended deadline (Gradescope's created_at against the policy).",
)
def export_gradescope(
    assignment: str,
    keys_dir: Path,
    out: Path,
    wheel: Path | None,
    timeout: float,
    torch_index: str,
    extensions_file: Path | None,
) -> None:
    """A Gradescope autograder zip (setup.sh, run_autograder) grading ASSIGNMENT's notebooks."""
    from autograder.integrations import gradescope
    from autograder.semester.lateness import ExtensionsError
    from contract import KeyFileError, read_release

    try:
        info = read_release(keys_dir)
        if info.assignment != assignment:
            fail(f"{keys_dir} holds the keys of {info.assignment}, not {assignment}")
        package = gradescope.build(
            keys_dir,
            out,
            wheel=wheel,
            timeout=timeout,
            torch_index=torch_index,
            extensions=extensions_file,
        )
    except (KeyFileError, gradescope.PackageError, ExtensionsError) as err:
        fail(str(err))
    console.print(
        f"{package.path}: {package.bytes / 2**20:.1f} MiB, {package.students} students' keys, "
        f"{package.checks} code checks, in {package.seconds:.1f} s"
    )
    console.print(
        "Upload it as the assignment's autograder on Gradescope (Configure Autograder > Zip "
        "file upload). Students submit their own notebook; each is graded with their numbers."
    )


def _lms_export(lms_name: str, assignment: str, opts: dict[str, Any]) -> None:
    from collections import Counter

    from autograder.semester import lms
    from contract import KeyFileError, read_keys, read_release

    try:
        info = read_release(opts["keys_dir"])
        roster = lms.roster(read_keys(opts["keys_dir"]))
        existing = lms.read(opts["lms_export"]) if opts["lms_export"] else None
    except (KeyFileError, lms.LmsError) as err:
        fail(str(err))
    if info.assignment != assignment:
        fail(f"{opts['keys_dir']} holds the keys of {info.assignment}, not {assignment}")
    if existing and existing.lms != lms_name:
        fail(f"{opts['lms_export']}: a {existing.lms} file, not {lms_name}")
    book = _gradebook(opts["grades"], opts["db_url"])
    try:
        results = book.results(assignment)
    finally:
        book.close()
    if not results:
        fail(f"the gradebook holds no results of {assignment}")
    write = lms.canvas_csv if lms_name == "canvas" else lms.moodle_csv
    text = write(
        results,
        roster,
        opts["column"] or info.title,
        per_question=opts["per_question"],
        existing=existing,
    )
    opts["out"].parent.mkdir(parents=True, exist_ok=True)
    opts["out"].write_text(text, encoding="utf-8")
    console.print(f"{opts['out']}: {len(results)} students", highlight=False)
    if existing:
        m = lms.match(existing, roster)
        ways = ", ".join(f"{n} by {h}" for h, n in Counter(m.how.values()).most_common())
        console.print(f"matched in {opts['lms_export']}: {len(m.rows)} ({ways or 'none'})")
        if m.missing:
            console.print(f"[yellow]not in the {lms_name} file[/]: {', '.join(m.missing)}")
        for row in m.unmatched:
            console.print(f"[yellow]not on the roster[/]: {row.identity}", highlight=False)
        for line in m.ambiguous:
            console.print(f"[yellow]ambiguous[/]: {line}", highlight=False)


def _lms_options(f):
    for option in reversed(
        [
            click.argument("assignment"),
            click.option(
                "--grades",
                required=True,
                type=click.Path(path_type=Path, file_okay=False),
                help="The folder `scalegrade grade --out` wrote (its gradebook).",
            ),
            click.option(
                "--keys",
                "keys_dir",
                required=True,
                type=click.Path(path_type=Path),
                help="The keys/ folder (the roster's names and emails).",
            ),
            click.option("--out", required=True, type=click.Path(path_type=Path), help="CSV."),
            click.option("--db", "db_url", help="Gradebook URL (default: sqlite in GRADES)."),
            click.option("--column", help="Grade column (default: the assignment's title)."),
            click.option("--per-question", is_flag=True, help="A column per question too."),
            click.option(
                "--lms-export",
                type=click.Path(path_type=Path, exists=True, dir_okay=False),
                help="The LMS's own gradebook export: match it and reuse its ids and column.",
            ),
        ]
    ):
        f = option(f)
    return f


@export.command("canvas")
@_lms_options
def export_canvas(assignment: str, **opts: Any) -> None:
    """A Canvas gradebook CSV of ASSIGNMENT (SIS User ID = student id, SIS Login ID = email)."""
    _lms_export("canvas", assignment, opts)


@export.command("moodle")
@_lms_options
def export_moodle(assignment: str, **opts: Any) -> None:
    """A Moodle grade-import CSV of ASSIGNMENT (map from Email address or ID number)."""
    _lms_export("moodle", assignment, opts)


# Registered on `scalegrade` by scalegrade/cli/__init__.py.
COMMANDS = (export,)
