"""The rules both sides apply to an answer: its value, its unit, its tolerance, plausibility.

The generator computes each key with :func:`evaluate`; the grader computes a carried
answer (error carried forward) with the same function over the student's own earlier
answers; the self-test compiler traces it into JavaScript.  :func:`within` is the one
tolerance test, :func:`unit_factor` the one unit conversion and :func:`plausible` the one
bound on what an earlier answer may carry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

import costmodel
from costmodel import expression
from costmodel.units import to_si

# An earlier answer further than this factor from its key earns no carried credit:
# orders of magnitude off is not a slip, and it would let anything through.
PLAUSIBLE_FACTOR = 100.0


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


def plausible(value: float, key: float) -> bool:
    """An earlier answer that may carry credit: same sign, within 100x of its key, not 0."""
    if value == 0 or key == 0 or (value > 0) != (key > 0):
        return False
    return 1 / PLAUSIBLE_FACTOR <= value / key <= PLAUSIBLE_FACTOR
