"""What every reader does to a source notebook's cells: load it, mark its solutions as
ScaleGrade reads them, keep the code a kernel ran, title a prompt, and note what a test
or a cell cannot carry over.  ``where`` is always the notebook and cell ("problem1.ipynb
cell 3 (squares)"), for the error or the report line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat

from generator.starter import BEGIN, END, RegionError, split

from . import SourceError

MAGIC = re.compile(r"^\s*[%!]")  # IPython's %magic and !shell lines
_SOLUTION_MARK = re.compile(r"^(\s*)#+\s*(BEGIN|END) SOLUTION\b(?: NO PROMPT)?(.*)$")
_SOLUTION_LINE = re.compile(r"^(\s*)(.*?)\s*#\s*SOLUTION(?: NO PROMPT)?\s*$")  # otter's
_PROMPT = re.compile(r'^\s*"""\s*;?\s*#\s*(BEGIN|END) PROMPT\s*$')  # otter's student text
_IGNORE = re.compile(r"^\s*#\s*(BEGIN|END) IGNORE\s*$")  # otter: in no output
_IGNORED_LINE = re.compile(r"#\s*IGNORE\s*$")
_SEED = re.compile(r"\s*#\s*SEED\s*$")  # otter: the autograder's seed replaces the line
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)")
_NETWORK = {"socket", "requests", "urllib", "http", "httpx", "aiohttp", "urllib3"}
_BLANKS = re.compile(r"\n{3,}")
_RULE = re.compile(r"^\s*(-{3,}|\*{3,}|_{3,})\s*$")
_POINTS = re.compile(r"\s*\(\s*[\d.]+\s*points?\s*\)\s*$", re.IGNORECASE)
_BOLD_LEAD = re.compile(r"^\s*\*\*([^*]{1,80}?)\.?\*\*")


def load(path: Path) -> nbformat.NotebookNode:
    """A Python notebook, or :class:`SourceError` naming the file."""
    try:
        nb = nbformat.read(path, as_version=4)
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file") from None
    except Exception as err:  # noqa: BLE001 - nbformat raises many kinds on a bad file
        raise SourceError(f"{path}: not a Jupyter notebook ({err})") from None
    info = nb.metadata.get("language_info", {}).get("name", "python")
    kernel = nb.metadata.get("kernelspec", {}).get("language") or info
    if kernel != "python":
        raise SourceError(f"{path}: a {kernel} notebook; ScaleGrade grades Python")
    return nb


def marked(source: str, where: str, report: list[str] | None = None) -> str:
    """A solution cell's source with ``### BEGIN/END SOLUTION`` regions, as ScaleGrade
    reads them (:mod:`generator.starter`): nbgrader's and otter's ``# BEGIN SOLUTION``
    (``NO PROMPT`` or not), otter's ``stmt  # SOLUTION`` line as a region of its own, its
    ``\"\"\" # BEGIN PROMPT`` text dropped (the starter is derived instead), its ``#
    IGNORE`` lines and blocks dropped (in no output, as otter does) and its ``# SEED``
    marker (a report line: otter's seeding is not carried); a source with no marker at
    all is all solution, as nbgrader takes it.  Markers that do not pair are an error
    naming ``where``."""
    lines, prompt, ignored = [], False, False
    for line in source.splitlines():
        if _PROMPT.match(line):
            prompt = _PROMPT.match(line).group(1) == "BEGIN"
            continue
        if _IGNORE.match(line):
            ignored = _IGNORE.match(line).group(1) == "BEGIN"
            continue
        if prompt or ignored or _IGNORED_LINE.search(line):
            continue
        if _SEED.search(line):
            line = _SEED.sub("", line)
            if report is not None:
                report.append(f"{where}: `{line.strip()}` (otter's # SEED) stays as written")
        m = _SOLUTION_MARK.match(line)
        if m:
            lines.append(f"{m.group(1)}{BEGIN if m.group(2) == 'BEGIN' else END}{m.group(3)}")
            continue
        m = _SOLUTION_LINE.match(line)
        if m and m.group(2):
            lines += [f"{m.group(1)}{BEGIN}", f"{m.group(1)}{m.group(2)}", f"{m.group(1)}{END}"]
            continue
        lines.append(line)
    text = "\n".join(lines)
    if BEGIN not in text and END not in text:
        text = f"{BEGIN}\n{text}\n{END}"
    try:
        split(text, where)
    except RegionError as err:
        raise SourceError(str(err)) from None
    return text


def kernel_code(source: str, where: str, report: list[str] | None) -> str:
    """Code a kernel ran, as plain Python: ``%magic`` and ``!shell`` lines commented out
    (each a report line, when ``report`` is given)."""
    out = []
    for line in source.splitlines():
        if MAGIC.match(line):
            if report is not None:
                report.append(f"{where}: `{line.strip()}` (IPython) is commented out")
            line = "# " + line
        out.append(line)
    return "\n".join(out)


def markdown_cell(source: str) -> str:
    """A Markdown cell among a part's code cells (``# %% [markdown]``)."""
    return "# %% [markdown]\n" + "\n".join(f"# {x}".rstrip() for x in source.splitlines())


def titled(prompt: str, fallback: str) -> tuple[str, str]:
    """A question's title and its prompt: the prompt's last heading (the nearest to its
    code, its points dropped) taken out of it, else a bold lead (``**Question 1.**``),
    else ``fallback``; rules and runs of blank lines go."""
    lines = [x for x in prompt.splitlines() if not _RULE.match(x)]
    for i in reversed(range(len(lines))):
        if lines[i].lstrip().startswith("#"):
            title = _POINTS.sub("", lines[i].lstrip("# ").strip())
            if title:
                return title, _BLANKS.sub("\n\n", "\n".join(lines[:i] + lines[i + 1 :])).strip()
    text = _BLANKS.sub("\n\n", "\n".join(lines)).strip()
    bold = _BOLD_LEAD.match(text)
    return (bold.group(1).strip(), text) if bold else (fallback, text)


def note_images(source: str, where: str, report: list[str]) -> None:
    """A report line for each image a Markdown cell links by a relative path or attaches."""
    for image in _IMAGE.findall(source):
        if "://" not in image:
            kind = "an attached image" if image.startswith("attachment:") else f"the image {image}"
            report.append(f"{where}: {kind} is not copied; link it by URL")


def note_test(source: str, where: str, report: list[str]) -> None:
    """Report lines for a test that reaches the network (the grader has none) or compares
    with a number (it stays a test); :class:`SourceError` for one that is not Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise SourceError(f"{where}: line {err.lineno}: the test is not Python") from None
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        if any(n.partition(".")[0] in _NETWORK for n in names):
            report.append(f"{where}: the test reaches the network, which the grader has not")
    if re.search(r"==\s*-?\d+\.\d|isclose|allclose|approx\(", source):
        report.append(
            f"{where}: compares with a number; it stays a test (a numeric answer with units "
            "and tolerance is written by hand: docs/authors.md)"
        )


def _number(node) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return -inner if inner is not None else None
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    return None


def _isclose(call) -> tuple[str, float, dict] | None:
    """``np.isclose(x, 42.0, rtol=..., atol=...)`` or ``math.isclose(x, 42.0, rel_tol=...,
    abs_tol=...)``, either order: (x, 42.0, its tolerance)."""
    if not isinstance(call, ast.Call) or len(call.args) != 2:
        return None
    fn = call.func
    name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
    if name != "isclose":
        return None
    module = fn.value.id if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) else ""
    a, b = call.args
    var, value = (a, _number(b)) if isinstance(a, ast.Name) else (b, _number(a))
    if not isinstance(var, ast.Name) or value is None:
        return None
    kw = {k.arg: _number(k.value) for k in call.keywords}
    if module == "math":
        rel, absolute = kw.get("rel_tol", 1e-9), kw.get("abs_tol", 0.0)
    else:  # NumPy's defaults
        rel, absolute = kw.get("rtol", 1e-5), kw.get("atol", 1e-8)
    if rel is None or absolute is None:
        return None
    tolerance = {"rel": rel} if rel and value and 0 < rel < 1 else {"abs": absolute}
    return (var.id, value, tolerance) if tolerance.get("abs", 1) > 0 else None


def _within(test) -> tuple[str, float, dict] | None:
    """``abs(x - 42.0) < 1e-3`` (or ``<=``, either order inside): (x, 42.0, {abs: 1e-3})."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Lt | ast.LtE)):  # fmt: skip
        return None
    left, tol = test.left, _number(test.comparators[0])
    if not (isinstance(left, ast.Call) and getattr(left.func, "id", None) == "abs"
            and len(left.args) == 1 and tol and tol > 0):  # fmt: skip
        return None
    diff = left.args[0]
    if not (isinstance(diff, ast.BinOp) and isinstance(diff.op, ast.Sub)):
        return None
    for var, lit in ((diff.left, diff.right), (diff.right, diff.left)):
        if isinstance(var, ast.Name) and _number(lit) is not None:
            return var.id, _number(lit), {"abs": tol}
    return None


def numeric(test: str, doctest: bool = False) -> list[tuple[str, float, dict]] | None:
    """The comparisons of a notebook variable with a number that make up the whole of a
    test, as (variable, number, tolerance): nbgrader's ``assert abs(x - 42.0) < 1e-3`` and
    ``assert np.isclose(x, 42.0)``, otter's ``>>> np.isclose(x, 42.0)`` printing ``True``;
    None when the test does anything else."""
    if doctest:
        import doctest as doctests

        examples = doctests.DocTestParser().get_examples(test)
        if not examples or any(e.want.strip() != "True" for e in examples):
            return None
        found = [_isclose(_expression(e.source)) for e in examples]
    else:
        try:
            body = ast.parse(test).body
        except SyntaxError:
            return None
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # its docstring
        if not body or not all(isinstance(s, ast.Assert) for s in body):
            return None
        found = [_isclose(s.test) or _within(s.test) for s in body]
    return found if found and all(found) else None


def _expression(code: str):
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return None
    return body[0].value if len(body) == 1 and isinstance(body[0], ast.Expr) else None
