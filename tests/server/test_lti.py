"""ScaleGrade as an LTI 1.3 tool (scalegrade/server/lti/, pages/lti.py), end to end
against a real local platform (tests/server/lms.py: lti1p3platform with its own keys),
each served by uvicorn on 127.0.0.1, and a browser (httpx) that follows the redirects
and the self-posting launch form as a browser does.

The people of the LMS (``USERS``): ana, a learner whose SIS id is s00 (on the roster);
zed, a learner whose SIS id s99 is on no roster; mal, another LMS person who also claims
s00; tess, a TA; noid, a learner whose roster id Canvas could not fill in.
"""

from __future__ import annotations

import dataclasses
import html
import json
import logging
import re
import stat
import threading
import time
from dataclasses import dataclass

import httpx
import jwt
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from scalegrade.server.config import load
from scalegrade.server.lti.config import KEY_FILE, LtiConfigError, load_tool, tool_of
from scalegrade.server.lti.identity import role_of
from scalegrade.server.lti.passback import SCORE_SCOPE, Poster, Score, wanted
from scalegrade.server.store import Account, LtiLaunchData, LtiLink
from scalegrade.server.worker import Worker
from tests.server.lms import (
    INSTRUCTOR,
    LEARNER,
    TEACHING_ASSISTANT,
    Link,
    Lms,
    User,
    free_port,
    private_pem,
    serving,
)
from tests.server.site import csrf_of

HW1 = "/a/tdlsm-hw1"
USERS = {
    "ana": User("lms-ana", "Ana Learner", [LEARNER], sis_id="s00"),
    "zed": User("lms-zed", "Zed Outsider", [LEARNER], sis_id="s99"),
    "mal": User("lms-mal", "Mal Other", [LEARNER], sis_id="s00"),
    "tess": User("lms-tess", "Tess Assistant", [INSTRUCTOR, TEACHING_ASSISTANT], sis_id="t01"),
    "noid": User("lms-noid", "No Id", [LEARNER], custom={"roster_id": "$Canvas.user.sisSourceId"}),
}
_FORM = re.compile(r'<form method="post" action="([^"]+)">(.*?)</form>', re.S)
_FIELD = re.compile(r'name="([^"]+)" value="([^"]*)"')


@dataclass
class Rig:
    """The LMS and ScaleGrade, each on its port, registered with each other."""

    lms: Lms
    tool_url: str
    app: object

    @property
    def engine(self):
        return self.app.state.platform.book.engine

    @property
    def book(self):
        return self.app.state.platform.book

    def browser(self) -> httpx.Client:
        return httpx.Client(follow_redirects=False, timeout=30)

    def launch_form(self, browser, user: str, link: str = "hw1") -> tuple[str, dict]:
        """Open ``link`` in the LMS as ``user`` up to the launch form it posts to the tool:
        the form's action and fields."""
        r = browser.get(f"{self.lms.url}/course/links/{link}", params={"user": user})
        assert r.status_code == 302, r.text
        r = browser.get(r.headers["location"])  # the tool's OIDC login
        assert r.status_code == 302, r.text
        r = browser.get(r.headers["location"])  # the LMS's authorization: the signed launch
        assert r.status_code == 200, r.text
        action, fields = _FORM.search(r.text).groups()
        return html.unescape(action), {k: html.unescape(v) for k, v in _FIELD.findall(fields)}

    def launch(self, browser, user: str, link: str = "hw1") -> httpx.Response:
        action, fields = self.launch_form(browser, user, link)
        return browser.post(action, data=fields)

    def account(self, login: str) -> Account | None:
        with Session(self.engine) as s:
            return s.scalar(select(Account).where(Account.login == login))


@pytest.fixture
def rig(course, tmp_path, request):
    lms_port, tool_port = free_port(), free_port()
    tool_url = f"http://127.0.0.1:{tool_port}"
    lms = Lms(lms_port, tool_url)
    lms.add_lineitem("hw1-item", label="Homework 1", scoreMaximum=10, resourceId="tdlsm/hw1")
    lms.add_lineitem("plain-item", label="Homework 1", scoreMaximum=10)  # no resourceId
    lms.links = {
        "hw1": Link({"assignment": "tdlsm/hw1"}, "hw1-item"),  # Canvas/Moodle custom parameter
        "by-item": Link({}, "hw1-item"),  # the line item's resourceId names it
        "by-url": Link({}, "plain-item", query="assignment=tdlsm-hw1"),  # Canvas's tool URL
        "hw9": Link({"assignment": "tdlsm/hw9"}, "hw1-item"),  # not served
    }
    lms.users = dict(USERS)
    settings = {"platforms": {lms.url: lms.tool_entry()}, **getattr(request, "param", {})}
    path = tmp_path / "lti.json"
    path.write_text(json.dumps(settings))
    config = load(course, workers=0, uploads_per_minute=100, lti=path, port=tool_port)
    from scalegrade.server.app import create_app

    app = create_app(config)
    with serving(lms.app, lms_port), serving(app, tool_port):
        yield Rig(lms, tool_url, app)
    app.state.platform.book.close()


def _wait(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _upload(rig: Rig, browser, notebook: bytes) -> None:
    token = csrf_of(browser.get(rig.tool_url + HW1).text)
    r = browser.post(rig.tool_url + HW1 + "/submit", data={"csrf": token},
                     files={"notebook": ("hw1.ipynb", notebook)})  # fmt: skip
    assert r.status_code == 303, r.text


def _graded(rig: Rig) -> None:
    _wait(lambda: not {"queued", "running"} & set(rig.app.state.platform.queue.counts()))


def _expected(doc: dict) -> tuple[float, float, str]:
    """What the gradebook's standing says the LMS must get (lti/passback.py's rule)."""
    pending = any(g["verdict"]["status"] == "pending" for g in doc["parts"])
    return doc["score"], doc["max_score"], "PendingManual" if pending else "FullyGraded"


def _posted(score: dict) -> tuple[float, float, str]:
    return score["scoreGiven"], score["scoreMaximum"], score["gradingProgress"]


def test_a_learner_launched_from_the_lms_is_graded_and_their_score_goes_back(
    rig, submissions, caplog
):
    caplog.set_level(logging.WARNING, logger="scalegrade.server.lti")
    browser = rig.browser()
    r = rig.launch(browser, "ana")
    assert r.status_code == 303 and r.headers["location"] == HW1, r.text
    page = browser.get(rig.tool_url + HW1)
    assert page.status_code == 200 and "Homework 1" in page.text
    ana = rig.account("s00")  # her roster id, from lis.person_sourcedid
    assert (ana.role, ana.lti_issuer, ana.lti_subject) == ("student", rig.lms.url, "lms-ana")
    with Session(rig.engine) as s:
        link = s.scalar(select(LtiLink))
    assert (link.assignment, link.student_id, link.lti_user) == ("tdlsm/hw1", "s00", "lms-ana")
    assert link.lineitem == rig.lms.lineitem_url("hw1-item")
    assert SCORE_SCOPE in json.loads(link.scope)

    rig.lms.fail_scores = 1  # the LMS's first answer is a 500: retried, not lost
    poster = Poster(rig.engine, tool_of(rig.app), every=0.05, first_retry=0.3).start()
    worker = Worker(rig.app.state.platform.config, "lti-worker")
    stop = threading.Event()
    grading = threading.Thread(target=worker.run, args=(stop,))
    grading.start()
    try:
        _upload(rig, browser, (submissions / "s07" / "hw1.ipynb").read_bytes())
        _graded(rig)
        _wait(lambda: len(rig.lms.scores) == 1)
        first = rig.book.result("tdlsm/hw1", "s00")
        item, score = rig.lms.scores[0]
        assert item == "hw1-item" and score["userId"] == "lms-ana"
        assert _posted(score) == _expected(first)
        assert score["activityProgress"] == "Completed"
        assert "not posted (try 1" in caplog.text  # the failure was logged

        # The same standing again (the same notebook, graded again): nothing new posted.
        _upload(rig, browser, (submissions / "s07" / "hw1.ipynb").read_bytes())
        _graded(rig)
        assert rig.book.result("tdlsm/hw1", "s00")["score"] == first["score"]
        assert poster.run_once() == 0 and len(rig.lms.scores) == 1

        # A different standing (s00's own notebook, for her own variant) posts once more;
        # then s07's again (the first standing's score): once more.
        _upload(rig, browser, (submissions / "s00" / "hw1.ipynb").read_bytes())
        _graded(rig)
        second = rig.book.result("tdlsm/hw1", "s00")
        assert second["score"] > first["score"]  # s07's answers are for s07's variant
        _wait(lambda: len(rig.lms.scores) == 2)
        assert _posted(rig.lms.scores[1][1]) == _expected(second)
        _upload(rig, browser, (submissions / "s07" / "hw1.ipynb").read_bytes())
        _graded(rig)
        _wait(lambda: len(rig.lms.scores) == 3)
        assert _posted(rig.lms.scores[2][1]) == _expected(first)
    finally:
        poster.stop()
        stop.set()
        grading.join()
        worker.close()

    # score = "best": the best standing seen (the second) goes back, once.
    tool = tool_of(rig.app)
    best = dataclasses.replace(tool, settings=tool.settings.model_copy(update={"score": "best"}))
    assert Poster(rig.engine, best).run_once() == 1
    assert _posted(rig.lms.scores[3][1]) == _expected(second)
    assert Poster(rig.engine, best).run_once() == 0


def test_forged_replayed_and_misaddressed_launches_are_refused(rig):
    browser = rig.browser()
    action, fields = rig.launch_form(browser, "ana")
    token = fields["id_token"]
    header, claims = (
        jwt.get_unverified_header(token),
        jwt.decode(token, options={"verify_signature": False}),
    )
    forged = jwt.encode(claims, private_pem(), algorithm="RS256", headers={"kid": header["kid"]})
    r = browser.post(action, data={**fields, "id_token": forged})  # signed with another key
    assert r.status_code == 403 and "could not be checked" in r.text
    assert "Signature verification failed" in html.unescape(r.text)

    action, fields = rig.launch_form(browser, "ana")
    assert browser.post(action, data=fields).status_code == 303  # the real one signs in
    replay = browser.post(action, data=fields)  # the same state and token again
    assert replay.status_code == 403 and "used already" in replay.text
    _, fresh = rig.launch_form(browser, "ana")  # a new login's state, the old token's nonce
    r = browser.post(action, data={**fresh, "id_token": fields["id_token"]})
    assert r.status_code == 403 and "Invalid Nonce" in r.text

    rig.lms.tamper = {"aud": "another-tool"}  # a token the LMS signed for another tool
    r = rig.launch(browser, "ana")
    assert r.status_code == 403 and "Client id not registered" in r.text
    rig.lms.tamper = {"aud": ["scalegrade-tool", "another-tool"], "azp": "another-tool"}
    r = rig.launch(browser, "ana")  # ours among several audiences, but authorized for another
    assert r.status_code == 403 and "azp is not ours" in r.text
    rig.lms.tamper = {"https://purl.imsglobal.org/spec/lti/claim/deployment_id": "elsewhere"}
    r = rig.launch(browser, "ana")
    assert r.status_code == 403 and "Unable to find deployment" in r.text
    rig.lms.tamper = {}
    rig.lms.expires_in = -3600  # signed an hour too late
    r = rig.launch(browser, "ana")
    assert r.status_code == 403 and "Signature has expired" in r.text
    assert browser.get(rig.tool_url + HW1).status_code == 303  # refused: nobody signed in
    with Session(rig.engine) as s:  # every login's state was used, once
        assert s.scalar(select(func.count()).select_from(LtiLaunchData)
                        .where(LtiLaunchData.name.like("%state-%"))) == 0  # fmt: skip


def test_a_learner_on_no_roster_is_refused_and_nothing_is_made(rig):
    with Session(rig.engine) as s:
        accounts = s.scalar(select(func.count(Account.id)))
    browser = rig.browser()
    r = rig.launch(browser, "zed")
    assert r.status_code == 403 and "s99 is on no roster of this course" in r.text
    r = rig.launch(browser, "noid")  # "$Canvas.user.sisSourceId": Canvas had no SIS id
    assert r.status_code == 403 and "sent no roster id" in r.text
    with Session(rig.engine) as s:
        assert s.scalar(select(func.count(Account.id))) == accounts
        assert s.scalar(select(func.count(LtiLink.id))) == 0


def test_the_lti_identity_keeps_its_account_and_never_takes_another(rig):
    browser = rig.browser()
    assert rig.launch(browser, "ana").status_code == 303
    rig.lms.users["ana"].sis_id = "s01"  # the LMS's claims change: still the same account
    assert rig.launch(browser, "ana").status_code == 303
    assert rig.account("s01") is None and rig.account("s00").lti_subject == "lms-ana"
    r = rig.launch(rig.browser(), "mal")  # another LMS identity claiming s00
    assert r.status_code == 403 and "bound to another LMS identity" in r.text
    assert rig.account("s00").lti_subject == "lms-ana"

    tess = rig.browser()  # Instructor + its TeachingAssistant sub-role, as Canvas sends a TA
    r = rig.launch(tess, "tess")
    assert r.status_code == 303 and r.headers["location"] == "/mark"
    assert rig.account("t01").role == "ta"
    rig.lms.users["tess"].roles = [LEARNER]  # staff never becomes a student by a launch
    r = rig.launch(tess, "tess")
    assert r.status_code == 403 and "is a ta's" in html.unescape(r.text)


def test_the_link_names_the_assignment_by_resource_id_or_url_and_the_login_may_be_posted(rig):
    browser = rig.browser()
    r = browser.get(f"{rig.lms.url}/course/links/by-item", params={"user": "ana"})
    query = dict(httpx.URL(r.headers["location"]).params)
    r = browser.post(rig.tool_url + "/lti/login", data=query)  # Canvas posts the login
    assert r.status_code == 302, r.text
    r = browser.get(r.headers["location"])
    action, fields = _FORM.search(r.text).groups()
    data = {k: html.unescape(v) for k, v in _FIELD.findall(fields)}
    r = browser.post(html.unescape(action), data=data)
    assert r.status_code == 303 and r.headers["location"] == HW1  # from resourceId tdlsm/hw1
    r = rig.launch(rig.browser(), "ana", link="by-url")
    assert r.status_code == 303 and r.headers["location"] == HW1  # from the target link URI
    r = rig.launch(rig.browser(), "ana", link="hw9")
    assert r.status_code == 404 and "tdlsm/hw9" in r.text and "tdlsm/hw1" in r.text


@pytest.mark.parametrize("rig", [{"state_cookie": "required"}], indirect=True)
def test_a_required_state_cookie_must_come_from_the_browser_that_logged_in(rig):
    browser = rig.browser()
    action, fields = rig.launch_form(browser, "ana")
    other = rig.browser()  # login CSRF: the launch posted from a browser that did not start it
    r = other.post(action, data=fields)
    assert r.status_code == 403 and "did not start this launch" in r.text
    assert rig.launch(browser, "ana").status_code == 303


def test_the_jwks_serves_the_public_key_only_and_the_private_key_is_the_owners(rig):
    keys = httpx.get(rig.tool_url + "/lti/jwks").json()["keys"]
    assert len(keys) == 1 and keys[0]["kty"] == "RSA" and keys[0]["kid"]
    assert not {"d", "p", "q", "dp", "dq", "qi"} & set(keys[0])
    config = rig.app.state.platform.config
    key_file = config.data_dir / KEY_FILE  # made on first use, its owner's only
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert load_tool(config).public_pem == tool_of(rig.app).public_pem  # kept


@pytest.mark.parametrize(
    ("roles", "role"),
    [
        ([LEARNER], "student"),
        ([INSTRUCTOR], "instructor"),
        ([INSTRUCTOR, TEACHING_ASSISTANT], "ta"),
        (["http://purl.imsglobal.org/vocab/lis/v2/membership#Mentor"], "ta"),
        (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator"], "instructor"),
        (["Learner"], "student"),
        (["http://purl.imsglobal.org/vocab/lis/v2/institution/person#Student"], None),
        ([], None),
    ],
)
def test_lti_roles_map_to_the_platforms(roles, role):
    assert role_of(roles) == role


def test_best_keeps_the_best_standing_seen_and_latest_the_latest():
    high = Score(8.0, 10.0, "FullyGraded")
    low = Score(5.0, 10.0, "FullyGraded")
    marked = Score(8.0, 10.0, "PendingManual")
    assert wanted("latest", low, high) == low
    assert wanted("best", low, high) == high
    assert wanted("best", marked, high) == marked  # same score, progress changed
    assert wanted("best", high, None) == high


def test_a_bad_tool_configuration_names_the_file_and_the_setting(config, tmp_path):
    path = tmp_path / "lti.json"
    cases = {
        "{not json": "not JSON",
        json.dumps({"platforms": {}}): "setting 'platforms'",
        json.dumps({"platforms": {"https://lms": {"client_id": "x"}}}): "auth_login_url",
        json.dumps({"platforms": {"https://lms": {
            "client_id": "x", "auth_login_url": "u", "auth_token_url": "t",
            "deployment_ids": ["d"], "key_set_url": "k"}}, "score": "highest"}): "'score'",
    }  # fmt: skip
    for text, said in cases.items():
        path.write_text(text)
        with pytest.raises(LtiConfigError, match=re.escape(said)) as err:
            load_tool(config.model_copy(update={"lti": path}))
        assert str(path) in str(err.value)
