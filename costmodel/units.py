"""Units at the edges: parse "25 GB/s" into SI, show 2.1e10 bytes as "21.0 GB (19.5 GiB)".

The core computes in SI (bytes, FLOP, seconds, FLOP/s, bytes/s); prompts, the
calculator and feedback convert here, with pint (FLOP is a unit of its own dimension,
so "TFLOP/s" and "FLOP/byte" parse).  pint is imported on first use only.
"""

from __future__ import annotations

import math
import re
import sys
from functools import cache
from typing import Any

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_LEADING_NUMBER = re.compile(r"^[+-]?(\d|\.\d)")


class UnitError(ValueError):
    """A value whose unit is unknown or of the wrong dimension."""


_DEFINITIONS = """
kilo- = 1e3 = k-
mega- = 1e6 = M-
giga- = 1e9 = G-
tera- = 1e12 = T-
peta- = 1e15 = P-
exa- = 1e18 = E-
milli- = 1e-3 = m-
micro- = 1e-6 = u- = µ- = μ-
nano- = 1e-9 = n-
kibi- = 2**10 = Ki-
mebi- = 2**20 = Mi-
gibi- = 2**30 = Gi-
tebi- = 2**40 = Ti-
pebi- = 2**50 = Pi-
second = [time] = s = sec = seconds
minute = 60 * second = min = minutes
hour = 60 * minute = h = hr = hours
day = 24 * hour = days
week = 7 * day = weeks
year = 365 * day = yr = years
byte = [information] = B = bytes
KB = 1e3 * byte
bit = byte / 8 = b = bits
FLOP = [computation] = flop = FLOPs = flops
watt = [power] = W = watts
joule = watt * second = J
watt_hour = watt * hour = Wh
gram = [mass] = g = grams
tonne = 1e6 * gram = t = tonnes
percent = 0.01 = %
token = [] = tokens
parameter = [] = parameters = params
kib = 2**10 * byte
mb = 1e6 * byte
mib = 2**20 * byte
gb = 1e9 * byte
gib = 2**30 * byte
tb = 1e12 * byte
tib = 2**40 * byte
pb = 1e15 * byte
pib = 2**50 * byte
mflop = 1e6 * FLOP
gflop = 1e9 * FLOP
tflop = 1e12 * FLOP
pflop = 1e15 * FLOP
eflop = 1e18 * FLOP
"""
# The last lines: lower-case spellings that mean one thing here ("gb" is a gigabyte, "mb" a
# megabyte, not a millibit; "kb" keeps its standard meaning, the kilobit).


def _pint():
    """pint, imported without dask where dask is installed but not yet imported: pint.compat
    imports dask (80-100 ms, as long as pint itself) only to handle dask arrays, which no
    course quantity is.  An ``import dask`` later (the Dask runner) loads it as usual."""
    if "pint" not in sys.modules and "dask" not in sys.modules:
        sys.modules["dask"] = None  # find_spec("dask") is None while pint loads
        try:
            import pint
        finally:
            del sys.modules["dask"]
    import pint

    return pint


@cache
def registry() -> Any:
    """A small pint registry holding only the courses' units.

    pint's default registry reads almost any typo as some unit ("21 GP" is 21
    gigapoise, a viscosity); this one knows bytes and bits with decimal and binary
    prefixes, FLOP, time, power, energy, mass (for emissions) and percent.
    """
    ureg = _pint().UnitRegistry(None)
    for line in _DEFINITIONS.strip().splitlines():
        ureg.define(line)
    return ureg


_WORDS = {
    "byte": "bytes",
    "byte/s": "bytes per second",
    "FLOP": "FLOPs",
    "FLOP/s": "FLOP per second",
    "FLOP/byte": "FLOP per byte",
    "s": "a duration",
    "hour": "a duration",
    "W": "a power",
    "kWh": "an energy",
    "": "a plain number",
}


def to_si(text: str | float | int, unit: str) -> float:
    """Read ``text`` in ``unit`` (pint syntax, ``""`` for dimensionless).

    A bare number is taken to be in ``unit`` already: ``to_si("2e12", "byte/s")``;
    ``to_si("2 TB/s", "byte/s")`` converts; an unknown unit or a wrong dimension raises
    :class:`UnitError` saying what was expected.
    """
    if isinstance(text, int | float):
        return float(text)
    s = text.strip().replace("_", "")
    if _NUMBER.match(s):
        return float(s)
    pint = _pint()
    ureg = registry()
    expected = f"expected {_WORDS.get(unit, unit)}, e.g. '{_example(unit)}'"
    if not _LEADING_NUMBER.match(s):
        raise UnitError(f"cannot read {text!r}: it must start with a number ({expected})")
    try:
        q = ureg.Quantity(s)
    except pint.UndefinedUnitError as err:
        names = err.unit_names if isinstance(err.unit_names, tuple | list) else [err.unit_names]
        raise UnitError(f"unknown unit {names[0]!r} in {text!r} ({expected})") from None
    except Exception:
        raise UnitError(f"cannot read {text!r} as a number with a unit ({expected})") from None
    try:
        return float(q.to(ureg.Unit(unit) if unit else ureg.dimensionless).magnitude)
    except pint.DimensionalityError:
        raise UnitError(f"{text!r} is not {_WORDS.get(unit, unit)} ({expected})") from None


def _example(unit: str) -> str:
    return {
        "byte": "21 GB",
        "byte/s": "2 TB/s",
        "FLOP": "2e20 FLOP",
        "FLOP/s": "312 TFLOP/s",
        "s": "8.8 days",
        "hour": "4.4 h",
        "W": "700 W",
        "kWh": "16 MWh",
    }.get(unit, "1.5")


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def sig(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant figures, plain for moderate sizes, else 1.23e+20."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if 1e-3 <= abs(x) < 1e6:
        decimals = digits - 1 - math.floor(math.log10(abs(x)))
        return f"{round(x, decimals):,.{max(decimals, 0)}f}"
    return f"{x:.{digits - 1}e}"


def sci(x: float, digits: int = 3) -> str:
    """As the notes print numbers: 0.0800, 1,536, 1.31 × 10⁹ (plain text, no LaTeX)."""
    if float(x).is_integer() and abs(x) < 1e6:
        return f"{int(x):,}"  # counts: 32, not 32.0
    if x == 0 or not math.isfinite(x) or 1e-3 <= abs(x) < 1e6:
        return sig(x, digits)
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(_SUPERSCRIPT)}"


_DECIMAL = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BINARY = ((2**50, "Pi"), (2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"))


def _prefixed(x: float, symbol: str, scale=_DECIMAL) -> str:
    for factor, prefix in scale:
        if abs(x) >= factor:
            return f"{sig(x / factor)} {prefix}{symbol}"
    return f"{sig(x)} {symbol}"


def human(value: Any, unit: str) -> str:
    """Show a core result in the units people read: GB and GiB, hours and days, TFLOP/s."""
    if isinstance(value, tuple):
        return ", ".join(human(v, unit) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    x = float(value)
    if unit == "byte":
        if abs(x) < 1000:
            return f"{sig(x)} B"
        return f"{_prefixed(x, 'B')} ({_prefixed(x, 'B', _BINARY)})"
    if unit == "byte/s":
        return _prefixed(x, "B/s")
    if unit == "FLOP/s":
        return _prefixed(x, "FLOP/s")
    if unit == "FLOP":
        return f"{sig(x)} FLOP"
    if unit == "s":
        if x < 60:
            return f"{sig(x)} s"
        if x < 86400:
            return f"{sig(x)} s ({sig(x / 3600)} h)"
        return f"{sig(x)} s ({sig(x / 3600)} h, {sig(x / 86400)} days)"
    if unit == "hour":
        return f"{sig(x)} h ({sig(x / 24)} days)"
    if unit == "kWh":
        return f"{sig(x)} kWh ({sig(x / 1000)} MWh)"
    if unit == "":
        if isinstance(value, int) or x.is_integer():
            return f"{int(x):,}" if abs(x) < 1e15 else sig(x)
        return f"{sig(x, 4)} ({sig(100 * x)} %)" if 0 < x < 1 else sig(x, 4)
    return f"{sig(x)} {unit}"
