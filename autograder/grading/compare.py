"""The trusted comparison: a harvested answer against the key.

Runs only in the grader's process, on plain data (numbers and strings) from the
sandbox.  Units are read with pint (``"21 GB"``, ``"19.6 GiB"``, ``"8.8 days"``; a bare
number is in the unit the question asks), then, in this order, the first rule that holds:

1. within tolerance of the key → correct;
2. within tolerance of one of the part's own declared misconceptions → that
   misconception's feedback and credit, even when the value would also be a carried
   answer (a declared mistake is never turned into carried credit by writing a matching
   wrong earlier answer);
3. consistent with the student's own earlier answers (error carried forward) → the
   policy's share of the points, when the carrying is work: the earlier answers are
   plausible slips (:func:`contract.plausible`), the formula does not just hand back an
   earlier answer, and the question's answers are the student's (:func:`shows_work`);
4. otherwise wrong.

The self-test page's checker (``generator/selftest_assets/checker.js``) applies the same
rules in the same order.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import contract
import costmodel
from contract import Answer, plausible, readings, unit_factor, within
from contract.answers import LEADING_NUMBER
from costmodel.units import UnitError, sci, to_si


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
        return value * unit_factor(a.unit, a.si_unit), ""
    if kind == "string":
        text = str(harvested["value"]).strip()
        texts = readings(text)
        if not texts:
            return None, (
                f"unreadable:cannot read {text!r}: write decimals with a point (or one decimal "
                "comma), and commas only between groups of three digits"
            )
        try:
            values = [_read_with_unit(t, a) if a.unit else to_si(t, a.si_unit) for t in texts]
        except UnitError as err:
            return None, f"wrong_unit:{err}"
        if len(values) > 1:  # 1,234: thousands or a decimal comma, by what is plausible
            fitting = [v for v in values if plausible(v, a)]
            if len(fitting) != 1:
                plain, decimal = (re.match(LEADING_NUMBER, t)[0] for t in texts)
                return None, (
                    f"unreadable:{text!r} can be read as {plain} or as {decimal}: write "
                    f"{plain} without the comma, or {decimal} with a decimal point"
                )
            values = fitting
        value = values[0]
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
        return float(text) * unit_factor(a.unit, a.si_unit)
    except ValueError:
        return to_si(text, a.si_unit)


def shown(value: float, a: Answer) -> str:
    x = value / unit_factor(a.unit, a.si_unit)
    return f"{sci(x)} {a.unit}" if a.unit else sci(x)


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
    # A declared misconception of this part is matched before carried credit: otherwise a
    # wrong earlier answer chosen to make it "consistent" turns the misconception's credit
    # into the carried share (naive 2N forward FLOPs, then the ratio 1.0).  An author who
    # wants a mistake carried here to count once gives the misconception that credit.
    misconception = next((m for m in a.misconceptions if within(value, m.value, a)), None)
    if misconception is not None:
        return Verdict(
            score=a.points * misconception.credit,
            status="misconception",
            feedback=misconception.feedback,
            given=given,
            misconception=misconception.name,
            **base,
        ), value
    carried = _carried(a, value, params, earlier, keys_by_id) if ecf else None
    if carried is not None:
        return Verdict(
            score=a.points * ecf_credit, status="carried", feedback=carried, given=given, **base
        ), value
    hint = _magnitude_hint(value, a.value)
    return Verdict(
        score=0.0, status="wrong", feedback=f"Not within tolerance.{hint}", given=given, **base
    ), value


def shows_work(values: list[float | None]) -> bool:
    """Whether a question's answers (each in its asked unit; None: none readable) are work
    that may earn carried credit: at least half of the asked parts answered, and not all
    with one number (``1`` in every cell carries nothing)."""
    answered = [v for v in values if v is not None]
    if 2 * len(answered) < len(values):
        return False
    return len(answered) < 2 or len(set(answered)) > 1


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
        if student_value is None or not plausible(student_value, keys_by_id[d]):
            return None  # an implausible (or missing) earlier answer carries nothing
        own[d] = student_value
    try:
        target = contract.value(a, {**params, **own})  # the formula over the student's own
    except (ValueError, ArithmeticError, costmodel.ArgumentError):
        return None
    if not within(value, target, a) or any(within(target, own[d], a) for d in wrong):
        return None  # not this formula's value, or an earlier answer handed back unchanged
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
