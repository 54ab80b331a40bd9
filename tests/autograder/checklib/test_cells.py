"""Test cells run against a notebook's names (autograder/checklib/cells.py).

The notebook is a namespace served by the harness's real server over a socket pair
(``prober.in_process``), as the student's process serves the probe process; the tests
are nbgrader's own kinds: asserts, a test that hides a function to see whether another
calls it, partial credit from a last expression (``nbgrader.utils.determine_grade``),
hidden lines.  Through the sandbox and against real nbgrader:
tests/generator/imports/test_nbgrader.py.
"""

from __future__ import annotations

import pytest

from autograder.checklib import cells
from autograder.checklib.cells import Test
from autograder.sandbox.inside import harness, prober

NOTEBOOK = """
import numpy as np
import json
calls = 0

def squares(n):
    global calls
    calls += 1
    if n < 1:
        raise ValueError("n must be at least 1")
    return [i ** 2 for i in range(1, n + 1)]

def sum_of_squares(n):
    return sum(squares(n))

def sum_alone(n):
    return sum(i * i for i in range(1, n + 1))

class Yes:
    def __eq__(self, other):
        return True

def always(n):
    return Yes()
"""

USES_SQUARES = """orig_squares = squares
del squares
try:
    {fn}(1)
except NameError:
    pass
else:
    raise AssertionError("{fn} does not use squares")
finally:
    squares = orig_squares"""


@pytest.fixture
def notebook():
    ns: dict = {}
    exec(NOTEBOOK, ns)  # noqa: S102 - the test's own notebook
    student = prober.Student(prober.in_process(ns, harness._Server), "squares")
    yield ns, student
    student._channel.close()


def run(student, *tests: Test) -> dict:
    """name -> (score, message) of each scored test."""
    props = cells.grade(cells.probe(student, list(tests)), list(tests))
    return {p.name.removeprefix("test "): (p.score, p.message) for p in props}


def test_a_test_passes_when_it_raises_nothing_and_names_the_line_that_failed(notebook):
    _, student = notebook
    got = run(
        student,
        Test("right", 1, "assert squares(3) == [1, 4, 9]\nassert np.allclose(squares(2), [1, 4])"),
        Test("wrong", 1, "assert squares(1) == [1]\nassert squares(2) == [1, 5], 'no'"),
        Test("raises", 1, "squares(0)"),
    )
    assert got["right"] == (1.0, "Test right passes.")
    assert got["wrong"][0] == 0 and "at `assert squares(2) == [1, 5], 'no'`" in got["wrong"][1]
    assert "ValueError: n must be at least 1" in got["raises"][1]


def test_hiding_a_function_reaches_the_notebook_and_is_undone(notebook):
    """nbgrader's sum_of_squares_uses_squares: `del squares` in the test hides the
    notebook's; a function that calls it then raises NameError there."""
    ns, student = notebook
    got = run(
        student,
        Test("uses", 1, USES_SQUARES.format(fn="sum_of_squares")),
        Test("alone", 1, USES_SQUARES.format(fn="sum_alone")),
        Test("after", 1, "assert sum_of_squares(3) == 14"),
    )
    assert got["uses"][0] == 1 and got["after"][0] == 1
    assert got["alone"][0] == 0 and "sum_alone does not use squares" in got["alone"][1]
    assert ns["squares"].__name__ == "squares"


def test_a_test_reads_and_sets_the_notebooks_state(notebook):
    ns, student = notebook
    got = run(student, Test("state", 1, "calls = 0\nsquares(2)\nsquares(3)\nassert calls == 2"))
    assert got["state"][0] == 1 and ns["calls"] == 2


def test_a_last_expression_below_the_points_is_partial_credit(notebook):
    """nbgrader's rule: a number from 0 to the points is the score; anything else, full."""
    _, student = notebook
    got = run(
        student,
        Test("half", 2, "len(squares(3)) / 3"),
        Test("zero", 2, "0"),
        Test("text", 2, "'0.5'"),
        Test("over", 2, "7"),
    )
    assert [got[k][0] for k in ("half", "zero", "text", "over")] == [0.5, 0.0, 1.0, 1.0]


def test_an_answer_equal_to_anything_never_reaches_the_assert(notebook):
    """In the kernel `always(3) == [1, 4, 9]` is True; here the value must cross as data."""
    _, student = notebook
    got = run(student, Test("yes", 1, "assert always(3) == [1, 4, 9]"))
    assert got["yes"][0] == 0 and "Yes" in got["yes"][1]


def test_hidden_lines_are_not_shown_when_they_fail():
    test = Test("h", 1, "x = 1\n### BEGIN HIDDEN TESTS\nassert x == 2\n### END HIDDEN TESTS")
    assert cells.visible(test.source) == "x = 1"
    assert cells.score(test, {"error": "AssertionError", "line": 3, "value": None}) == (
        0.0,
        "Test h: a hidden check failed: AssertionError.",
    )


def test_names_carry_to_later_tests_and_setup_tests_are_not_scored(notebook):
    _, student = notebook
    tests = [
        Test("defines", 1, "expected = [1, 4]", setup=True),
        Test("reads", 1, "assert squares(2) == expected"),
    ]
    assert run(student, *tests) == {"reads": (1.0, "Test reads passes.")}


def test_a_module_is_shared_only_from_the_list(notebook):
    _, student = notebook
    got = run(
        student, Test("np", 1, "assert np.sum(squares(2)) == 5"), Test("js", 1, "json.dumps(1)")
    )
    assert got["np"][0] == 1
    assert got["js"][0] == 0 and "import it in the test" in got["js"][1]


@pytest.mark.parametrize("result", [None, [], {"tests": 3}, {"tests": {"t": "x"}}])
def test_a_malformed_probe_result_scores_zero(result):
    props = cells.grade(result, [Test("t", 1, "pass")])
    assert [(p.score, p.message) for p in props] == [(0.0, "Test t did not run.")]


def test_a_notebook_that_stops_answering_fails_each_test_left_with_the_reason(notebook):
    _, student = notebook
    student._channel.gone = "the notebook's process ended during the call"  # as P marks it
    got = run(student, Test("a", 1, "assert squares(1) == [1]"), Test("b", 1, "squares(2)"))
    assert [s for s, _ in got.values()] == [0.0, 0.0]
    assert all("StudentGone: the notebook's process ended" in m for _, m in got.values())


def test_a_test_reads_the_students_drawn_parameters(notebook):
    _, student = notebook
    tests = [Test("drawn", 1, "assert len(squares(params['n'])) == params['n']")]
    result = cells.probe(student, tests, {"n": 7})
    assert cells.grade(result, tests)[0].score == 1


def test_an_otter_doctest_passes_when_each_example_prints_what_it_expects(notebook):
    """otter's OK format: `>>> expr` then its output (otter/test_files/ok_test.py)."""
    _, student = notebook
    got = run(
        student,
        Test("q1 - 1", 1, ">>> squares(3)\n[1, 4, 9]\n>>> calls > 0\nTrue", doctest=True),
        Test("q1 - 2", 1, ">>> squares(2)\n[1, 5]", doctest=True),
        Test("q1 - 3", 1, ">>> squares(2)\n[1, 5]", doctest=True, hidden=True),
        Test("q1 - 4", 1, ">>> always(1)\n[1]", doctest=True),
    )
    assert got["q1 - 1"] == (1.0, "Test q1 - 1 passes.")
    assert got["q1 - 2"][0] == 0 and "Expected:\n    [1, 5]\nGot:\n    [1, 4]" in got["q1 - 2"][1]
    assert got["q1 - 3"] == (0.0, "Test q1 - 3 (hidden) failed.")
    assert got["q1 - 4"][0] == 0  # its repr would print [1]: the value never crosses


def test_a_failed_test_ends_with_its_authors_hint():
    """otter's failure_message: shown when the test fails, hidden or not, never when it
    passes."""
    test = Test("q1 - 1", 1, ">>> x\n2", doctest=True, hidden=True, hint="Make sure x is 2.")
    failed = {"error": "Expected: 2 Got: 3", "line": None, "value": None}
    assert cells.score(test, failed) == (0.0, "Test q1 - 1 (hidden) failed. Make sure x is 2.")
    assert cells.score(test, {"error": None})[1] == "Test q1 - 1 passes."
