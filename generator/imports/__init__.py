"""Bringing an existing course in: another tool's notebooks as questions of a bank.

A reader (:mod:`.nbgrader`, :mod:`.otter`; :mod:`.source` holds what both do to a cell)
turns a source notebook into :class:`Imported` questions and report lines; :func:`write`
puts them into a bank: one folder per question
(``question.yaml``, ``prompt.md``, and ``solution.py`` with ``checks.py`` when it has
tests), an assignment listing them with their points, and the import report, which says,
one line each with its cell, everything that was not carried over.

Nothing is written when a source is malformed (:class:`SourceError` names the file and the
cell) or when a question folder or the assignment already exists: the folders are staged
in the bank, loaded as the bank will load them, and only then moved into place.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from autograder.checklib.cells import Test
from generator import bank as banks
from generator import question as questions


class SourceError(ValueError):
    """A source notebook that cannot be imported, or a bank it cannot go into."""


@dataclass(frozen=True)
class Written:
    """A part a person grades: a manually graded answer, or a task."""

    id: str
    prompt: str
    points: float
    rubric: str


@dataclass(frozen=True)
class Numeric:
    """A test that compared a notebook variable with a number, as a numeric answer: the
    grader reads ``variable`` as the student's code leaves it."""

    id: str
    variable: str
    value: float
    tolerance: dict  # {"abs": 0.001} or {"rel": 1e-05}
    points: float
    test: str  # the test it was

    def shown(self) -> str:
        ((kind, x),) = self.tolerance.items()
        return f"{self.value:g} ± {x:g}" + (" relative" if kind == "rel" else "")


@dataclass
class Imported:
    """One question read from a source notebook."""

    slug: str  # its folder under templates/<topic>/
    title: str
    ref: str  # where it comes from: "problem1.ipynb, cells 2-8"
    prompt: str  # Markdown
    code: str = ""  # solution.py: the cells, ``# %%``-separated, solution regions marked
    tests: list[Test] = field(default_factory=list)
    written: list[Written] = field(default_factory=list)
    answers: list[Numeric] = field(default_factory=list)
    solution: str = ""  # Markdown: the source's own explanation, for the worked solution

    @property
    def points(self) -> float:
        parts = [t for t in self.tests if not t.setup] + self.written + self.answers
        return sum(p.points for p in parts)


def numeric_answers(test: str, found, points: float, taken: set[str]) -> list[Numeric] | None:
    """``found`` (:func:`.source.numeric`'s comparisons of test ``test``, worth
    ``points``) as numeric answers, or None when one of its variables is already an
    answer of this import (``taken``, which this extends)."""
    if not found or {var for var, _, _ in found} & taken:
        return None
    taken |= {var for var, _, _ in found}
    share = points / len(found)
    return [Numeric(identifier(var), var, value, tol, share, test) for var, value, tol in found]


@dataclass(frozen=True)
class Outcome:
    """What :func:`write` put into the bank."""

    folders: list[Path]
    assignment: Path
    report: Path
    points: float


def identifier(text: str) -> str:
    """``text`` as a Python identifier (a part's id): ``correct-squares`` -> ``correct_squares``."""
    out = re.sub(r"\W+", "_", text).strip("_").lower() or "part"
    return f"p_{out}" if out[0].isdigit() or keyword.iskeyword(out) else out


def slug(text: str) -> str:
    """``text`` as a folder name: ``Part_A`` -> ``part-a``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "question"


def jinja_safe(markdown: str) -> str:
    """Markdown that a question's Jinja rendering leaves as it is."""
    if any(mark in markdown for mark in ("{{", "{%", "{#")):
        return "{% raw %}" + markdown.replace("{% endraw %}", "") + "{% endraw %}"
    return markdown


def _literal(source: str) -> str:
    """``source`` as a Python string literal an author can read and edit."""
    raw = f"r'''{source}'''"
    try:
        if ast.literal_eval(raw) == source:
            return raw
    except (SyntaxError, ValueError):
        pass
    return repr(source)


def checks_file(q: Imported, tool: str, origin: str) -> str:
    """The ``checks.py`` of a question with tests: its tests, run by the check library."""

    def flags(t: Test) -> str:
        on = [name for name in ("setup", "doctest", "hidden") if getattr(t, name)]
        hint = f"        hint={json.dumps(t.hint, ensure_ascii=False)},\n" if t.hint else ""
        return "".join(f"        {name}=True,\n" for name in on) + hint

    tests = "".join(
        f"    cells.Test(\n        {json.dumps(t.name)},\n        {t.points!r},\n"
        f"        {_literal(t.source)},\n{flags(t)}    ),\n"
        for t in q.tests
    )
    setup = (
        " A test marked ``setup`` is an earlier question's, run first for the names it "
        "defines and not scored."
        if any(t.setup for t in q.tests)
        else ""
    )
    return f'''"""Checks imported from {tool}: the tests of {origin} for "{q.title}".

Each test runs in the probe process against the notebook's names, as it ran in the
kernel, and passes when it raises nothing (autograder.checklib.cells); a test reads the
student's drawn parameters, once question.yaml draws some, as `params`.{setup}  Edit a
test here, then run `scalegrade validate`: it proves that the question's solution still
earns every point and its starter does not.
"""

from autograder.checklib import cells

TESTS = [
{tests}]


def probe(student, seed: int, params: dict) -> dict:
    return cells.probe(student, TESTS, params)


def grade(result: dict, seed: int, params: dict) -> list:
    return cells.grade(result, TESTS)
'''


def spec(q: Imported, cite: str) -> dict:
    """A question's ``question.yaml``, as data."""
    out: dict = {
        "title": q.title,
        "source": {"notes": cite, "ref": q.ref},
        "params": {},
    }
    if q.answers:
        out["answers"] = [
            {
                "id": a.id,
                "prompt": f"`{a.variable}`, as test {a.test} checks it",
                "expr": repr(a.value),
                "si_unit": "",
                "tolerance": a.tolerance,
                "points": a.points,
                "sign": "any",
                "variable": a.variable,
                "guessable": "the source's own number, until the question draws it",
            }
            for a in q.answers
        ]
    if q.written:
        out["free_response"] = [
            {"id": w.id, "prompt": w.prompt, "points": w.points, "rubric": w.rubric}
            for w in q.written
        ]
    if q.code and q.answers and not q.tests:  # what the answers read, worth nothing itself
        out["code"] = [
            {
                "id": "code",
                "prompt": "Your code, in the cells below: the answers above are what it computes.",
                "solution": "solution.py",
                "points": 0,
            }
        ]
    if q.tests:
        names = ", ".join(t.name for t in q.tests if not t.setup)
        out["code"] = [
            {
                "id": "tests",
                "prompt": f"Your code, in the cells below: the grader runs its tests ({names}).",
                "solution": "solution.py",
                "checks": "checks.py",
                "points": sum(t.points for t in q.tests if not t.setup),
            }
        ]
    return out


def _dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def write(
    imported: list[Imported],
    *,
    bank: Path,
    course: str | None,
    assignment: str,
    topic: str,
    tool: str,
    sources: list[str],
    report: list[str],
) -> Outcome:
    """Put ``imported`` into ``bank`` as ``templates/<topic>/<slug>/`` folders, the
    assignment ``assignments/<course>/<assignment>.yaml`` and the import report
    ``imports/<course>-<assignment>.md``; nothing is written on an error."""
    try:
        b = banks.load(bank, fresh=True)
    except banks.BankError as err:
        raise SourceError(str(err)) from None
    if course is None:
        if len(b.courses) != 1:
            raise SourceError(
                f"{b.root}: the bank has the courses {', '.join(b.courses)}: name one (--course)"
            )
        course = next(iter(b.courses))
    if course not in b.courses:
        raise SourceError(f"--course {course}: not a course of {b.root} ({', '.join(b.courses)})")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", assignment):
        raise SourceError(f"--assignment {assignment}: letters, digits, - and _ only")
    if not imported:
        raise SourceError(f"{', '.join(sources)}: no graded cell: nothing to import")
    target = b.assignments / course / f"{assignment}.yaml"
    report_path = b.root / "imports" / f"{course}-{assignment}.md"
    for path in [target, report_path, *(b.templates / topic / q.slug for q in imported)]:
        if path.exists():
            raise SourceError(
                f"{path}: exists already; import into another --assignment or --topic"
            )
    cite = b.courses[course].cite_as
    b.templates.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".import-", dir=b.templates) as tmp:
        staged = []
        for q in imported:
            folder = Path(tmp) / topic / q.slug
            folder.mkdir(parents=True)
            (folder / questions.SPEC_FILE).write_text(
                f"# Imported from {tool}: {q.ref} (scalegrade import).\n" + _dump(spec(q, cite)),
                encoding="utf-8",
            )
            (folder / "prompt.md").write_text(jinja_safe(q.prompt).strip() + "\n", encoding="utf-8")
            if q.solution.strip():
                text = jinja_safe(q.solution).strip() + "\n"
                (folder / "solution.md").write_text(text, encoding="utf-8")
            if q.code:
                (folder / "solution.py").write_text(q.code.strip("\n") + "\n", encoding="utf-8")
            if q.tests:
                (folder / "checks.py").write_text(
                    checks_file(q, tool, q.ref.partition(",")[0]), encoding="utf-8"
                )
            try:
                questions.load(folder, Path(tmp))
            except questions.QuestionError as err:
                raise SourceError(f"{q.ref}: the question it makes does not load: {err}") from None
            staged.append((folder, b.templates / topic / q.slug))
        for src, dst in staged:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(src, dst)
    target.parent.mkdir(parents=True, exist_ok=True)
    items = [{"question": f"{topic}/{q.slug}", "points": q.points} for q in imported]
    title = assignment.replace("-", " ").replace("_", " ").capitalize()
    target.write_text(
        f"# Imported from {tool}: {', '.join(sources)} (scalegrade import).\n"
        "# Set `due:` before release; `kind: exam` for an exam.\n"
        + _dump({"title": title, "kind": "homework", "notebook": assignment, "questions": items}),
        encoding="utf-8",
    )
    total = sum(q.points for q in imported)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.write_text(
        render_report(tool, sources, course, assignment, imported, report), encoding="utf-8"
    )
    return Outcome([dst for _, dst in staged], target, report_path, total)


def render_report(
    tool: str,
    sources: list[str],
    course: str,
    assignment: str,
    imported: list[Imported],
    report: list[str],
) -> str:
    """The import report, in Markdown: the questions written, then every construct that
    was not carried over (one line each, with its cell)."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# Import of {', '.join(sources)} from {tool}",
        "",
        f"Into {course}/{assignment}, {when}. Every question has fixed numbers until you "
        'draw them: docs/authors.md, "Coming from nbgrader or otter".',
        "",
        "## Questions",
        "",
    ]
    for q in imported:
        tests = [t.name for t in q.tests if not t.setup]
        parts = [f"{len(tests)} test(s)"] if tests else []
        parts += [f"written part {w.id} ({w.points:g})" for w in q.written]
        parts += [f"numeric answer {a.variable} ({a.points:g})" for a in q.answers]
        lines.append(f"- {q.slug}: {q.title} ({q.points:g} points; {', '.join(parts)}), {q.ref}")
    lines += ["", "## Not carried over", ""]
    lines += [f"- {line}" for line in report] or ["Nothing: every cell was carried over."]
    return "\n".join(lines) + "\n"
