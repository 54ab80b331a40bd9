"""Every page ScaleGrade writes for people, in Debian's chromium, checked by axe-core's
WCAG 2.1 A and AA rules: the instructor report (with its item analysis and fairness plots),
a student's feedback, the self-test page, an exam sheet and a TA key.

axe-core comes from npm: ``.ci/run`` installs it and sets ``$SCALEGRADE_AXE`` to its
``axe.min.js``; without it the test is skipped (a failure under
``SCALEGRADE_REQUIRE_BROWSER``).  The report must also render without a console error and
give every plot a title, a text alternative and axis labels.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autograder.analysis.item_report import analysis, section
from autograder.semester import outputs
from autograder.semester.gradebook import result_to_json
from contract import Student
from generator import bank, selftest
from generator.release import release
from generator.roster import parse
from scalegrade import cohort
from tests.browser.conftest import _unavailable
from tests.test_cohort import _bank

AXE_ENV = "SCALEGRADE_AXE"
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


@pytest.fixture(scope="module")
def axe() -> str:
    path = os.environ.get(AXE_ENV)
    if not path or not Path(path).is_file():
        _unavailable(f"axe-core is not installed (npm install axe-core; ${AXE_ENV}=axe.min.js)")
    return Path(path).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pages")
    # a report with something flagged: the unfair question of tests/test_cohort.py
    unfair = _bank(root / "bank", unfair=True).assignment("tdlsm/one")
    students = [Student(id=f"s{i:03d}", name=f"Student {i}") for i in range(300)]
    graded, keys = cohort.answered(unfair, students)
    results = [result_to_json(r) for r in graded]
    found = analysis(results, keys)
    assert any(e.flagged for e in found.fairness.effects)
    out = {
        "report": outputs.instructor_report(
            results, title="tdlsm/one", signals={}, analysis=section(found)
        ),
        "feedback": outputs.feedback_html(results[0], title="tdlsm/one — s000", solutions=None),
    }
    exam = bank.load().assignment("dl/exam")
    out["selftest"] = selftest.build(exam, selftest.for_seed(3)).html
    release(exam, parse("student_id,name,email\nana,Ana Lima,ana@x\n"), secret=b"a" * 32,
            out=root / "exam")  # fmt: skip
    out["exam sheet"] = (root / "exam" / "sheets" / "ana.html").read_text(encoding="utf-8")
    out["TA key"] = (root / "exam" / "ta_keys" / "ana.html").read_text(encoding="utf-8")
    paths = {}
    for name, page in out.items():
        paths[name] = root / f"{name.replace(' ', '-')}.html"
        paths[name].write_text(page, encoding="utf-8")
    return paths


def _open(browser, path: Path):
    context = browser.new_context(offline=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(path.as_uri())
    return context, page, errors


@pytest.mark.parametrize("name", ["report", "feedback", "selftest", "exam sheet", "TA key"])
def test_the_page_passes_wcag_2_1_a_and_aa(name, pages, browser, axe):
    context, page, errors = _open(browser, pages[name])
    try:
        page.add_script_tag(content=axe)
        found = page.evaluate(
            "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", WCAG
        )
        violations = [
            f"{v['id']} ({v['impact']}): {v['help']}: "
            + "; ".join(n["target"][0] for n in v["nodes"][:3])
            for v in found["violations"]
        ]
        assert violations == []
        assert errors == []
    finally:
        context.close()


def test_every_plot_of_the_report_has_a_title_a_text_alternative_and_axes(pages, browser):
    context, page, errors = _open(browser, pages["report"])
    try:
        plots = page.locator("svg")
        assert plots.count() >= 6  # scores, success, misconceptions, item scatter, ...
        for i in range(plots.count()):
            svg = plots.nth(i)
            assert svg.get_attribute("role") == "img"
            labelled = svg.get_attribute("aria-labelledby").split()
            title, desc = (page.locator(f"[id='{x}']").text_content() for x in labelled)
            assert title.strip() and desc.strip()
            texts = svg.locator(":scope > text").evaluate_all("els => els.map(e => e.textContent)")
            assert any(t.strip() for t in texts)  # axis labels drawn as text
        flagged = page.locator("figcaption", has_text="mean score share against inner_steps")
        assert flagged.count() == 1  # the flagged parameter's effect plot
        assert errors == []
    finally:
        context.close()
