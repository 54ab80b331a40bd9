"""The rules both sides apply to an answer: its value, its unit, its tolerance, plausibility.

The generator computes each key with :func:`evaluate`; the grader computes a carried
answer (error carried forward) with the same function over the student's own earlier
answers; the self-test compiler traces it into JavaScript.  :func:`within` is the one
tolerance test, :func:`unit_factor` the one unit conversion and :func:`plausible` the one
bound on what an earlier answer may carry.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import cache
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

import costmodel
from costmodel import expression
from costmodel.units import to_si

# An earlier answer may carry credit to the parts computed from it only when it is a slip
# of that part: within this factor of its key, or one of its declared misconceptions.
# The slips the notes warn about keep the order of magnitude (GiB for GB 1.07x, 12 for
# 16 bytes per parameter 1.33x, 2ND for 6ND 3x, bits for bytes 8x); an answer further off
# is another quantity, and a wider window lets guesses through (100x admitted "1" for a
# segment length of 7 or a count of 32 micro-batches).  A misconception the question
# declares is a mistake the course names, so it carries at any distance.
PLAUSIBLE_FACTOR = 10.0


class Tolerance(BaseModel):
    """Relative, absolute (in the answer's unit) or significant figures: exactly one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rel: float | None = Field(default=None, gt=0, lt=1)
    abs: float | None = Field(default=None, gt=0)
    sig: int | None = Field(default=None, ge=1, le=8)

    @model_validator(mode="after")
    def _one(self) -> Tolerance:
        if sum(x is not None for x in (self.rel, self.abs, self.sig)) != 1:
            raise ValueError("give exactly one of rel, abs, sig")
        return self

    def __str__(self) -> str:
        """As a TA key shows it: "±1 %", "±0.5", "3 significant figures"."""
        if self.rel is not None:
            return f"±{100 * self.rel:g} %"
        if self.abs is not None:
            return f"±{self.abs:g}"
        return f"{self.sig} significant figures"

    @model_serializer
    def _only_the_one(self) -> dict[str, float]:
        given = (("rel", self.rel), ("abs", self.abs), ("sig", self.sig))
        return {k: v for k, v in given if v is not None}


# How a typed number may use commas (the self-test page runs the same patterns): groups of
# three after a first group that is not 0 (1,234,567; 1,234.5) are thousands; otherwise
# one comma between digits is a decimal comma (26,8; 0,125; 1,5e9); a single group of three
# (1,234) is either, and the grader takes the reading that is plausible for the key.
LEADING_NUMBER = r"^([+-]?)([0-9][0-9,]*(?:\.[0-9]*)?)"
COMMA_THOUSANDS = r"^[1-9][0-9]{0,2}(?:,[0-9]{3})+(?:\.[0-9]*)?$"
COMMA_DECIMAL = r"^[0-9]+,[0-9]+$"
_LEADING, _THOUSANDS, _DECIMAL = map(re.compile, (LEADING_NUMBER, COMMA_THOUSANDS, COMMA_DECIMAL))


def readings(text: str) -> list[str]:
    """``text`` with the commas of its leading number read: one reading, two for the
    ambiguous ``1,234`` (thousands first), none for a form that is neither (``1,2,3``)."""
    m = _LEADING.match(text)
    if not m or "," not in m[2]:
        return [text]
    sign, number, rest = m[1], m[2], text[m.end() :]
    if _THOUSANDS.match(number):
        plain = sign + number.replace(",", "") + rest
        if number.count(",") == 1 and "." not in number:
            return [plain, sign + number.replace(",", ".") + rest]
        return [plain]
    if _DECIMAL.match(number):
        return [sign + number.replace(",", ".") + rest]
    return []


class AnswerNode(Protocol):
    """A node of the answer graph: a cost-model formula over arguments, or an expression.

    ``args`` maps each formula argument to an expression over parameters and earlier
    answers, a number, or (for a choice argument such as a precision) a literal.
    """

    formula: str | None
    args: Mapping[str, Any]
    output: int | None
    expr: str | None


class Graded(Protocol):
    """What the tolerance needs of an answer: its tolerance, its units."""

    tolerance: Tolerance
    unit: str
    si_unit: str


class Known(Protocol):
    """A misconception's value, for :func:`plausible`."""

    value: float


class Keyed(Graded, Protocol):
    """An answer with its key and its declared misconceptions."""

    value: float
    misconceptions: tuple[Known, ...]


@cache
def unit_factor(unit: str, si_unit: str) -> float:
    """SI value of one ``unit`` (1 for a plain number): GB -> 1e9 bytes."""
    return to_si(f"1 {unit}", si_unit) if unit else 1.0


def evaluate(
    node: AnswerNode, scope: Mapping[str, Any], overrides: Mapping[str, Any] | None = None
) -> tuple[Any, dict[str, Any]]:
    """The value of ``node`` over ``scope`` (parameters and answers), and its arguments.

    ``overrides`` replaces some formula arguments (a misconception's ``args``).  The value
    is what the formula returns (no ``float()``: the self-test compiler passes tracers
    through); the arguments are resolved to numbers, for the worked solution.
    """
    if node.expr is not None:
        return expression.evaluate(node.expr, scope), {}
    domains = costmodel.formula(node.formula).domains
    args = {
        name: expression.evaluate(src, scope)
        if isinstance(src, str) and domains[name].kind != "choice"
        else src
        for name, src in {**node.args, **(overrides or {})}.items()
    }
    result = costmodel.evaluate(node.formula, **args)
    return (result[node.output] if node.output is not None else result), args


def value(node: AnswerNode, scope: Mapping[str, Any]) -> float:
    """The SI value of ``node`` over ``scope``."""
    return float(evaluate(node, scope)[0])


def within(value: float, target: float, a: Graded) -> bool:
    """``value`` equals ``target`` (both SI) within the answer's tolerance."""
    tol = a.tolerance
    if tol.rel is not None:
        return abs(value - target) <= tol.rel * abs(target) + 1e-300
    f = unit_factor(a.unit, a.si_unit)
    if tol.abs is not None:
        return abs(value - target) / f <= tol.abs + 1e-12
    shown = target / f
    if shown == 0:
        return value == 0
    half_unit = 0.5 * 10 ** (math.floor(math.log10(abs(shown))) - tol.sig + 1)
    return abs(value / f - shown) <= half_unit * (1 + 1e-9)


def plausible(value: float, a: Keyed) -> bool:
    """An earlier answer that may carry credit: one of ``a``'s declared misconceptions, or
    of the key's sign and within :data:`PLAUSIBLE_FACTOR` of it (never 0)."""
    if any(within(value, m.value, a) for m in a.misconceptions):
        return True
    key = a.value
    if value == 0 or key == 0 or (value > 0) != (key > 0):
        return False
    return 1 / PLAUSIBLE_FACTOR <= value / key <= PLAUSIBLE_FACTOR
