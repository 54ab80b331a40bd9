"""Self-test pages (Python side): whose numbers, the input syntax, unit tables, the
compiled carried formulas, one self-contained file, the CLI.  What the page does in a
browser is in tests/browser/."""

from __future__ import annotations

import base64
import json
import math
import random
import re
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import contract
from autograder.grading.compare import read_value
from contract import Student
from costmodel.units import registry
from generator import bank, selftest
from generator.release import variants_for
from generator.selftest_ecf import TraceError, Tracer, compile_carried, trace_once
from scalegrade.cli import main

BANK = bank.load()
ALL = BANK.assignment_ids()


@pytest.fixture(scope="module")
def hw1():
    return BANK.assignment("tdlsm/hw1")


@pytest.fixture(scope="module")
def page(hw1):
    return selftest.build(hw1, selftest.for_seed(7))


# --- whose numbers -------------------------------------------------------------------


def test_practice_seed_is_public_and_reproducible(hw1, page):
    again = selftest.build(hw1, selftest.for_seed(7))
    assert again.html == page.html  # byte-identical: a seed names one page
    other = selftest.build(hw1, selftest.for_seed(8))
    assert other.key.questions[0].params != page.key.questions[0].params


def test_a_self_test_never_shows_a_graded_variant(hw1):
    secret = b"a-course-secret-of-32-bytes-long"
    graded = variants_for(hw1, Student(id="ana", name="Ana", email="a@x"), secret)
    practice = selftest.build(hw1, selftest.for_student("ana", secret))
    assert practice.label == "ana"
    for v, q in zip(graded, practice.key.questions, strict=True):
        assert q.seed != v.seed
    # and it is personal: another student's practice differs
    bob = selftest.build(hw1, selftest.for_student("bob", secret))
    assert bob.key.questions[0].seed != practice.key.questions[0].seed


def test_negative_seed_is_refused():
    with pytest.raises(selftest.SelfTestError, match="--seed"):
        selftest.for_seed(-1)


# --- what a student types ------------------------------------------------------------


@pytest.mark.parametrize(
    "typed, read",
    [
        ("21 GB", "21 GB"),
        ("21GB", "21 GB"),
        ("  19.6\u00a0GiB ", "19.6 GiB"),
        ("8.8 days", "8.8 days"),
        ("1,234", "1,234"),  # commas stay: the grader reads them (contract.readings)
        ("26,8GB", "26,8 GB"),
        ("1.2×10^9", "1.2e9"),
        ("1.2 x 10**9 FLOP", "1.2e9 FLOP"),
        ("1.2·10⁹", "1.2e9"),
        ("10⁻³ s", "1e-3 s"),
        ("\u22125", "-5"),
        ("2 TB per s", "2 TB / s"),
        ("2.4e8J", "2.4e8 J"),  # not a complex literal
        ("2EB", "2 EB"),
        ("5 s²", "5 s^2"),
        ("50%", "50 %"),
        ("3000/s", "3000 /s"),
    ],
)
def test_normalize(typed, read):
    assert selftest.normalize(typed) == read


@pytest.mark.parametrize(
    "typed",
    [
        "abc",
        "GB 21",
        "1.2.3",
        "nan",
        "inf",
        "(1 GB)",
        "5 G B",
        "2 * 3 GB",
        "1 squared",
        "21 GP",
        "1_000",
        "0x10",
    ],
)
def test_normalize_refuses(typed):
    with pytest.raises(selftest.InputError):
        selftest.normalize(typed)


def test_what_the_grader_reads_from_typed_text(page):
    """The page's text goes through the grader's own reading (autograder.grading.compare)."""
    gb = next(a for q in page.key.questions for a in q.answers if a.unit == "GB")
    assert read_value(gb, selftest.harvested("21"))[0] == pytest.approx(21e9)
    assert read_value(gb, selftest.harvested("19.6 GiB"))[0] == pytest.approx(19.6 * 2**30)
    assert read_value(gb, selftest.harvested("2.1×10¹⁰ B"))[0] == pytest.approx(2.1e10)
    assert read_value(gb, selftest.harvested("")) == (None, "missing")
    assert read_value(gb, selftest.harvested("1,2"))[0] == pytest.approx(1.2e9)  # decimal comma
    value, problem = read_value(gb, selftest.harvested("1,2,3"))
    assert value is None and problem.startswith("unreadable")


def test_unit_table_is_pints():
    """Each name the page knows, with the factor and dimension pint gives it."""
    names = selftest.unit_names()
    assert {"GB", "GiB", "gigabytes", "ms", "hrs", "KiB", "TFLOP", "kWh", "%"} <= set(names)
    assert "GBs" not in names and "hs" not in names  # pint refuses these too
    ureg = registry()
    for name in random.Random(1).sample(sorted(names), 150) + ["GB", "GiB", "%", "days"]:
        q = ureg.Quantity(f"1 {name}")
        factor, dims = names[name]
        assert math.isclose(factor, q.to_root_units().magnitude, rel_tol=1e-12), name
        assert dict(dims) == dict(q.dimensionality), name


def test_page_units_cover_the_answers(page):
    data = json.loads(_public(page.html))
    si = data["units"]["si"]
    for q in page.key.questions:
        for a in q.answers:
            assert a.si_unit in si
    assert data["units"]["syntax"]["full"] == selftest.SYNTAX["full"]


# --- the compiled carried formulas -----------------------------------------------------


def test_tracer_records_branches_and_steps():
    answer = SimpleNamespace(
        expr="floor(x) if x > 2 else 2 * x", formula=None, args={}, output=None
    )
    guards, leaf = trace_once(answer, {}, {"x": 3.5})
    assert guards == [("(v[0] > 2)", True)]
    assert leaf == ("value", "$.floor(v[0])")
    guards, leaf = trace_once(answer, {}, {"x": 1.0})
    assert guards == [("(v[0] > 2)", False)] and leaf == ("value", "(2 * v[0])")
    with pytest.raises(TraceError):
        hash(Tracer(1.0, None))  # a traced value is never a dictionary key


def test_formula_arguments_become_domain_guards(page):
    q = next(q for q in page.key.questions if q.id == "parallel/pipeline-sizing")
    keys = {a.id: a for a in q.answers}
    compiled = compile_carried(keys["mem_1f1b"], q.params, keys)
    assert compiled.inputs == ("m_min",)
    assert "$.domain(v[0], 1," in compiled.js  # a micro-batch count must be whole
    assert compiled.untraceable == 0 and compiled.paths >= 2


@pytest.mark.parametrize("aid", ALL)
def test_every_assignment_builds_and_every_carried_formula_traces(aid):
    st = selftest.build(BANK.assignment(aid), selftest.for_seed(2))
    assert st.answers > 0
    assert st.untraceable == 0, f"{aid}: a carried formula the page cannot compute"
    assert len(st.html.encode()) < 1_500_000


def test_compiled_formulas_match_python_at_the_keys(page):
    """A quick Python-side check (the browser tests compare the JavaScript itself):
    the compiled expressions, read back as Python, give the grader's carried value."""
    checked = 0
    for q in page.key.questions:
        keys = {a.id: a for a in q.answers}
        for a in q.answers:
            if not (a.ask and a.depends_on):
                continue
            compiled = compile_carried(a, q.params, keys)
            own = {d: keys[d].value * (1.5 if keys[d].ask else 1) for d in a.depends_on}
            try:
                want = contract.value(a, {**q.params, **own})
            except (ValueError, ArithmeticError):
                continue
            got = _eval_js(compiled, own)
            if got is not None:
                assert math.isclose(got, want, rel_tol=1e-9), (a.id, compiled.js)
                checked += 1
    assert checked >= 10


def _eval_js(compiled, own):
    """Evaluate simple compiled JavaScript (no branches) in Python."""
    if "?" in compiled.js or "$." in compiled.js.replace("$.div", ""):
        return None
    expr = compiled.js.replace("$.div", "_div").replace("===", "==")
    v = [own[d] for d in compiled.inputs]
    return eval(expr, {"_div": lambda a, b: a / b, "v": v})  # noqa: S307 - our own output


# --- one self-contained file ------------------------------------------------------------


def _public(page_html: str) -> str:
    return re.search(
        r'<script id="sg-public" type="application/json">(.*?)</script>', page_html, re.S
    )[1]


def test_one_file_that_asks_the_network_for_nothing(page):
    html_text = page.html
    assert "Content-Security-Policy" in html_text and "default-src 'none'" in html_text
    # no external resource of any kind: only in-page anchors and data: URLs
    for attr in re.findall(r'\b(?:src|href)="([^"]*)"', html_text):
        assert attr.startswith(("#", "data:")), attr
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", html_text))
    assert urls <= {"http://www.w3.org/1998/Math/MathML"}, urls  # MathML's namespace
    assert "<math" in html_text  # formulas rendered at build time, no script library
    assert "@media print" in html_text


def test_answers_are_scrambled_not_plain(page):
    html_text = page.html
    q0 = page.key.questions[0]
    assert q0.solution_html[:60] not in html_text
    for a in q0.answers:
        for m in a.misconceptions:
            assert m.feedback[:50] not in html_text
    # ... but recoverable by anyone with the file, as the page says
    blob = re.search(
        r'<script id="sg-key" type="text/plain" data-k="([0-9a-f]+)">([^<]*)<', html_text
    )
    mask = bytes.fromhex(blob[1])
    raw = base64.b64decode(blob[2])
    data = json.loads(bytes(b ^ mask[i % len(mask)] for i, b in enumerate(raw)))
    assert data["questions"][0]["answers"][0]["value"] == q0.answers[0].value
    assert "XOR" in html_text and "practice" in html_text


def test_duration_is_the_exams_or_two_hours(page):
    assert json.loads(_public(page.html))["minutes"] == 120  # homework: no duration
    for aid in ALL:
        a = BANK.assignment(aid)
        if a.spec.duration_minutes:
            st = selftest.build(a, selftest.for_seed(1))
            assert json.loads(_public(st.html))["minutes"] == a.spec.duration_minutes
            break


def test_code_parts_point_to_the_notebook():
    hw1 = BANK.assignment("tdlsm/hw1")
    st = selftest.build(hw1, selftest.for_seed(1))
    if not any(q.code for q in st.key.questions):
        pytest.skip("no code part in tdlsm/hw1")
    assert "graded" in st.html and "notebook" in st.html and 'class="part code"' in st.html


# --- the command ---------------------------------------------------------------------


def test_cli_seed(tmp_path):
    out = tmp_path / "exam.html"
    result = CliRunner().invoke(main, ["selftest", "tdlsm/hw1", "--seed", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert "works offline" in result.output


def test_cli_student_needs_the_course_secret(tmp_path, monkeypatch):
    monkeypatch.delenv("SCALEGRADE_SECRET", raising=False)
    out = tmp_path / "exam.html"
    result = CliRunner().invoke(
        main, ["selftest", "tdlsm/hw1", "--student", "ana", "--out", str(out)]
    )
    assert result.exit_code == 2 and "--seed" in result.output
    secret = tmp_path / "secret.txt"
    secret.write_text("b" * 40)
    result = CliRunner().invoke(
        main,
        [
            "selftest",
            "tdlsm/hw1",
            "--student",
            "ana",
            "--secret-file",
            str(secret),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "args, message",
    [(["--seed", "1", "--student", "ana"], "not both"), (["--seed", "1"], "name it *.html")],
)
def test_cli_refuses(tmp_path, args, message):
    out = tmp_path / "exam.txt"
    result = CliRunner().invoke(main, ["selftest", "tdlsm/hw1", *args, "--out", str(out)])
    assert result.exit_code == 2
    assert message in result.output
    assert not out.exists()


def test_cli_unknown_assignment(tmp_path):
    result = CliRunner().invoke(
        main, ["selftest", "tdlsm/nope", "--seed", "1", "--out", str(tmp_path / "x.html")]
    )
    assert result.exit_code == 2 and "no such assignment" in result.output
