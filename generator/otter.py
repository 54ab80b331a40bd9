"""otter-grader public checks: ``grader.check("q1")`` in the student's own notebook.

``scalegrade generate --otter`` writes, for each question with numeric answers, an otter
test (otter-grader's exception-based format) into the notebook's metadata
(``metadata.otter.tests``, as ``otter assign`` does), an init cell
(``grader = otter.Notebook("hw1.ipynb")``) and a ``grader.check("q1")`` cell after each
question's answers.  The checks give format, unit and sanity feedback for *that student's*
variant:

- the answer is set, and is a number or a string with a unit ("19.6 GiB", "8.8 days");
- the unit is one the grader reads, of the right kind (bytes where bytes are asked);
- the value has the right sign and lies in a plausible window for the student's numbers:
  powers of ten around the key, 3 to 5 decades wide, its edges drawn from the question's
  seed; a value 1000x off always fails, and the message suggests the unit slip that would
  explain it ("did you write it in bytes? the question asks for GB").

The tests never contain the answer, only the window's powers of ten (what probing the
check would reveal anyway: the order of magnitude, within a factor of 10-100).  They do
not grade.  Everything they need is in the test text (stdlib only): the student's kernel
needs otter-grader, not ScaleGrade.  Where the grader runs the notebook (a sandbox
without otter), the cells do nothing.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

from contract.answers import COMMA_DECIMAL, COMMA_THOUSANDS, LEADING_NUMBER
from generator.variant import KeyAnswer, Variant, unit_factor

# The part of every test that reads values and units.  It mirrors ScaleGrade's unit
# registry (costmodel/units.py: bytes and bits with decimal and binary prefixes, FLOP,
# time, power, energy, mass, percent); tests/generator/test_otter.py checks the two agree.
HELPER = r'''
import math as _math
import numbers as _numbers
import re as _re

_PREFIXES = {
    "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "m": 1e-3, "u": 1e-6, "\u00b5": 1e-6, "\u03bc": 1e-6, "n": 1e-9,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50,
    "kilo": 1e3, "mega": 1e6, "giga": 1e9, "tera": 1e12, "peta": 1e15, "exa": 1e18,
    "milli": 1e-3, "micro": 1e-6, "nano": 1e-9,
    "kibi": 2.0**10, "mebi": 2.0**20, "gibi": 2.0**30, "tebi": 2.0**40, "pebi": 2.0**50,
}
_UNITS = {}
for _names, _factor, _dims in (
    ("second s sec seconds", 1.0, {"time": 1}),
    ("minute min minutes", 60.0, {"time": 1}),
    ("hour h hr hours", 3600.0, {"time": 1}),
    ("day days", 86400.0, {"time": 1}),
    ("week weeks", 604800.0, {"time": 1}),
    ("year yr years", 31536000.0, {"time": 1}),
    ("byte B bytes", 1.0, {"information": 1}),
    ("KB", 1e3, {"information": 1}),
    ("bit b bits", 0.125, {"information": 1}),
    ("FLOP flop FLOPs flops", 1.0, {"computation": 1}),
    ("watt W watts", 1.0, {"power": 1}),
    ("joule J", 1.0, {"power": 1, "time": 1}),
    ("watt_hour Wh", 3600.0, {"power": 1, "time": 1}),
    ("gram g grams", 1.0, {"mass": 1}),
    ("tonne t tonnes", 1e6, {"mass": 1}),
    ("percent %", 0.01, {}),
    ("token tokens parameter parameters params", 1.0, {}),
    # lower-case spellings that mean one thing (costmodel/units.py)
    ("kib", 2.0**10, {"information": 1}),
    ("mb", 1e6, {"information": 1}),
    ("mib", 2.0**20, {"information": 1}),
    ("gb", 1e9, {"information": 1}),
    ("gib", 2.0**30, {"information": 1}),
    ("tb", 1e12, {"information": 1}),
    ("tib", 2.0**40, {"information": 1}),
    ("pb", 1e15, {"information": 1}),
    ("pib", 2.0**50, {"information": 1}),
    ("mflop", 1e6, {"computation": 1}),
    ("gflop", 1e9, {"computation": 1}),
    ("tflop", 1e12, {"computation": 1}),
    ("pflop", 1e15, {"computation": 1}),
    ("eflop", 1e18, {"computation": 1}),
):
    for _name in _names.split():
        _UNITS[_name] = (_factor, _dims)


def _one_unit(name):
    for candidate in (name, name[:-1] if name.endswith("s") else None):
        if not candidate:
            continue
        if candidate in _UNITS:
            return _UNITS[candidate]
        for prefix in sorted(_PREFIXES, key=len, reverse=True):
            rest = candidate[len(prefix):]
            if candidate.startswith(prefix) and rest in _UNITS:
                factor, dims = _UNITS[rest]
                return _PREFIXES[prefix] * factor, dims
    raise KeyError(name)


def _unit(text):
    """(factor, dimensions) of a unit such as "GB", "GiB/s", "TFLOP/s", "days", "%"."""
    factor, dims, power = 1.0, {}, 1
    for token in _re.findall(r"[/*\u00b7]|[^/*\u00b7\s]+", text.strip()):
        if token == "/":
            power = -1
            continue
        if token in ("*", "\u00b7"):
            continue
        if token != "1":
            f, d = _one_unit(token)
            factor *= f**power
            for k, v in d.items():
                dims[k] = dims.get(k, 0) + power * v
        power = 1
    return factor, {k: v for k, v in dims.items() if v}


_NUMBER = _re.compile(r"\s*([+-]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*")
_LEADING = _re.compile(r"@LEADING_NUMBER@")
_THOUSANDS = _re.compile(r"@COMMA_THOUSANDS@")
_DECIMAL = _re.compile(r"@COMMA_DECIMAL@")


def _readings(text):
    """contract.readings: the commas of the leading number, as the grader reads them."""
    m = _LEADING.match(text)
    if not m or "," not in m[2]:
        return [text]
    sign, number, rest = m[1], m[2], text[m.end():]
    if _THOUSANDS.match(number):
        plain = sign + number.replace(",", "") + rest
        if number.count(",") == 1 and "." not in number:
            return [plain, sign + number.replace(",", ".") + rest]
        return [plain]
    if _DECIMAL.match(number):
        return [sign + number.replace(",", ".") + rest]
    return []


def _in_asked_unit(name, value, text, unit, base, dims, asked):
    """The number ``text`` (one reading of ``value``) means, in the asked unit; None for a
    unit this check cannot convert."""
    match = _NUMBER.fullmatch(text)
    if not match:
        raise AssertionError(f"{name} = {value!r} does not start with a number: write {asked}")
    number, written = float(match.group(1)), match.group(2)
    if not written:
        return number
    if base is None:
        return None
    try:
        factor, kind = _unit(written)
    except KeyError:
        raise AssertionError(
            f"{name} = {value!r}: unknown unit {written!r}; write {asked}"
        ) from None
    if kind != dims:
        raise AssertionError(
            f"{name} = {value!r}: {written!r} is not a unit of the kind asked "
            f"({unit or 'a plain number'}); write {asked}"
        )
    return number * factor / base


def _check(name, value, unit, base, dims, lo, hi, sign, scales, example):
    """Raise AssertionError with advice unless ``value`` looks like a valid answer."""
    asked = f"a number in {unit}" if unit else "a number"
    if example:
        asked += f", or a string with its unit such as {example}"
    if value is None or value is Ellipsis:
        raise AssertionError(f"{name} is not answered yet: replace ... with {asked}")
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, str):
        texts = _readings(value.replace("_", "").strip())
        if not texts:
            raise AssertionError(
                f"{name} = {value!r}: write decimals with a point (or one decimal comma), and "
                "commas only between groups of three digits"
            )
        numbers = [_in_asked_unit(name, value, t, unit, base, dims, asked) for t in texts]
        if None in numbers:
            return  # a unit this check cannot convert: the grader reads it
        if len(numbers) > 1 and lo is not None:  # 1,234: the reading in the window, if one is
            inside = [x for x in numbers if lo <= abs(x) < hi]
            numbers = inside if len(inside) == 1 else numbers
        number = numbers[0]
    elif isinstance(value, _numbers.Real):
        number = float(value)
    else:
        raise AssertionError(
            f"{name} is a {type(value).__name__}: write {asked} (not a list, array or object)"
        )
    if not _math.isfinite(number):
        raise AssertionError(f"{name} is {number}: write a finite number")
    if sign == "positive" and number <= 0:
        raise AssertionError(f"{name} must be positive")
    if sign == "nonnegative" and number < 0:
        raise AssertionError(f"{name} cannot be negative")
    if lo is None or (number == 0 and sign != "positive"):
        return
    size = abs(number)
    if lo <= size < hi:
        return
    shown = f" {unit}" if unit else ""
    advice = ""
    for other, ratio in scales:
        if lo <= size * ratio < hi:
            advice = f" Did you write it in {other}? The question asks for {unit or 'a number'}."
            break
    way = "larger" if size >= hi else "smaller"
    raise AssertionError(
        f"{name} = {number:.3g}{shown} is far {way} than your numbers make plausible "
        f"(between {lo:g} and {hi:g}{shown}): check the unit and the powers of ten.{advice}"
    )
'''

HELPER = (
    HELPER.replace("@LEADING_NUMBER@", LEADING_NUMBER)
    .replace("@COMMA_THOUSANDS@", COMMA_THOUSANDS)
    .replace("@COMMA_DECIMAL@", COMMA_DECIMAL)
)
_NAMESPACE: dict[str, Any] = {}
exec(compile(HELPER, "<scalegrade otter helper>", "exec"), _NAMESPACE)  # our own text
parse_unit = _NAMESPACE["_unit"]
check_value = _NAMESPACE["_check"]
comma_readings = _NAMESPACE["_readings"]  # contract.readings, as the student's kernel runs it

# Units a slip is commonly made in, offered as "did you write it in ...?" when a value
# converted from one of them would be plausible.
SLIPS = (
    "B",
    "kB",
    "MB",
    "GB",
    "TB",
    "PB",
    "GiB",
    "bit",
    "Gb",
    "s",
    "ms",
    "µs",
    "min",
    "h",
    "days",
    "years",
    "FLOP",
    "GFLOP",
    "TFLOP",
    "PFLOP",
    "FLOP/s",
    "GFLOP/s",
    "TFLOP/s",
    "PFLOP/s",
    "B/s",
    "MB/s",
    "GB/s",
    "TB/s",
    "Gb/s",
    "W",
    "kW",
    "MW",
    "J",
    "kWh",
    "MWh",
    "g",
    "kg",
    "t",
)
_EXAMPLES = {  # the unit-bearing form a student may write, without a number from the key
    "information": '"<number> GB" or "<number> GiB"',
    "time": '"<number> s", "<number> h" or "<number> days"',
    "computation": '"<number> FLOP"',
}


@dataclass(frozen=True)
class AnswerCheck:
    """What the public check of one answer knows: never the key, only its window."""

    variable: str
    unit: str
    base: float | None  # the asked unit in the helper's base units (None: not convertible)
    dims: dict[str, int]
    lo: float | None  # the plausible window, in the asked unit (None: no magnitude check)
    hi: float | None
    sign: str
    scales: tuple[tuple[str, float], ...]
    example: str


def window(key: float, seed: str, answer_id: str) -> tuple[float, float]:
    """Powers of ten around ``key``: [10^(d-a), 10^(d+1+b)), d = floor(log10 |key|), a and b
    in {1, 2} drawn from the question's seed.  1000x the key, or a thousandth, is outside."""
    digest = hashlib.sha256(f"{seed}:otter:{answer_id}".encode()).digest()
    below, above = 1 + digest[0] % 2, 1 + digest[1] % 2
    size = abs(key)
    d = math.floor(math.log10(size))
    d += (10.0 ** (d + 1) <= size) - (10.0**d > size)  # log10(99.99999999999999) is 2.0
    return 10.0 ** (d - below), 10.0 ** (d + 1 + above)


def answer_check(k: KeyAnswer, seed: str) -> AnswerCheck:
    unit = k.unit
    key = k.display_value
    try:
        base, dims = parse_unit(unit or k.si_unit or "1")
        si_base, _ = parse_unit(k.si_unit or "1")
        if not math.isclose(base / si_base, unit_factor(unit, k.si_unit), rel_tol=1e-9):
            raise KeyError(unit)
    except KeyError:
        base, dims = None, {}
    # a yes/no or small count with an absolute tolerance of about a unit: no window (it
    # would tell the answer apart from the other few possible ones)
    small = k.tolerance.abs is not None and abs(key) <= 10 * k.tolerance.abs
    lo, hi = (None, None) if key == 0 or small else window(key, seed, k.id)
    scales = []
    if base is not None:
        for other in SLIPS:
            f, d = parse_unit(other)
            if d == dims and other != unit and not math.isclose(f, base):
                scales.append((other, f / base))
        if not dims and base != 1.0:  # percent asked, a fraction written
            scales.append(("a fraction (0.42 for 42 %)", 1 / base))
    kind = next(iter(dims)) if len(dims) == 1 and next(iter(dims.values())) == 1 else ""
    example = _EXAMPLES.get(kind, "") if unit else ""
    return AnswerCheck(
        k.variable, unit, base, dims, lo, hi, k.sign, tuple(scales), "" if base is None else example
    )


def test_source(v: Variant) -> str | None:
    """otter's exception-based test for question ``q<index>`` of one student's variant."""
    asked = [k for k in v.answers if k.ask]
    if not asked:
        return None
    name = f"q{v.index}"
    lines = [
        f'"""Public check of question {v.index}: format, unit and plausibility of your answers',
        "for your numbers. It never contains the answer, and it does not grade.",
        '"""',
        "from otter.test_files import test_case",
        "",
        "OK_FORMAT = False",
        f"name = {name!r}",
        "points = None",
        HELPER,
    ]
    for k in asked:
        c = answer_check(k, v.seed)
        lines += [
            "",
            f"@test_case(name={c.variable!r}, points=None, hidden=False)",
            f"def test_{c.variable}({c.variable}):",
            f"    _check({c.variable!r}, {c.variable}, {c.unit!r}, {c.base!r}, {c.dims!r},",
            f"           {c.lo!r}, {c.hi!r}, {c.sign!r}, {c.scales!r}, {c.example!r})",
        ]
    return "\n".join(lines) + "\n"


def tests(variants: list[Variant]) -> dict[str, str]:
    """``q<index>`` -> test source, for the questions that have numeric answers."""
    out = {}
    for v in variants:
        source = test_source(v)
        if source is not None:
            out[f"q{v.index}"] = source
    return out


def init_cell(notebook: str) -> str:
    return (
        "# Public checks (otter-grader; `pip install otter-grader` to use them): after your\n"
        '# answers to a question, `grader.check("q1")` tells you whether they are numbers in a\n'
        "# unit the grader reads and of a plausible size for your numbers. They never show\n"
        "# the answer and do not grade.\n"
        "try:\n"
        "    import otter\n"
        "\n"
        f"    grader = otter.Notebook({notebook!r})\n"
        "except Exception:  # no otter-grader, or not run beside the notebook\n"
        "    grader = None"
    )


def check_cell(question: str) -> str:
    return f"grader.check({question!r}) if grader else None"
