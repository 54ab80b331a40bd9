"""otter-grader public checks (`scalegrade generate --otter`), run with real otter-grader.

The released notebook's own cells are executed the way Jupyter would (the init cell, then
``grader.check("q<n>")``) in the student's folder, against otter-grader 7.0.0: answers in
the right format pass; a string, a value 1000x off, a unit of the wrong kind or an
unanswered cell fail with a message that says what to fix, and no test nor message ever
holds the student's key.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import nbformat
import pytest

from costmodel.units import to_si
from generator import bank
from generator import otter as public_checks
from generator.release import release
from generator.roster import parse


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("otter") / "hw1"
    roster = parse("student_id,name,email\nana,Ana Lima,ana@x.edu\nben,Ben O,ben@x.edu\n")
    release(
        bank.load().assignment("tdlsm/hw1"),
        roster,
        secret=b"o" * 32,
        out=out,
        with_solutions=True,
        otter=True,
    )
    return out


def _key(out: Path, student: str) -> dict:
    return json.loads((out / "keys" / f"{student}.json").read_text(encoding="utf-8"))


def _asked(key: dict) -> dict[int, list[dict]]:
    return {q["index"]: [a for a in q["answers"] if a["ask"]] for q in key["questions"]}


class Kernel:
    """The student's notebook cells run in one namespace, in the notebook's folder (as
    Jupyter does), with real otter-grader."""

    def __init__(self, folder: Path, monkeypatch):
        self.nb = nbformat.read(folder / "hw1.ipynb", as_version=4)
        monkeypatch.chdir(folder)
        self.ns: dict = {"__name__": "__main__"}
        init = next(c for c in self.nb.cells if c.get("id") == "otter-init")
        exec(compile(init.source, "<init cell>", "exec"), self.ns)

    def check(self, question: str, **answers):
        self.ns.update(answers)
        cell = next(c for c in self.nb.cells if c.get("id") == f"{question}-check")
        return eval(compile(cell.source, "<check cell>", "eval"), self.ns)


def _messages(result) -> dict[str, str]:
    return {r.test_case.name: r.message for r in result.test_case_results if not r.passed}


def test_the_notebook_carries_otter_tests_and_check_cells(released):
    nb = nbformat.read(released / "release" / "ana" / "hw1.ipynb", as_version=4)
    nbformat.validate(nb)
    tests = nb.metadata["otter"]["tests"]
    assert nb.metadata["otter"]["OK_FORMAT"] is False
    asked = _asked(_key(released, "ana"))
    assert set(tests) == {f"q{i}" for i, answers in asked.items() if answers}
    ids = [c.get("id") for c in nb.cells]
    assert ids.index("otter-init") < ids.index("q1-prompt")
    for q in tests:
        # the check comes right after the question's last answer cell
        last = max(i for i, c in enumerate(nb.cells) if c.get("id", "").startswith(f"{q}-"))
        assert ids.index(f"{q}-check") <= last
        assert nb.cells[ids.index(f"{q}-check") - 1].metadata["scalegrade"]["kind"] == "answer"
    assert "grader = otter.Notebook('hw1.ipynb')" in nb.cells[ids.index("otter-init")].source


def test_right_answers_pass_in_any_unit_the_grader_reads(released, monkeypatch):
    kernel = Kernel(released / "release" / "ana", monkeypatch)
    assert kernel.ns["grader"] is not None
    for index, answers in _asked(_key(released, "ana")).items():
        if not answers:
            continue
        values = {a["variable"]: a["display_value"] for a in answers}
        result = kernel.check(f"q{index}", **values)
        assert result.passed_all, result.summary()
        for a in answers:  # the same as strings with a unit, in another unit of the kind
            if a["si_unit"] == "byte":
                values[a["variable"]] = f"{a['value'] / 2**30:.4g} GiB"
            elif a["si_unit"] == "s":
                values[a["variable"]] = f"{a['value'] / 3600:.4g} h"
            elif a["unit"]:
                values[a["variable"]] = f"{a['display_value']:.4g} {a['unit']}"
        result = kernel.check(f"q{index}", **values)
        assert result.passed_all, result.summary()


def test_wrong_formats_and_sizes_fail_with_advice(released, monkeypatch):
    kernel = Kernel(released / "release" / "ana", monkeypatch)
    q1 = _asked(_key(released, "ana"))[1]
    counts = [a for a in q1 if a["display_value"] > 1000]  # 1.85e8 parameters, FLOPs, ...
    target = counts[0]
    base = {a["variable"]: a["display_value"] for a in q1}
    v = target["variable"]

    failed = _messages(kernel.check("q1", **{**base, v: "hello"}))
    assert set(failed) == {v} and "does not start with a number" in failed[v]
    failed = _messages(kernel.check("q1", **{**base, v: target["display_value"] * 1000}))
    assert "far larger than your numbers make plausible" in failed[v]
    failed = _messages(kernel.check("q1", **{**base, v: target["display_value"] / 1000}))
    assert "far smaller" in failed[v]
    failed = _messages(kernel.check("q1", **{**base, v: ...}))
    assert "is not answered yet" in failed[v]
    failed = _messages(kernel.check("q1", **{**base, v: [1, 2]}))
    assert "is a list" in failed[v]

    # an answer in GB written in MB, or as a duration
    index, a = next(
        (i, a)
        for i, answers in _asked(_key(released, "ana")).items()
        for a in answers
        if a["unit"] == "GB"
    )
    answers = {x["variable"]: x["display_value"] for x in _asked(_key(released, "ana"))[index]}
    failed = _messages(
        kernel.check(f"q{index}", **{**answers, a["variable"]: a["display_value"] * 1000})
    )
    assert "Did you write it in MB? The question asks for GB." in failed[a["variable"]]
    failed = _messages(kernel.check(f"q{index}", **{**answers, a["variable"]: "3 days"}))
    assert "not a unit of the kind asked (GB)" in failed[a["variable"]]
    failed = _messages(kernel.check(f"q{index}", **{**answers, a["variable"]: "3 GP"}))
    assert "unknown unit 'GP'" in failed[a["variable"]]


def _forms(x: float) -> set[str]:
    """The ways a key could be spelled; only those with 3+ significant digits (a bare "2" or
    "100" is no leak, and matches any text)."""
    forms = {repr(x), f"{x:g}", f"{x:.6g}", f"{x:.4g}", f"{x:.3g}", f"{x:,.0f}", f"{x:.2e}"}
    digits = {f: re.sub(r"e[+-]?\d+$", "", f).replace(".", "").replace(",", "") for f in forms}
    return {f for f, d in digits.items() if len(d.strip("0-")) >= 3}


def test_no_check_ever_holds_the_key(released, monkeypatch):
    kernel = Kernel(released / "release" / "ben", monkeypatch)
    key = _key(released, "ben")
    nb = nbformat.read(released / "release" / "ben" / "hw1.ipynb", as_version=4)
    ours = [c.source for c in nb.cells if c.id == "otter-init" or c.id.endswith("-check")]
    # the tests less the helper all share (the same text for everyone: bits are 0.125 B)
    tests = [t.replace(public_checks.HELPER, "") for t in nb.metadata["otter"]["tests"].values()]
    texts = [*tests, *ours]  # (prompts show the given numbers)
    for index, answers in _asked(key).items():
        if not answers:
            continue
        # failure messages echo the value written: probe with values that are not the key's
        for wrong in ("x", 1e30, 1e-30, "3 days"):
            values = {a["variable"]: wrong for a in answers}
            texts.append(kernel.check(f"q{index}", **values).summary())
    text = re.sub(r"Error at line \d+", "", "\n".join(texts))  # otter's line numbers
    text = re.sub(r"\(\('.*?\)\)", "", text)  # the unit ratios (Gb to MB is 125) of the advice
    for q in key["questions"]:
        for a in q["answers"]:
            for x in (a["display_value"], a["value"]):
                for form in _forms(x):
                    assert not re.search(rf"(?<![\d.]){re.escape(form)}(?!\d)", text), (
                        a["variable"],
                        form,
                    )


def test_the_window_excludes_1000x_and_holds_the_key():
    for x in (1.0, 99.99999999999999, 123.4, 1e-3, 7.2e21, 0.0625):
        for i in range(8):
            lo, hi = public_checks.window(x, f"seed{i}", "a")
            assert lo <= x < hi and not lo <= 1000 * x < hi and not lo <= x / 1000 < hi
            assert math.log10(lo).is_integer() and math.log10(hi).is_integer()
            assert 3 <= round(math.log10(hi / lo)) <= 5


@pytest.mark.parametrize(
    "text, unit",
    [
        ("21 GB", "byte"),
        ("19.6 GiB", "byte"),
        ("4 kB", "byte"),
        ("4 KB", "byte"),
        ("3 KiB", "byte"),
        ("8 Gb", "byte"),
        ("2 gigabytes", "byte"),
        ("1.5 TB/s", "byte/s"),
        ("100 Gb/s", "byte/s"),
        ("8.8 days", "s"),
        ("3 h", "s"),
        ("45 min", "s"),
        ("12 ms", "s"),
        ("5 µs", "s"),
        ("2 weeks", "s"),
        ("312 TFLOP/s", "FLOP/s"),
        ("2e20 FLOP", "FLOP"),
        ("4 FLOP/byte", "FLOP/byte"),
        ("700 W", "W"),
        ("16 MWh", "kWh"),
        ("3 t", "gram"),
        ("42 %", ""),
        ("1200 tokens/s", "1/s"),
        ("26.8 gb", "byte"),  # lower-case spellings that mean one thing
        ("3 gib", "byte"),
        ("5 mb", "byte"),
        ("2 tflop/s", "FLOP/s"),
    ],
)
def test_the_checks_read_units_as_the_grader_does(text, unit):
    number, written = text.split(" ", 1)
    factor, dims = public_checks.parse_unit(written)
    base, si_dims = public_checks.parse_unit(unit or "1")
    assert dims == si_dims
    assert float(number) * factor / base == pytest.approx(to_si(text, unit), rel=1e-12)


def test_the_cells_do_nothing_without_otter(released, monkeypatch):
    monkeypatch.setitem(sys.modules, "otter", None)  # `import otter` raises ImportError
    kernel = Kernel(released / "release" / "ana", monkeypatch)
    assert kernel.ns["grader"] is None and kernel.check("q1") is None


def test_the_grader_reads_answers_past_the_check_cells(released):
    """The sandbox runs the check cells too: no cell error, every answer read."""
    from autograder.grading.grade import grade_harvest
    from autograder.grading.keys import Keys
    from autograder.sandbox import Limits, Plan, Sandbox

    keys = Keys(released / "keys")
    key = keys.key("ana")
    nb = nbformat.read(released / "solutions" / "ana" / "hw1.ipynb", as_version=4)
    values = {a.variable: a.display_value for q in key.questions for a in q.answers}
    for cell in nb.cells:
        variable = cell.metadata.get("scalegrade", {}).get("variable")
        if variable in values:
            cell.source = f"{variable} = {values[variable]!r}"
    path = released.parent / "submitted" / "hw1.ipynb"
    path.parent.mkdir(exist_ok=True)
    nbformat.write(nb, path)
    plan = Plan(variables=keys.plan(key).variables)  # the answers only, no code probes
    with Sandbox(limits=Limits(wall_seconds=60), hide=[released]) as sandbox:
        outcome = sandbox.run(path, plan)
    assert outcome.error is None, outcome.log
    result = grade_harvest(
        key, outcome.harvest, policy=keys.release.policy, checks=keys.checks, reveal=False
    )
    assert not result.cell_errors
    answers = [g.verdict for g in result.parts if g.verdict.variable in values]
    assert answers and all(v.status == "correct" for v in answers)


@pytest.mark.parametrize(
    ("text", "number"),
    [("26,8 GB", 26.8), ("0,125", 0.125), ("1,234,567 B", 1234567.0), ("1,5e9", 1.5e9)],
)
def test_the_checks_read_commas_as_the_grader_does(text, number):
    from contract import readings

    (reading,) = readings(text)
    assert float(reading.split()[0]) == pytest.approx(number)
    assert public_checks.comma_readings(text) == readings(text)
    assert public_checks.comma_readings("1,234") == readings("1,234") == ["1234", "1.234"]
    assert public_checks.comma_readings("1,2,3") == readings("1,2,3") == []
