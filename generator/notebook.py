"""Student notebooks (nbformat 4.5) with nbgrader-compatible cell metadata.

A release notebook holds the student's header, each question's prompt with their
numbers, locked "given" cells, and answer cells (``q2_states_gb = ...  # in GB``); no
answer value and no solution.  The solutions notebook is the same with the answers and
reference code filled in, and the worked solutions.
"""

from __future__ import annotations

import json
from typing import Any

import nbformat
from nbformat import v4
from nbformat.v4.nbjson import split_lines

from contract import answer_variable
from generator import otter as public_checks
from generator.variant import KeyAnswer, Variant, given_cell, unit_factor

SCHEMA_VERSION = 1
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _meta(
    grade_id: str,
    *,
    solution: bool,
    grade: bool,
    locked: bool,
    points: float = 0.0,
    part: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """nbgrader (schema 3) and ScaleGrade metadata for one cell."""
    nbg: dict[str, Any] = {
        "grade": grade,
        "grade_id": grade_id,
        "locked": locked,
        "schema_version": 3,
        "solution": solution,
    }
    if grade:
        nbg["points"] = points
    meta: dict[str, Any] = {"nbgrader": nbg}
    if part is not None:
        meta["scalegrade"] = part
    return meta


# Cells are built as plain nodes (nbformat's new_*_cell validates each against the JSON
# schema, which dominated release time); each notebook is validated whole in `render`
# when asked.  The cell id is the grade id: nbformat's default is random, and releases
# must be byte-identical from the same inputs.
def _markdown(source: str, grade_id: str, **kw: Any) -> Any:
    return nbformat.from_dict(
        {
            "cell_type": "markdown",
            "id": grade_id,
            "source": source,
            "metadata": _meta(grade_id, **kw),
        }
    )


def _code(source: str, grade_id: str, **kw: Any) -> Any:
    return nbformat.from_dict(
        {
            "cell_type": "code",
            "id": grade_id,
            "source": source,
            "metadata": _meta(grade_id, **kw),
            "outputs": [],
            "execution_count": None,
        }
    )


def _points(pts: float) -> str:
    return f"{pts:g} point" if pts == 1 else f"{pts:g} points"


_ALTERNATIVES = {  # SI unit -> other units a student may write with the value
    "byte": '"GB", "GiB", "MB", "TB"',
    "s": '"ms", "s", "min", "h", "days"',
    "hour": '"h", "days"',
    "byte/s": '"GB/s", "TB/s"',
    "FLOP": '"FLOP", "PFLOP"',
    "FLOP/s": '"TFLOP/s", "PFLOP/s"',
}


def _answer_hint(k: KeyAnswer) -> str:
    """What to write; no example number, so no hint can coincide with an answer."""
    if not k.unit:
        return "a number"
    if k.unit == "%":
        return "in %: a number of percent"
    others = _ALTERNATIVES.get(k.si_unit)
    if others:
        return f"in {k.unit}: a number, or a string with one of the units {others}"
    return f"in {k.unit}: a number"


def _filled(k: KeyAnswer) -> str:
    """The reference answer in the asked unit, exact enough for any tolerance: a whole
    number as an integer (a count graded to ±0.5), anything else to 12 significant figures."""
    x = k.value / unit_factor(k.unit, k.si_unit)
    return str(int(x)) if float(x).is_integer() and abs(x) < 2**53 else f"{x:.12g}"


def render(
    variants: list[Variant],
    *,
    course_title: str,
    assignment_id: str,
    assignment_title: str,
    student: Any,
    params_units: dict[str, dict[str, str]],
    points: list[float],
    solutions: bool = False,
    check: bool = True,
    otter: str | None = None,
    version: int = 0,
) -> nbformat.NotebookNode:
    """The notebook of one student; ``solutions=True`` fills answers and code.

    ``version``: the student's variant version (their number of reseeds), written in the
    metadata after a reseed; the grader checks it and never trusts it.

    ``otter``: the notebook's file name, to add otter-grader public checks
    (:mod:`generator.otter`): the tests in the metadata, an init cell and a
    ``grader.check("q<n>")`` cell after each question's answers.
    """
    nb = v4.new_notebook()
    nb.metadata.update(_notebook_metadata(assignment_id, student, solutions, version))
    nb.cells.append(
        _header_cell(course_title, assignment_id, assignment_title, student, sum(points))
    )
    checked: dict[str, str] = {}
    if otter:
        checked = public_checks.tests(variants)
        nb.metadata["otter"] = {"OK_FORMAT": False, "tests": checked}
        nb.cells.append(_otter_init_cell(otter))
    for v, q_points in zip(variants, points, strict=True):
        nb.cells.extend(
            _question_cells(
                v,
                q_points,
                params_units[v.question_id],
                solutions=solutions,
                public_check=f"q{v.index}" in checked,
            )
        )
    if check:
        nbformat.validate(nb)
    return nb


def _notebook_metadata(
    assignment_id: str, student: Any, solutions: bool, version: int
) -> dict[str, Any]:
    """The notebook's kernel, and whose notebook it is (read by the grader, never trusted)."""
    return {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "scalegrade": {
            "schema_version": SCHEMA_VERSION,
            "assignment": assignment_id,
            "student_id": student.id,
            "solutions": solutions,
            **({"variant_version": version} if version else {}),
        },
    }


def _header_cell(
    course_title: str, assignment_id: str, assignment_title: str, student: Any, total: float
) -> Any:
    """The title, the student's name, the points, and how to write an answer."""
    header = (
        f"# {assignment_title}\n\n**{course_title}** — `{assignment_id}`\n\n"
        f"Student: **{student.name}** (`{student.id}`). These numbers are yours: other "
        f"students have different ones. {total:g} points.\n\n"
        "Write each answer in its cell in place of `...`: a number in the unit asked, or a "
        'string with its unit (`"21 GB"`, `"19.6 GiB"`, `"8.8 days"`). Run the whole '
        "notebook before submitting."
    )
    return _markdown(header, "header", solution=False, grade=False, locked=True)


def _otter_init_cell(notebook_name: str) -> Any:
    return _code(
        public_checks.init_cell(notebook_name),
        "otter-init",
        solution=False,
        grade=False,
        locked=True,
    )


def _question_cells(
    v: Variant,
    q_points: float,
    params_units: dict[str, str],
    *,
    solutions: bool,
    public_check: bool,
) -> list[Any]:
    """Question ``v``'s cells, worth ``q_points``: its prompt and Given cell (none when
    nothing is drawn: an imported question's fixed numbers), its answers (then its otter
    check, with ``public_check``), its written and code parts, and its worked solution in
    the solutions notebook.  Each part's points are scaled to ``q_points``."""
    q = f"q{v.index}"
    scale = q_points / v.points if v.points else 1.0
    title = f"## Question {v.index}. {v.title} ({_points(q_points)})\n\n*Source: notes {v.source}*"
    cells = [
        _markdown(
            f"{title}\n\n{v.prompt}", f"{q}-prompt", solution=False, grade=False, locked=True
        ),
    ]
    if v.given:
        given = given_cell(v, params_units)
        cells.append(_code(given, f"{q}-given", solution=False, grade=False, locked=True))
    for k in v.answers:
        if k.ask:
            cells += _answer_cells(v, q, k, k.points * scale, solutions)
    if public_check:
        check = public_checks.check_cell(q)
        cells.append(_code(check, f"{q}-check", solution=False, grade=False, locked=True))
    for r in v.free_response:
        cells += _free_response_cells(v, q, r, r["points"] * scale, solutions)
    for c in v.code:
        cells += _code_part_cells(v, q, c, c["points"] * scale, solutions)
    if solutions:
        worked = f"### Worked solution, question {v.index}\n\n{v.solution}"
        cells.append(_markdown(worked, f"{q}-solution", solution=False, grade=False, locked=True))
    return cells


def _answer_cells(v: Variant, q: str, k: KeyAnswer, pts: float, solutions: bool) -> list[Any]:
    """A numeric answer's prompt, and its cell (``variable = ...``, or the key's value);
    an answer the question's code sets (its own variable), its prompt alone."""
    if k.variable != answer_variable(v.index, k.id):
        text = f"**{k.prompt}** ({_points(pts)}): the grader reads `{k.variable}` as your code"
        text += " below leaves it" + (f", in {k.unit}." if k.unit else ".")
        return [_markdown(text, f"{q}-{k.id}-prompt", solution=False, grade=False, locked=True)]
    part = {
        "question": v.question_id,
        "kind": "answer",
        "answer": k.id,
        "variable": k.variable,
        "unit": k.unit,
        "points": pts,
    }
    value = _filled(k) if solutions else "..."
    source = f"{k.variable} = {value}  # {_answer_hint(k)}"
    return [
        _markdown(
            f"**{k.prompt}** ({_points(pts)})",
            f"{q}-{k.id}-prompt",
            solution=False,
            grade=False,
            locked=True,
        ),
        _code(source, f"{q}-{k.id}", solution=True, grade=False, locked=False, part=part),
    ]


def _free_response_cells(
    v: Variant, q: str, r: dict[str, Any], pts: float, solutions: bool
) -> list[Any]:
    """A written part's prompt, and its cell for a person to grade (the rubric, in the
    solutions notebook)."""
    part = {
        "question": v.question_id,
        "kind": "free_response",
        "answer": r["id"],
        "points": pts,
    }
    body = f"*Expected:* {r['rubric']}" if solutions else "YOUR ANSWER HERE"
    return [
        _markdown(
            f"**{r['prompt']}** ({_points(pts)}, graded by a person)",
            f"{q}-{r['id']}-prompt",
            solution=False,
            grade=False,
            locked=True,
        ),
        _markdown(
            body,
            f"{q}-{r['id']}",
            solution=True,
            grade=True,
            locked=False,
            points=pts,
            part=part,
        ),
    ]


def split_cells(source: str) -> list[tuple[str, str]]:
    """A code part's source as cells, (``"code"`` or ``"markdown"``, text): one cell, or
    one per ``# %%`` line where the source has them (jupytext's percent format; ``# %%
    [markdown]`` starts a markdown cell, its lines commented with ``# ``)."""
    if not any(line.startswith("# %%") for line in source.splitlines()):
        return [("code", source)]
    cells: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("# %%"):
            kind = "markdown" if line[4:].strip() == "[markdown]" else "code"
            cells.append((kind, []))
        elif cells:
            text = line.removeprefix("# ").removeprefix("#") if cells[-1][0] == "markdown" else line
            cells[-1][1].append(text)
        elif line.strip():  # code before the first marker opens a code cell
            cells.append(("code", [line]))
    return [(kind, "\n".join(lines).strip("\n")) for kind, lines in cells]


def _code_part_cells(
    v: Variant, q: str, c: dict[str, Any], pts: float, solutions: bool
) -> list[Any]:
    """A code part's prompt, and its cells (:func:`split_cells`): the starter, or the
    reference solution.  Each code cell carries the part."""
    part = {
        "question": v.question_id,
        "kind": "code",
        "answer": c["id"],
        "function": c["function"],
        "points": pts,
    }
    cells = [
        _markdown(
            f"**{c['prompt']}** ({_points(pts)})",
            f"{q}-{c['id']}-prompt",
            solution=False,
            grade=False,
            locked=True,
        )
    ]
    source = c["solution"] if solutions else c["starter"]
    for n, (kind, text) in enumerate(split_cells(source)):
        grade_id = f"{q}-{c['id']}" + (f"-{n}" if n else "")
        if kind == "markdown":
            cells.append(_markdown(text, grade_id, solution=False, grade=False, locked=True))
        else:
            cells.append(_code(text, grade_id, solution=True, grade=False, locked=False, part=part))
    return cells


def dumps(nb: nbformat.NotebookNode) -> str:
    """``nbformat.writes`` without its deep copy and its schema validation per notebook.

    Same bytes as nbformat writes (a test checks it); ``render`` validates what it
    builds.  ``nb`` is consumed (its sources are split into lines in place).
    """
    return json.dumps(
        split_lines(nb), sort_keys=True, indent=1, separators=(",", ": "), ensure_ascii=False
    )
