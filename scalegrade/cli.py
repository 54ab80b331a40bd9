"""The ``scalegrade`` command: a thin edge that parses, calls the library and prints."""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from scalegrade.selfcheck import SEEDS as SELFCHECK_SEEDS

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


@click.group()
@click.version_option(package_name="scalegrade")
def main() -> None:
    """ScaleGrade: per-student assignments and exams on training and serving large models."""


@main.command()
@click.option("--points", default=12, show_default=True, help="Random points per derivation.")
def verify(points: int) -> None:
    """Check every sympy derivation of the cost model against its numeric function."""
    from costmodel.verify import verify_all

    start = time.perf_counter()
    checks = verify_all(points=points)
    elapsed = time.perf_counter() - start
    table = Table(title="Derivations of the cost model", show_lines=False)
    for col in ("formula", "derivation", "symbolic", "numeric", "ms"):
        table.add_column(col, justify="right" if col == "ms" else "left")
    for c in checks:
        mark = {True: "[green]ok[/]", False: "[red]FAIL[/]"}
        table.add_row(
            c.formula,
            c.title,
            mark[c.symbolic_ok],
            f"{mark[c.numeric_ok]} ({c.points} pts)",
            f"{1000 * c.seconds:.0f}",
        )
    console.print(table)
    failed = [c for c in checks if not c.ok]
    for c in failed:
        console.print(f"[red]FAIL[/] {c.formula}: {c.title}: {c.detail}")
    formulas = len({c.formula for c in checks})
    console.print(
        f"{len(checks) - len(failed)}/{len(checks)} derivations verified "
        f"({formulas} formulas) in {elapsed:.1f} s"
    )
    sys.exit(1 if failed else 0)


def _parse_value(name: str, formula: Any, raw: str) -> Any:
    from costmodel.units import UnitError, to_si

    dom = formula.domains[name]
    text = raw.strip()
    try:
        if dom.kind == "bool":
            lowered = text.lower()
            if lowered not in ("true", "false", "yes", "no", "1", "0"):
                raise ValueError("expected true or false")
            return lowered in ("true", "yes", "1")
        if dom.kind in ("distribution", "reals"):
            return [float(x) for x in text.strip("[]()").split(",") if x.strip()]
        if dom.kind == "choice":
            return next(c for c in dom.choices if str(c) == text)
        value = to_si(text, dom.unit)
        return int(value) if dom.kind == "int" and float(value).is_integer() else value
    except StopIteration:
        fail(f"{formula.name}: {name} = {raw!r}: must be one of {dom.choices}")
    except (ValueError, UnitError) as err:
        unit = f" in {dom.unit}" if dom.unit else ""
        fail(f"{formula.name}: {name} = {raw!r}: {err} ({dom.meaning}{unit})")


def _gpu_defaults(gpu_name: str, precision: str) -> dict[str, float]:
    from costmodel.hardware import gpu

    try:
        g = gpu(gpu_name)
        peak = g.peak(precision)
    except KeyError as err:
        fail(str(err.args[0]))
    return {"peak_flops": peak, "bandwidth": g.memory_bandwidth, "watts": g.tdp_watts}


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("name", required=False)
@click.argument("assignments", nargs=-1)
@click.option("--list", "list_", is_flag=True, help="List every formula.")
@click.option("--gpu", "gpu_name", help="Fill peak_flops, bandwidth, watts from the catalog.")
@click.option("--precision", default="bf16", show_default=True, help="Precision for --gpu.")
def calc(
    name: str | None,
    assignments: tuple[str, ...],
    list_: bool,
    gpu_name: str | None,
    precision: str,
) -> None:
    """Evaluate a formula: scalegrade calc memory.model_state_bytes n_params=7e9

    Values may carry units (bandwidth=25GB/s, n_bytes=1GB); a bare number is in the
    formula's SI unit.
    """
    import costmodel
    from costmodel.units import human

    if list_ or not name:
        for f in costmodel.formulas().values():
            args = ", ".join(
                p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                for p in f.signature.parameters.values()
            )
            derived = " [derived]" if f.has_derivation else ""
            click.echo(f"{f.name}({args}) -> {f.unit or 'number'}{derived}")
            click.echo(f"    {f.summary}  ({f.cite})")
        return
    try:
        formula = costmodel.formula(name)
    except costmodel.UnknownFormula as err:
        fail(str(err))
    kwargs: dict[str, Any] = {}
    if gpu_name:
        params = formula.signature.parameters
        defaults = _gpu_defaults(gpu_name, precision)
        kwargs.update({k: v for k, v in defaults.items() if k in params})
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep:
            fail(f"{name}: expected key=value, got {item!r}")
        if key not in formula.signature.parameters:
            allowed = ", ".join(formula.signature.parameters)
            fail(f"{name}: unknown argument {key!r} (arguments: {allowed})")
        kwargs[key] = _parse_value(key, formula, raw)
    try:
        result = formula.func(**kwargs)
    except costmodel.ArgumentError as err:
        fail(str(err))
    shown = ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in kwargs.items()
    )
    console.print(f"[bold]{name}[/]({shown})", highlight=False)
    console.print(f"  = {human(result, formula.unit)}", highlight=False)
    console.print(f"  [dim]{formula.summary} — {formula.cite}[/]", highlight=False)


def _count(found: list) -> str:
    return f"[yellow]{len(found)}[/]" if found else ""


def _load_assignment(aid: str, bank_dir: Path | None, *, fresh: bool = False):
    from generator.assignment import AssignmentError

    try:
        return _bank(bank_dir, fresh=fresh).assignment(aid)
    except AssignmentError as err:
        fail(str(err))


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
        console.print(f"[yellow]warning[/] {w}", highlight=False)
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


@main.command()
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


@main.command()
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
        console.print(f"[red]FAIL[/] {f}", highlight=False)
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


@main.command("new-bank")
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


@main.command()
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


@main.command()
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
        console.print(f"[red]FAIL[/] {p}", highlight=False)
    sys.exit(0 if cov.ok else 1)


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


@main.command()
@click.argument("assignment")
@click.argument(
    "submissions", required=False, type=click.Path(path_type=Path, exists=True, file_okay=False)
)
@click.option(
    "--keys",
    "keys_dir",
    type=click.Path(path_type=Path),
    help="The keys/ folder `scalegrade generate` wrote.",
)
@click.option("--out", type=click.Path(path_type=Path), help="Results folder.")
@click.option(
    "--nbgrader",
    "nbgrader_course",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="An nbgrader course folder: grade its submitted/*/ASSIGNMENT into its gradebook "
    "(keys in COURSE/scalegrade/ASSIGNMENT/keys).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    help="Submissions graded at once [default: 2; --executor dask: the cluster's threads].",
)
@click.option(
    "--executor",
    default="local",
    show_default=True,
    type=click.Choice(["local", "dask", "service"]),
    help="Where submissions run: this machine, the workers of a Dask cluster, or the warm "
    "sandbox of `scalegrade sandbox-serve`.",
)
@click.option("--scheduler", help="Dask scheduler address (tcp://host:8786) for --executor dask.")
@click.option(
    "--service",
    "service",
    type=click.Path(path_type=Path),
    help="The socket of `scalegrade sandbox-serve SOCKET`, for --executor service.",
)
@_sandbox_options
@click.option(
    "--db",
    "db_url",
    help="Gradebook URL (default: sqlite in OUT); give every assignment of a course the same "
    "one, for its late-day pool (--nbgrader: nbgrader's gradebook).",
)
@click.option("--timeout", default=120.0, show_default=True, help="Wall seconds per submission.")
@click.option(
    "--reveal/--no-reveal",
    default=None,
    help="Show expected values and solutions (default: after the due date).",
)
@click.option("--regrade", is_flag=True, help="Grade again even if a notebook is unchanged.")
@click.option(
    "--submitted-at",
    "manifest_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="submissions.csv (student_id,submitted_at): submission times over the notebooks' "
    "own (nbgrader's timestamp.txt, Gradescope's metadata, else the file time).",
)
@click.option(
    "--extensions",
    "extensions_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="extensions.csv to record first (student_id,assignment,due or extra_days,"
    "granted_by,reason).",
)
@click.option("--by", "granted_by", help="Who granted the extensions that name nobody.")
def grade(
    assignment: str,
    submissions: Path,
    keys_dir: Path | None,
    out: Path | None,
    nbgrader_course: Path | None,
    jobs: int | None,
    executor: str,
    scheduler: str | None,
    service: Path | None,
    backend: str,
    image: str | None,
    gpus: str | None,
    engine: str,
    db_url: str | None,
    timeout: float,
    reveal: bool | None,
    regrade: bool,
    manifest_file: Path | None,
    extensions_file: Path | None,
    granted_by: str | None,
) -> None:
    """Grade SUBMISSIONS/<student_id>/*.ipynb of ASSIGNMENT in the sandbox.

    With --nbgrader COURSE: grade COURSE/submitted/*/ASSIGNMENT into nbgrader's gradebook."""
    late_input = dict(
        manifest_file=manifest_file, extensions_file=extensions_file, granted_by=granted_by
    )
    if (executor == "dask") != bool(scheduler):
        fail("--executor dask and --scheduler ADDRESS go together")
    if (executor == "service") != bool(service):
        fail("--executor service and --service SOCKET go together")
    if nbgrader_course is not None:
        if submissions or keys_dir or out or scheduler or service:
            fail(
                "--nbgrader COURSE takes only ASSIGNMENT (no SUBMISSIONS, --keys, --out, dask, "
                "service)"
            )
        _grade_nbgrader(
            nbgrader_course,
            assignment,
            backend=backend,
            jobs=jobs or 2,
            timeout=timeout,
            image=image,
            gpus=gpus,
            engine=engine,
            db_url=db_url,
            reveal=reveal,
            regrade=regrade,
            **late_input,
        )
        return
    if submissions is None or keys_dir is None or out is None:
        fail("grade needs SUBMISSIONS, --keys and --out (or --nbgrader COURSE)")
    _grade(
        assignment,
        submissions,
        keys_dir,
        out,
        jobs=jobs,
        scheduler=scheduler,
        service=service,
        backend=backend,
        image=image,
        gpus=gpus,
        engine=engine,
        db_url=db_url,
        timeout=timeout,
        reveal=reveal,
        regrade=regrade,
        **late_input,
    )


def _late_input(release, opts: dict) -> dict[str, Any]:
    """The submission times and extensions a grade run was given, read (or refused) before
    anything is graded."""
    from autograder.lateness import ExtensionsError, read_extensions
    from autograder.submitted_at import ManifestError, read_manifest

    try:
        manifest = (
            read_manifest(opts["manifest_file"], release.timezone)
            if opts.get("manifest_file")
            else None
        )
        extensions = (
            read_extensions(
                opts["extensions_file"], release.timezone, granted_by=opts["granted_by"]
            )
            if opts.get("extensions_file")
            else None
        )
    except (ManifestError, ExtensionsError) as err:
        fail(str(err))
    return dict(manifest=manifest, extensions=extensions)


def _grade_nbgrader(course: Path, name: str, **opts: Any) -> None:
    from autograder.gradebook import GradebookError
    from autograder.nbgrader_gradebook import CourseLayout, grade_course
    from autograder.sandbox import Sandbox
    from contract import KeyFileError, read_release

    lay = CourseLayout(course.resolve(), name)
    try:
        late_input = _late_input(read_release(lay.keys), opts)
    except KeyFileError as err:
        fail(f"{err} (`scalegrade generate ... --out {lay.root}` writes the keys)")
    sandbox = Sandbox(
        backend=opts["backend"],
        limits=_limits(opts),
        hide=[lay.course],
        image=opts["image"],
        gpus=opts["gpus"],
        engine=opts["engine"],
        jobs=opts["jobs"] or 2,
    )
    try:
        with sandbox:
            summary = grade_course(
                lay.course,
                name,
                sandbox=sandbox,
                db_url=opts["db_url"],
                jobs=opts["jobs"],
                reveal=opts["reveal"],
                regrade=opts["regrade"],
                **late_input,
            )
    except KeyFileError as err:
        fail(f"{err} (`scalegrade generate ... --out {lay.root}` writes the keys)")
    except GradebookError as err:
        fail(f"{opts.get('extensions_file')}: nothing recorded, nothing graded:\n{err}")
    table = Table(title=f"{name}: {summary.graded} graded, {summary.errors} errors (nbgrader)")
    for col in ("student", "score", "max", "error"):
        table.add_column(col)
    for r in summary.results:
        table.add_row(
            r["student_id"], f"{r['score']:.2f}", f"{r['max_score']:g}", (r["error"] or "")[:60]
        )
    console.print(table)
    console.print(
        f"gradebook: nbgrader's ({lay.course / 'gradebook.db'} unless configured); "
        f"formgrader: {lay.autograded}; ScaleGrade results: {lay.grades}"
    )


def _dask_runner(scheduler: str, sandbox_args: dict):
    """Connect to the Dask scheduler; each worker builds the same sandbox."""
    from autograder.distributed import DaskRunner, SandboxSpec

    from autograder.sandbox import SandboxError

    try:
        runner = DaskRunner.connect(scheduler, SandboxSpec(**sandbox_args))
    except (OSError, RuntimeError, SandboxError, ValueError) as err:
        fail(f"--scheduler {scheduler}: {err}")
    if runner.threads == 0:
        runner.close()
        fail(f"the Dask scheduler at {scheduler} has no workers: run `dask worker {scheduler}`")
    console.print(f"Dask cluster {scheduler}: {runner.threads} worker threads")
    return runner


def _service_runner(socket_path: Path, sandbox_args: dict, preload):
    """The warm sandbox service at ``socket_path``, checked against this command's sandbox."""
    from autograder.service import ServiceRunner

    from autograder.sandbox import SandboxError

    if sandbox_args["backend"] != "auto" or sandbox_args["image"]:
        fail("--executor service runs the service's own sandbox: give --sandbox and --image "
             "to `scalegrade sandbox-serve`")  # fmt: skip
    try:
        runner = ServiceRunner(
            socket_path, hide=sandbox_args["hide"], limits=sandbox_args["limits"], preload=preload
        )
    except SandboxError as err:
        fail(str(err))
    console.print(f"sandbox service {socket_path}: {runner.isolation}, {runner.threads} jobs")
    return runner


def _limits(opts: dict):
    """The sandbox's limits of a grade command: its timeout; with --gpus, memory bounded by
    each job's cgroup, not by RLIMIT_AS (CUDA reserves far more address space than it uses)."""
    from autograder.sandbox import Limits

    return Limits(wall_seconds=opts["timeout"], address_space=not opts["gpus"])


def _grade_keys(assignment: str, keys_dir: Path, opts: dict, starting):
    """The keys to grade with and the late-work input; on bad input, the sandbox being
    started (``starting``, a future) is closed before the sentence."""
    from autograder.keys import Keys
    from contract import KeyFileError

    try:
        keys = Keys(keys_dir)
        info = keys.release
        if info.assignment != assignment:
            raise KeyFileError(f"{keys_dir} holds the keys of {info.assignment}, not {assignment}")
        return keys, _late_input(info, opts)
    except (KeyFileError, SystemExit) as err:
        if starting is not None:
            try:
                starting.result().close()
            except Exception:  # noqa: BLE001 - the keys' sentence is the one to say
                pass
        if isinstance(err, SystemExit):
            raise
        fail(str(err))


def _grade(assignment: str, submissions: Path, keys_dir: Path, out: Path, **opts) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from autograder.sandbox import Sandbox, SandboxError

    sandbox_args = dict(
        backend=opts["backend"],
        limits=_limits(opts),
        hide=[keys_dir.resolve(), out.resolve(), submissions.resolve()],
        image=opts["image"],
        gpus=opts["gpus"],
        engine=opts.get("engine", "auto"),
    )
    starting = None
    if opts.get("service"):  # a warm sandbox of its own, started before
        keys, late_input = _grade_keys(assignment, keys_dir, opts, None)
        runner = _service_runner(opts["service"], sandbox_args, keys.preload)
        opts["jobs"] = opts["jobs"] or runner.threads
    elif not opts.get("scheduler"):  # the executor starts while the keys load...
        opts["jobs"] = opts["jobs"] or 2
        with ThreadPoolExecutor(1) as pool:
            starting = pool.submit(Sandbox, **sandbox_args, jobs=opts["jobs"])
            keys, late_input = _grade_keys(assignment, keys_dir, opts, starting)
        try:
            runner = starting.result()
        except SandboxError as err:
            fail(str(err))
        runner.warm(keys.preload)  # ...then imports what the checks need...
    else:
        keys, late_input = _grade_keys(assignment, keys_dir, opts, None)
        runner = _dask_runner(opts["scheduler"], sandbox_args | {"preload": keys.preload})
        opts["jobs"] = opts["jobs"] or runner.threads
    from rich.progress import Progress  # ...while the grader imports the rest

    from autograder.batch import grade_batch

    with (
        runner as sandbox,
        Progress(console=console, transient=True) as bar,
    ):
        task = bar.add_task(f"grading {assignment}", total=None)
        try:
            summary = grade_batch(
                keys,
                submissions,
                out,
                sandbox=sandbox,
                db_url=opts["db_url"],
                jobs=opts["jobs"],
                reveal=opts["reveal"],
                regrade=opts["regrade"],
                on_done=lambda _r: bar.advance(task),
                **late_input,
            )
        except Exception as err:
            from autograder.gradebook import GradebookError  # SQLAlchemy: loaded by the batch

            if not isinstance(err, GradebookError):
                raise
            fail(f"{opts.get('extensions_file')}: nothing recorded, nothing graded:\n{err}")
    table = Table(
        title=f"{assignment}: {summary.graded} graded, {summary.skipped} unchanged, "
        f"{summary.errors} errors in {summary.seconds:.1f} s"
    )
    for col in ("student", "score", "pending", "max", "late", "error"):
        table.add_column(col, justify="left" if col in ("student", "late", "error") else "right")
    for r in summary.results:
        pending = sum(g["verdict"]["points"] for g in r["parts"] if g["verdict"]["score"] is None)
        late = r.get("late") or {}
        table.add_row(
            r["student_id"],
            f"{r['score']:.2f}",
            f"{pending:g}",
            f"{r['max_score']:g}",
            f"-{100 * late['penalty']:g} %" if late.get("penalty") else "",
            (r["error"] or "")[:60],
        )
    console.print("(pending: points of free-response parts, graded by a person)")
    console.print(table)
    for line in summary.warnings:
        console.print(f"[yellow]warning[/]: {line}", highlight=False)
    console.print(
        f"results: {out}/<student>/results.json and feedback.html; "
        f"summary.csv, canvas.csv, moodle.csv; report: {out / 'report.html'}"
    )
    failed = summary.check_errors
    for line in failed[:10]:
        console.print(f"[red]check failed[/]: {line}", highlight=False)
    if failed:  # exit 1: every result is recorded, but the batch is not whole
        click.echo(
            f"scalegrade: {len(failed)} code parts were not graded because their check "
            "failed (the grader's error, not the students': those parts are pending). Fix "
            "the check in the bank, then `scalegrade rekey` and `scalegrade regrade`.",
            err=True,
        )
        sys.exit(1)


@main.command("sandbox-serve")
@click.argument("socket_path", metavar="SOCKET", type=click.Path(path_type=Path))
@_sandbox_options
@click.option(
    "--hide",
    multiple=True,
    type=click.Path(path_type=Path),
    help="A folder the notebooks must not see (the course's: keys, submissions, results); "
    "again for more.  The project, your home, /tmp and /run are always hidden.",
)
@click.option("--jobs", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--timeout", default=120.0, show_default=True, help="Wall seconds per submission.")
@click.option(
    "--preload",
    multiple=True,
    help="A module the warm executor imports now (torch, torch._dynamo); a grade command "
    "adds what its checks need.",
)
def sandbox_serve(socket_path: Path, backend: str, hide: tuple[Path, ...], **opts: Any) -> None:
    """Keep a warm sandbox running on the Unix socket SOCKET, for `scalegrade grade
    --executor service --service SOCKET`: each command then skips the sandbox's start and
    its imports.  Until Ctrl-C (or SIGTERM)."""
    import signal
    import threading

    from autograder.service import serve

    from autograder.sandbox import Sandbox, SandboxError

    try:
        sandbox = Sandbox(
            backend=backend,
            limits=_limits(opts),
            hide=[p.resolve() for p in hide],
            image=opts["image"],
            gpus=opts["gpus"],
            engine=opts["engine"],
            preload=opts["preload"],
            jobs=opts["jobs"],
        )
    except (SandboxError, ValueError) as err:
        fail(str(err))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    console.print(
        f"sandbox service on {socket_path}: {sandbox.isolation}, {opts['jobs']} jobs, "
        f"{opts['timeout']:g} s per submission; Ctrl-C ends it"
    )
    with sandbox:
        try:
            serve(socket_path, sandbox, stop)
        except KeyboardInterrupt:
            pass
        except SandboxError as err:
            fail(str(err))
        except OSError as err:  # e.g. no such folder
            fail(f"{socket_path}: {err.strerror or err}")


def _gradebook_options(f):
    f = click.option("--db", "db_url", help="Gradebook URL (instead of --grades).")(f)
    return click.option(
        "--grades",
        type=click.Path(path_type=Path, file_okay=False),
        help="The folder `scalegrade grade --out` wrote (its gradebook).",
    )(f)


LATE_SETTINGS = ("late_penalty_per_day", "late_charge", "late_days_max", "late_days_pool")


def _gradebook(grades: Path | None, db_url: str | None):
    """The gradebook a command names: --db URL, or the sqlite file in --grades DIR."""
    from autograder.gradebook import Gradebook

    if db_url:
        return Gradebook(db_url)
    if grades is None:
        fail("name the gradebook: --grades DIR (what `scalegrade grade --out` wrote) or --db URL")
    if not (grades / "gradebook.sqlite").is_file():
        fail(f"{grades}: no gradebook.sqlite (the folder `scalegrade grade --out` wrote)")
    return Gradebook(f"sqlite:///{(grades / 'gradebook.sqlite').resolve()}")


@main.command()
@click.argument("assignment")
@_gradebook_options
@click.option("--due", help="A new deadline for everyone (ISO 8601; no zone: the course's).")
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="NAME=VALUE",
    help=f"Change the late policy: {', '.join(LATE_SETTINGS)}.",
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
    from autograder.batch import publish
    from autograder.gradebook import GradebookError
    from autograder.lateness import ExtensionsError, read_extensions
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


@main.command()
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


@main.command()
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


@main.command()
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
    from autograder.batch import publish
    from autograder.gradebook import GradebookError
    from autograder.regrade import regrade as grade_again
    from autograder.regrade import write_diff
    from autograder.sandbox import Limits, Sandbox

    book = _gradebook(grades, db_url)

    def open_runner(keys):
        hide = [keys.folder.resolve(), Path(book.assignment(assignment).out_dir or ".").resolve()]
        return Sandbox(
            backend=backend, limits=Limits(wall_seconds=timeout), hide=hide, preload=keys.preload
        )

    try:
        done = grade_again(book, assignment, open_runner=open_runner)
        out = publish(book, assignment, set(done.totals))
        path = write_diff(out, done)
        book.log(
            assignment,
            "regrade",
            {
                "from_harvest": done.from_harvest,
                "rerun": done.rerun,
                "gained": len(done.gained),
                "lost": len(done.lost),
                "diff": path.name,
            },
            by=by,
            why=why,
        )
        publish(book, assignment, set())  # the report, with this regrade in its history
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


@main.command()
@click.argument("assignment")
@_gradebook_options
def stats(assignment: str, grades: Path | None, db_url: str | None) -> None:
    """Is each question of ASSIGNMENT good, and fair across the numbers students drew?

    Per part: facility, discrimination (corrected, and item-total), discriminative
    efficiency, misconceptions, flags; Cronbach's alpha; each part's score tested against
    each parameter its question draws, at equal rest score (Holm-corrected); the spread of
    expected scores across the assignments drawn.  The same is in report.html."""
    from autograder.fairness import MIN_MINORITY
    from autograder.gradebook import GradebookError
    from autograder.item_report import analysis
    from autograder.keys import Keys
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


@main.group()
def marks() -> None:
    """Marks given by people: export a marking sheet, import it filled in."""


@marks.command("export")
@click.argument("assignment")
@_gradebook_options
@click.option("--out", required=True, type=click.Path(path_type=Path), help="CSV to write.")
def marks_export(assignment: str, grades: Path | None, db_url: str | None, out: Path) -> None:
    """A marking sheet of ASSIGNMENT: one row per student and part a person grades."""
    from autograder.gradebook import GradebookError
    from autograder.keys import Keys
    from autograder.marks import sheet
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
    from autograder.batch import publish
    from autograder.gradebook import GradebookError
    from autograder.marks import MarksError, read_sheet

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


@main.command()
@bank_option
@click.option("--out", default="out/demo", show_default=True, type=click.Path(path_type=Path))
def demo(bank_dir: Path | None, out: Path) -> None:
    """The whole flow on the embedded sample course: release, submissions, grading, report."""
    import shutil

    from generator.roster import read
    from generator.secret import DEMO_SECRET
    from scalegrade.demo import simulate

    roster = Path(__file__).resolve().parent / "sample" / "roster.csv"
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


@main.command()
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


@main.group()
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
    from autograder import gradescope
    from autograder.lateness import ExtensionsError
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

    from autograder import lms
    from contract import KeyFileError, read_keys, read_release

    try:
        info = read_release(opts["keys_dir"])
        roster = {
            sid: {"name": k.student.name, "email": k.student.email}
            for sid, k in read_keys(opts["keys_dir"]).items()
        }
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


if __name__ == "__main__":  # pragma: no cover
    main()
