"""Helpers for the tests of the bank's code questions: define a starter or reference function
the way a notebook cell defines it, grade it with the question's checks, read the properties.

A code part has one source, its marked ``solution.py``: the starter and the reference are
derived from it by :func:`generator.starter.split`, as the engine derives them."""

from __future__ import annotations

from pathlib import Path

from autograder.grading.checks import fraction, local_student, run_locally, runs_isolated
from generator.starter import CodeSources, split

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"

__all__ = [
    "probed",
    "student_for",
    "TEMPLATES",
    "define",
    "fraction",
    "function",
    "grade",
    "lost",
    "names",
    "sources",
    "starter",
]


def sources(folder: Path, solution: str = "solution.py") -> CodeSources:
    """The starter and the reference derived from the marked ``folder/solution``."""
    path = folder / solution
    return split(path.read_text(encoding="utf-8"), str(path))


def define(source: str, where: str, name: str):
    """The function ``name`` of ``source``, as a notebook cell holding ``source`` defines it."""
    ns: dict = {"__name__": "notebook_cell"}  # not "__main__": the file's demo stays off
    exec(compile(source, where, "exec"), ns)
    return ns[name]


def function(folder: Path, file: str, name: str):
    """The function ``name`` of the reference derived from ``folder/file`` (markers removed)."""
    return define(sources(folder, file).solution, str(folder / file), name)


def starter(folder: Path, name: str, solution: str = "solution.py"):
    """The function ``name`` of the starter derived from ``folder/solution``: what the student
    gets."""
    return define(sources(folder, solution).starter, f"{folder / solution} (starter)", name)


def grade(folder: Path, fn, seed: int, params: dict | None = None) -> list[dict]:
    """probe() then grade() of ``folder/checks.py`` on ``fn``, in this process."""
    return run_locally(folder / "checks.py", fn, seed, params)


def lost(props: list[dict]) -> set[str]:
    """Names of the properties that did not score full marks."""
    return {p["name"] for p in props if p["score"] < 1}


def names(props: list[dict]) -> set[str]:
    return {p["name"] for p in props}


def student_for(module, fn):
    """``fn`` as a checks module's probe() gets the student's function: behind the probe
    process's interface when the checks run there (:func:`runs_isolated`)."""
    return local_student(fn) if runs_isolated(module) else fn


def probed(module, fn, seed: int, params: dict | None = None):
    """A checks module's probe() of ``fn``, as the probe process hands it back: plain
    data, its records converted (``prober._plain``)."""
    from autograder.sandbox.inside.prober import _plain

    return _plain(module.probe(student_for(module, fn), seed, params or {}))
