"""otter-assign's source notebooks (format v1) as questions.

A source is read twice.  Its raw-cell blocks give the structure: ``# ASSIGNMENT CONFIG``,
then per ``# BEGIN QUESTION`` (name, points, manual, all_or_nothing) the prompt, the
``# BEGIN SOLUTION`` cells (otter's ``# SOLUTION`` line markers and ``# BEGIN/END
SOLUTION`` regions, as :func:`.source.marked` reads them), ``# BEGIN PROMPT`` (what a
student of a written question starts from) and ``# BEGIN TESTS``.  The tests themselves,
with otter's hidden flags and its split of a question's points among its cases, are what
the real ``otter assign`` makes of the source (run here, in a temporary folder, its
tests not run), read back by otter's own ``OKTestFile``: nothing of otter's rules is
written twice.  Each case becomes a doctest check (:mod:`autograder.checklib.cells`);
an ``all_or_nothing`` question's cases, one check.  The public cases are also a cell of
the student's notebook that runs them (``grader.check`` does the same in otter).
"""

from __future__ import annotations

import contextlib
import doctest
import io
import logging
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autograder.checklib.cells import Test

from . import Imported, SourceError, Written, identifier, numeric_answers, slug, source

CONFIG = "# ASSIGNMENT CONFIG"
_BLOCK = re.compile(r"^#\s*(BEGIN|END)\s+(QUESTION|PROMPT|SOLUTION|TESTS)\b(.*)$", re.I | re.S)
# the assignment settings that change nothing a question grades (otter's own release)
_RELEASE_ONLY = {
    "name", "generate", "solutions_pdf", "template_pdf", "init_cell", "check_all_cell",
    "export_cell", "run_tests", "show_question_points", "suppress_no_tests_warning",
    "strip_solutions_from_all_cells",
}  # fmt: skip


def _otter():
    """otter-grader's parser classes; a clear error where it is not installed."""
    try:
        from otter.assign import main as assign
        from otter.assign.assignment import Assignment
        from otter.assign.blocks import extract_fenced_otter_cell
        from otter.assign.question_config import QuestionConfig
        from otter.test_files.ok_test import OKTestFile
    except ImportError:
        raise SourceError(
            "importing otter notebooks runs otter assign: pip install 'scalegrade[otter]'"
        ) from None
    return assign, Assignment, QuestionConfig, OKTestFile, extract_fenced_otter_cell


def _keys(config_class) -> set[str]:
    import fica

    return {k for k in dir(config_class) if isinstance(getattr(config_class, k, None), fica.Key)}


def _config(text: str, where: str, known: set[str], what: str) -> dict:
    """A YAML block of a raw cell, its keys checked against otter's."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise SourceError(f"{where}: the {what} is not YAML ({err})") from None
    if not isinstance(data, dict):
        raise SourceError(f"{where}: the {what} must be `key: value` lines")
    unknown = sorted(set(data) - known)
    if unknown:
        raise SourceError(
            f"{where}: {', '.join(map(repr, unknown))} is no otter {what} key "
            f"(otter-grader 7 has: {', '.join(sorted(known))})"
        )
    return data


@dataclass
class _Question:
    config: dict
    where: str  # its BEGIN QUESTION cell
    first: int  # cell numbers, for the reference
    last: int = 0
    before: list = field(default_factory=list)  # (number, cell) before the question's block
    body: list = field(default_factory=list)  # (number, cell, block or None)


def _structure(path: Path, cells, Assignment, QuestionConfig, report) -> list[_Question]:
    file = path.name
    assignment_keys, question_keys = _keys(Assignment), _keys(QuestionConfig)
    questions: list[_Question] = []
    pending: list = []  # cells before the next question
    q: _Question | None = None
    block: tuple[str, str] | None = None  # (kind, its BEGIN cell)
    for number, cell in enumerate(cells, start=1):
        where = f"{file} cell {number}"
        text = cell.get("source", "")
        if cell.cell_type == "raw":
            first, _, rest = text.strip().partition("\n")
            if first.strip().upper() == CONFIG:
                config = _config(rest, where, assignment_keys, "assignment config")
                for key in sorted(set(config) - _RELEASE_ONLY):
                    report.append(f"{where}: the assignment setting `{key}` is not carried")
                continue
            m = _BLOCK.match(first.strip())
            if not m:
                report.append(f"{where}: a raw cell that is no otter block is not carried")
                continue
            begin, kind = m.group(1).upper() == "BEGIN", m.group(2).upper()
            if kind == "QUESTION":
                if begin:
                    if q is not None:
                        raise SourceError(f"{where}: BEGIN QUESTION inside the one of {q.where}")
                    config = _config(rest, where, question_keys, "question config")
                    if not config.get("name"):
                        raise SourceError(f"{where}: a question needs a name (`name: q1`)")
                    q = _Question(config, where, number, before=pending)
                    pending = []
                else:
                    if q is None or block is not None:
                        what = "no question" if q is None else f"the {block[0]} of {block[1]}"
                        raise SourceError(f"{where}: END QUESTION closes {what}")
                    q.last = number
                    questions.append(q)
                    q = None
                continue
            if q is None:
                raise SourceError(f"{where}: {m.group(1)} {kind} outside a question")
            if begin:
                if block is not None:
                    raise SourceError(f"{where}: BEGIN {kind} inside the {block[0]} of {block[1]}")
                block = (kind, where)
            else:
                if block is None or block[0] != kind:
                    raise SourceError(f"{where}: END {kind} without BEGIN {kind}")
                block = None
            continue
        if q is None:
            pending.append((number, cell))
        else:
            q.body.append((number, cell, block[0] if block else None))
    if block is not None:
        raise SourceError(f"{block[1]}: BEGIN {block[0]} is never closed by END {block[0]}")
    if q is not None:
        raise SourceError(f"{q.where}: BEGIN QUESTION is never closed by END QUESTION")
    if not questions:
        raise SourceError(f"{path}: no # BEGIN QUESTION block: nothing to import")
    if pending:  # after the last question: its context
        questions[-1].body += [(n, c, None) for n, c in pending]
    return questions


def _tests(path: Path, assign, OKTestFile, report: list[str]) -> dict:
    """What the real `otter assign` makes of the source's tests: OKTestFile per question
    (none, and a report line, where they are otter's exception-based tests)."""
    with tempfile.TemporaryDirectory(prefix="scalegrade-otter-") as tmp:
        master = Path(tmp) / "source" / path.name
        master.parent.mkdir()
        shutil.copy(path, master)
        for extra in path.parent.iterdir():  # files the notebook names (config, data)
            if extra.is_file() and extra.suffix != ".ipynb":
                shutil.copy(extra, master.parent / extra.name)
        quiet = io.StringIO()
        level = logging.getLogger("otter").level
        logging.getLogger("otter").setLevel(logging.ERROR)
        try:
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
                assign(str(master), str(Path(tmp) / "dist"), no_pdfs=True, no_run_tests=True)
        except Exception as err:  # noqa: BLE001 - otter's own refusal, named
            raise SourceError(f"{path}: otter assign refused it: {err}") from None
        finally:
            logging.getLogger("otter").setLevel(level)
        graded = source.load(Path(tmp) / "dist" / "autograder" / path.name)
        meta = graded.metadata.get("otter", {}).get("tests") or {}
        files = sorted((Path(tmp) / "dist" / "autograder" / "tests").glob("*.py"))
        # an OK-format test is a dict (in the metadata) or a file defining one; otter's
        # exception-based tests are Python source either way, with OK_FORMAT = False
        sources = [*(s for s in meta.values() if isinstance(s, str)),
                   *(p.read_text(encoding="utf-8") for p in files)]  # fmt: skip
        if any("OK_FORMAT = False" in text for text in sources):
            report.append(
                f"{path.name}: otter's exception-based tests (tests: ok_format: false) are not "
                "carried: write them as OK-format tests, or as checks"
            )
            return {}
        if meta:
            return {name: OKTestFile.from_spec(spec) for name, spec in meta.items()}
        return {p.stem: OKTestFile.from_file(str(p)) for p in files}


def _public_cell(name: str, cases: list) -> str:
    """The public cases as a cell the student runs (otter's ``grader.check``)."""
    shown = "\n".join(tc.body.strip() for tc in cases)
    return (
        f"# %%\n# The public tests of {name}: run this cell to check your work (the grader "
        "runs these, and hidden ones).\nimport doctest as _doctest\n\n"
        f"_doctest.run_docstring_examples({shown!r}, globals(), name={name!r})"
    )


def _question(
    file: str, stem: str | None, q: _Question, tests: dict, report, taken: set[str]
) -> Imported:
    name = str(q.config["name"])
    manual = bool(q.config.get("manual"))
    prompt, code, written, answer, start, explained = [], [], [], [], [], []
    for number, cell in q.before:
        where = f"{file} cell {number}"
        if cell.cell_type == "markdown":
            prompt.append(cell.source)
            source.note_images(cell.source, where, report)
        elif cell.source.strip():
            start.append("# %%\n" + source.kernel_code(cell.source, where, report))
    lead = len(prompt)  # the Markdown before the question: the notebook's, not its title
    code += start
    student = ""
    for number, cell, block in q.body:
        where = f"{file} cell {number}"
        if cell.cell_type == "markdown":
            source.note_images(cell.source, where, report)
        if block == "TESTS":
            continue  # otter assign's reading of them is the checks
        if block == "PROMPT":
            student += cell.source
        elif block == "SOLUTION" and manual:
            answer.append(
                f"```python\n{cell.source}\n```" if cell.cell_type == "code" else cell.source
            )
        elif block == "SOLUTION" and cell.cell_type == "markdown":
            if "otter_include" in cell.metadata.get("tags", []):  # the student sees it
                code.append(source.markdown_cell(cell.source))
            else:  # the solution's own words: the worked solution
                explained.append(cell.source)
        elif block == "SOLUTION":
            code.append("# %%\n" + source.marked(cell.source, where, report))
        elif cell.cell_type == "markdown" and len(code) > len(start):
            code.append(source.markdown_cell(cell.source))  # among the part's code cells
        elif cell.cell_type == "markdown":
            prompt.append(cell.source)
        elif cell.source.strip():
            code.append("# %%\n" + source.kernel_code(cell.source, where, report))
    checks: list[Test] = []
    answers = []
    test_file = tests.get(name)
    if manual:
        points = float(q.config.get("points") or 0)
        if any(c.cell_type == "code" for _, c, b in q.body if b == "SOLUTION"):
            report.append(
                f"{q.where} ({name}): a manually graded code question becomes a written part "
                "(the student answers in a Markdown cell; nothing runs it)"
            )
        rubric = "\n\n".join(answer) or "Graded by a person."
        prompt_text = f"Your answer{': ' + student.strip() if student.strip() else ''}"
        written.append(Written(identifier(name), prompt_text[:300], points, rubric))
        if code:
            report.append(
                f"{q.where} ({name}): the code cells of a manually graded question are not "
                "carried (a later cell that needs what they define will not find it)"
            )
        code = []
    elif test_file is None or not test_file.test_cases:
        raise _Untested(code)
    else:
        cases = test_file.test_cases
        for i, tc in enumerate(cases, start=1):
            case, where = tc.name or f"{name} - {i}", f"{q.where} ({name} test {i})"
            found = None
            if not test_file.all_or_nothing:  # its cases are one check
                found = source.numeric(tc.body, doctest=True)
                found = numeric_answers(case, found, float(tc.points), taken)
            if found:
                answers += found
                shown = ", ".join(f"`{a.variable}` ({a.shown()})" for a in found)
                report.append(f"{where}: became the numeric answer {shown}")
                continue
            source.note_test(_doctest_code(tc.body), where, report)
            if not test_file.all_or_nothing:
                hint, hidden = tc.failure_message or None, bool(tc.hidden)
                body = tc.body.strip()
                checks.append(
                    Test(case, float(tc.points), body, doctest=True, hidden=hidden, hint=hint)
                )
        if test_file.all_or_nothing:
            body = "\n".join(tc.body.strip() for tc in cases)
            checks.append(Test(name, float(sum(tc.points for tc in cases)), body, doctest=True))
        public = [tc for tc in cases if not tc.hidden]
        if public:
            code.append(_public_cell(name, public))
    own, _ = source.titled("\n\n".join(prompt[lead:]), "")
    title, text = source.titled("\n\n".join(p for p in prompt if p.strip()), name)
    title = own or title
    return Imported(
        slug=f"{slug(stem)}-{slug(name)}" if stem else slug(name),
        title=title,
        ref=f"{file}, cells {q.first}-{q.last} ({name})",
        prompt=text or title,
        code="\n\n".join(code),
        tests=checks,
        written=written,
        answers=answers,
        solution="\n\n".join(explained),
    )


class _Untested(Exception):  # noqa: N818 - a question that is no question
    """An autograded question with no tests: its code cells, for the next question."""

    def __init__(self, code: list[str]):
        super().__init__()
        self.code = code


def _doctest_code(body: str) -> str:
    """The Python of a doctest's examples (for the report's notes on a test)."""
    return "\n".join(e.source for e in doctest.DocTestParser().get_examples(body))


def read(path: Path, report: list[str], *, prefix: bool = False) -> list[Imported]:
    """The questions of one otter-assign source notebook (format v1); what is not carried
    goes to ``report``.  :class:`SourceError` names the cell of a malformed source, or
    says what otter assign refused."""
    assign, Assignment, QuestionConfig, OKTestFile, unfenced = _otter()
    nb = source.load(path)
    cells = [unfenced(c) for c in nb.cells]  # a ```otter Markdown cell is a raw one
    questions = _structure(path, cells, Assignment, QuestionConfig, report)
    for q in questions:  # the solution regions, checked before otter assign reads them
        for number, cell, block in q.body:
            if block == "SOLUTION" and cell.cell_type == "code" and not q.config.get("manual"):
                source.marked(cell.source, f"{path.name} cell {number}")
    tests = _tests(path, assign, OKTestFile, report)
    if not any(not q.config.get("manual") for q in questions) and not tests:
        report.append(f"{path.name}: no autograded question")
    stem, taken = (path.stem if prefix else None), set()
    out, carried = [], []
    for q in questions:
        try:
            imported = _question(path.name, stem, q, tests, report, taken)
        except _Untested as untested:
            where = f"{q.where} ({q.config['name']})"
            follows = "its code goes to the next question" if q is not questions[-1] else ""
            report.append(f"{where}: an autograded question with no tests is not carried"
                          + (f"; {follows}" if follows else ""))  # fmt: skip
            carried += untested.code
            continue
        if carried and imported.code:
            imported.code = "\n\n".join([*carried, imported.code])
            carried = []
        out.append(imported)
    return out
