"""What a student can read of their own key in their notebook, or get without the work.

Two checks of every variant, run by ``scalegrade validate``:

- **leaked** (a failure): an asked key is printed in the student's question, in any of
  the formats numbers are written in (1,536; 0.08; 3.12e+14; 1.31 × 10⁹; LaTeX): the
  value of a derived parameter shown in the "Given" cell, or a number of the prompt
  that is not one of the drawn parameters;
- **guessable** (reported): the key is 0 or 1, or equals a drawn parameter of the same
  unit, so that writing it earns the point without the computation.  A question's
  constraints remove such draws; a part that is a choice among a few whole numbers
  (yes/no as 1/0, a ZeRO stage) is guessable by its format and is not counted.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from contract import Answer, unit_factor, within

_NUMBER = re.compile(
    r"(?<![\w.])(\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?)"  # 1,536  0.08  3.12e+14
    r"(?: × 10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)|\s*\\times\s*10\^\{(-?\d+)\})?"  # 1.31 × 10⁹, 1.31 \times 10^{9}
)
_SUPER = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
# citations and labels are not values: §2.1, Proposition 3.7, Exercise 13, q3_states_gb
_NOT_VALUES = re.compile(
    r"(§|Proposition|Prop\.?|Example|Exercise|Theorem|Thm|Definition|Def\.?|ch\.|Code|Table"
    r"|Question)\s*\d+(\.\d+)*|\bq\d+_\w*"
)
TRIVIAL = (0.0, 1.0)
MIN_DIGITS = 3  # a number of fewer significant digits ("8", "2.5") identifies no answer


def numbers_in(text: str) -> list[float]:
    """Every number of :data:`MIN_DIGITS` or more significant digits written in ``text``
    (citations such as §2.1 or Exercise 13 are not numbers of the question)."""
    return list(_numbers_in(text))


@functools.lru_cache(maxsize=4096)  # one question's text, read for each of its parts
def _numbers_in(text: str) -> tuple[float, ...]:
    out = []
    for mantissa, unicode_power, latex_power in _NUMBER.findall(_NOT_VALUES.sub(" ", text)):
        digits = mantissa.replace(",", "").lower().split("e")[0]
        significant = digits.replace(".", "").lstrip("0")
        if "." not in digits:
            significant = significant.rstrip("0")
        if len(significant) < MIN_DIGITS:
            continue
        power = unicode_power.translate(_SUPER) or latex_power or "0"
        try:
            out.append(float(mantissa.replace(",", "")) * 10 ** int(power))
        except ValueError:
            continue
    return tuple(out)


def _same(a: float, b: float) -> bool:
    """Equal as printed to three significant figures."""
    return abs(a - b) <= 5e-3 * max(abs(a), abs(b))


def _exact(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def _numeric(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def leaked(
    a: Answer, text: str, params: dict[str, Any], drawn: set[str], shown: dict[str, str]
) -> str | None:
    """Where the student's question prints ``a``'s key, or None.

    ``text``: what the question shows (prompt, parts, given cell); ``drawn``: the names of
    the drawn parameters (the rest are derived); ``shown``: each parameter as displayed.
    """
    keys = (a.value, a.display_value)
    for name, value in params.items():  # the author's own computation, printed: exact
        if name not in drawn and _numeric(value) and any(_exact(float(value), k) for k in keys):
            return f"{a.id} = the derived parameter {name} of the Given cell"
    values = [float(v) for n, v in params.items() if n in drawn and _numeric(v)]
    values += [x for n in drawn for x in _numbers_in(shown.get(n, ""))]
    for x in _numbers_in(text):
        if any(_same(x, k) for k in keys) and not any(_same(x, v) for v in values):
            return f"{a.id} = {x:g}, printed in the question"
    return None


def guessed(
    a: Answer, params: dict[str, Any], units: dict[str, str], drawn: set[str]
) -> str | None:
    """Why ``a``'s key needs no work, or None: it is 0 or 1, or a drawn parameter of its
    unit (read in the asked unit, as a student would type it)."""
    factor = unit_factor(a.unit, a.si_unit)
    for x in TRIVIAL:
        if within(x * factor, a.value, a):
            return f"{a.id} = {x:g}"
    for name in sorted(drawn):
        value = params.get(name)
        if _numeric(value) and units.get(name, "") == a.si_unit and within(value, a.value, a):
            return f"{a.id} = the given {name}"
    return None


def is_choice(values: list[float], a: Answer) -> bool:
    """A part graded to the whole number whose keys are a few small integers: a choice."""
    whole = a.tolerance.abs is not None and a.tolerance.abs >= 0.5
    small = all(float(v).is_integer() and 0 <= v <= 3 for v in values)
    return whole and small and len(set(values)) <= 4
