"""The self-test page's checker (JavaScript, in chromium) against the Python grader.

For every assignment, typed answer sets (correct in several units and number formats,
wrong units, known misconceptions, errors carried forward from a wrong earlier part,
garbage, blanks) are graded twice: by ``ScaleGradeChecker`` inside the page, and by
``autograder.grading.grade.grade_harvest`` on what the page reads
(``generator.selftest.harvested``).
Scores and feedback identifiers (status, misconception) must be identical, part by part.
The unit factors, the input syntax and the compiled error-carried-forward formulas are
also compared directly.
"""

from __future__ import annotations

import functools
import json
import math
import random
from collections import Counter

import pytest

import contract
from autograder.grading.compare import read_value
from autograder.grading.grade import grade_harvest
from costmodel.units import UnitError, to_si
from generator import bank, selftest

BANK = bank.load()

SETS_PER_ASSIGNMENT = 12

# units a student might write instead of the one asked, by SI unit
ALTERNATIVES = {
    "byte": ["GB", "GiB", "MB", "MiB", "TB", "kB", "bytes", "B", "Gbit", "gigabytes"],
    "s": ["s", "ms", "min", "h", "hours", "days", "us", "µs"],
    "hour": ["h", "hr", "days", "min", "s"],
    "FLOP": ["FLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP", "flops", "kFLOP"],
    "FLOP/s": ["TFLOP/s", "PFLOP/s", "GFLOP/s", "FLOP/s", "TFLOP / s", "TFLOP s^-1"],
    "byte/s": ["GB/s", "TB/s", "GiB/s", "Gbit/s", "GB per s", "MB/ms"],
    "FLOP/byte": ["FLOP/byte", "FLOP/B", "flops/bytes", "kFLOP/kB"],
    "1/s": ["tokens/s", "/s", "token/s", "/min", "per hour"],
    "bit": ["bit", "bits", "b", "B", "kbit"],
    "": ["%", "percent", "tokens"],
    "kWh": ["kWh", "MWh", "Wh", "J"],
    "W": ["W", "kW", "MW"],
}
GARBAGE = [
    "abc",
    "1,2",
    "1,500",  # thousands or a decimal comma: read by what is plausible for the key
    "1,2,3",
    "26,8 gb",
    "3 gib",
    "1.2.3",
    "nan",
    "inf",
    "1e999",
    "--5",
    "GB 21",
    "21 GP",
    "(3) GB",
    "3 + 4",
    "½",
    "0x10",
    "1_000",
    "21 kg",
    "5 s",
    "2 W",
]


@functools.cache
def built(aid: str) -> selftest.SelfTest:
    """One page per assignment for this module (practice seed 11)."""
    return selftest.build(BANK.assignment(aid), selftest.for_seed(11))


@pytest.fixture(scope="module")
def page(browser):
    context = browser.new_context(offline=True)
    p = context.new_page()
    p.set_content("<!doctype html><title>blank</title>")
    yield p
    context.close()


def _open(page, st, tmp_path) -> None:
    path = tmp_path / "page.html"
    path.write_text(st.html, encoding="utf-8")
    page.goto(path.as_uri())
    page.wait_for_function("() => window.ScaleGradeSelfTest !== undefined")


def _number(rng: random.Random, x: float, exact: bool = False) -> str:
    """``x`` as a student might type it: to 6 significant figures (within a relative
    1e-5), or to 17 (``exact``, for absolute and significant-figure tolerances)."""
    style = rng.randrange(6)
    d = 16 if exact else 5
    if x == 0:
        return "0"
    if style == 0:
        text = f"{x:.{d + 1}g}"
    elif style == 1:
        text = f"{x:.{d}e}"
    elif style == 2:
        m, e = f"{x:.{d}e}".split("e")
        text = f"{m} × 10^{int(e)}"
    elif style == 3:
        m, e = f"{x:.{d}e}".split("e")
        sup = str(int(e)).translate(str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹"))
        text = f"{m}×10{sup}"
    elif style == 4 and 1000 <= abs(x) < 1e15 and not exact:
        text = f"{x:,.2f}" if abs(x) < 1e9 else f"{x:,.0f}"
    else:
        text = repr(x) if exact else repr(float(f"{x:.7g}"))
    return text.replace("-", "\u2212", 1) if text.startswith("-") and rng.random() < 0.5 else text


def _typed(rng: random.Random, si_value: float, a) -> str:
    """The SI value ``si_value`` typed for answer ``a``: bare in the asked unit or with a unit."""
    options = [u for u in ALTERNATIVES.get(a.si_unit, []) if _factor(u, a.si_unit)]
    exact = a.tolerance.rel is None
    if a.unit and (not options or rng.random() < 0.4):
        return _number(rng, si_value / _factor(a.unit, a.si_unit), exact)
    if not a.unit and (not options or rng.random() < 0.5):
        return _number(rng, si_value, exact)
    unit = rng.choice(options)
    number = _number(rng, si_value / _factor(unit, a.si_unit), exact)
    space = "" if rng.random() < 0.2 and unit[0].isalpha() else " "
    return f"{number}{space}{unit}"


def _factor(unit: str, si_unit: str) -> float | None:
    try:
        return to_si(f"1 {unit}", si_unit)
    except UnitError:
        return None


def answer_sets(key, rng: random.Random, n: int) -> list[tuple[dict[str, str], dict[str, str]]]:
    """``n`` sets of typed answers (variable -> text) over the whole key, each with the
    kind of answer each text was meant to be (variable -> kind)."""
    out = []
    for _ in range(n):
        typed: dict[str, str] = {}
        meant: dict[str, str] = {}
        for q in key.questions:
            own: dict[str, float] = {}  # SI values as the grader reads them
            correct: dict[str, bool] = {}
            by_id = {a.id: a for a in q.answers}
            for a in q.answers:
                if not a.ask:
                    own[a.id], correct[a.id] = a.value, True
                    continue
                kinds = ["correct", "wrong", "off", "unit", "garbage", "missing", "near"]
                weights = [3, 2, 1, 1, 1, 1, 1]
                if a.misconceptions:
                    kinds.append("misconception")
                    weights.append(3)
                wrong_deps = [d for d in a.depends_on if d in correct and not correct[d]]
                if wrong_deps:
                    kinds.append("carried")
                    weights.append(8)
                kind = rng.choices(kinds, weights)[0]
                text = _answer_text(rng, kind, a, q.params, own, by_id)
                typed[a.variable] = text
                meant[a.variable] = kind
                value, _ = read_value(a, selftest.harvested(text))
                own[a.id] = value
                correct[a.id] = value is not None and abs(value - a.value) <= 1e-3 * abs(a.value)
        out.append((typed, meant))
    return out


def _answer_text(rng, kind, a, params, own, by_id) -> str:
    if kind == "correct":
        return _typed(rng, a.value, a)
    if kind == "near":  # inside or just outside a relative tolerance
        rel = a.tolerance.rel or 0.01
        return _typed(rng, a.value * (1 + rng.choice([-1, 1]) * rel * rng.choice([0.5, 1.5])), a)
    if kind == "misconception":
        return _typed(rng, rng.choice(a.misconceptions).value, a)
    if kind == "carried":
        deps = {d: own.get(d) for d in a.depends_on}
        if all(v is not None for v in deps.values()):
            try:
                return _typed(rng, contract.value(a, {**params, **deps}), a)
            except (ValueError, ArithmeticError):
                pass
        return _typed(rng, a.value * 1.37, a)
    if kind == "wrong":
        return _typed(rng, a.value * rng.choice([1.3, 0.62, 2.5, -1.0, 1.06]), a)
    if kind == "off":
        return _typed(rng, a.value * rng.choice([1000, 1e-3, 1e6]), a)
    if kind == "unit":
        x = _number(rng, a.value)
        return f"{x} {rng.choice(['kg', 'W', 'GP', 'parsec', 'm', 'FLOP/s', 'GB', 'h'])}"
    if kind == "garbage":
        return rng.choice(GARBAGE)
    return rng.choice(["", "  "])


def python_verdicts(key, policy, typed: dict[str, str]) -> list[list[dict]]:
    answers = {var: selftest.harvested(text) for var, text in typed.items()}
    result = grade_harvest(key, {"answers": answers}, policy=policy, checks={}, reveal=False)
    per_question: dict[str, list[dict]] = {q.id: [] for q in key.questions}
    for g in result.parts:
        if g.verdict.status in ("pending", "code"):
            continue
        v = g.verdict
        per_question[g.question].append(
            {"part": v.part, "status": v.status, "score": v.score, "misconception": v.misconception}
        )
    return [per_question[q.id] for q in key.questions]


JS_GRADE = """(sets) => sets.map((texts) => window.ScaleGradeSelfTest.data.questions.map(
    (q, i) => window.ScaleGradeSelfTest.gradeQuestion(i, texts[i]).map((v) => ({
        part: v.part, status: v.status, score: v.score, misconception: v.misconception,
        unknown: Boolean(v.ecf_unknown)}))))"""


@pytest.mark.parametrize("aid", BANK.assignment_ids())
def test_page_and_python_grader_agree(aid, page, tmp_path):
    a = BANK.assignment(aid)
    st = built(aid)
    key = st.key
    policy = a.policy
    _open(page, st, tmp_path)
    rng = random.Random(f"agree:{aid}")
    sets = answer_sets(key, rng, SETS_PER_ASSIGNMENT)
    by_question = [
        [{a.id: s.get(a.variable, "") for a in q.answers if a.ask} for q in key.questions]
        for s, _ in sets
    ]
    js = page.evaluate(JS_GRADE, by_question)
    statuses: Counter[str] = Counter()
    for n, ((typed, meant), js_set) in enumerate(zip(sets, js, strict=True)):
        py_set = python_verdicts(key, policy, typed)
        for q, py_q, js_q in zip(key.questions, py_set, js_set, strict=True):
            assert [v["part"] for v in js_q] == [v["part"] for v in py_q]
            for p, j in zip(py_q, js_q, strict=True):
                text = typed[next(x.variable for x in q.answers if x.id == p["part"])]
                where = f"{aid} set {n} {q.id} {p['part']} typed {text!r}"
                assert not j["unknown"], f"{where}: carried formula took an unseen path"
                assert j["status"] == p["status"], f"{where}: page {j} python {p}"
                assert j["misconception"] == p["misconception"], f"{where}: page {j} python {p}"
                assert math.isclose(j["score"], p["score"], abs_tol=1e-9), f"{where}"
                statuses[p["status"]] += 1
                kind = meant[next(x.variable for x in q.answers if x.id == p["part"])]
                if kind == "correct":  # every way of writing the right answer is read right
                    assert p["status"] == "correct", f"{where}: {p}"
                if kind == "misconception":  # unless it equals the key for these numbers
                    assert p["status"] in ("misconception", "carried", "correct"), f"{where}: {p}"
        totals = (
            sum(v["score"] for q in py_set for v in q),
            sum(v["score"] for q in js_set for v in q),
        )
        assert math.isclose(*totals, abs_tol=1e-9)
    # the sets exercise every rule the page reproduces
    for status in ("correct", "wrong", "wrong_unit", "missing", "misconception"):
        assert statuses[status] > 0, f"{aid}: no {status!r} verdict in {dict(statuses)}"
    if any(x.depends_on for q in key.questions for x in q.answers if x.ask):
        assert statuses["carried"] > 0, f"{aid}: no carried verdict in {dict(statuses)}"


def test_at_least_fifty_answer_sets_are_compared():
    assert SETS_PER_ASSIGNMENT * len(BANK.assignment_ids()) >= 50


SYNTAX_CORPUS = [
    "21 GB",
    "21GB",
    " 21  GB ",
    "19.6 GiB",
    "8.8 days",
    "1.2e9",
    "1.2E+9",
    "1,234",
    "26,8 GB",
    "0,125",
    "1,234,567.5 B",
    "1,5e9 FLOP",
    "2 gb",
    "1,234,567.5",
    "1,2",
    "12,34",
    "1.2×10^9",
    "1.2 × 10^9",
    "1.2x10^9",
    "1.2 * 10**9",
    "1.2·10⁹",
    "10^9",
    "10⁻³ s",
    "−5",
    "\u22125 GB",
    "–3",
    "2 TB per s",
    "2 TB per second",
    "3 percent",
    "50%",
    "50 %",
    "5 s²/s",
    "5 s^2 / s",
    "3000 /s",
    "3000/s",
    "2 TB s^-1",
    "3 kW h",
    "1 B / s / s * s",
    "1\u00a0GB",
    "1\u202fGB",
    "abc",
    "",
    "GB",
    "1.2.3",
    "1e",
    "1e5e5",
    ".5",
    "5.",
    "+5",
    "1 squared",
    "5 G B",
    "5 GB GB",
    "1_000",
    "nan",
    "inf",
    "(1 GB)",
    "2 * 3 GB",
    "1 µs",
    "1 μs",
    "2EB",
    "2e3B",
    "\x1c5 GB",
    "5\u2028GB",
    "\ufeff5",
    "\u2003",
    "\x85",
]


def test_input_syntax_is_the_same(page, tmp_path):
    _open(page, built("tdlsm/hw1"), tmp_path)
    js = page.evaluate(
        """(corpus) => corpus.map((t) => {
            try { return window.ScaleGradeChecker.normalize(t,
                window.ScaleGradeSelfTest.pub.units.syntax); }
            catch (e) { return null; } })""",
        SYNTAX_CORPUS,
    )
    for text, got in zip(SYNTAX_CORPUS, js, strict=True):
        try:
            expected = selftest.normalize(text)
        except selftest.InputError:
            expected = None
        if expected is not None:  # the page reads names only from its table
            assert got == expected, text
        else:
            assert got is None or not _names_known(got), text
    blank = page.evaluate(
        """(corpus) => corpus.map((t) => window.ScaleGradeChecker.readValue(
            {unit: "GB", si_unit: "byte", factor: 1e9}, t,
            window.ScaleGradeSelfTest.pub.units)[1] === "missing")""",
        SYNTAX_CORPUS,
    )
    for text, got in zip(SYNTAX_CORPUS, blank, strict=True):
        assert got == (selftest.harvested(text)["kind"] == "missing"), repr(text)


def _names_known(text: str) -> bool:
    try:
        selftest.normalize(text)
        return True
    except selftest.InputError:
        return False


def test_unit_conversions_are_pints(page, tmp_path):
    """Every unit name of a page, and compound units, read as pint reads them."""
    _open(page, built("tdlsm/hw1"), tmp_path)
    units = page.evaluate("() => window.ScaleGradeSelfTest.pub.units")
    rng = random.Random(5)
    cases = []
    names = sorted(units["table"])
    for si_unit in units["si"]:
        for name in rng.sample(names, 60):
            cases.append((f"3.7 {name}", si_unit))
        for alt in ALTERNATIVES.get(si_unit, []):
            cases.append((f"2.5e3 {alt}", si_unit))
            cases.append((f"4{alt}", si_unit))
    compound = [
        ("1 B/s h", "byte"),
        ("5 GB^2/GB", "byte"),
        ("2 TB s^-1", "byte/s"),
        ("1 B / s / s * s", "byte/s"),
        ("7 /s", "1/s"),
        ("9 FLOP/B", "FLOP/byte"),
        ("3 GB*s/s", "byte"),
        ("2.5 TFLOP/s", "FLOP/s"),
        ("4 min/h", ""),
    ]
    cases += [(text, si) for text, si in compound if si in units["si"]]
    js = page.evaluate(
        """(cases) => cases.map(([text, si]) => {
            const C = window.ScaleGradeChecker, u = window.ScaleGradeSelfTest.pub.units;
            try { return C.toSI(C.normalize(text, u.syntax), si, u); }
            catch (e) { if (e instanceof C.InputError) return null; throw e; } })""",
        cases,
    )
    agreed = 0
    for (text, si_unit), got in zip(cases, js, strict=True):
        try:
            expected = to_si(selftest.normalize(text), si_unit)
        except (UnitError, selftest.InputError):
            expected = None
        if expected is None:
            assert got is None, (text, si_unit, got)
        else:
            assert got is not None and math.isclose(got, expected, rel_tol=1e-12), (
                text,
                si_unit,
                got,
                expected,
            )
            agreed += 1
    assert agreed > 100


@pytest.mark.parametrize("aid", BANK.assignment_ids())
def test_carried_formulas_compute_what_python_computes(aid, page, tmp_path):
    """The compiled formula of each carried answer, at random plausible earlier answers."""
    st = built(aid)
    key = st.key
    _open(page, st, tmp_path)
    rng = random.Random(aid)
    cases, expected = [], []
    for qi, q in enumerate(key.questions):
        by_id = {x.id: x for x in q.answers}
        for x in q.answers:
            if not (x.ask and x.depends_on):
                continue
            for _ in range(25):
                own = {}
                for d in x.depends_on:
                    k = by_id[d].value
                    r = math.exp(rng.uniform(-1, 1) * math.log(contract.PLAUSIBLE_FACTOR))
                    v = k * r if by_id[d].ask else k
                    if by_id[d].ask and rng.random() < 0.3:
                        v = float(round(v)) or v
                    own[d] = v
                try:
                    want = contract.value(x, {**q.params, **own})
                except (ValueError, ArithmeticError):
                    want = None
                cases.append([qi, x.id, {d: [v, False] for d, v in own.items()}])
                expected.append(want)
    got = page.evaluate(
        """(cases) => cases.map(([qi, id, earlier]) => {
            const q = window.ScaleGradeSelfTest.data.questions[qi];
            const a = q.answers.find((x) => x.id === id);
            return window.ScaleGradeChecker.carriedValue(a, earlier); })""",
        cases,
    )
    unknown = 0
    for case, want, g in zip(cases, expected, got, strict=True):
        if g.get("unknown"):
            unknown += 1
            continue
        if want is None or not math.isfinite(want):
            assert "value" not in g or not math.isfinite(g["value"]), (case, want, g)
        else:
            assert "value" in g, (case, want, g)
            assert math.isclose(g["value"], want, rel_tol=1e-9, abs_tol=1e-300), (case, want, g)
    assert unknown <= len(cases) // 100, f"{unknown} of {len(cases)} points took an unseen path"
    json.dumps(cases)  # plain data crossed into the page
