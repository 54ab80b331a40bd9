"""The platform in Debian's chromium (scalegrade serve, live on loopback with a grading
worker): a student's whole round, as they click it, every page checked by axe-core's
WCAG 2.1 A and AA rules under the platform's own Content-Security-Policy."""

from __future__ import annotations

import json

import nbformat
import pytest

from scalegrade.server.security import add_account
from tests.browser.test_accessibility import WCAG, axe  # noqa: F401 - the fixture
from tests.server.conftest import config, course, released  # noqa: F401 - fixtures
from tests.server.live import live
from tests.server.site import PASSWORD

STUDENT = "s07"  # the demo's scenarios leave s07 on: honest


def _accounts(app) -> None:
    engine = app.state.platform.book.engine
    add_account(engine, STUDENT, "student", name="Sofia", password=PASSWORD)
    add_account(engine, "ta", "ta", name="Tess TA", password=PASSWORD)
    add_account(engine, "prof", "instructor", name="Prof", password=PASSWORD)


@pytest.fixture
def site(config):  # noqa: F811 - the server's config fixture
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


def test_a_student_downloads_uploads_a_wrong_answer_reads_it_resubmits_and_gets_full_marks(
    browser, site, course, axe, tmp_path  # noqa: F811
):
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
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
            " document.querySelector('#status .score').textContent !== old", arg=first,
            timeout=120_000,
        )
        page.click("text=Read your feedback")
        assert page.locator("tr.wrong").count() == 0
        autograded = page.locator("tr.correct").count()
        assert autograded > 0 and page.locator("tr.pending").count() >= 1  # TAs mark those
        page.click("text=All your attempts")
        assert page.locator("text=attempt 2").count() == 1
        _checked(page, axe)
        assert errors == []
    finally:
        context.close()
