"""Test cells, as nbgrader and otter write them, run in the probe process against the
notebook.

An imported question (:mod:`generator.imports`) keeps its source's tests as they are:
nbgrader's test cells, plain Python that reads the notebook's names (``assert
squares(10) == [...]``), may hide one of them (``del squares``) and bind it again; otter's
doctests (``>>> squares(3)`` then ``[1, 4, 9]``).  :func:`probe` runs each in the probe
process, never in the student's, in a namespace (:class:`Notebook`) that resolves a free
name the way the notebook's kernel would, through the harness:

- the test's own names first (``orig = squares``, ``import numpy as np``, a helper);
- then the notebook's: a function is called in the student's process
  (``student.sibling``), with arguments and results crossing as data; a module is imported
  here by its name (:data:`SHARED_MODULES`); any other value is read as data;
- then the built-ins, this process's.

``del name`` and ``name = value`` on one of the notebook's names act on the notebook's
namespace (``student.unbind`` / ``student.bind``), so a test that hides a function to see
whether another one calls it works as in the kernel.  What crosses is data: an object
whose ``__eq__`` always says yes never reaches an ``assert``, it is refused on the wire.

A test cell passes when it raises nothing.  A last expression that is a number from 0 to
the test's points is partial credit, nbgrader's rule (``nbgrader.utils.determine_grade``).
A doctest passes when each example prints what it expects (:func:`run_doctest`).
:func:`grade` turns each scored test into a :class:`Property` weighted by its points; a
message names the line that failed, unless that line is hidden.

Differences from the kernel, written in the importer's report and in the authors' guide:
a student's function gets copies of its arguments (a test that relies on it mutating one
in place fails), and a name the notebook gives to a built-in (``sum = ...``) is not seen.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import doctest
import importlib
import io
import math
import numbers
from dataclasses import dataclass

import numpy as np

from .grading import Property
from .record import error_text

SHARED_MODULES = frozenset(
    {
        "cmath",
        "collections",
        "decimal",
        "fractions",
        "functools",
        "itertools",
        "math",
        "numpy",
        "operator",
        "random",
        "re",
        "statistics",
        "string",
        "torch",
    }
)  # a module the notebook imported, that a test may use by the notebook's name for it
_BUILTINS = frozenset(dir(builtins))
_np_bool = np.bool_
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
ERROR_TEXT = 600  # the end of a doctest's report of its failure, kept for the message


@dataclass(frozen=True)
class Test:
    """One test: its name, its points and its source (hidden lines included).
    ``setup``: an earlier test cell run first for the names it defines, not scored.
    ``doctest``: the source is a doctest (otter's OK format: ``>>> expr`` then the output
    it must print), run as otter runs it (``otter.test_files.ok_test.run_doctest``).
    ``hidden``: the whole test is hidden, and so is why it failed.  ``hint``: what the
    author tells a student who fails it (otter's ``failure_message``)."""

    __test__ = False  # not pytest's

    name: str
    points: float
    source: str
    setup: bool = False
    doctest: bool = False
    hidden: bool = False
    hint: str | None = None

    def hidden_lines(self) -> set[int]:
        """The 1-based lines inside ``### BEGIN/END HIDDEN TESTS`` (markers included)."""
        out, inside = set(), False
        for number, line in enumerate(self.source.splitlines(), start=1):
            text = line.strip()
            if text.startswith(HIDDEN[0]):
                inside = True
            if inside:
                out.add(number)
            if text.startswith(HIDDEN[1]):
                inside = False
        return out


def visible(source: str) -> str:
    """A test's source as the student sees it: its hidden lines removed (nbgrader's
    ``ClearHiddenTests``)."""
    hidden = Test("", 0, source).hidden_lines()
    lines = source.splitlines()
    return "\n".join(x for i, x in enumerate(lines, start=1) if i not in hidden).strip("\n")


# --- probe side ------------------------------------------------------------------------


class Notebook(dict):
    """A test cell's globals: its own names, then the notebook's (read through
    ``student``, every time: a value the student's code changes is read anew), then the
    built-ins."""

    def __init__(self, student):
        super().__init__(__builtins__=builtins, __name__="__main__")
        self._student = student
        self._theirs: set[str] = set()  # the notebook's names this test has touched

    def __missing__(self, name: str):
        if name in _BUILTINS or name.startswith("__"):
            raise KeyError(name)
        try:
            kind = self._student.variable(name)
        except NameError:
            raise KeyError(name) from None
        self._theirs.add(name)
        if kind[0] == "function":
            return self._student.sibling(name)
        if kind[0] == "module":
            return _module(name, kind[1])
        return kind[1]

    def _notebooks(self, name: str) -> bool:
        """Whether ``name`` is the notebook's (a test that sets it sets the notebook's)."""
        if name in self._theirs:
            return True
        try:
            self._student.variable(name)
        except NameError:
            return False
        except TypeError:  # it is there, but not data
            pass
        self._theirs.add(name)
        return True

    def __setitem__(self, name: str, value) -> None:
        if not dict.__contains__(self, name) and self._notebooks(name):
            if isinstance(value, type(self._student)):  # the notebook's, as a test kept it
                self._student.bind(name, source=value.__name__)
            else:
                self._student.bind(name, value)
            return
        dict.__setitem__(self, name, value)

    def __delitem__(self, name: str) -> None:
        if dict.__contains__(self, name):
            dict.__delitem__(self, name)
            return
        try:
            self._student.unbind(name)
        except NameError:
            raise KeyError(name) from None
        self._theirs.add(name)


def _module(name: str, module: str):
    top = module.partition(".")[0]
    if top not in SHARED_MODULES:
        raise ImportError(
            f"the test uses {name}, the notebook's module {module!r}, which the grader does "
            f"not share (it shares {', '.join(sorted(SHARED_MODULES))}); import it in the test"
        )
    return importlib.import_module(module)


def _failed_line(err: BaseException, filename: str) -> int | None:
    """The line of the test where ``err`` went up (the last frame of the test's code)."""
    line, tb = None, err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def run_doctest(test: Test, ns: Notebook) -> dict:
    """Run a doctest in ``ns`` (its names stay there, as otter's ``clear_globs=False``):
    ``error`` is doctest's report of the first example that printed something else."""
    examples = [e for e in doctest.DocTestParser().parse(test.source, test.name)
                if isinstance(e, doctest.Example)]  # fmt: skip
    case = doctest.DocTest(examples, {}, test.name, None, None, test.source)
    case.globs = ns  # the notebook's names, not a copy
    runner = doctest.DocTestRunner(verbose=False, optionflags=doctest.REPORT_ONLY_FIRST_FAILURE)
    report = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()):
        runner.run(case, out=report.write, clear_globs=False)
    if runner.failures:
        text = report.getvalue().strip("*\n ")
        return {"error": text[-ERROR_TEXT:], "line": None, "value": None}
    return {"error": None, "line": None, "value": None}


def run_test(test: Test, ns: Notebook) -> dict:
    """Run one test cell in ``ns``: ``error`` (None when it passed), ``line`` (where it
    failed) and ``value`` (its last expression, when that is a number)."""
    if test.doctest:
        return run_doctest(test, ns)
    filename = f"<test {test.name}>"
    try:
        tree = ast.parse(test.source, filename)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, filename, "exec"), ns)  # noqa: S102 - the author's test
        value = None
        if last is not None:
            expr = ast.Expression(last.value)
            value = eval(compile(expr, filename, "eval"), ns)  # noqa: S307
    except SyntaxError as err:
        return {"error": error_text(err), "line": err.lineno, "value": None}
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # noqa: BLE001 - a failed test: what it raised is its result
        # (the student's process gone or too slow included: each test after fails the same)
        return {"error": error_text(err), "line": _failed_line(err, filename), "value": None}
    number = None
    if isinstance(value, numbers.Real) and not isinstance(value, bool | _np_bool):
        number = float(value) if math.isfinite(value) else None
    return {"error": None, "line": None, "value": number}


def probe(student, tests: list[Test], params: dict | None = None) -> dict:
    """Run the tests in order, as the kernel would: the names a test defines carry into
    the tests after it (a setup test only runs for them).  ``params``, the student's drawn
    parameters (SI values), is the tests' ``params``: a test of a question an author has
    parameterised reads its numbers there."""
    shared: dict = {"params": dict(params or {})}
    out = {}
    for test in tests:
        ns = Notebook(student)
        dict.update(ns, shared)
        result = run_test(test, ns)
        shared.update({k: v for k, v in dict.items(ns) if not k.startswith("__")})
        if not test.setup:
            out[test.name] = result
    return {"tests": out}


# --- grade side (trusted) --------------------------------------------------------------


def score(test: Test, got) -> tuple[float, str]:
    """A test's score in [0, 1] and its message, from what :func:`run_test` returned (and
    the author's hint, where it failed)."""
    points, message = _score(test, got)
    if points < 1 and test.hint:
        message = f"{message} {test.hint}"
    return points, message


def _score(test: Test, got) -> tuple[float, str]:
    if not isinstance(got, dict):
        return 0.0, f"Test {test.name} did not run."
    error = got.get("error")
    if error is not None and test.hidden:
        return 0.0, f"Test {test.name} (hidden) failed."
    if error is not None and test.doctest:
        return 0.0, f"Test {test.name} failed:\n{str(error)[-ERROR_TEXT:]}"
    if error is not None:
        line = got.get("line")
        where = ""
        if isinstance(line, int) and line not in test.hidden_lines():
            lines = test.source.splitlines()
            if 1 <= line <= len(lines):
                where = f" at `{lines[line - 1].strip()[:160]}`"
        kind = "a hidden check" if isinstance(line, int) and not where else "the test"
        return 0.0, f"Test {test.name}: {kind} failed{where}: {str(error)[:300]}."
    value = got.get("value")
    if isinstance(value, int | float) and math.isfinite(value) and test.points > 0:
        if 0 <= value < test.points:
            return value / test.points, f"Test {test.name} gives {value:g} of {test.points:g}."
    return 1.0, f"Test {test.name} passes."


def grade(result, tests: list[Test]) -> list[Property]:
    """One property per scored test, weighted by its points."""
    got = result.get("tests") if isinstance(result, dict) else None
    got = got if isinstance(got, dict) else {}
    return [
        Property(f"test {t.name}", t.points, *score(t, got.get(t.name)))
        for t in tests
        if not t.setup
    ]
