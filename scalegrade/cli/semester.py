"""The semester after grading, from the gradebook: `late` work, `rekey` and `regrade`
after a fix, `reseed` one student, `stats` on the questions, `marks` given by people."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import click
from rich.table import Table

from scalegrade.cli.common import (
    _gradebook,
    _gradebook_options,
    _load_assignment,
    _released_option,
    bank_option,
    console,
    fail,
)


class _LateSettings(click.Option):
    """``late --set``: its help names the late policy's settings, read from the library
    (:data:`autograder.semester.lateness.LATE_SETTINGS`) only when the help is shown, as
    the CLI imports no library to start."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from autograder.semester.lateness import LATE_SETTINGS

        self.help = f"Change the late policy: {', '.join(LATE_SETTINGS)}."
        return super().get_help_record(ctx)


@click.command()
@click.argument("assignment")
@_gradebook_options
@click.option("--due", help="A new deadline for everyone (ISO 8601; no zone: the course's).")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="NAME=VALUE",
    cls=_LateSettings,
)
@click.option(
    "--extensions",
    "extensions_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="extensions.csv to record (student_id,assignment,due or extra_days,granted_by,reason).",
)
@click.option("--by", help="Who makes the change (recorded).")
@click.option("--why", help="Why (recorded with a deadline or policy change).")
def late(
    assignment: str,
    grades: Path | None,
    db_url: str | None,
    due: str | None,
    settings: tuple[str, ...],
    extensions_file: Path | None,
    by: str | None,
    why: str | None,
) -> None:
    """Late work on ASSIGNMENT: who was late, and by how much.

    With --due, --set or --extensions, record the change (who and why), make every standing
    again from the gradebook (no notebook runs), write the files again, and print whose
    score changed."""
    from autograder.semester.batch import publish
    from autograder.semester.gradebook import GradebookError
    from autograder.semester.lateness import LATE_SETTINGS, ExtensionsError, read_extensions
    from contract import times

    book = _gradebook(grades, db_url)
    try:
        row = book.assignment(assignment)
        policy: dict[str, str] = {}
        for item in settings:
            name, eq, value = item.partition("=")
            if not eq or name not in LATE_SETTINGS:
                fail(f"--set {item}: give NAME=VALUE, NAME one of {', '.join(LATE_SETTINGS)}")
            policy[name] = value
        new_due = times.parse(due, row.timezone) if due else None
        extensions = (
            read_extensions(extensions_file, row.timezone, granted_by=by) if extensions_file else []
        )
        if new_due or policy:
            book.change(assignment, by=by or "", why=why or "", due=new_due, policy=policy)
        if extensions:
            book.add_extensions(extensions)
        moved = book.restate() if (new_due or policy or extensions) else []
        touched: dict[str, set[str]] = {}
        for m in moved:
            touched.setdefault(m.assignment, set()).add(m.student_id)
        for name, students in sorted(touched.items()):
            publish(book, name, students)
        results = book.results(assignment)
    except (GradebookError, ExtensionsError, times.TimeError, ValueError) as err:
        fail(f"nothing changed: {err}")
    finally:
        book.close()
    scored = [m for m in moved if abs(m.new - m.old) > 1e-9]
    if scored:
        table = Table(title=f"scores changed: {len(scored)}")
        for col in ("assignment", "student", "before", "after", "now"):
            table.add_column(col)
        for m in scored:
            table.add_row(m.assignment, m.student_id, f"{m.old:.2f}", f"{m.new:.2f}", m.why)
        console.print(table)
    if new_due or policy or extensions:
        console.print(
            f"recorded; {len(scored)} scores changed, {len(moved) - len(scored)} more "
            "feedback notes rewritten",
            highlight=False,
        )
    table = Table(title=f"{assignment}: submission times")
    for col in ("student", "submitted", "late by", "free days", "penalty", "score", "source"):
        table.add_column(col)
    for r in results:
        late_ = r.get("late") or {}
        if not late_:
            continue
        table.add_row(
            r["student_id"],
            times.shown(datetime.fromisoformat(late_["submitted_at"]), row.timezone)
            if late_.get("submitted_at")
            else "—",
            f"{late_['late_seconds'] / 3600:.1f} h" if late_["late_seconds"] else "",
            f"{late_['pool_days'] or ''}",
            f"{100 * late_['penalty']:g} %" if late_["penalty"] else "",
            f"{r['score']:.2f}",
            late_["time_source"] + (" (check it)" if late_["warning"] else ""),
        )
    console.print(table)


@click.command()
@click.argument("assignment")
@bank_option
@_released_option("its keys are replaced")
@click.option(
    "--secret-file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="The course secret the assignment was released with [default: $SCALEGRADE_SECRET].",
)
@click.option(
    "--allow-new-numbers",
    is_flag=True,
    help="Let a change give other numbers to the students who have not submitted yet.",
)
@_gradebook_options
def rekey(
    assignment: str,
    bank_dir: Path | None,
    out: Path,
    secret_file: Path | None,
    allow_new_numbers: bool,
    grades: Path | None,
    db_url: str | None,
) -> None:
    """Rebuild ASSIGNMENT's keys after its questions were fixed, with the same seeds.

    Says what changed per question; refuses a change that would give a student other
    numbers (with --allow-new-numbers: only those who have not submitted get them, and a
    new notebook).  Then `scalegrade regrade` grades again."""
    from generator.rekey import rekey as rebuild
    from generator.release import ReleaseError
    from generator.secret import SecretError, load_secret
    from generator.variant import VariantError

    try:
        secret = load_secret(secret_file)
    except SecretError as err:
        fail(str(err))
    submitted: set[str] = set()
    if grades or db_url:
        book = _gradebook(grades, db_url)
        try:
            submitted = {r["student_id"] for r in book.results(assignment)}
        finally:
            book.close()
    elif allow_new_numbers:
        fail("--allow-new-numbers needs the gradebook (--grades or --db), to know who submitted")
    a = _load_assignment(assignment, bank_dir, fresh=True)  # the bank as edited now
    try:
        done = rebuild(
            a, out, secret=secret, submitted=submitted, allow_new_numbers=allow_new_numbers
        )
    except (ReleaseError, VariantError) as err:
        fail(str(err))
    if not done.changes:
        console.print(f"{assignment}: the keys are those released; nothing changed")
        return
    table = Table(title=f"{assignment}: what changed")
    table.add_column("question")
    table.add_column("change")
    for q, what in done.changes.items():
        table.add_row(q, "\n".join(what))
    console.print(table)
    if done.new_numbers:
        console.print(
            f"new numbers and notebooks for {len(done.new_numbers)} students who had not "
            f"submitted: {', '.join(done.new_numbers)} ({out / 'release'})",
            highlight=False,
        )
    console.print(
        f"keys replaced; the old ones are in {done.archived}. Next: scalegrade regrade "
        f"{assignment} --grades DIR --by NAME --why TEXT",
        highlight=False,
    )


@click.command()
@click.argument("assignment")
@click.argument("student")
@bank_option
@_released_option()
@click.option("--question", help="Only this question (its folder, e.g. budgets/model-budget).")
@click.option("--by", required=True, help="Who reseeds (recorded in the seed ledger).")
@click.option("--why", required=True, help="Why (recorded in the seed ledger).")
@click.option(
    "--secret-file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="The course secret [default: $SCALEGRADE_SECRET].",
)
def reseed(
    assignment: str,
    student: str,
    bank_dir: Path | None,
    out: Path,
    question: str | None,
    by: str,
    why: str,
    secret_file: Path | None,
) -> None:
    """Give STUDENT new numbers on ASSIGNMENT (one question, or all): nobody else's change.

    Recorded in the seed ledger (OUT/keys/ledger.json); writes their new notebook and key.
    What they submitted before is still graded with the numbers they had then."""
    from generator.release import ReleaseError
    from generator.reseed import reseed as give_new_numbers
    from generator.secret import SecretError, load_secret
    from generator.variant import VariantError

    try:
        secret = load_secret(secret_file)
    except SecretError as err:
        fail(str(err))
    a = _load_assignment(assignment, bank_dir, fresh=True)
    try:
        done = give_new_numbers(
            a, out, secret=secret, student=student, question=question, by=by, why=why
        )
    except (ReleaseError, VariantError) as err:
        fail(str(err))
    console.print(
        f"{student}: variant version {done.version}; new numbers for "
        f"{', '.join(done.changed) or 'no question (the draw gave the same numbers)'}; "
        f"their new notebook: {done.notebook}",
        highlight=False,
    )


@click.command()
@click.argument("assignment")
@_gradebook_options
@click.option("--by", required=True, help="Who regrades (recorded).")
@click.option("--why", required=True, help="Why (recorded, and in the report).")
@click.option(
    "--sandbox",
    "backend",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "namespaces", "process"]),
    help="Where changed code checks run again.",
)
@click.option("--timeout", default=120.0, show_default=True, help="Wall seconds per submission.")
def regrade(
    assignment: str,
    grades: Path | None,
    db_url: str | None,
    by: str,
    why: str,
    backend: str,
    timeout: float,
) -> None:
    """Grade ASSIGNMENT again against its keys as they are now (after `scalegrade rekey`).

    From the stored harvests where only the comparison changed, no notebook run; the
    notebook again, for those probes only, where a code part's checks changed.  Writes the
    diff (OUT/regrade-N.csv), every file again, and records who and why."""
    from autograder.sandbox import Limits, Sandbox
    from autograder.semester.gradebook import GradebookError
    from autograder.semester.regrade import regrade_recorded

    book = _gradebook(grades, db_url)

    def open_runner(keys):
        hide = [keys.folder.resolve(), Path(book.assignment(assignment).out_dir or ".").resolve()]
        return Sandbox(
            backend=backend, limits=Limits(wall_seconds=timeout), hide=hide, preload=keys.preload
        )

    try:
        done, path = regrade_recorded(book, assignment, open_runner=open_runner, by=by, why=why)
    except GradebookError as err:
        fail(str(err))
    finally:
        book.close()
    console.print(
        f"{assignment}: {done.from_harvest} graded again from their harvests (no notebook "
        f"run), {done.rerun} notebooks run again for changed checks, {done.unchanged} "
        f"unchanged, in {done.seconds:.2f} s; {len(done.gained)} gained, {len(done.lost)} "
        f"lost; diff: {path}",
        highlight=False,
    )
    for line in done.errors:
        console.print(f"[yellow]not regraded[/]: {line}", highlight=False)
    if done.totals:
        table = Table(title="scores that changed")
        for col in ("student", "before", "after"):
            table.add_column(col)
        for sid, (old, new) in done.totals.items():
            if abs(new - old) > 1e-9:
                table.add_row(sid, f"{old:.2f}", f"{new:.2f}")
        console.print(table)


@click.command()
@click.argument("assignment")
@_gradebook_options
def stats(assignment: str, grades: Path | None, db_url: str | None) -> None:
    """Is each question of ASSIGNMENT good, and fair across the numbers students drew?

    Per part: facility, discrimination (corrected, and item-total), discriminative
    efficiency, misconceptions, flags; Cronbach's alpha; each part's score tested against
    each parameter its question draws, at equal rest score (Holm-corrected); the spread of
    expected scores across the assignments drawn.  The same is in report.html."""
    from autograder.analysis.fairness import MIN_MINORITY
    from autograder.analysis.item_report import analysis
    from autograder.grading.keys import Keys
    from autograder.semester.gradebook import GradebookError
    from contract import KeyFileError

    start = time.perf_counter()
    book = _gradebook(grades, db_url)
    try:
        row = book.assignment(assignment)
        results = book.results(assignment)
        found = analysis(results, Keys(Path(row.keys_dir or "")).all())
    except (GradebookError, KeyFileError) as err:
        fail(str(err))
    finally:
        book.close()
    s, f = found.stats, found.fairness
    alpha = "—" if s.alpha is None else f"{s.alpha:.2f}"
    table = Table(title=f"{assignment}: {s.n_students} students, Cronbach's alpha {alpha}")
    for col in ("part", "facility (95 %)", "discr.", "item-total", "effic.", "flags"):
        table.add_column(col, justify="left" if col in ("part", "flags") else "right")
    for i in s.items:
        table.add_row(
            i.item,
            f"{100 * i.facility:.0f} % ({100 * i.facility_low:.0f}-{100 * i.facility_high:.0f})",
            "—" if i.discrimination is None else f"{i.discrimination:.2f}",
            "—" if i.item_total is None else f"{i.item_total:.2f}",
            "—" if i.efficiency is None else f"{100 * i.efficiency:.0f} %",
            "; ".join(i.flags),
        )
    console.print(table)
    flagged = [e for e in f.effects if e.flagged]
    console.print(
        f"fairness: {f.tests} tests of a part against a drawn parameter at equal rest score, "
        f"Holm-corrected at 5 % family-wise: {len(flagged)} flagged; {f.untested} parts not "
        f"tested (fewer than {MIN_MINORITY} students off their most common score); the "
        f"hardest assignment drawn is {f.gap:.2f} points harder than the easiest (an average "
        "student)",
        highlight=False,
    )
    if flagged:
        table = Table(title="parameters a part's score depends on")
        for col in ("part", "parameter", "from", "to", "points", "p"):
            table.add_column(col)
        for e in flagged:
            table.add_row(
                e.item, e.parameter, str(e.low), str(e.high), f"{e.points:+.2f}", f"{e.p:.1e}"
            )
        console.print(table)
    console.print(f"in {time.perf_counter() - start:.2f} s", highlight=False)


@click.group()
def marks() -> None:
    """Marks given by people: export a marking sheet, import it filled in."""


@marks.command("export")
@click.argument("assignment")
@_gradebook_options
@click.option("--out", required=True, type=click.Path(path_type=Path), help="CSV to write.")
def marks_export(assignment: str, grades: Path | None, db_url: str | None, out: Path) -> None:
    """A marking sheet of ASSIGNMENT: one row per student and part a person grades."""
    from autograder.grading.keys import Keys
    from autograder.semester.gradebook import GradebookError
    from autograder.semester.marks import sheet
    from contract import KeyFileError

    book = _gradebook(grades, db_url)
    try:
        row = book.assignment(assignment)
        keys = Keys(Path(row.keys_dir or ""))
        text = sheet(assignment, book.results(assignment), keys.all())
    except (GradebookError, KeyFileError) as err:
        fail(str(err))
    finally:
        book.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"{out}: {text.count(chr(10)) - 1} rows to mark", highlight=False)


@marks.command("import")
@click.argument("sheet_file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@_gradebook_options
@click.option("--by", "marker", required=True, help="Who marked (recorded with each mark).")
def marks_import(sheet_file: Path, grades: Path | None, db_url: str | None, marker: str) -> None:
    """Record the marks of a filled-in sheet; the standings and files are made again."""
    from autograder.semester.batch import publish
    from autograder.semester.gradebook import GradebookError
    from autograder.semester.marks import MarksError, read_sheet

    book = _gradebook(grades, db_url)
    try:
        standings = {
            name: {r["student_id"]: r for r in book.results(name)} for name in book.assignments()
        }
        given = read_sheet(sheet_file, standings, marker=marker)
        moved = book.add_marks(given)
        for name in sorted({m.assignment for m in moved}):
            publish(book, name, {m.student_id for m in moved if m.assignment == name})
    except (MarksError, GradebookError) as err:
        fail(f"nothing recorded:\n{err}")
    finally:
        book.close()
    console.print(
        f"{len(given)} marks recorded by {marker}; {len(moved)} standings changed",
        highlight=False,
    )


# Registered on `scalegrade` by scalegrade/cli/__init__.py.
COMMANDS = (late, rekey, reseed, regrade, stats, marks)
