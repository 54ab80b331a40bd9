"""Release: reproducible, per-student, no answers in what students get, atomic, exams."""

from __future__ import annotations

import filecmp
import json
import re
from pathlib import Path

import nbformat
import pytest

import contract
from costmodel.units import sci
from generator import bank
from generator.release import ReleaseError, release
from generator.roster import parse
from tests.banks import copy_bank

SECRET = b"a-test-secret-of-32-bytes-length"
ROSTER = "student_id,name,email\n" + "".join(
    f"s{i:03d},Student {i},s{i}@example.edu\n" for i in range(50)
)


@pytest.fixture(scope="module")
def hw1():
    return bank.load().assignment("tdlsm/hw1")


@pytest.fixture(scope="module")
def released(hw1, tmp_path_factory):
    out = tmp_path_factory.mktemp("rel") / "out"
    release(hw1, parse(ROSTER), secret=SECRET, out=out, with_solutions=True)
    return out


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_same_roster_twice_gives_identical_files(hw1, released, tmp_path):
    again = tmp_path / "again"
    release(hw1, parse(ROSTER), secret=SECRET, out=again, with_solutions=True)
    assert _tree(released) == _tree(again)
    _, mismatch, errors = filecmp.cmpfiles(released, again, _tree(released), shallow=False)
    assert not mismatch and not errors


def test_layout_one_notebook_per_student_and_keys(released):
    students = [f"s{i:03d}" for i in range(50)]
    assert sorted(p.name for p in (released / "release").iterdir()) == students
    for s in students[:3]:
        nbformat.validate(nbformat.read(released / "release" / s / "hw1.ipynb", as_version=4))
        assert (released / "keys" / f"{s}.json").is_file()
        assert (released / "solutions" / s / "hw1.ipynb").is_file()
    meta = json.loads((released / "keys" / "assignment.json").read_text())
    assert meta["assignment"] == "tdlsm/hw1" and meta["students"] == students


def test_numbers_differ_across_students(released):
    params = [
        json.dumps([q["params"] for q in json.loads(p.read_text())["questions"]])
        for p in sorted((released / "keys").glob("s*.json"))
    ]
    assert len(set(params)) >= 0.9 * len(params)  # shared numbers are rare (birthday odds)


_NUMBER = re.compile(
    r"(\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?)"  # 1,536  0.08  3.12e+14
    r"(?: × 10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)|\s*\\times\s*10\^\{(-?\d+)\})?"  # 1.31 × 10⁹, 1.31 \times 10^{9}
)
_SUPER = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
_REFERENCE = re.compile(
    r"(§|Proposition|Prop\.?|Example|Exercise|Theorem|Thm|Definition|Def\.?|ch\.)\s*\d+(\.\d+)*"
)


def _numbers(text: str) -> list[float]:
    """Every number of 3 or more significant digits written in ``text`` ("§2.1" excluded).

    Fewer digits ("100", "2.5") carry too little to identify an answer.
    """
    out = []
    for mantissa, unicode_power, latex_power in _NUMBER.findall(_REFERENCE.sub(" ", text)):
        digits = mantissa.replace(",", "").split("e")[0].split("E")[0]
        significant = digits.replace(".", "").lstrip("0")
        if "." not in digits:
            significant = significant.rstrip("0")
        if len(significant) < 3:
            continue
        power = unicode_power.translate(_SUPER) or latex_power or "0"
        out.append(float(mantissa.replace(",", "")) * 10 ** int(power))
    return out


def _close(a: float, b: float) -> bool:
    """Equal to 3 significant figures."""
    return abs(a - b) <= 5e-3 * max(abs(a), abs(b))


def test_no_key_value_appears_in_any_release_notebook(released):
    """No answer of a student is written anywhere in their notebook, in any number format.

    Numbers every student's notebook shares (the header, the notes' constants such as
    A = 406.4) are the same text for all and cannot leak anyone's answer; an answer equal
    to one of the student's given numbers (attainable = peak for a compute-bound kernel)
    or a small count (2(p - 1) steps) is no evidence of a leak either.
    """
    keys = [json.loads(p.read_text()) for p in sorted((released / "keys").glob("s*.json"))]
    written = {}
    for key in keys:
        nb = nbformat.read(released / "release" / key["student"]["id"] / "hw1.ipynb", 4)
        written[key["student"]["id"]] = _numbers("\n".join(c.source for c in nb.cells))
    common = set.intersection(*(set(w) for w in written.values()))
    for key in keys:
        mine = [w for w in written[key["student"]["id"]] if w not in common]
        given = [
            v for q in key["questions"] for v in q["params"].values() if isinstance(v, int | float)
        ]
        given += [n for q in key["questions"] for t in q["shown"].values() for n in _numbers(t)]
        for q in key["questions"]:
            for a in q["answers"]:
                for value in (a["value"], a["display_value"]):
                    if abs(value) < 100 and float(value).is_integer():
                        continue
                    if any(_close(value, g) for g in given):
                        continue
                    leaked = [w for w in mine if _close(w, value)]
                    assert not leaked, (key["student"]["id"], q["id"], a["id"], value, leaked)


def test_release_notebook_cells_carry_nbgrader_metadata(released):
    nb = nbformat.read(released / "release" / "s000" / "hw1.ipynb", as_version=4)
    answers = [c for c in nb.cells if c.metadata.get("scalegrade", {}).get("kind") == "answer"]
    assert answers
    for cell in answers:
        nbg = cell.metadata["nbgrader"]
        assert nbg["solution"] and not nbg["locked"] and nbg["schema_version"] == 3
        assert cell.source.startswith(cell.metadata["scalegrade"]["variable"] + " = ...")
    locked = [c for c in nb.cells if c.metadata["nbgrader"]["locked"]]
    assert any("Given" in c.source for c in locked)
    manual = [c for c in nb.cells if c.metadata["nbgrader"]["grade"]]
    assert all(c.cell_type == "markdown" and c.metadata["nbgrader"]["points"] > 0 for c in manual)
    assert "Student 0" in nb.cells[0].source and "s000" in nb.cells[0].source


def test_solutions_notebook_has_the_answers(released):
    key = json.loads((released / "keys" / "s000.json").read_text())
    text = (released / "solutions" / "s000" / "hw1.ipynb").read_text()
    for a in key["questions"][0]["answers"]:  # exact: a count graded to ±0.5 stays whole
        x = a["display_value"]
        written = str(int(x)) if float(x).is_integer() else f"{x:.12g}"
        assert f"{a['variable']} = {written}" in text


def test_an_existing_folder_is_never_silently_mixed(hw1, released, tmp_path):
    with pytest.raises(ReleaseError, match="exists and is not empty; pass --force"):
        release(hw1, parse(ROSTER), secret=SECRET, out=released)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("do not delete")
    with pytest.raises(ReleaseError, match="holds files ScaleGrade did not write .thesis.tex"):
        release(hw1, parse(ROSTER), secret=SECRET, out=mine, force=True)
    assert (mine / "thesis.tex").read_text() == "do not delete"


def test_exam_writes_sheets_and_ta_keys(tmp_path):
    mine = copy_bank(tmp_path / "bank", link_templates=True)
    (mine.assignments / "tdlsm" / "mock.yaml").write_text(
        "title: Mock exam\nkind: exam\nnotebook: mock\nduration_minutes: 120\n"
        "questions:\n  - {question: budgets/model-budget, points: 5}\n"
    )
    exam = mine.assignment("tdlsm/mock")
    assert exam.points == 5
    out = tmp_path / "out"
    release(exam, parse(ROSTER)[:2], secret=SECRET, out=out)
    sheet = (out / "sheets" / "s000.html").read_text()
    ta = (out / "ta_keys" / "s000.html").read_text()
    key = json.loads((out / "keys" / "s000.json").read_text())
    states = next(a for a in key["questions"][0]["answers"] if a["id"] == "states_gb")
    assert "Student 0" in sheet and "120 minutes" in sheet and "<math" in sheet
    assert sci(states["display_value"]) not in sheet
    assert sci(states["display_value"]) in ta and "Prop 1.2" in ta
    assert "http" not in sheet.replace("http://www.w3.org/1998/Math/MathML", "")


def test_notebooks_are_written_exactly_as_nbformat_writes_them(released):
    from generator.notebook import dumps

    path = released / "release" / "s000" / "hw1.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert dumps(nbformat.from_dict(nb)) + "\n" == nbformat.writes(nb) + "\n" == path.read_text()


def test_keys_carry_the_code_checks_with_their_hash(hw1, released):
    # keys/ is the whole contract: each code part's checks, as released, and its SHA-256
    keys = released / "keys"
    info = contract.read_release(keys)
    parts = [(q, c) for q in hw1.questions for c in q.spec.code if c.checks]
    assert len(parts) == 5  # tdlsm/hw1: online softmax, checkpointing, accumulation, ring, TP
    assert len(info.checks) == len(parts)
    for q, c in parts:
        file = contract.checks_file(q.id, c.checks)
        source = (keys / file).read_text(encoding="utf-8")
        assert source == q.files[c.checks]
        assert info.checks[file] == contract.sha256(source)
    key = contract.read_key(keys / "s000.json")
    refs = [c.checks for q in key.questions for c in q.code if c.checks]
    assert len(refs) == 5 and all(info.checks[r.file] == r.sha256 for r in refs)
    assert key.schema_version == info.schema_version == contract.SCHEMA_VERSION
