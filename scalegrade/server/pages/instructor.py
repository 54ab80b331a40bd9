"""The instructor's pages: the live gradebook of each assignment, its item analysis, the
LMS exports, and the changes the CLI makes, with the CLI's own functions.

- The gradebook: one row per student of the roster (those who never submitted too) from
  one read of the standings, polled by htmx every few seconds.
- The item analysis and fairness section of the report
  (:func:`autograder.analysis.item_report.section`, inline SVG plots), and the Canvas and
  Moodle CSVs (:mod:`autograder.semester.outputs`, the roster of
  :func:`autograder.semester.lms.roster`), as ``scalegrade grade`` writes them.
- An extension (checked by :func:`autograder.semester.lateness.extension`, as a row of
  ``extensions.csv``, then :meth:`Gradebook.add_extensions`), a new deadline or late policy
  (its settings: :data:`autograder.semester.lateness.LATE_SETTINGS`; :meth:`Gradebook.change`),
  each followed by :meth:`Gradebook.restate`, as ``scalegrade late`` does; a reseed of one
  student (:func:`generator.reseed.reseed`); a rekey then a regrade
  (:func:`generator.rekey.rekey`, then
  :func:`autograder.semester.regrade.regrade_recorded`, ``scalegrade rekey`` and
  ``regrade``'s own), run in a thread of the server while the page shows how far it got:
  a regrade may run notebooks again.  Every change says who (the signed-in instructor's
  login unless changed) and why, and a change without a why is refused, nothing changed.

The question bank and the course secret a rekey or a reseed needs are the configuration's
``bank`` (default: ScaleGrade's own) and ``secret_file`` (default: ``$SCALEGRADE_SECRET``).
Instructors only: a TA gets 403.
"""

from __future__ import annotations

import logging
import threading
import typing
from dataclasses import dataclass, field
from datetime import UTC, datetime

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from autograder.analysis import item_report
from autograder.grading.keys import Keys
from autograder.sandbox import Limits, Sandbox
from autograder.semester import lms, outputs
from autograder.semester.gradebook import GradebookError
from autograder.semester.lateness import (
    LATE_SETTINGS,
    MAX_EXTRA_DAYS,
    ExtensionsError,
    extension,
)
from autograder.semester.regrade import regrade_recorded
from contract import Policy, times
from scalegrade.server.course import CourseError, Served
from scalegrade.server.pages.common import page, redirect, require
from scalegrade.server.platform import Platform, platform

log = logging.getLogger(__name__)

LABELS = {  # of the late settings an instructor may change (lateness.LATE_SETTINGS)
    "late_penalty_per_day": "Share of the earned score lost per started day late (0 to 1)",
    "late_charge": "Charged per started",
    "late_days_max": "Days late after which nothing is earned",
    "late_days_pool": "Free late days per student, shared by the course's assignments",
}
POLL_SECONDS = 5  # the gradebook's refresh


class Refusal(ValueError):
    """A change the page refuses: what is wrong and how to put it right; nothing changed."""


def _served(request: Request) -> Served:
    served = platform(request).course.by_slug(request.path_params["slug"])
    if served is None:
        raise HTTPException(404, "No such assignment is served.")
    return served


def _at(iso: str | None, zone: str) -> str:
    return times.shown(datetime.fromisoformat(iso), zone) if iso else "—"


# --- the gradebook ---------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One student's row of the gradebook (``doc``: their standing; None: not submitted)."""

    student: str
    name: str
    doc: dict | None
    questions: list[tuple[float, float, int]]  # per question: score, points, parts to mark
    late: list[str]  # the late note and the extension's
    problems: list[str]  # the run's, and the checks' (outputs.problems)


def _questions(doc: dict, count: int) -> list[tuple[float, float, int]]:
    """Per question of the release (numbered from 1): score, points, parts to mark."""
    out = [[0.0, 0.0, 0] for _ in range(count)]
    for g in doc["parts"]:
        if not 0 < g["index"] <= count:
            continue  # not a question of the release as it is now
        v, cell = g["verdict"], out[g["index"] - 1]
        cell[0] += v["score"] or 0.0
        cell[1] += v["points"]
        cell[2] += v["status"] == "pending"
    return [tuple(c) for c in out]


def lines(p: Platform, served: Served) -> list[Line]:
    """Every student of the roster, and anyone else with a standing, from one read of the
    standings (and one of the extensions)."""
    docs = {doc["student_id"]: doc for doc in p.book.results(served.name)}
    extensions = p.book.extensions()
    zone, count = served.release.timezone, len(served.release.questions)
    out = []
    for sid in [*served.release.students, *sorted(docs.keys() - set(served.release.students))]:
        doc = docs.get(sid)
        name = served.keys.key(sid).student.name if sid in served.keys else ""
        ext = extensions.get((served.name, sid))
        late = (doc or {}).get("late") or {}
        notes = [late["note"]] if late.get("late_seconds") else []
        if ext is not None:
            notes.append(ext.note(zone))
        out.append(Line(sid, name, doc, _questions(doc, count) if doc else [], notes,
                        outputs.problems(doc) if doc else []))  # fmt: skip
    return out


async def index(request: Request):
    require(request, "instructor")
    p = platform(request)
    rows = []
    for served in p.course.assignments.values():
        row = p.book.assignment(served.name)
        graded = p.book.graded(served.name)
        rows.append((served, _at(row.due_override or row.due, row.timezone), graded))
    return page(request, "instructor/index.html", rows=rows)


async def assignment(request: Request):
    who = require(request, "instructor")
    served = _served(request)
    p = platform(request)
    row = p.book.assignment(served.name)
    return page(
        request,
        "instructor/assignment.html",
        served=served,
        row=row,
        due=_at(row.due_override or row.due, row.timezone),
        policy=row.policy.model_dump(),
        settings=[(name, LABELS.get(name, name), _choices(name)) for name in LATE_SETTINGS],
        done=request.session.pop("done", None),
        task=_tasks(request).get(served.name),
        changes=[c | {"at": _at(c["at"], row.timezone)} for c in p.book.changes(served.name)],
        me=who.login,
        max_extra_days=MAX_EXTRA_DAYS,
        **_rows_context(p, served),
    )


def _choices(setting: str) -> tuple[str, ...]:
    """A setting's values, where the policy names them (late_charge: day or hour)."""
    return typing.get_args(Policy.model_fields[setting].annotation)


def _rows_context(p: Platform, served: Served) -> dict:
    found = lines(p, served)
    return {"lines": found, "poll": POLL_SECONDS,
            "submitted": sum(line.doc is not None for line in found)}  # fmt: skip


async def rows(request: Request):
    """The gradebook's table alone: what htmx polls."""
    require(request, "instructor")
    served = _served(request)
    return page(request, "instructor/rows.html", served=served,
                **_rows_context(platform(request), served))  # fmt: skip


async def stats(request: Request):
    require(request, "instructor")
    served = _served(request)
    results = platform(request).book.results(served.name)
    section = (
        item_report.section(item_report.analysis(results, served.keys.all())) if results else None
    )
    return page(request, "instructor/stats.html", served=served, section=section,
                graded=len(results))  # fmt: skip


def _lms_csv(make):
    """The download of one LMS's grade import, with the roster as `scalegrade grade`
    writes it (autograder.semester.batch.write_reports)."""

    async def download(request: Request):
        require(request, "instructor")
        served = _served(request)
        roster = lms.roster(served.keys.all())
        text = make(platform(request).book.results(served.name), roster, served.release.title)
        name = f"{served.slug}-{make.__name__.removesuffix('_csv')}.csv"
        attachment = {"content-disposition": f'attachment; filename="{name}"'}
        return Response(text, media_type="text/csv; charset=utf-8", headers=attachment)

    return download


# --- changes ---------------------------------------------------------------------------


def _action(do):
    """A change of the assignment's page: ``do(request, served, form)`` makes it
    and says what it did (shown once on the page); a :class:`Refusal` is a clear page
    with the way back, and nothing changed."""

    async def endpoint(request: Request):
        require(request, "instructor")
        served = _served(request)
        form = await request.form()
        try:
            request.session["done"] = do(request, served, form)
        except Refusal as err:
            return page(request, "refused.html", status=400, why=str(err),
                        back=f"/course/{served.slug}")  # fmt: skip
        return redirect(f"/course/{served.slug}")

    return endpoint


def _who_and_why(form: FormData) -> tuple[str, str]:
    by, why = str(form.get("by", "")).strip(), str(form.get("why", "")).strip()
    if not by:
        raise Refusal("Say who makes this change (the Who field): it is recorded. "
                      "Nothing changed.")  # fmt: skip
    if not why:
        raise Refusal("Say why (the Why field): it is recorded with the change, and a "
                      "student reads an extension's. Nothing changed.")  # fmt: skip
    return by, why


def _student(form: FormData, served: Served) -> str:
    sid = str(form.get("student", "")).strip()
    if sid not in served.keys:
        raise Refusal(f"Choose a student of the roster of {served.release.title}. Nothing "
                      "changed.")  # fmt: skip
    return sid


def _idle(request: Request, served: Served) -> None:
    task = _tasks(request).get(served.name)
    if task is not None and task.finished is None:
        raise Refusal(f"A rekey and regrade of {served.release.title} is running: wait for "
                      "it to finish, then try again. Nothing changed.")  # fmt: skip


def _extension(request: Request, served: Served, form: FormData) -> str:
    by, why = _who_and_why(form)
    sid = _student(form, served)
    p = platform(request)
    zone = p.book.assignment(served.name).timezone
    try:
        granted = extension(sid, served.name, due=str(form.get("due", "")),
                            extra_days=str(form.get("extra_days", "")), granted_by=by,
                            reason=why, zone=zone, where="the course page")  # fmt: skip
        p.book.add_extensions([granted])
    except (ExtensionsError, GradebookError) as err:
        raise Refusal(f"{err}. Nothing changed.") from None
    moved = p.book.restate({sid})
    return f"{granted.note(zone)} ({sid}; {_scores(moved)})"


def _scores(moved) -> str:
    scored = [m for m in moved if abs(m.new - m.old) > 1e-9]
    return f"{len(scored)} score{'s' * (len(scored) != 1)} changed"


def _deadline(request: Request, served: Served, form: FormData) -> str:
    by, why = _who_and_why(form)
    p = platform(request)
    row = p.book.assignment(served.name)
    current = row.policy.model_dump()
    policy = {
        name: value
        for name in LATE_SETTINGS
        if (value := str(form.get(name, "")).strip()) and value != str(current[name])
    }
    try:
        typed = str(form.get("due", "")).strip()
        due = times.parse(typed, row.timezone) if typed else None
        if due is None and not policy:
            raise Refusal("Nothing to change: give a new deadline, or change a late setting.")
        p.book.change(served.name, by=by, why=why, due=due, policy=policy)
    except (times.TimeError, GradebookError) as err:
        raise Refusal(f"{err}. Nothing changed.") from None
    moved = p.book.restate()
    what = ", ".join([*(["the deadline"] if due else []), *policy])
    return f"Changed {what}; every standing made again: {_scores(moved)}."


# --- rekey, regrade, reseed --------------------------------------------------------------


def _secret(p: Platform) -> bytes:
    from generator.secret import SecretError, load_secret

    try:
        return load_secret(p.config.secret_file)
    except SecretError as err:
        raise Refusal(f"{err} (the secret_file setting of serve.toml). Nothing changed.") from None


def _from_bank(p: Platform, served: Served):
    """The assignment as the question bank has it now (read again: it may have been fixed
    since the server started)."""
    from generator.assignment import AssignmentError
    from generator.bank import BankError, load

    try:
        return load(p.config.bank, fresh=True).assignment(served.name)
    except (BankError, AssignmentError) as err:
        raise Refusal(f"{err} (the bank setting of serve.toml). Nothing changed.") from None


def _reseed(request: Request, served: Served, form: FormData) -> str:
    from generator.release import ReleaseError
    from generator.reseed import reseed
    from generator.variant import VariantError

    by, why = _who_and_why(form)
    sid = _student(form, served)
    question = str(form.get("question", "")).strip() or None
    _idle(request, served)
    p = platform(request)
    try:
        done = reseed(_from_bank(p, served), served.folder, secret=_secret(p), student=sid,
                      question=question, by=by, why=why)  # fmt: skip
    except (ReleaseError, VariantError) as err:
        raise Refusal(f"{err}. Nothing changed.") from None
    _refresh(p)
    numbers = ", ".join(done.changed) or "no question (the draw gave the same numbers)"
    return (f"{sid} reseeded: variant version {done.version}, new numbers for {numbers}; "
            "their new notebook is the one they download now.")  # fmt: skip


def _refresh(p: Platform) -> None:
    """The served keys read again after a rekey or a reseed wrote them."""
    try:
        p.course.refresh()
    except CourseError as err:
        log.error("%s (serving the keys read before)", err)


@dataclass
class Task:
    """A rekey and regrade running in a thread of the server, as the page shows it."""

    assignment: str
    by: str
    why: str
    zone: str  # the course's, to show the times in
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    stage: str = "rekeying"
    lines: list[str] = field(default_factory=list)
    problem: str | None = None
    finished: datetime | None = None

    def shown(self, at: datetime) -> str:
        return times.shown(at, self.zone)


_TASKS_LOCK = threading.RLock()


def _tasks(request: Request) -> dict[str, Task]:
    """The latest rekey and regrade per assignment, of this server process."""
    state = request.app.state
    with _TASKS_LOCK:
        if not hasattr(state, "rekey_tasks"):
            state.rekey_tasks = {}
        return state.rekey_tasks


def _rekey(request: Request, served: Served, form: FormData) -> str:
    by, why = _who_and_why(form)
    p = platform(request)
    secret, assignment = _secret(p), _from_bank(p, served)
    allow = form.get("allow_new_numbers") == "yes"
    with _TASKS_LOCK:
        _idle(request, served)
        task = Task(served.name, by, why, served.release.timezone)
        _tasks(request)[served.name] = task
    threading.Thread(target=_rekey_and_regrade, args=(p, served, task, assignment, secret, allow),
                     name=f"rekey {served.name}", daemon=True).start()  # fmt: skip
    return "Rekey and regrade started: the page says below how far it got."


def _sandbox(p: Platform, keys: Keys) -> Sandbox:
    """Where a regrade runs notebooks again: the configured sandbox, hiding the course and
    the platform's data (its uploads, the gradebook) from them."""
    return Sandbox(backend=p.config.sandbox, limits=Limits(wall_seconds=p.config.timeout),
                   hide=[p.course.root, p.config.data_dir], image=p.config.image,
                   preload=keys.preload)  # fmt: skip


def _rekey_and_regrade(p: Platform, served: Served, task: Task, assignment, secret: bytes,
                       allow_new_numbers: bool) -> None:  # fmt: skip
    """`scalegrade rekey` then `scalegrade regrade`, for ``task`` (in its own thread)."""
    from generator.rekey import rekey
    from generator.release import ReleaseError
    from generator.variant import VariantError

    try:
        submitted = {r["student_id"] for r in p.book.results(served.name)}
        keyed = rekey(assignment, served.folder, secret=secret, submitted=submitted,
                      allow_new_numbers=allow_new_numbers)  # fmt: skip
        task.lines += _rekeyed(keyed)
        _refresh(p)
        task.stage = "regrading"
        done, diff = regrade_recorded(p.book, served.name, open_runner=lambda k: _sandbox(p, k),
                                      by=task.by, why=task.why)  # fmt: skip
        task.lines += _regraded(done, diff.name)
    except (ReleaseError, VariantError, GradebookError) as err:
        task.problem = str(err)
    except Exception as err:  # noqa: BLE001 - said on the page, and logged whole
        log.exception("rekey and regrade of %s", served.name)
        task.problem = f"{type(err).__name__}: {err}"
    finally:
        task.stage = "finished"
        task.finished = datetime.now(UTC)


def _rekeyed(keyed) -> list[str]:
    if not keyed.changes:
        return ["Rekey: the keys are those released; nothing changed."]
    out = [f"Rekey: {q}: {'; '.join(what)}." for q, what in keyed.changes.items()]
    if keyed.new_numbers:
        out.append(f"New numbers and notebooks for {len(keyed.new_numbers)} students who had "
                   f"not submitted: {', '.join(keyed.new_numbers)}.")  # fmt: skip
    return [*out, f"The old keys are kept in {keyed.archived}."]


def _regraded(done, diff: str) -> list[str]:
    out = [
        f"Regrade: {done.from_harvest} graded again from their harvests (no notebook run), "
        f"{done.rerun} notebooks run again for changed checks, {done.unchanged} unchanged, "
        f"in {done.seconds:.2f} s; {len(done.gained)} gained, {len(done.lost)} lost "
        f"(diff: {diff})."
    ]
    out += [f"Not regraded: {line}" for line in done.errors]
    return out + [
        f"{sid}: {old:g} → {new:g}" for sid, (old, new) in done.totals.items()
        if abs(new - old) > 1e-9
    ]  # fmt: skip


async def task(request: Request):
    """The rekey and regrade's state, as a fragment htmx polls until it is finished."""
    require(request, "instructor")
    served = _served(request)
    return page(request, "instructor/task.html", served=served,
                task=_tasks(request).get(served.name))  # fmt: skip


ROUTES = [
    Route("/course", index),
    Route("/course/{slug}", assignment),
    Route("/course/{slug}/rows", rows),
    Route("/course/{slug}/stats", stats),
    Route("/course/{slug}/task", task),
    Route("/course/{slug}/canvas.csv", _lms_csv(outputs.canvas_csv)),
    Route("/course/{slug}/moodle.csv", _lms_csv(outputs.moodle_csv)),
    Route("/course/{slug}/extension", _action(_extension), methods=["POST"]),
    Route("/course/{slug}/deadline", _action(_deadline), methods=["POST"]),
    Route("/course/{slug}/reseed", _action(_reseed), methods=["POST"]),
    Route("/course/{slug}/rekey", _action(_rekey), methods=["POST"]),
]
