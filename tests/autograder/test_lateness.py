"""The late policy, applied in one place: started days or hours, the cut-off, the pool.

Every number here is worked by hand from the policy's definition (autograder/semester/lateness.py):
a penalty of ``late_penalty_per_day`` of the earned score per started day, 1/24 of it per
started hour, nothing after ``late_days_max`` days, free pool days spent first.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autograder.semester.lateness import (
    LATE_SETTINGS,
    MAX_EXTRA_DAYS,
    Entry,
    Extension,
    ExtensionsError,
    charge,
    extension,
    read_extensions,
    spend_pool,
)
from contract import Policy

HOUR = 3600.0
DAY = 24 * HOUR
DUE = datetime(2026, 12, 18, 22, 59, tzinfo=UTC)


@pytest.mark.parametrize(
    ("late", "policy", "pool", "expected"),
    [
        (0.0, Policy(), 0, (0, 0, 0.0)),
        (-5 * DAY, Policy(), 0, (0, 0, 0.0)),  # early
        (1.0, Policy(), 0, (0, 1, 0.1)),  # one second late: one started day
        (DAY, Policy(), 0, (0, 1, 0.1)),
        (DAY + 1, Policy(), 0, (0, 2, 0.2)),
        (3 * DAY, Policy(), 0, (0, 3, pytest.approx(0.3))),  # exactly late_days_max: allowed
        (3 * DAY + 1, Policy(), 0, (0, 4, 1.0)),  # past it: nothing
        (90 * 60.0, Policy(late_charge="hour"), 0, (0, 2, pytest.approx(0.2 / 24))),
        (3 * DAY, Policy(late_charge="hour"), 0, (0, 72, pytest.approx(0.3))),
        (2.5 * DAY, Policy(), 2, (2, 1, 0.1)),  # two free days, half a day charged
        (1.5 * DAY, Policy(), 5, (2, 0, 0.0)),  # whole days are spent: two of the five
        (5 * DAY, Policy(), 2, (2, 3, pytest.approx(0.3))),  # the pool moves the cut-off
        (DAY / 2, Policy(late_penalty_per_day=0.5), 0, (0, 1, 0.5)),
    ],
)
def test_charge(late, policy, pool, expected):
    assert charge(late, policy, pool) == expected


def _entry(assignment, submitted, pool=3, due=DUE, course="tdlsm"):
    return Entry(
        course=course,
        assignment=assignment,
        student_id="ana",
        due=due,
        submitted_at=submitted,
        time_source="test",
        policy=Policy(late_days_pool=pool),
    )


def test_the_pool_is_spent_in_submission_order_across_the_course():
    # hw2 was submitted first (1.5 days late): it takes 2 of the 3 free days; hw1, handed
    # in later (2 days late), gets the last one and pays for one started day
    entries = [
        _entry("tdlsm/hw1", DUE + timedelta(days=9), due=DUE + timedelta(days=7)),
        _entry("tdlsm/hw2", DUE + timedelta(days=1.5)),
    ]
    decided = spend_pool(entries)
    hw1, hw2 = decided[("tdlsm/hw1", "ana")], decided[("tdlsm/hw2", "ana")]
    assert (hw2.pool_days, hw2.charged, hw2.penalty) == (2, 0, 0.0)
    assert (hw1.pool_days, hw1.charged, hw1.penalty) == (1, 1, 0.1)
    assert "1 free late day spent: 1 started day charged, 10 % off" in hw1.note("UTC")


def test_each_course_has_its_own_pool():
    entries = [
        _entry("tdlsm/hw1", DUE + timedelta(days=2)),
        _entry("dl/hw1", DUE + timedelta(days=2), course="dl"),
    ]
    decided = spend_pool(entries)
    assert decided[("tdlsm/hw1", "ana")].pool_days == decided[("dl/hw1", "ana")].pool_days == 2


def test_an_unknown_time_or_deadline_is_never_late():
    decided = spend_pool([_entry("a", None), _entry("b", DUE, due=None)])
    assert all(d.penalty == 0 and not d.late for d in decided.values())
    assert decided[("a", "ana")].note("UTC") == ""


def test_the_notes_students_read():
    on_time = spend_pool([_entry("a", DUE - timedelta(hours=1))])[("a", "ana")]
    assert on_time.note("Europe/Zurich") == (
        "Submitted 2026-12-18 22:59 CET, due 2026-12-18 23:59 CET: on time."
    )
    gone = spend_pool([_entry("a", DUE + timedelta(days=4, minutes=1), pool=0)])[("a", "ana")]
    assert gone.note("UTC") == (
        "Submitted 2026-12-22 23:00 UTC, 4 d 1 min late: past the latest accepted time: no points."
    )


def _write(tmp_path, text):
    path = tmp_path / "extensions.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_extensions_are_read_with_who_and_why(tmp_path):
    path = _write(
        tmp_path,
        "student_id,assignment,due,extra_days,granted_by,reason\n"
        "ana,tdlsm/hw1,2026-12-20T12:00,,Prof. Ada,medical note\n"
        "ben,tdlsm/hw1,,2.5,,exchange semester travel\n",
    )
    ana, ben = read_extensions(path, "Europe/Zurich", granted_by="TA Bo")
    assert ana.due == "2026-12-20T12:00:00+01:00" and ana.granted_by == "Prof. Ada"
    assert ana.moves(DUE) == datetime(2026, 12, 20, 11, 0, tzinfo=UTC)
    assert ben.extra_days == 2.5 and ben.granted_by == "TA Bo"  # --by fills the gap
    assert ben.moves(DUE) == DUE + timedelta(days=2.5)
    assert (
        ben.note("UTC") == "Extension: 2.5 more days, granted by TA Bo (exchange semester travel)."
    )
    assert ana.source == f"{path}:2"


def test_a_bad_extensions_file_names_every_problem_and_yields_nothing(tmp_path):
    path = _write(
        tmp_path,
        "student_id,assignment,due,extra_days,granted_by,reason\n"
        "ana,tdlsm/hw1,next friday,,Ada,ill\n"
        "ben,tdlsm/hw1,,two,Ada,ill\n"
        "cem,tdlsm/hw1,2026-12-20T12:00,2,Ada,ill\n"
        "dan,tdlsm/hw1,,2,,ill\n"
        "eve,tdlsm/hw1,,2,Ada,\n"
        "fay,tdlsm/hw1,,400,Ada,ill\n"
        ",tdlsm/hw1,,2,Ada,ill\n"
        "gus,tdlsm/hw1,,1,Ada,ill\n"
        "gus,tdlsm/hw1,,2,Ada,ill again\n",
    )
    with pytest.raises(ExtensionsError) as err:
        read_extensions(path, "UTC")
    lines = str(err.value).splitlines()
    assert lines == [
        f"{path}:2: student ana, tdlsm/hw1: 'next friday' is not a time: write ISO 8601, "
        "such as 2026-12-18T23:59 or 2026-12-18T23:59:00+01:00",
        f"{path}:3: student ben, tdlsm/hw1: extra_days 'two' is not a number",
        f"{path}:4: student cem, tdlsm/hw1: give a new due time or extra_days, exactly one",
        f"{path}:5: student dan, tdlsm/hw1: say who granted it (a granted_by column, or --by NAME)",
        f"{path}:6: student eve, tdlsm/hw1: say why (the reason column): it is shown to the "
        "student",
        f"{path}:7: student fay, tdlsm/hw1: extra_days 400 must be more than 0 and at most 365",
        f"{path}:8: give the student_id and the assignment (tdlsm/hw1)",
        f"{path}:10: student gus, tdlsm/hw1: also on line 9; keep one row per student",
    ]


def test_an_extensions_file_without_the_columns_says_which(tmp_path):
    path = _write(tmp_path, "student,assignment,days\nana,tdlsm/hw1,2\n")
    with pytest.raises(ExtensionsError, match=r"missing: student_id, reason; unknown: student"):
        read_extensions(path, "UTC")


def test_one_extension_is_read_from_the_text_typed():
    """The course page's form and each row of extensions.csv go through ``extension``."""
    typed = {"granted_by": " Ada ", "reason": "ill ", "zone": "Europe/Zurich", "where": "here"}
    days = extension(" ana ", "tdlsm/hw1", due="", extra_days=" 1.5", **typed)
    assert days == Extension("ana", "tdlsm/hw1", None, 1.5, "Ada", "ill", "here")
    due = extension("ana", "tdlsm/hw1", due="2026-12-20T12:00", extra_days="", **typed)
    assert due.due == "2026-12-20T12:00:00+01:00"  # the course's zone: CET in December
    most = extension("ana", "tdlsm/hw1", due="", extra_days=str(MAX_EXTRA_DAYS), **typed)
    assert most.extra_days == 365.0  # a year is still an extension


@pytest.mark.parametrize(
    ("typed", "said"),  # what is typed (the rest as in GOOD), and the whole message
    [
        ({"student_id": " "}, "here: give the student_id and the assignment (tdlsm/hw1)"),
        ({"assignment": ""}, "here: give the student_id and the assignment (tdlsm/hw1)"),
        ({"extra_days": ""}, "here: student ana, tdlsm/hw1: give a new due time or extra_days, "
         "exactly one"),
        ({"due": "2026-12-20T12:00"}, "here: student ana, tdlsm/hw1: give a new due time or "
         "extra_days, exactly one"),
        ({"granted_by": " "}, "here: student ana, tdlsm/hw1: say who granted it (a granted_by "
         "column, or --by NAME)"),
        ({"reason": ""}, "here: student ana, tdlsm/hw1: say why (the reason column): it is "
         "shown to the student"),
        ({"extra_days": "two"}, "here: student ana, tdlsm/hw1: extra_days 'two' is not a number"),
        ({"extra_days": "0"}, "here: student ana, tdlsm/hw1: extra_days 0 must be more than 0 "
         "and at most 365"),
        ({"extra_days": "-1"}, "here: student ana, tdlsm/hw1: extra_days -1 must be more than 0 "
         "and at most 365"),
        ({"extra_days": "365.5"}, "here: student ana, tdlsm/hw1: extra_days 365.5 must be more "
         "than 0 and at most 365"),
        ({"extra_days": "nan"}, "here: student ana, tdlsm/hw1: extra_days nan must be more than "
         "0 and at most 365"),
        ({"extra_days": "inf"}, "here: student ana, tdlsm/hw1: extra_days inf must be more than "
         "0 and at most 365"),
        ({"extra_days": "", "due": "friday"}, "here: student ana, tdlsm/hw1: 'friday' is not a "
         "time: write ISO 8601, such as 2026-12-18T23:59 or 2026-12-18T23:59:00+01:00"),
    ],
)  # fmt: skip
def test_a_bad_extension_says_what_is_wrong_and_where(typed, said):
    good = {"student_id": "ana", "assignment": "tdlsm/hw1", "due": "", "extra_days": "2",
            "granted_by": "Ada", "reason": "ill"}  # fmt: skip
    cells = good | typed
    with pytest.raises(ExtensionsError) as err:
        extension(cells.pop("student_id"), cells.pop("assignment"), **cells, zone="UTC",
                  where="here")  # fmt: skip
    assert str(err.value) == said


def test_the_late_settings_are_the_policy_s_late_fields():
    """What `scalegrade late --set` and the course page may change: the four fields of
    Policy (contract/key.py) that charge() and spend_pool() read."""
    assert LATE_SETTINGS == (
        "late_penalty_per_day",
        "late_charge",
        "late_days_max",
        "late_days_pool",
    )
