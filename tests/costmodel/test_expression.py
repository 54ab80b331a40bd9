"""Expressions of the answer graph: arithmetic only, clear errors, the names they read."""

from __future__ import annotations

import pytest

from costmodel.expression import ExpressionError, evaluate, names


def test_arithmetic_comparisons_and_functions():
    values = {"d_model": 4096, "n_heads": 32, "p": 8, "m": 63}
    assert evaluate("d_model // n_heads", values) == 128
    assert evaluate("(p - 1) / (m + p - 1)", values) == pytest.approx(7 / 70)
    assert evaluate("d_model % n_heads == 0 and m >= p", values) is True
    assert evaluate("(d_model // n_heads) in [64, 128]", values) is True
    assert evaluate("ceil(m / p) if m > p else 1", values) == 8
    assert evaluate(3.5, values) == 3.5


def test_names_are_the_graph_edges():
    assert names("states_gb + activations_gb * ceil(n / k)") == {
        "states_gb",
        "activations_gb",
        "n",
        "k",
    }


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('true')",
        "().__class__.__bases__",
        "open('/etc/passwd')",
        "x[0]",
        "lambda: 1",
        "[y for y in range(3)]",
        "exp(x=1)",
    ],
)
def test_anything_but_arithmetic_is_refused(source):
    with pytest.raises(ExpressionError, match="not allowed|only these functions"):
        evaluate(source, {"x": [1]})


def test_unknown_name_and_syntax_errors_say_what():
    with pytest.raises(ExpressionError, match="unknown name 'n_gpu'"):
        evaluate("n_gpu * 2", {"n_gpus": 8})
    with pytest.raises(ExpressionError, match="is not an expression"):
        evaluate("n_gpus *", {"n_gpus": 8})
