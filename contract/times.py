"""Times of the course: one rule for reading them, on both sides of the contract.

A deadline, a submission time, an extension: each is read here.  A time that carries a
zone (``2026-12-18T23:59:00+01:00``, nbgrader's ``2026-12-18 23:59:00.000000 UTC``) is
that instant; a time without one is read in the course's zone (``courses.yaml``
``timezone``), which release writes into ``keys/assignment.json``.
"""

from __future__ import annotations

import re
from datetime import datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# nbgrader's timestamp.txt: "%Y-%m-%d %H:%M:%S.%f %Z", the zone an abbreviation or name
_NBGRADER = re.compile(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?) ([A-Za-z_/]+)$")


class TimeError(ValueError):
    """A time or a zone that cannot be read; the message says what was expected."""


def zone(name: str) -> tzinfo:
    """An IANA time zone (``Europe/Zurich``), or a sentence saying it is not one."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TimeError(
            f"{name!r} is not a time zone: give an IANA name such as UTC or Europe/Zurich"
        ) from None


def parse(text: str, course_zone: str) -> datetime:
    """An aware datetime from ISO 8601 or nbgrader's timestamp; no zone: the course's."""
    raw = text.strip()
    m = _NBGRADER.match(raw)
    if m:
        return datetime.fromisoformat(m.group(1)).replace(tzinfo=zone(m.group(2)))
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise TimeError(
            f"{text!r} is not a time: write ISO 8601, such as 2026-12-18T23:59 or "
            "2026-12-18T23:59:00+01:00"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=zone(course_zone))


def shown(at: datetime, course_zone: str) -> str:
    """A time as the course reads it: in its zone, to the minute, with the offset."""
    return at.astimezone(zone(course_zone)).strftime("%Y-%m-%d %H:%M %Z")
