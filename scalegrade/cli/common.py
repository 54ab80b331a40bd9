"""What the command groups share: the console, `fail`, and the options (and their
readers) of the bank, a release, the keys, the sandbox and the gradebook."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

# Tables are wide; a pipe or CI log has no terminal width to respect.
console = Console() if sys.stdout.isatty() else Console(width=150)


def fail(message: str) -> None:
    """One clear line on stderr, exit status 2 (bad input)."""
    click.echo(f"scalegrade: {message}", err=True)
    sys.exit(2)


def _released_option(what: str = ""):
    """``--out``: a folder `scalegrade generate` released (``what``: what the command does
    to it)."""
    return click.option(
        "--out",
        required=True,
        type=click.Path(path_type=Path, exists=True, file_okay=False),
        help="The folder `scalegrade generate --out` wrote" + (f": {what}." if what else "."),
    )


bank_option = click.option(
    "--bank",
    "bank_dir",
    envvar="SCALEGRADE_BANK",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="The question bank: a folder with courses.yaml, templates/ and assignments/ "
    "[default: $SCALEGRADE_BANK, else ScaleGrade's own].",
)


def _bank(bank_dir: Path | None, *, fresh: bool = False):
    from generator.bank import BankError, load

    try:
        return load(bank_dir, fresh=fresh)
    except BankError as err:
        fail(str(err))


keys_option = click.option(
    "--keys",
    "keys_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="The keys/ folder `scalegrade generate` wrote.",
)


def _load_assignment(aid: str, bank_dir: Path | None, *, fresh: bool = False):
    from generator.assignment import AssignmentError

    try:
        return _bank(bank_dir, fresh=fresh).assignment(aid)
    except AssignmentError as err:
        fail(str(err))


def _sandbox_options(f):
    """--sandbox, --image, --gpus and --engine: the sandbox a command grades in."""
    for option in reversed(
        [
            click.option(
                "--sandbox",
                "backend",
                default="auto",
                show_default=True,
                type=click.Choice(["auto", "namespaces", "process", "docker"]),
            ),
            click.option(
                "--image", help="Grading image for --sandbox docker (`make image` builds it)."
            ),
            click.option("--gpus", help="--gpus for --sandbox docker (e.g. all)."),
            click.option(
                "--engine",
                default="auto",
                show_default=True,
                type=click.Choice(["auto", "docker", "podman"]),
                help="The container engine of --sandbox docker: docker where its daemon "
                "answers, else podman ($SCALEGRADE_PODMAN_ARGS: its global flags on this host).",
            ),
        ]
    ):
        f = option(f)
    return f


def _limits(opts: dict):
    """The sandbox's limits of a grade command: its timeout; with --gpus, memory bounded by
    each job's cgroup, not by RLIMIT_AS (CUDA reserves far more address space than it uses)."""
    from autograder.sandbox import Limits

    return Limits(wall_seconds=opts["timeout"], address_space=not opts["gpus"])


def _gradebook_options(f):
    f = click.option("--db", "db_url", help="Gradebook URL (instead of --grades).")(f)
    return click.option(
        "--grades",
        type=click.Path(path_type=Path, file_okay=False),
        help="The folder `scalegrade grade --out` wrote (its gradebook).",
    )(f)


def _gradebook(grades: Path | None, db_url: str | None):
    """The gradebook a command names: --db URL, or the sqlite file in --grades DIR."""
    from autograder.semester.gradebook import Gradebook

    if db_url:
        return Gradebook(db_url)
    if grades is None:
        fail("name the gradebook: --grades DIR (what `scalegrade grade --out` wrote) or --db URL")
    if not (grades / "gradebook.sqlite").is_file():
        fail(f"{grades}: no gradebook.sqlite (the folder `scalegrade grade --out` wrote)")
    return Gradebook(f"sqlite:///{(grades / 'gradebook.sqlite').resolve()}")
