"""nbgrader's source notebooks as questions (cell metadata ``nbgrader``, schema 3 and 4).

Each cell is one of nbgrader's kinds (``nbgrader.utils``): a solution cell
(``solution``), an autograder test (``grade``, not ``solution``), a manually graded
answer (``grade`` and ``solution``), a task (``task``), or context (markdown, code, locked
or not).  A question is a run of cells that ends with graded cells: its Markdown up to
the first other cell is the prompt; its solution, context and test cells, in order,
become the code part's ``solution.py`` (one ``# %%`` cell each; a test as the student
sees it, its hidden lines removed), and its tests, hidden lines included, the checks
(:mod:`autograder.checklib.cells`), each worth its points.  Manually graded answers and
tasks become written parts: the ``=== BEGIN MARK SCHEME ===`` text, or the source's own
answer, is the rubric.  The notebook's order and state are kept: the questions follow
each other in one assignment, so a cell sees what the cells before it defined, as in the
kernel.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from autograder.checklib.cells import HIDDEN, Test, visible

from . import Imported, SourceError, Written, identifier, numeric_answers, slug, source

SCHEMAS = (3, 4)
MARK_SCHEME = ("=== BEGIN MARK SCHEME ===", "=== END MARK SCHEME ===")
_AUTO_ID = re.compile(r"^cell-[0-9a-f]{8,}$")  # nbgrader's id for a cell the author did not name


@dataclass
class Cell:
    """One source cell, classified."""

    number: int  # 1-based, as the notebook shows them
    kind: str  # "test", "manual", "task", "solution", "markdown", "code"
    cell_type: str
    source: str
    grade_id: str | None
    points: float

    def where(self, file: str) -> str:
        return f"{file} cell {self.number}" + (f" ({self.grade_id})" if self.grade_id else "")

    @property
    def graded(self) -> bool:
        return self.kind in ("test", "manual", "task")


def _classify(file: str, number: int, cell) -> Cell:
    meta = cell.get("metadata", {}).get("nbgrader")
    text = cell.get("source", "")
    where = f"{file} cell {number}"
    if not meta:
        return Cell(number, cell.cell_type, cell.cell_type, text, None, 0.0)
    grade_id = meta.get("grade_id")
    where += f" ({grade_id})" if grade_id else ""
    version = meta.get("schema_version", 1)
    if version not in SCHEMAS:
        raise SourceError(
            f"{where}: nbgrader metadata schema {version}; this reads {SCHEMAS[0]} and "
            f"{SCHEMAS[1]}: run `nbgrader update {file}` first"
        )
    grade, solution, task = (bool(meta.get(k)) for k in ("grade", "solution", "task"))
    if (grade or solution or task) and not grade_id:
        raise SourceError(f"{where}: an nbgrader cell with no grade_id: give it one")
    points = 0.0
    if grade or task:
        try:
            points = float(meta["points"])
        except (KeyError, TypeError, ValueError):
            raise SourceError(f"{where}: a graded cell with no points: set its points") from None
        if points < 0:
            raise SourceError(f"{where}: {points:g} points: points are >= 0")
    if task:
        kind = "task"
    elif grade and solution:
        kind = "manual"
    elif grade:
        if cell.cell_type != "code":
            raise SourceError(f"{where}: a graded Markdown cell must be a solution cell too")
        kind = "test"
    elif solution:
        kind = "solution"
    else:
        kind = cell.cell_type
    return Cell(number, kind, cell.cell_type, text, grade_id, points)


def _mark_scheme(text: str) -> tuple[str, str | None]:
    """A manually graded answer's text without its mark scheme, and the scheme."""
    begin, end = (text.find(m) for m in MARK_SCHEME)
    if begin < 0 or end < begin:
        return text, None
    scheme = text[begin + len(MARK_SCHEME[0]) : end].strip()
    return (text[:begin] + text[end + len(MARK_SCHEME[1]) :]).strip(), scheme


def _names(source: str, store: bool) -> set[str]:
    """Names a source binds at its top level (``store``) or reads anywhere."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    if not store:
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).partition(".")[0] for a in node.names}
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    out.add(sub.id)
    return out


def _groups(cells: list[Cell]) -> list[list[Cell]]:
    """The questions: a run of cells closes after graded cells, at the first cell that is
    not one more test (tests in a row test the same code); a run of tests with no
    solution cell joins the run before it (it tests that run's code)."""
    groups: list[list[Cell]] = [[]]
    for c in cells:
        g = groups[-1]
        if any(x.graded for x in g) and not (c.kind == "test" and g[-1].kind == "test"):
            groups.append([])
        groups[-1].append(c)
    out: list[list[Cell]] = []
    for g in groups:
        tests = any(c.kind == "test" for c in g)
        if out and tests and not any(c.kind == "solution" for c in g):
            out[-1].extend(g)
        elif out and not any(c.graded for c in g):  # trailing cells: the last question's
            out[-1].extend(g)
        else:
            out.append(g)
    return out


def _question(
    file: str, stem: str | None, g: list[Cell], report: list[str], taken: set[str]
) -> Imported:
    graded = [c for c in g if c.graded]
    # the prompt: the Markdown before the first cell the student writes or is graded on
    # (context code before it, `import math`, goes first in the code)
    first = next((i for i, c in enumerate(g) if c.kind not in ("markdown", "code")), len(g))
    lead = [c for c in g[:first] if c.kind == "markdown"]
    prompt = [c.source for c in lead]
    code: list[str] = []
    tests: list[Test] = []
    written: list[Written] = []
    answers = []
    among: list[str] = []  # Markdown among the code cells
    for c in [c for c in g if c not in lead]:
        if c.kind == "solution" and c.cell_type == "code":
            code.append("# %%\n" + source.marked(c.source, c.where(file)))
        elif c.kind == "code" and c.source.strip():
            code.append("# %%\n" + source.kernel_code(c.source, c.where(file), report))
        elif c.kind == "markdown":
            if code:
                code.append(source.markdown_cell(c.source))
                among.append(c.source)
            else:
                prompt.append(c.source)
        elif c.kind == "test":
            shown = source.kernel_code(visible(c.source), c.where(file), None)
            test = _test_source(c, file, report)
            found = numeric_answers(c.grade_id, source.numeric(test), c.points, taken)
            pts = f"{c.points:g} point" + ("" if c.points == 1 else "s")
            if found:
                answers += found
                names = ", ".join(f"`{a.variable}`" for a in found)
                head = f"# Test {c.grade_id} ({pts}): the grader reads {names} as your answer."
                values = ", ".join(f"`{a.variable}` ({a.shown()})" for a in found)
                report.append(f"{c.where(file)}: became the numeric answer {values}")
            else:
                head = f"# Test {c.grade_id} ({pts}): the grader runs it"
                head += ", and hidden checks." if HIDDEN[0] in c.source else "."
                source.note_test(test, c.where(file), report)
                tests.append(Test(c.grade_id, c.points, test))
            code.append(f"# %%\n{head}\n{shown}")
        elif c.kind == "task":
            prompt.append(c.source)
            written.append(
                Written(identifier(c.grade_id), "Your answer to the task above", c.points,
                        "Graded by a person against the task above.")
            )  # fmt: skip
        elif c.kind == "manual":
            answer, scheme = _mark_scheme(c.source)
            if c.cell_type == "code":
                report.append(
                    f"{c.where(file)}: a manually graded code cell becomes a written part "
                    "(the student answers in a Markdown cell; nothing runs it)"
                )
                answer = f"```python\n{answer}\n```"
            rubric = scheme or f"The source's answer:\n\n{answer}"
            written.append(Written(identifier(c.grade_id), "Your answer", c.points, rubric))
        elif c.kind == "solution":  # an ungraded Markdown solution cell
            report.append(f"{c.where(file)}: an ungraded answer cell is not carried (no points)")
    if code and not tests and not answers:  # nothing graded reads them
        cells = [c.where(file) for c in g if c.cell_type == "code" and c.kind != "manual"]
        report.append(
            f"{', '.join(cells)}: code in a question with no tests is not carried (a later "
            "cell that needs what it defines will not find it)"
        )
        code, prompt = [], prompt + among
    for c in g:
        if c.cell_type == "markdown":
            source.note_images(c.source, c.where(file), report)
    first, last = g[0].number, g[-1].number
    ref = f"{file}, cells {first}-{last}" if last > first else f"{file}, cell {first}"
    name = next((c.grade_id for c in g if c.kind == "solution"), graded[0].grade_id)
    title, text = source.titled("\n\n".join(p for p in prompt if p.strip()), name)
    if _AUTO_ID.match(name) and title != name:
        name = title
    return Imported(
        slug=f"{slug(stem)}-{slug(name)}" if stem else slug(name),
        title=title,
        ref=ref,
        prompt=text or title,
        code="\n\n".join(code),
        tests=tests,
        written=written,
        answers=answers,
    )


def _test_source(c: Cell, file: str, report: list[str]) -> str:
    """A test as the checks run it: IPython lines commented out, noted in the report, as
    are nbgrader's ``### AUTOTEST`` lines, which nbgrader expands from its autotests.yml
    when it generates an assignment and which stay comments here."""
    code = source.kernel_code(c.source, c.where(file), None)
    if code != c.source:
        report.append(f"{c.where(file)}: IPython lines in a test are commented out")
    if any(line.strip().startswith("### AUTOTEST") for line in code.splitlines()):
        report.append(
            f"{c.where(file)}: nbgrader's ### AUTOTEST lines are not carried (nbgrader "
            "expands them from autotests.yml): write the assertions they stand for"
        )
    return code


def read(path: Path, report: list[str], *, prefix: bool = False) -> list[Imported]:
    """The questions of one nbgrader source notebook; what is not carried goes to
    ``report``.  ``prefix``: each question's folder starts with the notebook's name (an
    assignment of several notebooks).  :class:`SourceError` names the cell of a malformed
    source."""
    file = path.name
    nb = source.load(path)
    cells = [_classify(file, i, c) for i, c in enumerate(nb.cells, start=1)]
    seen: dict[str, Cell] = {}
    for c in cells:
        if c.grade_id:
            if c.grade_id in seen:
                raise SourceError(
                    f"{c.where(file)}: grade_id {c.grade_id!r} is also cell "
                    f"{seen[c.grade_id].number}'s: grade ids are unique"
                )
            seen[c.grade_id] = c
    if not any(c.graded for c in cells):
        raise SourceError(f"{path}: no graded cell (nbgrader `grade` or `task`): nothing to import")
    taken: set[str] = set()  # the variables already numeric answers
    stem = path.stem if prefix else None
    out = []
    for g in _groups(cells):
        if any(c.kind == "test" for c in g) and not any(c.kind == "solution" for c in g):
            where = ", ".join(c.where(file) for c in g if c.kind == "test")
            report.append(
                f"{where}: tests of no solution cell (nothing for the student to write) are "
                "not carried"
            )
            continue
        out.append(_question(file, stem, g, report, taken))
    if not out:
        raise SourceError(f"{path}: no part a student writes: nothing to import")
    _setups(out, cells)
    if any(c.kind == "test" for c in cells):
        report.append(
            f"{file}: nbgrader fails a test that writes to stderr; here a test fails only "
            "when it raises"
        )
    return out


def _setups(out: list[Imported], cells: list[Cell]) -> None:
    """Give each question's checks the earlier questions' tests whose names its tests read
    (names the notebook's own cells define are read from the notebook instead)."""
    notebook = set()
    for c in cells:
        if c.kind in ("solution", "code") and c.cell_type == "code":
            notebook |= _names(c.source, store=True)
    earlier: list[Test] = []
    for q in out:
        own = [t for t in q.tests if not t.setup]
        needed = set().union(*(_names(t.source, store=False) for t in own)) if own else set()
        setup: list[Test] = []
        for t in reversed(earlier):
            defined = _names(t.source, store=True) - notebook
            if defined & needed:
                setup.insert(0, Test(t.name, t.points, t.source, setup=True))
                needed |= _names(t.source, store=False)
        q.tests = setup + own
        earlier += own
