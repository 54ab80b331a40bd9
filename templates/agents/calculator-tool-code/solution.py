"""A calculator tool for an agent (000 §7.1, §7.4 (agent loop code)).

``calculator(expression)`` evaluates an integer expression written by a language model:
integer literals, binary ``+``, ``-``, ``*``, unary minus and parentheses, with the usual
precedence (``*`` before ``+`` and ``-``, which group from left to right).  It returns a
Python ``int``, exact at any size.  Anything else raises ``ValueError``: other operators
(``/``, ``**``, ``%``, ``<<`` ...), names, calls, floats, strings, an empty or malformed
expression, and input too long or too deeply nested to parse.

A tool's input is data, not code (§7.4): never hand it to ``eval``, ``exec`` or
``compile``.  Parse it (``ast.parse`` builds a syntax tree without running anything) and
evaluate only the nodes you allow, as the notes' code does; or write a small parser.

The autograder checks sums and differences from left to right with unary minus, the
precedence of ``*`` and parentheses, exact integers beyond 64 bits, ``ValueError`` on
invalid input, long inputs (a result or a ``ValueError``, never another exception) and
that code written in the input never runs: it sends expressions that take Python half a
second to evaluate, with or without builtins, and times your function from outside.
"""

from __future__ import annotations

import ast  # ast.parse builds a syntax tree without running anything
import operator  # operator.add, operator.sub, operator.mul


def calculator(expression: str) -> int:
    """The value of an integer + − * expression; ValueError on anything else, never eval()."""
    ### BEGIN SOLUTION your calculator here
    if not isinstance(expression, str):
        raise ValueError("the expression must be a string")
    try:
        tree = ast.parse(expression, mode="eval")  # a syntax tree: nothing is executed
        return _evaluate(tree.body)
    except (SyntaxError, RecursionError, MemoryError) as err:  # malformed, too deep
        raise ValueError(f"cannot evaluate the expression: {type(err).__name__}") from None
    ### END SOLUTION


### BEGIN SOLUTION
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def _evaluate(node: ast.AST) -> int:
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.Constant) and type(node.value) is int:  # not True, not 1.5
        return node.value
    raise ValueError(f"unsupported expression: {type(node).__name__}")


### END SOLUTION
if __name__ == "__main__":
    print(calculator("2 + 3 * (4 - 6)"))  # -4
    print(calculator("-17 - 25"))  # -42: the agent's running total may be negative
    print(calculator("123456789012345678901 * 1000"))  # exact beyond 64 bits
    for bad in ["2 ** 100", "__import__('os').getcwd()", "7 / 2", "(1 + 2", ""]:
        try:
            calculator(bad)
        except ValueError as err:
            print(repr(bad), "->", err)
