"""The marking pages (scalegrade/server/pages/marking.py): a TA marks the parts a person
grades one at a time, checked as `scalegrade marks import` checks a sheet, and the mark
enters the student's standing and feedback and survives a regrade of the same answer."""

from __future__ import annotations

import json
import re
from html import unescape
from urllib.parse import urlsplit

import pytest

from autograder.semester.marks import answer_digest
from autograder.semester.standing import REMARK
from scalegrade.server.pages.marking import items, next_pending, url
from tests.server.site import csrf_of
from tests.server.test_student_pages import _graded, _upload

HW1 = "tdlsm/hw1"
MARK = "/mark/tdlsm-hw1"
FITS = ("s00", "budgets/model-budget", "fits")  # the demo's first free-response part (2 points)


def _submitted(site, config, notebook: bytes, student: str = "s00") -> dict:
    """``notebook`` uploaded by ``student`` and graded; their standing."""
    assert _upload(site.as_(student), notebook).status_code == 303
    _graded(site, config)
    return site.platform.book.result(HW1, student)


def _verdict(doc: dict, question: str, part: str) -> dict:
    return next(
        g["verdict"]
        for g in doc["parts"]
        if g["question"] == question and g["verdict"]["part"] == part
    )


def _with_answer(notebook: bytes, part: str, text: str) -> bytes:
    """The notebook with another answer in ``part``'s free-response cell."""
    doc = json.loads(notebook)
    cell = next(
        c for c in doc["cells"] if c.get("metadata", {}).get("scalegrade", {}).get("answer") == part
    )
    cell["source"] = text
    return json.dumps(doc).encode()


def _page_of(site, where: tuple[str, str, str]) -> str:
    served = site.platform.course.assignments[HW1]
    item = next(i for i in items(site.platform.book.results(HW1)) if i.where == where)
    return url(served, item)


def _mark(client, page: str, score: str, comment: str = "", html: str | None = None):
    """Send the marking form of ``page`` (as shown then: ``html``) with a score."""
    shown = html if html is not None else client.get(page).text
    fields = dict(re.findall(r'name="(answer|last_mark)" value="([^"]*)"', shown))
    data = {**fields, "score": score, "comment": comment, "csrf": csrf_of(shown)}
    return client.post(page, data=data)


def test_a_ta_marks_a_free_response_part_and_the_student_reads_it(site, config, submissions):
    notebook = (submissions / "s00" / "hw1.ipynb").read_bytes()
    before = _submitted(site, config, notebook)
    fits = _verdict(before, *FITS[1:])
    assert fits["status"] == "pending" and fits["points"] == 2.0  # the bank's points
    to_mark = sum(g["verdict"]["status"] == "pending" for g in before["parts"])
    ta = site.as_("ta")
    overview = ta.get("/mark").text
    assert re.search(rf"<td>{to_mark}</td>\s*<td>0</td>", overview)  # to mark, marked

    first = ta.get(f"{MARK}/next")
    assert first.status_code == 303 and first.headers["location"] == _page_of(site, FITS)
    shown = ta.get(first.headers["location"]).text
    assert unescape(fits["given"].strip()) in unescape(shown)  # the answer as written
    assert "Score, from 0 to 2" in shown and 'src="/static/marking.js"' in shown
    key = site.platform.course.assignments[HW1].keys.key("s00")
    rubric = next(r.rubric for q in key.questions for r in q.free_response if r.id == "fits")
    assert rubric and unescape(rubric) in unescape(shown)

    saved = _mark(ta, first.headers["location"], "1,5", "One remedy of two.", shown)
    assert saved.status_code == 303
    order = [i for i in items([before]) if i.pending]
    assert saved.headers["location"] == url(site.platform.course.assignments[HW1], order[1])

    after = site.platform.book.result(HW1, "s00")
    marked = _verdict(after, *FITS[1:])
    assert (marked["status"], marked["score"], marked["marked_by"]) == ("marked", 1.5, "ta")
    assert after["score"] == pytest.approx(before["score"] + 1.5)  # autograded + marked
    (mark,) = site.platform.book.marks(HW1, "s00")
    assert (mark.marker, mark.source) == ("ta", "the marking page")
    assert mark.answer_sha256 == answer_digest(fits["given"].strip())
    feedback = site.as_("s00").get("/a/tdlsm-hw1/feedback").text
    assert "One remedy of two." in feedback and "1.5 / 2" in feedback
    assert re.search(rf"<td>{to_mark - 1}</td>\s*<td>1</td>", ta.get("/mark").text)

    again = _submitted(site, config, notebook)  # the same notebook: graded again
    assert len(site.platform.book.attempts(HW1, "s00")) == 2
    assert _verdict(again, *FITS[1:])["status"] == "marked"
    assert again["score"] == pytest.approx(after["score"])

    changed = _submitted(site, config, _with_answer(notebook, "fits", "It fits: 70 GB."))
    pending = _verdict(changed, *FITS[1:])
    assert (pending["status"], pending["feedback"]) == ("pending", REMARK)
    assert changed["score"] == pytest.approx(before["score"])
    assert "before the student's answer changed" in ta.get(_page_of(site, FITS)).text


BAD_SCORES = {  # the part has 2 points; the messages are those of `scalegrade marks import`
    "-1": "score -1 is outside 0 to 2, the part&#39;s points",
    "2.5": "score 2.5 is outside 0 to 2, the part&#39;s points",
    "abc": "score &#39;abc&#39; is not a number",
    "NaN": "score &#39;NaN&#39; is not a number",
    "inf": "score &#39;inf&#39; is not a number",
    "1,2,3": "score &#39;1,2,3&#39; is not a number",
    "  ": "no score given",
}


def test_a_bad_score_is_refused_with_what_to_fix_and_nothing_recorded(site, config, submissions):
    before = _submitted(site, config, (submissions / "s00" / "hw1.ipynb").read_bytes())
    ta = site.as_("ta")
    page = _page_of(site, FITS)
    for score, said in BAD_SCORES.items():
        refused = _mark(ta, page, score, "kept as typed")
        assert refused.status_code == 400, score
        assert f"Not recorded: {said}" in refused.text, (score, refused.text[-2000:])
        assert "kept as typed" in refused.text  # what the TA typed is not lost
    digest = re.search(r'name="answer" value="([^"]*)"', ta.get(page).text).group(1)
    assert ta.post(page, data={"score": "2", "answer": digest}).status_code == 403  # no token
    assert site.platform.book.marks(HW1, "s00") == []
    assert site.platform.book.result(HW1, "s00") == before


def test_an_answer_changed_since_the_page_was_shown_is_refused(site, config, submissions):
    notebook = (submissions / "s00" / "hw1.ipynb").read_bytes()
    _submitted(site, config, notebook)
    ta = site.as_("ta")
    page = _page_of(site, FITS)
    shown = ta.get(page).text  # the TA reads the first answer...
    hostile = "<script>alert('x')</script> It fits."
    _submitted(site, config, _with_answer(notebook, "fits", hostile))  # ...the student resubmits
    refused = _mark(ta, page, "2", html=shown)
    assert refused.status_code == 400
    assert "the student submitted again since this page was shown" in refused.text
    assert site.platform.book.marks(HW1, "s00") == []
    assert "<script>alert" not in refused.text  # the answer is shown escaped
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; It fits." in refused.text
    assert _mark(ta, page, "2", html=refused.text).status_code == 303  # the new answer read
    assert _verdict(site.platform.book.result(HW1, "s00"), *FITS[1:])["score"] == 2.0


def test_a_part_marked_by_someone_else_meanwhile_is_not_overwritten_unread(
    site, config, submissions
):
    _submitted(site, config, (submissions / "s00" / "hw1.ipynb").read_bytes())
    ta, prof = site.as_("ta"), site.as_("prof")  # an instructor marks too
    page = _page_of(site, FITS)
    shown = ta.get(page).text
    assert _mark(prof, page, "2", "Both remedies.").status_code == 303
    refused = _mark(ta, page, "1", html=shown)
    assert refused.status_code == 400
    assert "prof marked this part (2 points) after this page was shown" in refused.text
    assert [m.marker for m in site.platform.book.marks(HW1, "s00")] == ["prof"]
    assert _mark(ta, page, "1", html=refused.text).status_code == 303  # read, then replaced
    assert _verdict(site.platform.book.result(HW1, "s00"), *FITS[1:])["marked_by"] == "ta"


def test_next_unmarked_follows_the_parts_in_order_and_comes_round(site, config, submissions):
    doc = _submitted(site, config, (submissions / "s00" / "hw1.ipynb").read_bytes())
    served = site.platform.course.assignments[HW1]
    order = [i for i in items([doc]) if i.pending]
    assert [i.where for i in order][0] == FITS and len(order) > 2
    ta = site.as_("ta")
    shown = ta.get(url(served, order[0])).text
    skip = re.search(r'id="next-unmarked" href="([^"]+)"', shown).group(1)
    assert unescape(skip) == url(served, order[1])
    last = url(served, order[-1])
    assert _mark(ta, last, "0").headers["location"] == url(served, order[0])  # round
    assert next_pending(items([site.platform.book.result(HW1, "s00")]), None) == order[0]
    for item in order[:-1]:
        _mark(ta, url(served, item), "1")
    done = ta.get(f"{MARK}/next")
    assert done.headers["location"] == f"{MARK}?all=marked"
    assert "Every part is marked" in ta.get(done.headers["location"]).text


def test_students_and_strangers_cannot_mark(site):
    page = f"{MARK}/part/s00?question=budgets/model-budget&part=fits"
    s00 = site.as_("s00")
    for path in ("/mark", MARK, f"{MARK}/next", page):
        assert s00.get(path).status_code == 403, path
        assert urlsplit(site.client().get(path).headers["location"]).path == "/signin"
    token = csrf_of(s00.get("/a").text)  # a real session token: only the role stops it
    forged = s00.post(page, data={"score": "2", "csrf": token, "answer": "", "last_mark": "0"})
    assert forged.status_code == 403
    assert site.platform.book.marks(HW1, "s00") == []
    ta = site.as_("ta")
    assert ta.get(f"{MARK}/part/nobody?question=x&part=y").status_code == 404
    assert ta.get(page).status_code == 404  # nothing graded: no part to mark
    assert ta.get("/mark/tdlsm-hw9/next").status_code == 404


def test_the_shortcuts_script_is_served_from_the_site(site):
    got = site.client().get("/static/marking.js")
    assert got.status_code == 200 and "javascript" in got.headers["content-type"]
    assert "requestSubmit" in got.text and "single-keys" in got.text
