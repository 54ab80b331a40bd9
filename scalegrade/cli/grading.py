"""Grading submissions in the sandbox: `grade` (here, on a Dask cluster, through a warm
sandbox service, or an nbgrader course) and `sandbox-serve`, that warm service."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from scalegrade.cli.common import _limits, _sandbox_options, console, fail


@click.command()
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
    from autograder.semester.lateness import ExtensionsError, read_extensions
    from autograder.semester.submitted_at import ManifestError, read_manifest

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
    from autograder.integrations.nbgrader_gradebook import CourseLayout, grade_course
    from autograder.sandbox import Sandbox
    from autograder.semester.gradebook import GradebookError
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
    from autograder.sandbox import SandboxError
    from autograder.sandbox.distributed import DaskRunner, SandboxSpec

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
    from autograder.sandbox import SandboxError
    from autograder.sandbox.service import ServiceRunner

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


def _grade_keys(assignment: str, keys_dir: Path, opts: dict, starting):
    """The keys to grade with and the late-work input; on bad input, the sandbox being
    started (``starting``, a future) is closed before the sentence."""
    from autograder.grading.keys import Keys
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

    from autograder.semester.batch import grade_batch

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
            from autograder.semester.gradebook import (
                GradebookError,  # SQLAlchemy: loaded by the batch
            )

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


@click.command("sandbox-serve")
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

    from autograder.sandbox import Sandbox, SandboxError
    from autograder.sandbox.service import serve

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


# Registered on `scalegrade` by scalegrade/cli/__init__.py.
COMMANDS = (grade, sandbox_serve)
