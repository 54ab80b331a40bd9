"""A bank and its releases: `new-bank`, `new` and `bank` write and list questions,
`validate` checks an assignment (its variants, and its code parts in the sandbox),
`generate` releases it to a roster, `selftest` writes a practice page."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from scalegrade.cli.common import _bank, _load_assignment, bank_option, console, fail
from scalegrade.selfcheck import SEEDS as SELFCHECK_SEEDS


def _count(found: list) -> str:
    return f"[yellow]{len(found)}[/]" if found else ""


selfcheck_option = click.option(
    "--selfcheck-seeds",
    default=SELFCHECK_SEEDS,
    show_default=True,
    type=click.IntRange(min=0),
    help="Grade each code part's solution (it must earn every point) and its starter (it "
    "must not) in the sandbox, for this many synthetic students, before anything else "
    "(0: skip, at your risk).",
)


def _selfcheck(assignment, seeds: int) -> list[str]:
    """Grade each code part's solution and starter in the sandbox (scalegrade/selfcheck.py);
    print a line per part; the problems found."""
    from scalegrade.selfcheck import code_parts, selfcheck

    if seeds <= 0 or not code_parts(assignment):
        return []
    from autograder.sandbox import SandboxError

    with console.status(f"grading each code part's solution and starter ({seeds} seeds)"):
        try:
            found = selfcheck(assignment, seeds=seeds)
        except SandboxError as err:
            fail(f"the release check needs the sandbox: {err}")
    for p in found.parts:
        mark = "[red]FAIL[/]" if p.problems else "ok"
        console.print(
            f"{mark} {p.question} {p.part}: solution {min(p.solution):g}/{p.points:g}, "
            f"starter {max(p.starter):g}/{p.points:g} over {seeds} seeds",
            highlight=False,
        )
    for w in found.warnings:
        console.print(f"[yellow]warning[/] {escape(w)}", highlight=False)
    console.print(f"release check of {len(found.parts)} code parts in {found.seconds:.1f} s")
    return found.problems


def _release(
    assignment,
    students,
    secret: bytes,
    out: Path,
    with_solutions: bool,
    force: bool,
    otter: bool = False,
):
    from rich.progress import Progress

    from generator.release import ReleaseError, release
    from generator.variant import VariantError

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"releasing {assignment.id}", total=len(students))
        try:
            summary = release(
                assignment,
                students,
                secret=secret,
                out=out,
                with_solutions=with_solutions,
                force=force,
                on_student=lambda _s: progress.advance(task),
                otter=otter,
            )
        except (ReleaseError, VariantError) as err:
            fail(str(err))
    table = Table(
        title=f"{assignment.id}: {summary.students} students, "
        f"{summary.questions} questions in {summary.seconds:.1f} s"
    )
    table.add_column("question")
    table.add_column("points", justify="right")
    table.add_column("students sharing numbers", justify="right")
    for i, q in enumerate(assignment.questions):
        share = summary.shared_numbers[q.id]
        table.add_row(q.id, f"{q.points * assignment.scale(i):g}", f"{100 * share:.1f} %")
    console.print(table)
    console.print(f"release:  {summary.out / 'release'}  (one notebook per student)")
    console.print(f"keys:     {summary.out / 'keys'}  (instructor only)")
    if with_solutions:
        console.print(f"solutions: {summary.out / 'solutions'}")
    if assignment.spec.kind == "exam":
        pdf = "HTML and PDF" if summary.pdf else "HTML (install chromium for PDF)"
        console.print(
            f"sheets:   {summary.out / 'sheets'} ({pdf}); TA keys: {summary.out / 'ta_keys'}"
        )
    return summary


@click.command()
@click.argument("assignment")
@bank_option
@click.option(
    "--roster",
    "roster_path",
    required=True,
    type=click.Path(path_type=Path),
    help="CSV with header student_id,name,email.",
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--with-solutions", is_flag=True, help="Also write filled-in solution notebooks.")
@click.option(
    "--secret-file",
    type=click.Path(path_type=Path),
    help="Course secret (default: $SCALEGRADE_SECRET).",
)
@click.option("--force", is_flag=True, help="Replace an existing output folder.")
@click.option(
    "--otter",
    is_flag=True,
    help="Notebooks carry otter-grader public checks (grader.check: format, unit, size).",
)
@selfcheck_option
def generate(
    assignment: str,
    bank_dir: Path | None,
    roster_path: Path,
    out: Path,
    with_solutions: bool,
    secret_file: Path | None,
    force: bool,
    otter: bool,
    selfcheck_seeds: int,
) -> None:
    """Release ASSIGNMENT (e.g. tdlsm/hw1): one variant per student, keys, sheets.
    Nothing is written when a code part's own solution does not earn every point."""
    from generator.roster import RosterError, read
    from generator.secret import SecretError, load_secret

    try:
        secret = load_secret(secret_file)
        students = read(roster_path)
    except (SecretError, RosterError) as err:
        fail(str(err))
    a = _load_assignment(assignment, bank_dir)
    problems = _selfcheck(a, selfcheck_seeds)
    if problems:
        fail(
            "nothing released: a code part cannot grade its own solution\n"
            + "\n".join(problems[:20])
        )
    _release(a, students, secret, out, with_solutions, force, otter)


@click.command()
@click.argument("assignment")
@bank_option
@click.option("--students", default=1000, show_default=True, help="Synthetic students to draw.")
@click.option(
    "--cohort",
    type=click.IntRange(min=30),
    help="Also simulate a cohort of this many students, grade it with the real comparison "
    "and test each part's score against each drawn parameter (scalegrade/cohort.py).",
)
@selfcheck_option
def validate(
    assignment: str,
    bank_dir: Path | None,
    students: int,
    cohort: int | None,
    selfcheck_seeds: int,
) -> None:
    """Draw N students' variants of ASSIGNMENT and check every one, and grade each code
    part's own solution and starter in the sandbox; exit 1 on any failure."""
    from generator.validate import validate as run_validation
    from generator.variant import show_value

    a = _load_assignment(assignment, bank_dir)
    start = time.perf_counter()
    reports = run_validation(a, students)
    table = Table(title=f"{assignment}: {students} students in {time.perf_counter() - start:.1f} s")
    for col in (
        "question",
        "variants",
        "distinct",
        "failures",
        "answer",
        "min",
        "median",
        "max",
        "sympy",
        "printed",
        "no work",
        "small int",
        "fits others",
    ):
        names = col in ("question", "answer")
        table.add_column(col, justify="left" if names else "right", no_wrap=names)
    for r in reports:
        first = True
        for stats in r.answers.values():
            lo, mid, hi = stats.summary()
            table.add_row(
                r.question if first else "",
                str(r.variants) if first else "",
                str(r.distinct) if first else "",
                (f"[red]{len(r.failures)}[/]" if r.failures else "0") if first else "",
                stats.id,
                *(show_value(x, stats.unit) for x in (lo, mid, hi)),
                f"{stats.symbolic}/{len(stats.values)}",
                _count(stats.leaked),
                "choice" if stats.choice else _count(stats.guessed),
                "" if stats.choice else _count(range(stats.small_integer)),
                "" if not stats.keys else f"{100 * stats.fits_others:.0f} %",
            )
            first = False
    console.print(table)
    for kind, what in (
        ("leaked", "is printed in the question (a derived parameter or a number of the prompt)"),
        ("guessed", "needs no work (0, 1 or a given number; a constraint can remove the draws)"),
    ):
        for r in reports:
            for stats in r.answers.values():
                found = getattr(stats, kind)
                if found:
                    console.print(
                        f"[yellow]note[/] templates/{r.question}: {stats.id} {what}: "
                        f"{len(found)} of {r.variants} variants, e.g. {found[0]}",
                        highlight=False,
                    )
    from generator.validate import FITS_OTHERS, SMALL_INTEGERS

    for r in reports:
        for stats in r.answers.values():
            if stats.choice or stats.declared:  # guessable by its format, or said why
                continue
            if stats.small_integer > SMALL_INTEGERS * r.variants:
                console.print(
                    f"[yellow]note[/] templates/{r.question}: {stats.id} is a small whole "
                    f"number with a unit in {stats.small_integer} of {r.variants} variants "
                    "(a round guess is right that often)",
                    highlight=False,
                )
            if stats.fits_others > FITS_OTHERS:
                console.print(
                    f"[yellow]note[/] templates/{r.question}: {stats.id} barely varies: "
                    f"{100 * stats.fits_others:.0f} % of the variants' keys are within "
                    "tolerance of the median one (one student's answer fits most others)",
                    highlight=False,
                )
    hidden = sum(r.misconceptions_hidden for r in reports)
    if hidden:
        console.print(
            f"note: {hidden} misconception values fell within their answer's tolerance of the "
            "key (that feedback cannot fire for those students; the correct answer still gets "
            "full credit)"
        )
    if cohort:
        _simulated_cohort(a, cohort)
    failed = [f for r in reports for f in r.failures] + _selfcheck(a, selfcheck_seeds)
    for f in failed[:20]:
        console.print(f"[red]FAIL[/] {escape(f)}", highlight=False)
    if len(failed) > 20:
        console.print(f"... and {len(failed) - 20} more failures")
    sys.exit(1 if failed else 0)


def _simulated_cohort(assignment, n: int) -> None:
    from scalegrade.cohort import simulate

    start = time.perf_counter()
    found = simulate(assignment, n)
    f = found.fairness
    flagged = [e for e in f.effects if e.flagged]
    console.print(
        f"simulated cohort of {n}, graded by the real comparison in "
        f"{time.perf_counter() - start:.1f} s: {f.tests} tests of a part against a drawn "
        f"parameter, {len(flagged)} flagged (Holm, 5 % family-wise); the hardest assignment "
        f"drawn is {f.gap:.2f} points harder than the easiest",
        highlight=False,
    )
    for e in flagged:
        console.print(
            f"[yellow]unfair[/] {e.question} {e.item}: its score depends on {e.parameter} "
            f"({e.points:+.2f} points from {e.low} to {e.high}, p = {e.p:.1e}): constrain "
            "the range, or check its tolerance and misconceptions there",
            highlight=False,
        )
    for i in found.stats.items:
        for flag in i.flags:
            if "everybody" in flag or "negative" in flag:
                console.print(f"[yellow]note[/] {i.question} {i.item}: {flag}", highlight=False)


@click.command("new-bank")
@click.argument("folder", type=click.Path(path_type=Path))
@click.option("--course", default="course", show_default=True, help="The course's id.")
@click.option("--title", default="My course", show_default=True, help="The course's title.")
def new_bank(folder: Path, course: str, title: str) -> None:
    """Write a minimal bank in FOLDER: one course, its notes' index, a numeric and a code
    question, and an assignment listing both; it validates, generates and grades as it is."""
    from scalegrade.scaffold import ScaffoldError, new_bank

    try:
        new_bank(folder, course=course, title=title)
    except ScaffoldError as err:
        fail(str(err))
    console.print(f"bank: {folder} (what to change is marked TODO)", highlight=False)
    console.print(f"next: scalegrade validate {course}/hw1 --bank {folder}", highlight=False)


@click.command()
@click.argument("question")
@bank_option
@click.option("--code", is_flag=True, help="With a code part: solution.py and checks.py.")
@click.option("--course", help="The course whose notes it cites (the bank's only one if unset).")
@click.option("--assignment", help="Also list it in this assignment of the course (e.g. hw1).")
def new(
    question: str, bank_dir: Path | None, code: bool, course: str | None, assignment: str | None
) -> None:
    """Write the question folder templates/QUESTION (TOPIC/NAME) in a bank, numeric or with
    a code part, that validates as it is; then list it in an assignment."""
    from scalegrade.scaffold import ScaffoldError, new_question

    root = _bank(bank_dir).root
    try:
        folder = new_question(root, question, code=code, course=course, assignment=assignment)
    except ScaffoldError as err:
        fail(str(err))
    console.print(f"question: {folder} (what to change is marked TODO)", highlight=False)
    if not assignment:
        console.print(
            f"next: list `- question: {question}` in an assignment of {root / 'assignments'} "
            "(or pass --assignment), then `scalegrade validate`",
            highlight=False,
        )


@click.command()
@bank_option
@click.option("--coverage", "show_coverage", is_flag=True, help="Notes' items against questions.")
def bank(bank_dir: Path | None, show_coverage: bool) -> None:
    """List the question bank, or (--coverage) every exercise and written-exam question of
    its courses' notes with the questions covering it; --coverage exits 1 on an item left
    uncovered without a reason in templates/coverage.yaml.  With $SCALEGRADE_NOTES set to the
    folder of the notes themselves, --coverage also checks the bank's index against them."""
    from generator.assignment import AssignmentError
    from generator.bank import BankError
    from generator.coverage import coverage
    from generator.question import QuestionError

    the_bank = _bank(bank_dir)
    try:
        questions = the_bank.all_questions()
        cov = coverage(the_bank, questions) if show_coverage else None
    except (BankError, QuestionError, AssignmentError) as err:
        fail(str(err))
    if cov is None:
        table = Table(title=f"Question bank {the_bank.root}: {len(questions)} questions")
        for col in ("question", "notes", "source", "numeric", "free", "code", "points"):
            table.add_column(col, justify="right" if col in ("numeric", "free", "code") else "left")
        for q in questions:
            s = q.spec
            table.add_row(
                q.id,
                s.source.notes,
                s.source.ref,
                str(sum(a.ask for a in s.answers)),
                str(len(s.free_response)),
                str(len(s.code)),
                f"{q.points:g}",
            )
        console.print(table)
        return
    covered = sum(bool(r.questions) for r in cov.rows)
    table = Table(title=f"Coverage of the notes: {covered}/{len(cov.rows)} items have questions")
    for col in ("notes", "item", "section", "title", "questions", "assignments", "notes' numbers"):
        table.add_column(col)
    for r in cov.rows:
        table.add_row(
            r.item.notes,
            r.item.label + (f" ({r.item.points} pts)" if r.item.points else ""),
            r.item.section,
            r.item.title,
            "\n".join(r.questions)
            or (f"[yellow]none[/]: {r.reason}" if r.reason else "[red]NONE[/]"),
            "\n".join(r.assignments) or "-",
            "reproduced" if r.reproduced else "",
        )
    console.print(table)
    for path in cov.checked_against:
        console.print(f"index checked against {path}", highlight=False)
    problems = [f"{r.item.key}: no question and no reason" for r in cov.rows if not r.ok]
    for p in problems + cov.unknown + cov.stale_reasons + cov.index_problems:
        console.print(f"[red]FAIL[/] {escape(p)}", highlight=False)
    sys.exit(0 if cov.ok else 1)


@click.command()
@click.argument("assignment")
@bank_option
@click.option(
    "--student",
    "student_id",
    help="Your student id: personal practice numbers (needs the course secret).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    help="Practice seed: public, the same page for everyone (no secret needed).",
)
@click.option(
    "--secret-file",
    type=click.Path(path_type=Path),
    help="Course secret for --student (default: $SCALEGRADE_SECRET).",
)
@click.option("--out", required=True, type=click.Path(path_type=Path), help="HTML file to write.")
def selftest(
    assignment: str,
    bank_dir: Path | None,
    student_id: str | None,
    seed: int | None,
    secret_file: Path | None,
    out: Path,
) -> None:
    """Write an offline practice exam of ASSIGNMENT: one HTML file with instant checking.

    With --student the numbers come from the course secret (personal; the instructor can
    rebuild the page); with --seed N from a public practice secret (anyone can run it).
    Neither: a random seed, printed.  A self-test never shows a graded variant.
    """
    import secrets as random_source

    from generator import selftest as pages
    from generator.secret import SecretError, load_secret

    if student_id is not None and seed is not None:
        fail("give --student ID or --seed N, not both")
    try:
        pages.check_out(out)
    except pages.SelfTestError as err:
        fail(str(err))
    if student_id is not None:
        try:
            practice = pages.for_student(student_id, load_secret(secret_file))
        except SecretError as err:
            fail(f"--student needs the course secret: {err}; without it, use --seed N")
    else:
        if seed is None:
            seed = random_source.randbelow(1_000_000)
            console.print(f"practice seed {seed} (run again with --seed {seed} for the same page)")
        practice = pages.for_seed(seed)
    start = time.perf_counter()
    try:
        page = pages.build(_load_assignment(assignment, bank_dir), practice)
        path = pages.write(page, out)
    except pages.SelfTestError as err:
        fail(str(err))
    console.print(
        f"{path}: {page.assignment}, {practice.label}: {page.questions} questions, "
        f"{page.answers} checked parts ({page.carried} with carried credit), "
        f"{len(page.html.encode()) / 1024:.0f} KiB in {time.perf_counter() - start:.1f} s"
    )
    console.print("Open it in any browser; it works offline and saves progress in the browser.")


# Registered on `scalegrade` by scalegrade/cli/__init__.py.
COMMANDS = (new_bank, new, bank, validate, generate, selftest)
