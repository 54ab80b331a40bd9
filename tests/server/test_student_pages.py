"""A student's pages (scalegrade/server/pages/student.py): their assignments, their own
notebook, uploads checked before they are queued, and a verdict they can read."""

from __future__ import annotations

import json
import threading
import time

import pytest

from scalegrade.server.worker import Worker
from tests.server.site import csrf_of, post_form

HW1 = "/a/tdlsm-hw1"


def _upload(client, notebook_bytes: bytes, name: str = "hw1.ipynb"):
    return post_form(client, HW1, f"{HW1}/submit", files={"notebook": (name, notebook_bytes)})


def _graded(site, config, until: float = 120.0) -> None:
    """Drain the queue with one worker (a warm local sandbox), as `scalegrade serve` does."""
    worker = Worker(config, "test-worker")
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + until
        while time.monotonic() < deadline:
            counts = site.platform.queue.counts()
            if not counts.get("queued") and not counts.get("running"):
                break
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join()
        worker.close()


def test_a_student_sees_their_assignment_and_downloads_their_own_notebook(site, course):
    ana = site.as_("s00")
    listing = ana.get("/a")
    assert listing.status_code == 200
    assert "Homework 1" in listing.text
    got = ana.get(f"{HW1}/notebook")
    assert got.status_code == 200
    released = (course / "hw1" / "release" / "s00" / "hw1.ipynb").read_bytes()
    assert got.content == released  # their own, byte for byte
    assert json.loads(got.content)["metadata"]["scalegrade"]["student_id"] == "s00"


def test_an_upload_is_graded_and_its_feedback_names_the_mistake(site, config, submissions):
    s00 = site.as_("s00")  # the demo's "GiB read as GB"
    sent = _upload(s00, (submissions / "s00" / "hw1.ipynb").read_bytes())
    assert sent.status_code == 303
    assert "Queued" in s00.get(f"{HW1}/status").text
    _graded(site, config)
    status = s00.get(f"{HW1}/status").text
    assert "hx-get" not in status and "points" in status  # graded: polling stops
    feedback = s00.get(f"{HW1}/feedback").text
    assert "GiB" in feedback or "GB" in feedback
    assert "expected:" not in feedback  # before the deadline: no expected value
    history = s00.get(f"{HW1}/history").text
    assert "attempt 1" in history


def test_bad_uploads_get_a_clear_page_and_queue_nothing(site, course):
    s01 = site.as_("s01")
    released = (course / "hw1" / "release" / "s01" / "hw1.ipynb").read_bytes()
    cases = {
        "hw1.txt": (b"x = 1", "is not a notebook"),
        "broken.ipynb": (b"{not json", "not a readable notebook"),
        "hw1.ipynb": (released, "holds no answer yet"),
    }
    for name, (data, said) in cases.items():
        r = _upload(s01, data, name)
        assert r.status_code == 400 and said in r.text, (name, r.text[-800:])
    other = json.loads(released)
    other["metadata"]["scalegrade"]["assignment"] = "tdlsm/hw9"
    r = _upload(s01, json.dumps(other).encode())
    assert r.status_code == 400 and "not of tdlsm/hw1" in r.text
    assert site.platform.queue.counts() == {}


def test_a_form_without_the_session_csrf_token_is_refused(site, submissions):
    s00 = site.as_("s00")
    data = (submissions / "s00" / "hw1.ipynb").read_bytes()
    page = s00.get(HW1).text
    assert csrf_of(page)
    for token in ("", "forged", csrf_of(site.client().get("/signin").text)):
        r = s00.post(f"{HW1}/submit", data={"csrf": token}, files={"notebook": ("hw1.ipynb", data)})
        assert r.status_code == 403
    assert site.platform.queue.counts() == {}


def _move_deadline(site, days: float) -> None:
    """The instructor moves tdlsm/hw1's deadline to ``days`` from now (as `scalegrade
    late --due` does)."""
    from datetime import UTC, datetime, timedelta

    due = datetime.now(UTC) + timedelta(days=days)
    site.platform.book.change("tdlsm/hw1", by="prof", why="a test", due=due, policy=None)


def test_lateness_is_applied_as_scalegrade_late_applies_it(site, config, submissions):
    _move_deadline(site, -1.5)  # due a day and a half ago: two started days late
    s07 = site.as_("s07")
    assert _upload(s07, (submissions / "s07" / "hw1.ipynb").read_bytes()).status_code == 303
    _graded(site, config)
    standing = site.platform.book.result("tdlsm/hw1", "s07")
    # courses.yaml's tdlsm policy: 10 % of the earned score per started day, 3 days at most
    assert standing["late"]["penalty"] == pytest.approx(0.2)
    assert standing["score"] == pytest.approx(0.8 * standing["earned"])
    feedback = s07.get(f"{HW1}/feedback").text
    assert "late" in feedback.lower()
    assert "expected:" in feedback  # after the deadline the policy shows expected values


def test_past_late_days_max_an_upload_is_refused_and_the_standing_kept(site, config, submissions):
    s07 = site.as_("s07")
    assert _upload(s07, (submissions / "s07" / "hw1.ipynb").read_bytes()).status_code == 303
    _graded(site, config)
    kept = site.platform.book.result("tdlsm/hw1", "s07")
    _move_deadline(site, -4)  # late_days_max is 3
    r = _upload(s07, (submissions / "s00" / "hw1.ipynb").read_bytes())
    assert r.status_code == 403 and "accepted uploads until" in r.text
    assert "Your earlier submission stands" in r.text
    assert len(site.platform.queue.jobs_of("tdlsm/hw1", "s07")) == 1
    assert site.platform.book.result("tdlsm/hw1", "s07")["earned"] == kept["earned"]
    assert "Uploads are closed" in s07.get(HW1).text
