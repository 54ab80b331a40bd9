"""The instructor's pages (scalegrade/server/pages/instructor.py): the live gradebook, the
item analysis, the LMS exports, and extensions, deadlines, reseeds, rekeys and regrades
made with the CLI's own functions, each saying who and why."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from html import unescape
from urllib.parse import urlsplit

import pytest

from autograder.analysis import item_report
from autograder.semester import lms, outputs
from autograder.semester.lateness import LATE_SETTINGS, ExtensionsError, extension
from contract import times
from scalegrade.server.config import load
from scalegrade.server.course import keys_stamp
from tests.server.site import post_form
from tests.server.test_student_pages import _graded, _upload

HW1 = "tdlsm/hw1"
COURSE = "/course/tdlsm-hw1"
SECRET = b"k" * 32  # the secret tests/autograder/demo_course.py released the course with


@pytest.fixture
def config(course, tmp_path):
    """The server's configuration with the course secret in a file, as serve.toml's
    ``secret_file`` names it (rekey and reseed need it)."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    return load(course, workers=0, uploads_per_minute=100, secret_file=secret)


def _submitted(site, config, submissions, student: str = "s00") -> dict:
    notebook = (submissions / student / "hw1.ipynb").read_bytes()
    assert _upload(site.as_(student), notebook).status_code == 303
    _graded(site, config)
    return site.platform.book.result(HW1, student)


def _roster(site) -> dict[str, dict[str, str]]:
    """The roster as `scalegrade grade` gives it to the LMS exports (batch.write_reports)."""
    keys = site.platform.course.assignments[HW1].keys
    return {s: {"name": k.student.name, "email": k.student.email} for s, k in keys.all().items()}


def _wall_clock(site, at: datetime) -> str:
    """``at`` as a browser's datetime-local field sends it: the course's wall clock."""
    zone = site.platform.course.assignments[HW1].release.timezone
    return at.astimezone(times.zone(zone)).strftime("%Y-%m-%dT%H:%M")


def test_the_gradebook_lists_every_student_and_the_exports_are_the_cli_s(site, config, submissions):
    standing = _submitted(site, config, submissions)
    prof = site.as_("prof")
    page = prof.get(COURSE)
    assert page.status_code == 200
    rows = re.findall(r'<th scope="row">(s\d\d)', page.text)
    assert rows == [f"s{i:02d}" for i in range(8)]  # the roster, submitted or not
    s00 = page.text[page.text.index('<th scope="row">s00') : page.text.index('scope="row">s01')]
    assert f"{standing['score']:g} / {standing['max_score']:g}" in s00
    s01 = page.text[page.text.index('scope="row">s01') : page.text.index('scope="row">s02')]
    assert "not submitted" in s01
    assert 'hx-get="/course/tdlsm-hw1/rows" hx-trigger="every 5s"' in page.text
    fragment = prof.get(f"{COURSE}/rows")
    assert fragment.text.startswith('<div id="gradebook"') and "<html" not in fragment.text

    results = site.platform.book.results(HW1)
    keys = site.platform.course.assignments[HW1].keys.all()
    assert lms.roster(keys) == _roster(site)  # the roster batch.write_reports gives them
    for name, make in (("canvas", outputs.canvas_csv), ("moodle", outputs.moodle_csv)):
        got = prof.get(f"{COURSE}/{name}.csv")
        assert got.status_code == 200
        assert got.headers["content-disposition"] == f'attachment; filename="tdlsm-hw1-{name}.csv"'
        title = site.platform.course.assignments[HW1].release.title  # the column, as batch's
        assert got.text == make(results, _roster(site), title)
    assert "s00" in prof.get(f"{COURSE}/canvas.csv").text

    stats = prof.get(f"{COURSE}/stats")
    expected = item_report.section(item_report.analysis(results, keys))
    plots = re.compile(r"plot\d+")  # each plot's ids count up across calls
    assert plots.sub("plot", expected) in plots.sub("plot", stats.text)
    assert "Item analysis" in stats.text


def test_a_deadline_and_a_late_policy_change_apply_to_the_standings(site, config, submissions):
    _submitted(site, config, submissions)
    prof = site.as_("prof")
    due = _wall_clock(site, datetime.now(UTC) - timedelta(days=1.5))  # two started days late
    changed = post_form(prof, COURSE, f"{COURSE}/deadline", {
        "due": due, "late_penalty_per_day": "0.05", "late_charge": "day", "late_days_max": "3",
        "late_days_pool": "0", "by": "prof", "why": "the server was down",
    })  # fmt: skip
    assert changed.status_code == 303
    standing = site.platform.book.result(HW1, "s00")
    assert standing["late"]["penalty"] == pytest.approx(2 * 0.05)
    assert standing["score"] == pytest.approx(0.9 * standing["earned"])
    (change,) = site.platform.book.changes(HW1)
    assert (change["kind"], change["by"], change["why"]) == (
        "due+policy",
        "prof",
        "the server was down",
    )
    assert change["detail"]["policy"][1] == {"late_penalty_per_day": 0.05}  # only what changed
    shown = prof.get(COURSE).text
    assert (
        "Changed the deadline, late_penalty_per_day; every standing made again: 1 score changed"
        in shown
    )
    assert "the server was down" in shown


def test_a_bad_deadline_or_policy_is_refused_and_nothing_changed(site):
    prof = site.as_("prof")
    policy = site.platform.book.assignment(HW1).policy.model_dump()
    same = {name: str(policy[name]) for name in policy if name.startswith("late_")}
    cases = [
        ({"due": ""}, "Nothing to change"),  # the form as shown: the settings in force
        ({"due": "friday"}, "is not a time"),
        ({"late_penalty_per_day": "2"}, "late_penalty_per_day"),  # a share: at most 1
        ({"late_charge": "week"}, "late_charge"),
        ({"late_days_max": "-1"}, "late_days_max"),
    ]
    for sent, said in cases:
        data = {**same, "due": "", "by": "prof", "why": "a test"} | sent
        refused = post_form(prof, COURSE, f"{COURSE}/deadline", data)
        assert refused.status_code == 400 and said in refused.text, sent
    assert site.platform.book.changes(HW1) == []
    assert site.platform.book.assignment(HW1).policy.model_dump() == policy


def test_an_extension_is_granted_and_the_student_sees_it(site):
    prof = site.as_("prof")
    granted = post_form(prof, COURSE, f"{COURSE}/extension", {
        "student": "s01", "extra_days": "2", "due": "", "by": "prof", "why": "a doctor's note",
    })  # fmt: skip
    assert granted.status_code == 303
    ext = site.platform.book.extensions()[(HW1, "s01")]
    assert (ext.extra_days, ext.granted_by, ext.reason) == (2.0, "prof", "a doctor's note")
    note = "Extension: 2 more days, granted by prof (a doctor's note)."
    assert note in unescape(site.as_("s01").get("/a/tdlsm-hw1").text)
    assert note in unescape(prof.get(COURSE).text)  # in the gradebook's row of s01
    assert note not in unescape(site.as_("s02").get("/a/tdlsm-hw1").text)


BAD_EXTENSIONS = [  # what is sent, and what the page says
    ({"student": "s01", "extra_days": "2", "why": ""}, "Say why"),
    ({"student": "s01", "extra_days": "2", "by": ""}, "Say who"),
    ({"student": "s01"}, "exactly one"),
    ({"student": "s01", "extra_days": "2", "due": "2027-01-10T12:00"}, "exactly one"),
    ({"student": "s01", "extra_days": "abc"}, "is not a number"),
    ({"student": "s01", "extra_days": "0"}, "more than 0 and at most 365"),
    ({"student": "s01", "extra_days": "nan"}, "more than 0 and at most 365"),
    ({"student": "s01", "due": "next friday"}, "is not a time"),
    ({"student": "zoe", "extra_days": "2"}, "Choose a student of the roster"),
]


@pytest.mark.parametrize(("sent", "said"), BAD_EXTENSIONS)
def test_a_bad_extension_is_refused_and_nothing_recorded(site, sent, said):
    prof = site.as_("prof")
    data = {"by": "prof", "why": "illness", "due": "", "extra_days": ""} | sent
    refused = post_form(prof, COURSE, f"{COURSE}/extension", data)
    assert refused.status_code == 400 and said in unescape(refused.text)
    assert "Nothing changed" in refused.text and f'href="{COURSE}"' in refused.text
    assert site.platform.book.extensions() == {}


def test_an_extension_is_refused_in_the_words_of_an_extensions_file(site):
    """The page checks an extension with lateness.extension, as `scalegrade late
    --extensions` checks each row: the same message, with where it came from."""
    zone = site.platform.book.assignment(HW1).timezone
    with pytest.raises(ExtensionsError) as err:
        extension("s01", HW1, due="", extra_days="400", granted_by="prof", reason="illness",
                  zone=zone, where="the course page")  # fmt: skip
    sent = {"student": "s01", "due": "", "extra_days": "400", "by": "prof", "why": "illness"}
    refused = post_form(site.as_("prof"), COURSE, f"{COURSE}/extension", sent)
    assert refused.status_code == 400
    assert f"{err.value}. Nothing changed." in unescape(refused.text)
    assert site.platform.book.extensions() == {}


def test_the_deadline_form_changes_the_late_settings_the_cli_changes(site):
    """The form offers lateness.LATE_SETTINGS, as `scalegrade late --set` accepts them, and
    no other field of the policy."""
    prof = site.as_("prof")
    text = prof.get(COURSE).text
    form = text[text.index(f'action="{COURSE}/deadline"') :]
    form = form[: form.index("</form>")]
    fields = re.findall(r'name="(\w+)"', form)
    assert tuple(f for f in fields if f not in ("csrf", "due", "by", "why")) == LATE_SETTINGS
    policy = site.platform.book.assignment(HW1).policy
    sent = {"due": "", "ecf_credit": "0.1", "by": "prof", "why": "a test"}  # not a late setting
    refused = post_form(prof, COURSE, f"{COURSE}/deadline", sent)
    assert refused.status_code == 400 and "Nothing to change" in refused.text
    assert site.platform.book.assignment(HW1).policy == policy


def test_every_change_needs_a_why(site, course):
    prof = site.as_("prof")
    keys = keys_stamp(course / "hw1" / "keys")  # each file's name, size and time
    forms = {
        "extension": {"student": "s01", "extra_days": "1"},
        "deadline": {"due": "2027-01-10T12:00"},
        "reseed": {"student": "s01", "question": ""},
        "rekey": {},
    }
    for action, data in forms.items():
        refused = post_form(prof, COURSE, f"{COURSE}/{action}", {**data, "by": "prof", "why": " "})
        assert refused.status_code == 400, action
        assert "Say why (the Why field)" in refused.text and "Nothing changed" in refused.text
    assert site.platform.book.extensions() == {} and site.platform.book.changes(HW1) == []
    assert keys_stamp(course / "hw1" / "keys") == keys  # no reseed, no rekey
    assert "Rekey and regrade started" not in prof.get(COURSE).text


def test_a_reseed_gives_the_student_a_new_notebook(site, course):
    s02, prof = site.as_("s02"), site.as_("prof")
    before = s02.get("/a/tdlsm-hw1/notebook").content
    done = post_form(prof, COURSE, f"{COURSE}/reseed", {
        "student": "s02", "question": "", "by": "prof", "why": "their notebook was shared",
    })  # fmt: skip
    assert done.status_code == 303
    after = s02.get("/a/tdlsm-hw1/notebook").content
    assert after != before  # new numbers, served at once (the keys read again)
    assert json.loads(after)["metadata"]["scalegrade"]["student_id"] == "s02"
    (entry,) = json.loads((course / "hw1" / "keys" / "ledger.json").read_text())["reseeds"]
    assert (entry["student"], entry["by"], entry["why"]) == (
        "s02",
        "prof",
        "their notebook was shared",
    )
    assert "s02 reseeded: variant version 1" in unescape(prof.get(COURSE).text)
    assert (
        site.as_("s03").get("/a/tdlsm-hw1/notebook").content
        == (course / "hw1" / "release" / "s03" / "hw1.ipynb").read_bytes()
    )  # nobody else's changed


def _finished(client, until: float = 60.0) -> str:
    """The rekey and regrade's fragment once it has finished (htmx stops polling then)."""
    deadline = time.monotonic() + until
    while time.monotonic() < deadline:
        text = client.get(f"{COURSE}/task").text
        if "hx-get" not in text:
            return text
        time.sleep(0.1)
    raise AssertionError(f"the rekey and regrade did not finish in {until} s")


def test_a_rekey_and_regrade_with_the_bank_unchanged_changes_nothing_and_says_who(
    site, config, submissions
):
    before = _submitted(site, config, submissions)
    prof = site.as_("prof")
    started = post_form(prof, COURSE, f"{COURSE}/rekey", {"by": "prof", "why": "Q3 reworded"})
    assert started.status_code == 303
    shown = unescape(_finished(prof))
    assert "Rekey: the keys are those released; nothing changed." in shown
    assert "0 graded again from their harvests" in shown and "1 unchanged" in shown
    assert "finished" in shown and "stopped" not in shown
    (change,) = site.platform.book.changes(HW1)
    assert (change["kind"], change["by"], change["why"]) == ("regrade", "prof", "Q3 reworded")
    assert change["detail"] == {"from_harvest": 0, "rerun": 0, "gained": 0, "lost": 0,
                                "diff": "regrade-1.csv"}  # fmt: skip
    assert site.platform.book.result(HW1, "s00") == before
    assert len(site.platform.book.attempts(HW1, "s00")) == 1  # nothing graded again


def test_without_the_course_secret_a_rekey_is_refused(site, monkeypatch):
    monkeypatch.delenv("SCALEGRADE_SECRET", raising=False)
    site.platform.config = site.platform.config.model_copy(update={"secret_file": None})
    prof = site.as_("prof")
    refused = post_form(prof, COURSE, f"{COURSE}/rekey", {"by": "prof", "why": "a fix"})
    assert refused.status_code == 400
    assert "no course secret" in refused.text and "secret_file" in refused.text
    assert site.platform.book.changes(HW1) == []


def test_only_instructors_reach_the_course_pages(site):
    paths = ["/course", COURSE, f"{COURSE}/rows", f"{COURSE}/stats", f"{COURSE}/canvas.csv",
             f"{COURSE}/task"]  # fmt: skip
    for login in ("s00", "ta"):
        client = site.as_(login)
        for path in paths:
            assert client.get(path).status_code == 403, (login, path)
        page = "/a" if login == "s00" else "/mark"
        sent = post_form(
            client,
            page,
            f"{COURSE}/extension",
            {"student": login, "extra_days": "9", "by": login, "why": "please"},
        )
        assert sent.status_code == 403
    for path in paths:
        assert urlsplit(site.client().get(path).headers["location"]).path == "/signin"
    assert site.platform.book.extensions() == {}
    assert site.as_("prof").get("/course/tdlsm-hw9").status_code == 404


def test_the_bank_and_the_secret_file_are_read_relative_to_serve_toml(course):
    (course / "serve.toml").write_text('bank = "bank"\nsecret_file = "../secret.txt"\n')
    config = load(course)
    assert config.bank == course.resolve() / "bank"
    assert config.secret_file.resolve() == (course.parent / "secret.txt").resolve()
