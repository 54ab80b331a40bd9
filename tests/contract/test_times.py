"""One rule for the course's times: a zone when given, the course's when not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from contract import times


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2026-12-18T23:59", "2026-12-18T22:59:00+00:00"),  # no zone: Zurich's (UTC+1)
        ("2026-06-18T23:59", "2026-06-18T21:59:00+00:00"),  # summer time: UTC+2
        ("2026-12-18T23:59:00+01:00", "2026-12-18T22:59:00+00:00"),
        ("2026-12-18T22:59:00Z", "2026-12-18T22:59:00+00:00"),
        ("2026-12-18 22:59:00.250000 UTC", "2026-12-18T22:59:00.250000+00:00"),  # nbgrader
        ("2026-12-18 14:59:00.000000 America/Los_Angeles", "2026-12-18T22:59:00+00:00"),
        ("  2026-12-18T23:59\n", "2026-12-18T22:59:00+00:00"),  # a file's newline
    ],
)
def test_times_are_read_as_instants(text, utc):
    at = times.parse(text, "Europe/Zurich")
    assert at.astimezone(UTC).isoformat() == utc


@pytest.mark.parametrize("text", ["tomorrow", "18/12/2026 23:59", "2026-13-01T00:00", ""])
def test_a_time_that_is_not_one_says_what_to_write(text):
    with pytest.raises(times.TimeError, match="is not a time: write ISO 8601"):
        times.parse(text, "UTC")


def test_an_unknown_zone_names_it():
    with pytest.raises(times.TimeError, match="'Europe/Atlantis' is not a time zone"):
        times.parse("2026-12-18T23:59", "Europe/Atlantis")
    with pytest.raises(times.TimeError, match="'Mars' is not a time zone"):
        times.parse("2026-12-18 23:59:00.0 Mars", "UTC")


def test_times_are_shown_in_the_course_zone():
    at = datetime(2026, 12, 18, 22, 59, tzinfo=UTC)
    assert times.shown(at, "Europe/Zurich") == "2026-12-18 23:59 CET"
    assert times.shown(at + timedelta(days=182), "Europe/Zurich").endswith("CEST")
