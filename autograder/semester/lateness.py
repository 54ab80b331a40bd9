"""Late work: when a submission was due, when it came, and what that costs.

The late policy is applied here and nowhere else; results.json, feedback, the CSVs, the
LMS files, nbgrader's gradebook and the Gradescope zip all show what :func:`assess`
decided (``doc["late"]``, the score after it).

- The deadline is the release's (``keys/assignment.json``), moved by the instructor
  (``scalegrade late --due``) or, for one student, by an extension.
- Each started day late costs ``late_penalty_per_day`` of the score earned; with
  ``late_charge: hour``, each started hour costs 1/24 of it.
- Later than ``late_days_max`` days, nothing is earned.
- A student's ``late_days_pool`` free days, shared by the course's assignments, are
  spent first, whole days, in the order the student submitted (:func:`spend_pool`).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from autograder.semester.submitted_at import SubmittedAt
from contract import Policy, times

DAY = 86400.0
EXTENSION_COLUMNS = ("student_id", "assignment", "due", "extra_days", "granted_by", "reason")
MAX_EXTRA_DAYS = 365  # longer is a typo, not an extension
# The policy's settings applied here, the ones an instructor may change for an assignment
# (`scalegrade late --set NAME=VALUE`, the course page's deadline form); the gradebook
# checks each value against Policy.
LATE_SETTINGS = tuple(name for name in Policy.model_fields if name.startswith("late_"))


class ExtensionsError(ValueError):
    """An extensions file that cannot be recorded: one line per problem, nothing recorded."""


@dataclass(frozen=True)
class Extension:
    """A new deadline for one student and assignment: a ``due`` time or ``extra_days``."""

    student_id: str
    assignment: str
    due: str | None  # ISO 8601 with offset
    extra_days: float | None
    granted_by: str
    reason: str
    source: str = ""  # "extensions.csv:4"

    def moves(self, due: datetime | None) -> datetime | None:
        """The deadline this extension gives, from the assignment's ``due``."""
        if self.due is not None:
            return datetime.fromisoformat(self.due)
        if due is None or self.extra_days is None:
            return due
        return due + timedelta(days=self.extra_days)

    def note(self, zone: str) -> str:
        what = (
            f"due {times.shown(datetime.fromisoformat(self.due), zone)}"
            if self.due
            else _count(self.extra_days or 0, "more day")
        )
        return f"Extension: {what}, granted by {self.granted_by} ({self.reason})."


def extension(
    student_id: str,
    assignment: str,
    *,
    due: str,
    extra_days: str,
    granted_by: str,
    reason: str,
    zone: str,
    where: str,
) -> Extension:
    """One extension as an instructor writes it (a row of ``extensions.csv``, the course
    page's form), from the text typed: a new ``due`` time (without an offset: in ``zone``,
    the course's) or ``extra_days`` (more than 0, at most :data:`MAX_EXTRA_DAYS`), exactly
    one; who granted it, and why (the student reads it).  A problem raises
    :class:`ExtensionsError`, its message starting with ``where`` (``extensions.csv:4``),
    which becomes the extension's ``source``."""
    student_id, assignment, due, extra_days, granted_by, reason = (
        text.strip() for text in (student_id, assignment, due, extra_days, granted_by, reason)
    )
    if not student_id or not assignment:
        raise ExtensionsError(f"{where}: give the student_id and the assignment (tdlsm/hw1)")
    who = f"{where}: student {student_id}, {assignment}"
    if bool(due) == bool(extra_days):
        raise ExtensionsError(f"{who}: give a new due time or extra_days, exactly one")
    if not granted_by:
        raise ExtensionsError(f"{who}: say who granted it (a granted_by column, or --by NAME)")
    if not reason:
        raise ExtensionsError(f"{who}: say why (the reason column): it is shown to the student")
    try:
        at = times.parse(due, zone).isoformat() if due else None
        days = float(extra_days) if extra_days else None
    except (times.TimeError, ValueError) as err:
        said = err if due else f"extra_days {extra_days!r} is not a number"
        raise ExtensionsError(f"{who}: {said}") from None
    if days is not None and not (0 < days <= MAX_EXTRA_DAYS):  # NaN too
        raise ExtensionsError(
            f"{who}: extra_days {extra_days} must be more than 0 and at most {MAX_EXTRA_DAYS}"
        )
    return Extension(student_id, assignment, at, days, granted_by, reason, where)


def read_extensions(path: Path, zone: str, *, granted_by: str | None = None) -> list[Extension]:
    """``extensions.csv``: ``student_id,assignment`` and ``due`` or ``extra_days``, with
    ``granted_by`` (or ``granted_by`` given here) and ``reason``.  Every problem of the
    file is reported at once, each with its line; a bad file yields nothing."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as err:
        raise ExtensionsError(f"{path}: cannot read ({err.strerror})") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in ("student_id", "assignment", "reason") if c not in header]
    unknown = [h for h in header if h not in EXTENSION_COLUMNS]
    if missing or unknown or not ({"due", "extra_days"} & set(header)):
        raise ExtensionsError(
            f"{path}: the header must be student_id,assignment,due or extra_days,"
            f"granted_by,reason (missing: {', '.join(missing) or 'due or extra_days'}"
            f"{'; unknown: ' + ', '.join(unknown) if unknown else ''})"
        )
    out, problems, seen = [], [], {}
    for n, row in enumerate(reader, start=2):
        cell = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
        try:
            granted = extension(
                cell.get("student_id", ""),
                cell.get("assignment", ""),
                due=cell.get("due", ""),
                extra_days=cell.get("extra_days", ""),
                granted_by=cell.get("granted_by") or granted_by or "",
                reason=cell.get("reason", ""),
                zone=zone,
                where=f"{path}:{n}",
            )
        except ExtensionsError as err:
            problems.append(str(err))
            continue
        pair = (granted.student_id, granted.assignment)
        if pair in seen:
            problems.append(
                f"{granted.source}: student {granted.student_id}, {granted.assignment}: also on "
                f"line {seen[pair]}; keep one row per student"
            )
            continue
        seen[pair] = n
        out.append(granted)
    if problems:
        raise ExtensionsError("\n".join(problems))
    return out


@dataclass(frozen=True)
class Lateness:
    """What the late policy decided for one submission (``doc["late"]``)."""

    due: str | None  # the deadline in force for this student, ISO 8601
    submitted_at: str | None
    time_source: str  # where the submission time came from
    late_seconds: float
    pool_days: int  # free late days spent on this submission
    charged: int  # started days (or hours) charged after the pool
    unit: str  # day | hour
    penalty: float  # share of the earned score lost; 1.0 past late_days_max
    extension: str | None  # the sentence the student reads
    warning: str | None  # e.g. a time read from the file's mtime

    @property
    def late(self) -> bool:
        return self.late_seconds > 0

    def note(self, zone: str) -> str:
        """The sentence on the student's feedback."""
        if self.submitted_at is None:
            return ""
        at = times.shown(datetime.fromisoformat(self.submitted_at), zone)
        if not self.late:
            due = f", due {times.shown(datetime.fromisoformat(self.due), zone)}" if self.due else ""
            return f"Submitted {at}{due}: on time."
        late = _duration(self.late_seconds)
        pool = f"; {_count(self.pool_days, 'free late day')} spent" if self.pool_days else ""
        if self.penalty >= 1:
            cost = "past the latest accepted time: no points"
        elif self.penalty:
            cost = (
                f"{_count(self.charged, 'started ' + self.unit)} charged, "
                f"{100 * self.penalty:.4g} % off"
            )
        else:
            cost = "no penalty"
        return f"Submitted {at}, {late} late{pool}: {cost}."

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def _count(n: float, thing: str) -> str:
    return f"{n:g} {thing}{'' if n == 1 else 's'}"


def _duration(seconds: float) -> str:
    d, rest = divmod(int(math.ceil(seconds)), 86400)
    h, rest = divmod(rest, 3600)
    m = math.ceil(rest / 60)
    return " ".join(x for x in (f"{d} d" if d else "", f"{h} h" if h else "", f"{m} min") if x)


def charge(late_seconds: float, policy: Policy, pool_left: int) -> tuple[int, int, float]:
    """(free days spent, started units charged, penalty) for a submission this late."""
    if late_seconds <= 0:
        return 0, 0, 0.0
    needed = math.ceil(late_seconds / DAY)
    spent = min(pool_left, needed)
    rest = max(0.0, late_seconds - spent * DAY)
    if rest > policy.late_days_max * DAY:
        return spent, math.ceil(rest / _unit(policy)), 1.0
    charged = math.ceil(rest / _unit(policy))
    per_unit = policy.late_penalty_per_day * _unit(policy) / DAY
    return spent, charged, min(1.0, charged * per_unit)


def _unit(policy: Policy) -> float:
    return DAY if policy.late_charge == "day" else DAY / 24


@dataclass(frozen=True)
class Entry:
    """One student's current submission of one assignment, as the pool sees it."""

    course: str
    assignment: str
    student_id: str
    due: datetime | None  # the deadline in force for this student
    submitted_at: datetime | None
    time_source: str
    policy: Policy
    extension: str | None = None
    warning: str | None = None


def spend_pool(entries: Iterable[Entry]) -> dict[tuple[str, str], Lateness]:
    """Lateness of every entry, by (assignment, student): each student's late-day pool of a
    course is spent on their submissions in the order they were submitted."""
    by_student: dict[tuple[str, str], list[Entry]] = defaultdict(list)
    for e in entries:
        by_student[(e.course, e.student_id)].append(e)
    out: dict[tuple[str, str], Lateness] = {}
    for group in by_student.values():
        group.sort(key=lambda e: (e.submitted_at is None, e.submitted_at or 0, e.assignment))
        spent = 0
        for e in group:
            late = (
                (e.submitted_at - e.due).total_seconds()
                if e.submitted_at is not None and e.due is not None
                else 0.0
            )
            pool_days, charged, penalty = charge(
                late, e.policy, max(0, e.policy.late_days_pool - spent)
            )
            spent += pool_days
            out[(e.assignment, e.student_id)] = Lateness(
                due=e.due.isoformat() if e.due else None,
                submitted_at=e.submitted_at.isoformat() if e.submitted_at else None,
                time_source=e.time_source,
                late_seconds=max(0.0, late),
                pool_days=pool_days,
                charged=charged,
                unit=e.policy.late_charge,
                penalty=penalty,
                extension=e.extension,
                warning=e.warning,
            )
    return out


def alone(
    assignment: str,
    student_id: str,
    due: datetime | None,
    submitted: SubmittedAt | None,
    policy: Policy,
    extension: Extension | None,
    zone: str,
) -> Lateness:
    """The lateness of one submission graded with no memory of the others (Gradescope's
    one submission per container): the late-day pool cannot be spent there."""
    entry = Entry(
        course="",
        assignment=assignment,
        student_id=student_id,
        due=extension.moves(due) if extension else due,
        submitted_at=submitted.at if submitted else None,
        time_source=submitted.source if submitted else "not known",
        policy=policy.model_copy(update={"late_days_pool": 0}),
        extension=extension.note(zone) if extension else None,
        warning=submitted.warning if submitted else None,
    )
    return spend_pool([entry])[(assignment, student_id)]
