"""One source per code part: the starter a student gets is derived from the solution.

A code part's ``solution.py`` marks what the student writes with nbgrader's markers::

    def ring_allreduce(x, rank, world, comm):
        \"\"\"...\"\"\"
        ### BEGIN SOLUTION your ring all-reduce here
        p = world
        ...
        ### END SOLUTION

The starter is the file with each region replaced: a region inside a block becomes
``raise NotImplementedError("your ring all-reduce here")`` at the marker's indentation (the
words after ``### BEGIN SOLUTION``; "your code here" without them); a region at the top
level (helpers, constants the student writes) is removed.  The reference solution is the
file with the marker lines removed.  nbgrader reads the same markers (``ClearSolutions``).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
DEFAULT_HINT = "your code here"


class RegionError(ValueError):
    """Solution markers that do not pair up, or a starter or solution that is not Python."""


@dataclass(frozen=True)
class CodeSources:
    """What one ``solution.py`` gives: the starter and the reference, both checked."""

    starter: str
    solution: str


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def split(source: str, where: str = "solution.py") -> CodeSources:
    """The starter and the reference of a marked solution; :class:`RegionError` names the line."""
    starter: list[str] = []
    solution: list[str] = []
    opened: int | None = None  # line number of the open region's BEGIN
    regions = 0
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        text = line.strip()
        if text.startswith(BEGIN):
            if opened is not None:
                raise RegionError(
                    f"{where}: line {number}: {BEGIN} inside the region opened on line {opened}"
                )
            opened, regions = number, regions + 1
            indent = _indent(line)
            if indent:
                hint = text[len(BEGIN) :].strip() or DEFAULT_HINT
                message = json.dumps(hint, ensure_ascii=False)  # a Python string literal too
                starter.append(f"{indent}raise NotImplementedError({message})\n")
        elif text.startswith(END):
            if opened is None:
                raise RegionError(f"{where}: line {number}: {END} without a {BEGIN}")
            opened = None
        else:
            solution.append(line)
            if opened is None:
                starter.append(line)
    if opened is not None:
        raise RegionError(f"{where}: line {opened}: {BEGIN} is never closed by {END}")
    if not regions:
        raise RegionError(f"{where}: no {BEGIN} / {END} region: mark the code the student writes")
    sources = CodeSources("".join(starter), "".join(solution))
    for kind, text in (("starter", sources.starter), ("solution", sources.solution)):
        try:
            ast.parse(text)
        except SyntaxError as err:
            raise RegionError(
                f"{where}: the {kind} derived from it is not Python: line {err.lineno}: {err.msg}"
            ) from None
    return sources


def defines(source: str, name: str) -> bool:
    """Whether ``source`` defines ``name`` at its top level (a function or a class)."""
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.name == name
        for node in ast.parse(source).body
    )
