"""The platform in Debian's chromium (scalegrade serve, live on loopback with a grading
worker): a student's whole round, a TA marking a free-response part, and the instructor
seeing both in the gradebook and downloading the Canvas CSV, as each clicks it; every page
checked by axe-core's WCAG 2.1 A and AA rules under the platform's own
Content-Security-Policy."""

from __future__ import annotations

import json

import nbformat
import pytest

from scalegrade.server.security import add_account
from tests.browser import test_accessibility
from tests.server import conftest as server
from tests.server.live import live
from tests.server.site import PASSWORD

# the fixtures this test shares: the accessibility tests' axe-core, the server tests' course
WCAG, axe = test_accessibility.WCAG, test_accessibility.axe
config, course, released = server.config, server.course, server.released

STUDENT = "s07"  # the demo's scenarios leave s07 on: honest


def _accounts(app) -> None:
    engine = app.state.platform.book.engine
    add_account(engine, STUDENT, "student", name="Sofia", password=PASSWORD)
    add_account(engine, "ta", "ta", name="Tess TA", password=PASSWORD)
    add_account(engine, "prof", "instructor", name="Prof", password=PASSWORD)


@pytest.fixture
def site(config):
    with live(config, setup=_accounts) as url:
        yield url


def _checked(page, axe_source: str) -> None:
    """No WCAG 2.1 A/AA violation on the page as it is now (axe evaluated through the
    DevTools protocol: the page's CSP forbids inline scripts, and stays on)."""
    page.evaluate(axe_source)
    found = page.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})",
                          WCAG)  # fmt: skip
    violations = [
        f"{page.url}: {v['id']} ({v['impact']}): {v['help']}: "
        + "; ".join(n["target"][0] for n in v["nodes"][:3])
        for v in found["violations"]
    ]
    assert violations == []


def _sign_in(page, url: str, login: str) -> None:
    page.goto(f"{url}/signin")
    page.fill("#login", login)
    page.fill("#password", PASSWORD)
    page.click("button[type=submit] >> text=Sign in")


def _wrong(solutions, tmp_path):
    """The student's solutions with the first answer replaced by 12345 (a parameter count
    off by powers of ten), so that one part is wrong."""
    nb = nbformat.read(solutions, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("scalegrade", {}).get("kind") == "answer")
    cell.source = f"{cell.metadata['scalegrade']['variable']} = 12345.0"
    path = tmp_path / "wrong" / "hw1.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    return path


def _verdict(page) -> str:
    page.wait_for_selector("#status .score", timeout=120_000)
    return page.text_content("#status .score")


def _page(browser):
    """A fresh browser context and page, and the page's errors (console and script)."""
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return context, page, errors


def test_a_semester_round_student_ta_and_instructor(browser, site, course, axe, tmp_path):
    autograded = _student_round(browser, site, course, axe, tmp_path)
    _ta_marks(browser, site, axe)
    _instructor_sees_it(browser, site, axe, autograded + 1)  # the TA's mark counted


def _student_round(browser, site, course, axe, tmp_path) -> float:
    """Sign in, download, upload a wrong answer, read it named, resubmit: every
    autograded part correct.  The score then."""
    context, page, errors = _page(browser)
    try:
        page.goto(f"{site}/signin")
        _checked(page, axe)
        _sign_in(page, site, STUDENT)
        page.wait_for_url(f"{site}/a")
        _checked(page, axe)
        page.click("text=Homework 1")
        _checked(page, axe)
        with page.expect_download() as got:
            page.click("text=Download your notebook")
        downloaded = json.loads(open(got.value.path()).read())
        assert downloaded["metadata"]["scalegrade"]["student_id"] == STUDENT

        solutions = course / "hw1" / "solutions" / STUDENT / "hw1.ipynb"
        page.set_input_files("#notebook", str(_wrong(solutions, tmp_path)))
        page.click("button >> text=Submit")
        first = _verdict(page)
        _checked(page, axe)
        page.click("text=Read your feedback")
        assert page.locator("tr.wrong").count() >= 1  # the wrong part, named
        assert "12,345" in page.text_content("tr.wrong")  # their value, as shown
        _checked(page, axe)

        page.click("text=Back to the assignment")
        page.set_input_files("#notebook", str(solutions))
        page.click("button >> text=Submit")
        page.wait_for_function(
            "old => document.querySelector('#status .score') &&"
            " document.querySelector('#status .score').textContent !== old",
            arg=first,
            timeout=120_000,
        )
        score = float(page.text_content("#status .score").split("/")[0])
        page.click("text=Read your feedback")
        assert page.locator("tr.wrong").count() == 0
        autograded = page.locator("tr.correct").count()
        assert autograded > 0 and page.locator("tr.pending").count() >= 1  # TAs mark those
        page.click("text=All your attempts")
        assert page.locator("text=attempt 2").count() == 1
        _checked(page, axe)
        assert errors == []
        return score
    finally:
        context.close()


def _ta_marks(browser, site, axe) -> None:
    """The TA opens the next unmarked part of the student's and gives it 1 point with
    the keyboard."""
    context, page, errors = _page(browser)
    try:
        _sign_in(page, site, "ta")
        page.wait_for_url(f"{site}/mark")
        _checked(page, axe)
        page.click("text=Mark the next unmarked part of")
        page.wait_for_selector("#mark-form")
        _checked(page, axe)
        assert STUDENT in page.text_content("h1")
        page.press("body", "1")  # a digit: that score, in the score field
        assert page.input_value("#score") == "1"
        page.fill("#comment", "Right idea; say why the bubble shrinks.")
        with page.expect_navigation():
            page.press("#comment", "Control+Enter")  # save, and on to the next unmarked
        assert "Not recorded" not in page.text_content("main")
        assert errors == []
    finally:
        context.close()


def _instructor_sees_it(browser, site, axe, expected: float) -> None:
    """The gradebook shows the student's row at ``expected`` points, and the Canvas CSV
    has the same score."""
    context, page, errors = _page(browser)
    try:
        _sign_in(page, site, "prof")
        page.wait_for_url(f"{site}/course")
        _checked(page, axe)
        page.click("text=Homework 1")
        row = page.locator("#gradebook tr", has=page.locator(f"th:has-text('{STUDENT}')"))
        shown = row.locator("td").first.text_content()
        assert float(shown.split("/")[0]) == expected
        _checked(page, axe)
        with page.expect_download() as got:
            page.click("text=Canvas grade import (CSV)")
        canvas = open(got.value.path(), encoding="utf-8").read()
        line = next(x for x in canvas.splitlines() if STUDENT in x)
        assert f"{expected:g}" in line.split(",")
        page.click("text=Item analysis and fairness")
        _checked(page, axe)
        assert errors == []
    finally:
        context.close()
