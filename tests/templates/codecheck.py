"""Helpers for the tests of the bank's code questions: load a starter/solution function the
way a notebook cell defines it, grade it with the question's checks, read the properties."""

from __future__ import annotations

from pathlib import Path

from autograder.checks import fraction, run_locally

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"

__all__ = ["TEMPLATES", "fraction", "function", "grade", "lost", "names"]


def function(folder: Path, file: str, name: str):
    """The function ``name`` of a starter or solution file, as a notebook cell defines it."""
    ns: dict = {"__name__": "notebook_cell"}  # not "__main__": the file's demo stays off
    exec(compile((folder / file).read_text(encoding="utf-8"), str(folder / file), "exec"), ns)
    return ns[name]


def grade(folder: Path, fn, seed: int, params: dict | None = None) -> list[dict]:
    """probe() then grade() of ``folder/checks.py`` on ``fn``, in this process."""
    return run_locally(folder / "checks.py", fn, seed, params)


def lost(props: list[dict]) -> set[str]:
    """Names of the properties that did not score full marks."""
    return {p["name"] for p in props if p["score"] < 1}


def names(props: list[dict]) -> set[str]:
    return {p["name"] for p in props}
