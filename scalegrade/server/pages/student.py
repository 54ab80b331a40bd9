"""A student's pages: their assignments, their notebook, uploads, verdicts and history.

The student is always the signed-in account (:func:`~.common.require`): no page takes a
student id from a URL, a form or a notebook, so a student can reach only their own work.
Expected values and worked solutions are shown only after the student's own deadline
(their extension's, if any), when the policy says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from autograder.semester import outputs
from autograder.semester.gradebook import AssignmentRow
from contract import times
from scalegrade.server import uploads
from scalegrade.server.course import Served
from scalegrade.server.pages.common import page, redirect, refuse, require
from scalegrade.server.platform import platform
from scalegrade.server.security import uploads_last_minute
from scalegrade.server.store import now


@dataclass(frozen=True)
class Deadline:
    """When a student's work on an assignment is due, and what is accepted after."""

    due: datetime | None  # the assignment's, moved by the student's extension
    last: datetime | None  # the last moment an upload is accepted (late_days_max after)
    extension: str | None  # the extension's note
    zone: str

    def shown(self, at: datetime | None) -> str:
        return times.shown(at, self.zone) if at else "no deadline"

    @property
    def passed(self) -> bool:
        return self.due is not None and datetime.now(UTC) >= self.due

    @property
    def closed(self) -> bool:
        return self.last is not None and datetime.now(UTC) > self.last


def deadline(request: Request, row: AssignmentRow, student_id: str) -> Deadline:
    ext = platform(request).book.extensions().get((row.name, student_id))
    due = ext.moves(row.due_in_force) if ext else row.due_in_force
    last = due + timedelta(days=row.policy.late_days_max) if due else None
    return Deadline(due, last, ext.note(row.timezone) if ext else None, row.timezone)


def revealed(row: AssignmentRow, when: Deadline) -> bool:
    """Expected values and solutions: after the student's own deadline, by the policy (or
    as the instructor chose for the assignment)."""
    if row.reveal is not None:
        return row.reveal and when.passed
    return row.policy.solutions_after_due and when.passed


def _mine(request: Request, slug: str) -> tuple[str, Served, AssignmentRow]:
    """The signed-in student and their assignment ``slug`` (404 if not theirs)."""
    student = require(request, "student").login
    served = platform(request).course.by_slug(slug)
    if served is None or student not in served.keys:
        raise HTTPException(404, "You have no such assignment.")
    return student, served, platform(request).book.assignment(served.name)


async def assignments(request: Request):
    student = require(request, "student").login
    p = platform(request)
    rows = []
    for served in p.course.assignments.values():
        if student not in served.keys:
            continue
        row = p.book.assignment(served.name)
        standing = platform(request).book.result(served.name, student)
        rows.append((served, deadline(request, row, student), standing))
    return page(request, "student/assignments.html", rows=rows)


async def assignment(request: Request):
    student, served, row = _mine(request, request.path_params["slug"])
    p = platform(request)
    return page(
        request,
        "student/assignment.html",
        served=served,
        when=deadline(request, row, student),
        standing=platform(request).book.result(served.name, student),
        job=next(iter(p.queue.jobs_of(served.name, student, limit=1)), None),
        cap_mib=p.config.upload_max_bytes / 2**20,
    )


async def notebook(request: Request):
    student, served, _row = _mine(request, request.path_params["slug"])
    path = served.notebook(student)
    if path is None:
        raise HTTPException(404, "Your notebook is not released yet.")
    return FileResponse(path, media_type="application/x-ipynb+json", filename=path.name)


async def submit(request: Request):
    student, served, row = _mine(request, request.path_params["slug"])
    p = platform(request)
    when = deadline(request, row, student)
    if when.closed:
        return refuse(request, 403,
                      f"{served.release.title} accepted uploads until {when.shown(when.last)} "
                      f"({row.policy.late_days_max} days after your deadline); this one is "
                      "not recorded. Your earlier submission stands; ask your instructor "
                      "about an extension.")  # fmt: skip
    if uploads_last_minute(p.book.engine, student) >= p.config.uploads_per_minute:
        return refuse(request, 429, f"You uploaded {p.config.uploads_per_minute} times in the "
                      "last minute: wait a minute, then upload again.")  # fmt: skip
    form = await request.form(max_files=1, max_fields=4, max_part_size=p.config.upload_max_bytes)
    upload = form.get("notebook")
    if upload is None or isinstance(upload, str):
        return refuse(request, 400, "Choose your notebook file, then press Submit.")
    data = await upload.read(p.config.upload_max_bytes + 1)
    if len(data) > p.config.upload_max_bytes:
        return refuse(request, 413, f"{upload.filename} is larger than the "
                      f"{p.config.upload_max_bytes / 2**20:g} MiB accepted: clear the "
                      "outputs (Edit > Clear all outputs), save, and upload again.")  # fmt: skip
    try:
        uploads.check(upload.filename or "", data, served, student)
    except uploads.UploadError as err:
        return refuse(request, 400, str(err))
    path, digest = uploads.store(p.config.data_dir, served, student, data)
    p.queue.enqueue(served.name, student, path, digest, now())
    return redirect(f"/a/{served.slug}")


async def status(request: Request):
    """The latest upload's state, as a fragment htmx polls until it is graded."""
    student, served, _row = _mine(request, request.path_params["slug"])
    p = platform(request)
    job = next(iter(p.queue.jobs_of(served.name, student, limit=1)), None)
    ahead = p.queue.ahead_of(job.id) if job is not None and job.state == "queued" else 0
    return page(request, "student/status.html", served=served, job=job, ahead=ahead,
                standing=platform(request).book.result(served.name, student))  # fmt: skip


def _shown(doc: dict, row: AssignmentRow, served: Served, student: str, when: Deadline):
    """A result document as this student may see it now, and the solutions they may."""
    if revealed(row, when):
        key = served.keys.key(student)
        return doc, {q.id: q.solution_html for q in key.questions}
    hidden = [g | {"verdict": g["verdict"] | {"expected": ""}} for g in doc["parts"]]
    return doc | {"parts": hidden}, None


async def feedback(request: Request):
    student, served, row = _mine(request, request.path_params["slug"])
    doc = platform(request).book.result(served.name, student)
    if doc is None:
        return refuse(request, 404, "Nothing graded yet: upload your notebook first.")
    return _feedback_page(request, served, row, student, doc, "Your standing")


async def attempt(request: Request):
    student, served, row = _mine(request, request.path_params["slug"])
    wanted = request.path_params["attempt"]
    found = next(
        (a for a in platform(request).book.attempts(served.name, student) if a.id == wanted),
        None,
    )
    if found is None:  # not one of this student's attempts
        raise HTTPException(404, "You have no such attempt.")
    doc = json.loads(found.result_json)
    when = f"Attempt uploaded {_at(found.submitted_at, row.timezone)} (before any late penalty)"
    return _feedback_page(request, served, row, student, doc, when)


def _feedback_page(request, served, row, student, doc, heading):
    when = deadline(request, row, student)
    shown, solutions = _shown(doc, row, served, student, when)
    body = outputs.feedback_body(shown, solutions=solutions)
    return page(request, "student/feedback.html", served=served, heading=heading,
                body=body, revealed=solutions is not None, when=when)  # fmt: skip


def _at(iso: str | None, zone: str) -> str:
    return times.shown(datetime.fromisoformat(iso), zone) if iso else "—"


async def history(request: Request):
    student, served, row = _mine(request, request.path_params["slug"])
    p = platform(request)
    attempts = [_line(a, row.timezone) for a in reversed(p.book.attempts(served.name, student))]
    jobs = [j for j in p.queue.jobs_of(served.name, student, limit=100) if j.state != "done"]
    return page(request, "student/history.html", served=served, attempts=attempts,
                jobs=[(j, _at(j.submitted_at, row.timezone)) for j in jobs])  # fmt: skip


@dataclass(frozen=True)
class AttemptLine:
    id: int
    submitted: str
    graded: str
    score: float
    error: str | None


def _line(a, zone: str) -> AttemptLine:
    return AttemptLine(a.id, _at(a.submitted_at, zone), _at(a.graded_at, zone), a.score, a.error)


async def styles(request: Request):
    """The feedback's own style, nested under ``.feedback`` (CSS nesting): it styles the
    feedback a page embeds, and nothing else of the page."""
    return Response(".feedback{" + outputs.STYLE + "}", media_type="text/css")


ROUTES = [
    Route("/a", assignments),
    Route("/a/{slug}", assignment),
    Route("/a/{slug}/notebook", notebook),
    Route("/a/{slug}/submit", submit, methods=["POST"]),
    Route("/a/{slug}/status", status),
    Route("/a/{slug}/feedback", feedback),
    Route("/a/{slug}/history", history),
    Route("/a/{slug}/attempts/{attempt:int}", attempt),
    Route("/feedback.css", styles),
]
