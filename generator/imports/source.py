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
_PROMPT = re.compile(r'^\s*"""\s*#\s*(BEGIN|END) PROMPT\s*$')  # otter's student text
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


def marked(source: str, where: str) -> str:
    """A solution cell's source with ``### BEGIN/END SOLUTION`` regions, as ScaleGrade
    reads them (:mod:`generator.starter`): nbgrader's and otter's ``# BEGIN SOLUTION``
    (``NO PROMPT`` or not), otter's ``stmt  # SOLUTION`` line as a region of its own, its
    ``\"\"\" # BEGIN PROMPT`` text dropped (the starter is derived instead); a source with
    no marker at all is all solution, as nbgrader takes it.  Markers that do not pair are
    an error naming ``where``."""
    lines, prompt = [], False
    for line in source.splitlines():
        if _PROMPT.match(line):
            prompt = _PROMPT.match(line).group(1) == "BEGIN"
            continue
        if prompt:
            continue
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
