"""A student's session with a self-test page in headless chromium, network cut off.

Open the file offline (every request is recorded; the page makes none), type answers
with units and a known misconception, check, read scores and feedback (the same as the
Python grader's), reload and find everything kept, run the timer, finish, print to PDF.
Screenshots and the PDF are kept in the artifacts folder (see conftest.py).
"""

from __future__ import annotations

import math
import re

import pytest

from autograder.grading.grade import grade_harvest
from generator import bank, selftest

BANK = bank.load()
EXAMS = [
    aid for aid in BANK.assignment_ids() if BANK.assignment(aid).spec.kind in ("exam", "selftest")
] or ["tdlsm/hw1"]


@pytest.fixture(scope="module")
def context(browser):
    ctx = browser.new_context(offline=True, viewport={"width": 1100, "height": 900})
    requests: list[str] = []
    ctx.on("request", lambda r: requests.append(r.url))
    # anything that is not a local file is refused (and recorded above)
    ctx.route(
        "**/*",
        lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort(),
    )
    ctx.requests = requests  # type: ignore[attr-defined]
    yield ctx
    ctx.close()


def _open(context, html: str, path):
    path.write_text(html, encoding="utf-8")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    context.requests.clear()
    page.goto(path.as_uri())
    page.wait_for_function("() => window.ScaleGradeSelfTest !== undefined")
    return page, errors


def _shown(value_si: float, unit: str, si_unit: str) -> str:
    """The value in ``unit``, as many digits as a float has (any tolerance accepts it)."""
    from costmodel.units import to_si

    return repr(value_si / to_si(f"1 {unit}", si_unit)) if unit else repr(value_si)


@pytest.mark.parametrize("aid", EXAMS)
def test_exam_page_works_offline(aid, context, tmp_path, artifacts):
    st = selftest.build(BANK.assignment(aid), selftest.for_seed(1))
    page, errors = _open(context, st.html, tmp_path / "exam.html")
    try:
        key = st.key
        q = key.questions[0]
        section = page.locator("section.question").first
        for a in (a for a in q.answers if a.ask):
            value = _shown(a.value, a.unit, a.si_unit)
            section.locator(f'.part.answer[data-a="{a.id}"] input').fill(value)
        section.locator("button.check").click()
        statuses = section.locator(".verdict").evaluate_all("els => els.map(e => e.dataset.status)")
        assert statuses and set(statuses) == {"correct"}
        assert section.locator("details.solution").is_visible()
        name = aid.replace("/", "-")
        page.screenshot(path=str(artifacts / f"{name}-offline.png"), full_page=False)
        assert not errors, errors
        # the page asked for nothing but itself
        assert context.requests == [(tmp_path / "exam.html").as_uri()]
    finally:
        page.close()


def _pick(key):
    """A question with a part that has a misconception and a unit, for the session."""
    for qi, q in enumerate(key.questions):
        asked = [a for a in q.answers if a.ask]
        for a in asked:
            if a.unit and a.si_unit and a.misconceptions:
                return qi, q, a
    pytest.skip("no part with a unit and a misconception in this assignment")


def test_student_session(context, tmp_path, artifacts):
    aid = "tdlsm/hw1"
    a_ = BANK.assignment(aid)
    st = selftest.build(a_, selftest.for_seed(4))
    key = st.key
    qi, q, target = _pick(key)
    path = tmp_path / "hw1.html"
    page, errors = _open(context, st.html, path)
    section = page.locator(f'section.question[data-q="{qi}"]')
    asked = [a for a in q.answers if a.ask]

    # what the student types: the misconception in the asked unit, a correct answer in
    # another unit of the same kind, a wrong unit, and a blank
    typed: dict[str, str] = {}
    miss = target.misconceptions[0]
    typed[target.id] = _shown(miss.value, target.unit, target.si_unit)
    others = [a for a in asked if a is not target]
    alternative = {"byte": "GiB", "s": "h", "FLOP": "PFLOP", "FLOP/s": "PFLOP/s", "hour": "days"}
    for a in others[:1]:
        unit = alternative.get(a.si_unit)
        typed[a.id] = f"{_shown(a.value, unit, a.si_unit)} {unit}" if unit else repr(a.value)
    for a in others[1:2]:
        typed[a.id] = "21 kg"
    for a_id, text in typed.items():
        section.locator(f'.part.answer[data-a="{a_id}"] input').type(text, delay=5)
    page.screenshot(path=str(artifacts / "session-1-typed.png"))
    section.locator("button.check").click()

    verdicts = {
        el["part"]: el
        for el in section.locator(".part.answer").evaluate_all(
            """els => els.map(e => ({part: e.dataset.a,
                status: e.querySelector('.verdict').dataset.status,
                score: Number(e.querySelector('.verdict').dataset.score),
                misconception: e.querySelector('.verdict').dataset.misconception,
                feedback: e.querySelector('.feedback').textContent}))"""
        )
    }
    # the Python grader on the same typed text
    answers = {a.variable: selftest.harvested(typed.get(a.id, "")) for a in asked}
    result = grade_harvest(key, {"answers": answers}, policy=a_.policy, checks={}, reveal=False)
    python = {g.verdict.part: g.verdict for g in result.parts if g.question == q.id}
    for a in asked:
        got, want = verdicts[a.id], python[a.id]
        assert got["status"] == want.status, (a.id, got, want)
        assert math.isclose(got["score"], want.score, abs_tol=1e-9)
        assert (got["misconception"] or None) == want.misconception
    assert verdicts[target.id]["status"] in ("misconception", "carried")
    assert miss.feedback[:40] in verdicts[target.id]["feedback"]
    if others:
        assert verdicts[others[0].id]["status"] == "correct"
    if len(others) > 1:
        assert verdicts[others[1].id]["status"] == "wrong_unit"
    assert section.locator("details.solution .solution-body").inner_html().strip()
    section.locator("details.solution summary").click()
    section.screenshot(path=str(artifacts / "session-2-checked.png"))
    question_score = float(section.locator(".qscore").get_attribute("data-score"))

    # the timer runs, pauses, and survives a reload
    assert page.locator("#time-left").inner_text() == "2:00:00"
    page.click("#start")
    page.wait_for_timeout(1300)
    page.click("#pause")
    left = page.locator("#time-left").inner_text()
    assert re.fullmatch(r"1:59:5\d", left), left

    page.reload()
    page.wait_for_function("() => window.ScaleGradeSelfTest !== undefined")
    section = page.locator(f'section.question[data-q="{qi}"]')
    for a_id, text in typed.items():
        assert section.locator(f'.part.answer[data-a="{a_id}"] input').input_value() == text
    assert (
        section.locator(f'.part.answer[data-a="{target.id}"] .verdict').get_attribute("data-status")
        == verdicts[target.id]["status"]
    )
    assert page.locator("#time-left").inner_text() == left
    assert page.locator("#start").inner_text() == "Resume"

    # finish grades everything
    page.click("#finish")
    total = page.locator("#summary .total")
    assert total.is_visible()
    assert math.isclose(float(total.get_attribute("data-score")), question_score, abs_tol=1e-9)
    assert float(total.get_attribute("data-max")) == pytest.approx(
        sum(a.points for q_ in key.questions for a in q_.answers if a.ask)
    )
    page.screenshot(path=str(artifacts / "session-3-finished.png"), full_page=False)

    # print: a paper exam, no feedback, solutions or controls
    page.emulate_media(media="print")
    hidden = page.evaluate(
        """() => ['.bar', '.verdict', '.feedback', 'details.solution', 'button.check', '#summary']
            .map(s => document.querySelector(s))
            .every(e => !e || getComputedStyle(e).display === 'none')"""
    )
    assert hidden
    page.screenshot(path=str(artifacts / "session-4-print.png"))
    pdf = artifacts / "session-print.pdf"
    page.pdf(path=str(pdf), format="A4")
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF") and data.count(b"/Type /Page") >= 2
    page.emulate_media(media="screen")

    # clearing starts over
    page.once("dialog", lambda d: d.accept())
    with page.expect_navigation():
        page.click("#clear")
    page.wait_for_function("() => window.ScaleGradeSelfTest !== undefined")
    section = page.locator(f'section.question[data-q="{qi}"]')
    assert section.locator(f'.part.answer[data-a="{target.id}"] input').input_value() == ""
    assert page.locator("#time-left").inner_text() == "2:00:00"
    assert not errors, errors
    assert all(u == path.as_uri() for u in context.requests), context.requests
    page.close()
