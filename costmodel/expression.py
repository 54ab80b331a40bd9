"""Arithmetic over named values, for the answer graph: ``"d_model // n_heads"``, ``"m >= p"``.

Question folders state derived parameters, constraints, formula arguments and
misconceptions as small expressions over the question's parameters and answers.  The
generator evaluates them to build the key; the autograder evaluates the same
expressions over a student's own earlier answers (error carried forward).  Only
arithmetic, comparisons, boolean logic and a few math functions are allowed: no
attribute access, no subscripts, no calls outside :data:`FUNCTIONS`.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "round": round,
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "exp": math.exp,
    "int": int,
    "float": float,
}

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}


class ExpressionError(ValueError):
    """An expression that is not allowed, or names something that does not exist."""


@cache
def parse(source: str) -> ast.Expression:
    """Parse and check ``source`` once; raise :class:`ExpressionError` naming what is wrong."""
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"{source!r} is not an expression ({err.msg})") from None
    for node in ast.walk(tree):
        allowed = (
            ast.Expression,
            ast.Constant,
            ast.Name,
            ast.Load,
            ast.BinOp,
            ast.UnaryOp,
            ast.Compare,
            ast.BoolOp,
            ast.And,
            ast.Or,
            ast.IfExp,
            ast.Call,
            ast.List,
            ast.Tuple,
            *_BINARY,
            *_COMPARE,
            *_UNARY,
        )
        if not isinstance(node, allowed):
            raise ExpressionError(f"{source!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and not node.keywords
        ):
            raise ExpressionError(
                f"{source!r}: only these functions may be called: {', '.join(FUNCTIONS)}"
            )
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float | str):
            raise ExpressionError(f"{source!r}: constant {node.value!r} is not allowed")
    return tree


def names(source: str) -> set[str]:
    """The names an expression reads (the edges of the answer graph)."""
    return {
        n.id for n in ast.walk(parse(source)) if isinstance(n, ast.Name) and n.id not in FUNCTIONS
    }


def evaluate(source: str | int | float, values: Mapping[str, Any]) -> Any:
    """Evaluate ``source`` with ``values`` for its names (a number evaluates to itself)."""
    if isinstance(source, int | float):
        return source
    return _eval(parse(source).body, values, source)


def _eval(node: ast.AST, values: Mapping[str, Any], source: str) -> Any:
    match node:
        case ast.Constant(value=v):
            return v
        case ast.Name(id=name):
            if name in values:
                return values[name]
            raise ExpressionError(f"{source!r}: unknown name {name!r}")
        case ast.BinOp(left=left, op=op, right=right):
            return _BINARY[type(op)](_eval(left, values, source), _eval(right, values, source))
        case ast.UnaryOp(op=op, operand=operand):
            return _UNARY[type(op)](_eval(operand, values, source))
        case ast.BoolOp(op=ast.And(), values=items):
            return all(_eval(v, values, source) for v in items)
        case ast.BoolOp(op=ast.Or(), values=items):
            return any(_eval(v, values, source) for v in items)
        case ast.Compare(left=left, ops=ops, comparators=rights):
            current = _eval(left, values, source)
            for op, right in zip(ops, rights, strict=True):
                nxt = _eval(right, values, source)
                if not _COMPARE[type(op)](current, nxt):
                    return False
                current = nxt
            return True
        case ast.IfExp(test=test, body=body, orelse=orelse):
            chosen = body if _eval(test, values, source) else orelse
            return _eval(chosen, values, source)
        case ast.Call(func=ast.Name(id=fname), args=args):
            return FUNCTIONS[fname](*(_eval(a, values, source) for a in args))
        case ast.List(elts=items) | ast.Tuple(elts=items):
            return [_eval(v, values, source) for v in items]
    raise ExpressionError(f"{source!r}: cannot evaluate {ast.dump(node)}")  # pragma: no cover
