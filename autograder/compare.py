"""The trusted comparison: a harvested answer against the key.

Runs only in the grader's process, on plain data (numbers and strings) from the
sandbox.  Units are read with pint (``"21 GB"``, ``"19.6 GiB"``, ``"8.8 days"``; a bare
number is in the unit the question asks), then: within tolerance of the key → correct;
within tolerance of a declared misconception → its feedback (and any partial credit);
consistent with the student's own earlier answers (error carried forward) → the
policy's share of the points, unless those earlier answers are implausible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

import costmodel
from autograder.key import Answer
from costmodel import expression
from costmodel.units import UnitError, sci, to_si

# An earlier answer further than this factor from its key earns no carried credit:
# orders of magnitude off is not a slip, and it would let anything through.
ECF_PLAUSIBLE_FACTOR = 100.0


@dataclass(frozen=True)
class Verdict:
    """The grade of one part."""

    part: str  # answer id
    variable: str
    points: float
    score: float | None  # None: pending (a person grades it)
    # correct | carried | misconception | wrong | wrong_unit | missing | unreadable | pending | code
    status: str
    feedback: str
    given: str = ""  # the student's answer as read, in the asked unit
    value: float | None = None  # the same in SI
    expected: str = ""  # the key, shown only when the policy reveals it
    misconception: str | None = None
    details: tuple[dict[str, Any], ...] = ()  # code properties


@cache
def factor(unit: str, si_unit: str) -> float:
    """SI value of one ``unit`` (GB → 1e9 bytes)."""
    return to_si(f"1 {unit}", si_unit) if unit else 1.0


def _asked_form(a: Answer) -> str:
    return f"a number in {a.unit}" if a.unit else "a number"


def read_value(a: Answer, harvested: dict[str, Any]) -> tuple[float | None, str]:
    """The student's answer in SI, or None with the reason (missing, unreadable, wrong unit)."""
    kind = harvested.get("kind")
    if kind == "missing":
        return None, "missing"
    if kind == "number":
        raw = harvested["value"]
        value = float(raw) if not isinstance(raw, str) else float(raw)  # "nan", "inf" spelled
        if not math.isfinite(value):
            return None, "unreadable:not a finite number"
        return value * factor(a.unit, a.si_unit), ""
    if kind == "string":
        text = str(harvested["value"]).strip()
        try:
            if a.unit:
                value = _read_with_unit(text, a)
            else:
                value = to_si(text, a.si_unit)
        except UnitError as err:
            return None, f"wrong_unit:{err}"
        if not math.isfinite(value):
            return None, "unreadable:not a finite number"
        return value, ""
    if kind == "unsupported":
        kind_of = harvested.get("type", "value")
        return None, f"unreadable:an object of type {kind_of} is not a number or a string"
    return None, "unreadable:the harvest holds no answer for it"


def _read_with_unit(text: str, a: Answer) -> float:
    """A bare number is in the asked unit; a number with a unit is converted."""
    try:
        return float(text.replace(",", "")) * factor(a.unit, a.si_unit)
    except ValueError:
        return to_si(text, a.si_unit)


def within(value: float, target: float, a: Answer) -> bool:
    """``value`` equals ``target`` (both SI) within the answer's tolerance."""
    tol = a.tolerance
    if "rel" in tol:
        return abs(value - target) <= tol["rel"] * abs(target) + 1e-300
    f = factor(a.unit, a.si_unit)
    if "abs" in tol:
        return abs(value - target) / f <= tol["abs"] + 1e-12
    digits = int(tol["sig"])
    shown = target / f
    if shown == 0:
        return value == 0
    half_unit = 0.5 * 10 ** (math.floor(math.log10(abs(shown))) - digits + 1)
    return abs(value / f - shown) <= half_unit * (1 + 1e-9)


def shown(value: float, a: Answer) -> str:
    x = value / factor(a.unit, a.si_unit)
    return f"{sci(x)} {a.unit}" if a.unit else sci(x)


def carried_value(a: Answer, params: dict[str, Any], own: dict[str, float]) -> float:
    """This answer's formula applied to the student's own earlier answers (``own``, SI)."""
    scope = {**params, **own}
    if a.expr is not None:
        return float(expression.evaluate(a.expr, scope))
    domains = costmodel.formula(a.formula).domains
    args = {
        k: expression.evaluate(v, scope)
        if isinstance(v, str) and domains[k].kind != "choice"
        else v
        for k, v in a.args.items()
    }
    result = costmodel.evaluate(a.formula, **args)
    return float(result[a.output] if a.output is not None else result)


def plausible(value: float, key: float) -> bool:
    """An earlier answer that may carry credit: same sign, within 100× of the key, not 0."""
    if value == 0 or key == 0 or (value > 0) != (key > 0):
        return False
    return 1 / ECF_PLAUSIBLE_FACTOR <= value / key <= ECF_PLAUSIBLE_FACTOR


def compare(
    a: Answer,
    harvested: dict[str, Any],
    *,
    params: dict[str, Any],
    earlier: dict[str, tuple[float | None, bool]],
    keys_by_id: dict[str, Answer],
    ecf: bool,
    ecf_credit: float,
    reveal: bool,
) -> tuple[Verdict, float | None]:
    """Grade one answer; return the verdict and the student's value (SI) for later parts.

    ``earlier`` maps each earlier answer id to (the student's SI value or None, correct?).
    """
    expected = shown(a.value, a) if reveal else ""
    value, problem = read_value(a, harvested)
    base = dict(part=a.id, variable=a.variable, points=a.points, expected=expected)
    if value is None:
        status, _, detail = problem.partition(":")
        messages = {
            "missing": f"No answer: set {a.variable} to {_asked_form(a)}.",
            "wrong_unit": f"{detail}.",
            "unreadable": f"Could not read {a.variable}: {detail} (write {_asked_form(a)}).",
        }
        return Verdict(score=0.0, status=status, feedback=messages[status], **base), None
    given = shown(value, a)
    base["value"] = value
    if within(value, a.value, a):
        return Verdict(
            score=a.points, status="correct", feedback="Correct.", given=given, **base
        ), value
    misconception = next((m for m in a.misconceptions if within(value, m.value, a)), None)
    # A mistake made earlier and carried here is one mistake, not two: carried credit
    # first, with the misconception's explanation when the value also matches one.
    carried = _carried(a, value, params, earlier, keys_by_id) if ecf else None
    if carried is not None:
        extra = f" {misconception.feedback}" if misconception else ""
        return Verdict(
            score=a.points * ecf_credit,
            status="carried",
            feedback=carried + extra,
            given=given,
            **base,
        ), value
    if misconception is not None:
        return Verdict(
            score=a.points * misconception.credit,
            status="misconception",
            feedback=misconception.feedback,
            given=given,
            misconception=misconception.name,
            **base,
        ), value
    hint = _magnitude_hint(value, a.value)
    return Verdict(
        score=0.0, status="wrong", feedback=f"Not within tolerance.{hint}", given=given, **base
    ), value


def _carried(a, value, params, earlier, keys_by_id) -> str | None:
    """The feedback when ``value`` follows from the student's own wrong earlier answers."""
    if not a.depends_on:
        return None
    wrong = [d for d in a.depends_on if d in earlier and not earlier[d][1]]
    if not wrong:
        return None  # nothing to carry: the earlier parts were right
    own = {}
    for d in a.depends_on:
        student_value, _ = earlier.get(d, (None, False))
        if student_value is None or not plausible(student_value, keys_by_id[d].value):
            return None  # an implausible (or missing) earlier answer carries nothing
        own[d] = student_value
    try:
        target = carried_value(a, params, own)
    except (ValueError, ArithmeticError, costmodel.ArgumentError):
        return None
    if not within(value, target, a):
        return None
    parts = ", ".join(keys_by_id[d].variable for d in wrong)
    return (
        f"Wrong, but consistent with your own earlier answer ({parts}): "
        "error carried forward, partial credit."
    )


def _magnitude_hint(value: float, key: float) -> str:
    if key == 0 or value == 0 or (value > 0) != (key > 0):
        return ""
    ratio = value / key
    if ratio > 10 or ratio < 0.1:
        off = sci(max(ratio, 1 / ratio), 2)
        return f" Your value is off by a factor of about {off}: check units and powers of ten."
    return ""
