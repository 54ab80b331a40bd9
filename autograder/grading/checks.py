"""The code checks of a question: its ``checks.py`` holds ``probe`` and ``grade``.

``probe(student, seed, params)`` runs inside the sandbox, after the notebook's cells, and
returns plain data (with :class:`autograder.checklib.Record` values); ``grade(result, seed,
params)`` runs here, in the trusted process, and returns one weighted
:class:`autograder.checklib.Property` per check (name, weight >= 0, score in [0, 1],
message; a dict of those four keys is read too, as checks released before the library
wrote them).  The authors' library, :mod:`autograder.checklib`, is the one import of
ScaleGrade a checks file has, on both sides.

A check that raises is the grader's error, never the student's: :func:`grade_result`
raises :class:`ChecksError` naming the file, line and seed, and grading leaves the part
pending and the batch's error (``autograder.grading.grade``); ``scalegrade/selfcheck.py`` runs
every code part's solution and starter through its checks before release.

Grading loads the checks that release wrote to ``keys/`` (:class:`autograder.grading.keys.Keys`),
never the question bank's, and never anything a student wrote: the source text travels to
the sandbox, and ``grade`` is compiled from the same text here.  :func:`load_checks`
reads a bank's file, for authors and tests.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from autograder.checklib import Property

Grade = Callable[[Any, int, dict], list[dict]]


class ChecksError(ValueError):
    """A checks file that is missing, outside its question folder, lacks probe/grade, or
    whose grade() returned something that is not a list of properties."""


_IMPORTS_TORCH = re.compile(r"^\s*(?:import|from)\s+torch\b", re.MULTILINE)


def preloads(module: ModuleType, source: str) -> tuple[str, ...]:
    """The modules the warm executor imports once per batch for these checks, instead of
    each submission importing them: the checks' ``PRELOAD`` (for what the student's code is
    asked to use: torch.utils.checkpoint imports torch._dynamo on its first call), else
    torch where the checks import it."""
    declared = getattr(module, "PRELOAD", None)
    if declared is not None:
        if not isinstance(declared, (tuple, list)) or not all(
            isinstance(m, str) and m for m in declared
        ):
            raise ChecksError(f"{module.__file__}: PRELOAD must be a tuple of module names")
        return tuple(declared)
    return ("torch",) if _IMPORTS_TORCH.search(source) else ()


def runs_isolated(module: ModuleType) -> bool:
    """Whether the module's probe() runs in the probe process, beside the student's: always,
    unless it says ``ISOLATED = False`` (checks written before the probe process, whose
    probe runs in the student's process, where the student's code can reach it)."""
    isolated = getattr(module, "ISOLATED", True)
    if type(isolated) is not bool:
        raise ChecksError(f"{module.__file__}: ISOLATED must be True or False")
    return isolated


@dataclass(frozen=True)
class Checks:
    """A question's checks: the source for the sandbox, ``grade`` for the grader."""

    name: str  # where the source came from, for messages: keys/checks/<question>/checks.py
    source: str  # the whole file; the sandbox executes it and calls probe()
    grade: Grade
    module: ModuleType  # the instructor's module (run_locally calls its probe)
    preload: tuple[str, ...] = ()  # imported once in the warm executor (:func:`preloads`)
    isolated: bool = True  # probe() runs in the probe process, beside the student's

    @classmethod
    def from_source(cls, source: str, name: str) -> Checks:
        """Compile ``source`` into a module of its own, named by its content (registered, as
        an import would, so that dataclasses and pickling work; no bytecode is written)."""
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
        module = ModuleType(f"scalegrade_checks_{digest}")
        module.__file__ = name
        sys.modules[module.__name__] = module
        try:
            exec(compile(source, name, "exec"), module.__dict__)  # noqa: S102 - instructor's code
        except Exception as err:
            sys.modules.pop(module.__name__, None)
            raise ChecksError(f"{name}: cannot be loaded: {type(err).__name__}: {err}") from err
        for fn in ("probe", "grade"):
            if not callable(getattr(module, fn, None)):
                raise ChecksError(f"{name}: defines no function {fn}()")
        return cls(
            name, source, module.grade, module, preloads(module, source), runs_isolated(module)
        )


_BY_FILE: dict[tuple[Path, int], Checks] = {}  # (path, mtime): a bank's file, loaded once


def load_checks(folder: Path | str, checks: str | Path) -> Checks:
    """A bank's ``folder/checks`` (a CodePart's ``checks`` file, which must lie in the folder)."""
    folder = Path(folder).resolve()
    path = (folder / checks).resolve()
    if not path.is_relative_to(folder):
        raise ChecksError(f"{folder}: checks file {str(checks)!r} is outside the question folder")
    if not path.is_file():
        raise ChecksError(f"{path}: missing (named as the checks of a code part)")
    cache_key = (path, path.stat().st_mtime_ns)
    if cache_key not in _BY_FILE:
        _BY_FILE[cache_key] = Checks.from_source(path.read_text(encoding="utf-8"), str(path))
    return _BY_FILE[cache_key]


def properties(raw: Any, where: Path | str = "checks") -> list[dict]:
    """Check what a ``grade`` returned; the properties as plain dicts with float numbers."""
    if not isinstance(raw, list) or not raw:
        raise ChecksError(f"{where}: grade() must return a non-empty list of properties")
    out = []
    for i, p in enumerate(raw):
        if isinstance(p, Property):
            p = p.plain()
        try:
            prop = {
                "name": str(p["name"]),
                "weight": float(p["weight"]),
                "score": float(p["score"]),
                "message": str(p["message"]),
            }
        except (KeyError, TypeError, ValueError):
            raise ChecksError(
                f"{where}: grade() property {i} is not {{name, weight, score, message}}: {p!r}"
            ) from None
        w, s = prop["weight"], prop["score"]
        if not (math.isfinite(w) and w >= 0 and 0 <= s <= 1):
            raise ChecksError(
                f"{where}: grade() property {i} ({prop['name']}): the weight {w} must be >= 0 "
                f"and the score {s} in [0, 1]"
            )
        out.append(prop)
    return out


def failed_at(err: BaseException, filename: str) -> str:
    """``err`` as one line naming the line of ``filename`` it was raised at (the innermost
    frame in that file), e.g. ``line 57, in grade: NameError: name 'np' is not defined``."""
    what = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == filename]
    return f"line {frames[-1].lineno}, in {frames[-1].name}: {what}" if frames else what


def grade_result(grade: Grade, result: Any, seed: int, params: dict) -> list[dict]:
    """Run ``grade`` on a probe's result (plain data from the sandbox); checked properties.
    An exception is the checks' fault, never the student's: a :class:`ChecksError` naming
    the file, the line and the seed."""
    where = getattr(grade, "__module__", "checks")
    filename = getattr(sys.modules.get(where), "__file__", None) or where
    try:
        raw = grade(result, seed, params)
    except Exception as err:
        raise ChecksError(
            f"{filename}: grade() failed (seed {seed}): {failed_at(err, filename)}"
        ) from err
    return properties(raw, filename)


def fraction(props: list[dict]) -> float:
    """The weighted score in [0, 1] (0 when every weight is 0)."""
    total = sum(p["weight"] for p in props)
    return sum(p["weight"] * p["score"] for p in props) / total if total else 0.0


def local_student(fn: Callable, name: str | None = None):
    """``fn``, a function of this process, behind the probe process's interface
    (:class:`prober.Student`): the harness's server answers in a thread, over a socket
    pair, so arguments, results, callbacks and lent modules cross the same wire as a
    student's.  For tests and authors; never for a student's code."""
    from autograder.sandbox.inside import harness, prober

    name = name or getattr(fn, "__name__", "student")
    ns = dict(getattr(fn, "__globals__", {}))  # its siblings, as a notebook defines them
    ns[name] = fn
    return prober.Student(prober.in_process(ns, harness._Server), name)


def probe_locally(checks: Checks, student_fn: Callable, seed: int, params: dict) -> Any:
    """probe() in this process, its result as plain data, as it comes out of the sandbox
    (records included, through the probe process's own conversion, then JSON).  A probe
    written for the probe process (every one but ``ISOLATED = False``) gets the function
    behind :func:`local_student`.  For tests and authors: never on a student's code."""
    from autograder.sandbox.inside import prober

    isolated = checks.isolated
    student = local_student(student_fn) if isolated else student_fn
    try:
        return json.loads(json.dumps(prober._plain(checks.module.probe(student, seed, params))))
    finally:
        if isolated:
            student._channel.close()


def run_locally(
    checks_path: Path | str, student_fn: Callable, seed: int, params: dict | None = None
) -> list[dict]:
    """probe() then grade() in this process (:func:`probe_locally`), for tests and for
    checking a reference solution.  Never use this on a student's code: student code runs
    only in the sandbox."""
    path = Path(checks_path)
    checks = load_checks(path.parent, path.name)
    params = dict(params or {})
    result = probe_locally(checks, student_fn, seed, params)
    return grade_result(checks.grade, result, seed, params)
