"""The platform's security (scalegrade/server/security.py, app.py, pages/): a student
reaches only their own work, by URL or by a forged form field; roles bound every page;
CSRF tokens are enforced; the session cannot be forged; keys, secrets and uploads are
never served; uploads are capped and rate limited."""

from __future__ import annotations

import json

import pytest

from scalegrade.server.security import check_password, hash_password
from tests.server.site import PASSWORD, csrf_of, post_form
from tests.server.test_student_pages import HW1, _graded, _upload


@pytest.fixture
def graded_pair(site, config, submissions):
    """s00 and s01 have each uploaded once, graded."""
    for student in ("s00", "s01"):
        nb = (submissions / student / "hw1.ipynb").read_bytes()
        assert _upload(site.as_(student), nb).status_code == 303
    _graded(site, config)
    return site


def test_a_student_cannot_read_another_students_attempt_by_url(graded_pair):
    site = graded_pair
    mine = site.platform.book.attempts("tdlsm/hw1", "s00")[0].id
    theirs = site.platform.book.attempts("tdlsm/hw1", "s01")[0].id
    s00 = site.as_("s00")
    assert s00.get(f"{HW1}/attempts/{mine}").status_code == 200
    r = s00.get(f"{HW1}/attempts/{theirs}")
    assert r.status_code == 404
    s01_score = site.platform.book.result("tdlsm/hw1", "s01")["score"]
    assert f"{s01_score:g} /" not in r.text


def test_no_page_takes_a_student_id_from_the_request(graded_pair, course, submissions):
    """Query strings and form fields naming another student change nothing: the session
    says who the student is."""
    site = graded_pair
    s00 = site.as_("s00")
    own = (course / "hw1" / "release" / "s00" / "hw1.ipynb").read_bytes()
    for forged in ("?student_id=s01", "?student=s01&login=s01"):
        got = s00.get(f"{HW1}/notebook{forged}")
        assert got.content == own
        assert "s01" not in s00.get(f"{HW1}/feedback{forged}").text.split("<main")[1]
    nb = (submissions / "s07" / "hw1.ipynb").read_bytes()
    r = post_form(s00, HW1, f"{HW1}/submit", {"student_id": "s01", "login": "s01"},
                  files={"notebook": ("hw1.ipynb", nb)})  # fmt: skip
    assert r.status_code == 303
    jobs = site.platform.queue.jobs_of("tdlsm/hw1", "s01")
    assert len(jobs) == 1  # only s01's own upload; the forged one is s00's
    assert len(site.platform.queue.jobs_of("tdlsm/hw1", "s00")) == 2


def test_a_student_on_no_roster_of_an_assignment_cannot_open_it(site):
    from scalegrade.server.security import add_account

    add_account(site.platform.book.engine, "zed", "student", password=PASSWORD)
    zed = site.as_("zed")
    assert "Homework 1" not in zed.get("/a").text
    for path in (HW1, f"{HW1}/notebook", f"{HW1}/feedback", f"{HW1}/history"):
        assert zed.get(path).status_code == 404, path


@pytest.mark.parametrize(
    "path",
    [
        "/course",
        "/course/tdlsm-hw1",
        "/course/tdlsm-hw1/rows",
        "/course/tdlsm-hw1/stats",
        "/course/tdlsm-hw1/canvas.csv",
        "/mark",
        "/mark/tdlsm-hw1",
        "/mark/tdlsm-hw1/next",
    ],
)
def test_students_cannot_reach_staff_pages(site, path):
    assert site.as_("s00").get(path).status_code == 403


@pytest.mark.parametrize("path", ["extension", "deadline", "reseed", "rekey"])
def test_students_cannot_change_the_course_with_a_valid_token(site, path):
    """A student's own CSRF token does not make them an instructor."""
    form = {"student": "s00", "extra_days": "3", "by": "s00", "why": "please"}
    r = post_form(site.as_("s00"), HW1, f"/course/tdlsm-hw1/{path}", form)
    assert r.status_code == 403


def test_staff_are_not_students(site):
    for login in ("ta", "prof"):
        assert site.as_(login).get(HW1).status_code == 403


def test_signed_out_visitors_are_sent_to_sign_in(site):
    c = site.client()
    for path in ("/a", HW1, f"{HW1}/notebook", f"{HW1}/feedback"):
        r = c.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/signin"), path
    r = c.post(f"{HW1}/submit", data={"csrf": "x"})
    assert r.status_code == 403


def test_a_wrong_password_or_a_forged_session_signs_nobody_in(site):
    c = site.client()
    token = csrf_of(c.get("/signin").text)
    r = c.post("/signin", data={"login": "s00", "password": "guess", "csrf": token})
    assert r.status_code == 401 and "do not match" in r.text
    r = c.post("/signin", data={"login": "nobody", "password": "guess", "csrf": token})
    assert r.status_code == 401
    s00 = site.as_("s00")
    cookie = s00.cookies["scalegrade"]
    forged = site.client()
    forged.cookies.set("scalegrade", cookie[:-4] + ("AAAA" if cookie[-4:] != "AAAA" else "BBBB"))
    assert forged.get("/a").status_code == 303  # the signature fails: nobody


def test_the_session_cookie_is_httponly_and_samesite(site):
    c = site.client()
    token = csrf_of(c.get("/signin").text)
    r = c.post("/signin", data={"login": "s00", "password": PASSWORD, "csrf": token})
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie


def test_sign_in_never_redirects_to_another_site(site):
    c = site.client()
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        token = csrf_of(c.get(f"/signin?next={target}").text)
        r = c.post("/signin", data={"login": "s00", "password": PASSWORD, "csrf": token,
                                    "next": target})  # fmt: skip
        assert r.headers["location"] == "/a", target


def test_csrf_is_enforced_on_every_post_route(site):
    """Every POST route of the app is behind the CSRF check, but the LMS's (/lti/)."""
    from starlette.routing import Route

    from scalegrade.server.app import CSRF_EXEMPT

    posts = [r for r in site.app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]
    assert posts
    for route in posts:
        guarded = getattr(route.endpoint, "csrf_checked", False)
        assert guarded or route.path.startswith(CSRF_EXEMPT), route.path
    s00 = site.as_("s00")
    assert s00.post("/signout", data={"csrf": "forged"}).status_code == 403
    assert s00.get("/a").status_code == 200  # still signed in


@pytest.mark.parametrize(
    "path",
    [
        "/static/../hw1/keys/s00.json",
        "/static/%2e%2e/%2e%2e/hw1/keys/assignment.json",
        "/a/..%2Fhw1%2Fkeys/notebook",
        "/server/session.key",
        "/hw1/keys/s00.json",
    ],
)
def test_keys_secrets_and_uploads_are_never_served(site, path):
    r = site.as_("s00").get(path)
    assert r.status_code in (400, 403, 404)
    assert "answers" not in r.text and "BEGIN" not in r.text


def test_every_response_carries_the_security_headers(site):
    r = site.client().get("/signin")
    csp = r.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff"


def test_an_oversized_upload_is_refused_unread(site, config, course):
    s00 = site.as_("s00")
    big = json.loads((course / "hw1" / "release" / "s00" / "hw1.ipynb").read_text())
    big["cells"][0]["source"] = "x" * (config.upload_max_bytes + 1)
    r = _upload(s00, json.dumps(big).encode())
    assert r.status_code == 413
    assert site.platform.queue.counts() == {}


def test_uploads_are_rate_limited_per_student(site, config, submissions):
    limited = config.model_copy(update={"uploads_per_minute": 2})
    site.platform.config = limited
    nb = (submissions / "s07" / "hw1.ipynb").read_bytes()
    s00 = site.as_("s00")
    assert [_upload(s00, nb).status_code for _ in range(3)] == [303, 303, 429]
    assert _upload(site.as_("s01"), nb).status_code == 303  # another student's are not


def test_passwords_are_salted_scrypt():
    a, b = hash_password("pw"), hash_password("pw")
    assert a != b and a.startswith("scrypt$")
    assert check_password("pw", a) and not check_password("pw ", a)
    assert not check_password("pw", None) and not check_password("pw", "plain")
