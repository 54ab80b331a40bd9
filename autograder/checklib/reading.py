"""Reading a probe's plain data that is not a record (its own counts, logs, lists of
numbers), and the messages that show a value: never raising, whatever the value is.

Both halves may import it: NumPy and the standard library only.
"""

from __future__ import annotations

import math

import numpy as np


def plain(values) -> list:
    """Floats for JSON: finite numbers as they are, nan/inf as strings."""
    return [float(v) if math.isfinite(v) else str(float(v)) for v in values]


def vector(x, n: int | None = None) -> np.ndarray | None:
    """A probe's list of numbers (or "nan"/"inf" strings) as float64; None if it is not one
    (or has not ``n`` elements, or holds an int beyond float64's range)."""
    if not isinstance(x, list) or not all(type(v) in (int, float, str) for v in x):
        return None
    try:
        a = np.array([float(v) for v in x], dtype=np.float64)
    except (ValueError, OverflowError):  # "abc", 10**400
        return None
    return a if n is None or a.size == n else None


def number(x) -> float | None:
    """A probe's single number (an int, a float, or a "nan"/"inf" string) as a float; None
    for anything else: None, a bool, another string, a list, an int beyond float64."""
    if type(x) not in (int, float, str):
        return None
    try:
        return float(x)
    except (ValueError, OverflowError):
        return None


def count(x, most: int) -> int | None:
    """A probe's count: an int (not a bool) in [0, ``most``]; None otherwise, so that a value
    no honest run records (negative, beyond what was drawn, beyond int64) reads as absent."""
    return x if type(x) is int and 0 <= x <= most else None


def shown(x, spec: str = ".4g", limit: int = 60) -> str:
    """A value of a probe's result, for a message: a number (:func:`number`) formatted with
    ``spec``, anything else as it came (its repr, cut to ``limit`` characters).  Never
    raises, whatever the student's value was."""
    v = number(x)
    if v is not None:
        return format(v, spec)
    try:
        text = repr(x)
    except ValueError:  # an int of more digits than Python converts (sys.set_int_max_str_digits)
        text = f"an int of {x.bit_length()} bits"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shape_note(got, expected, what: str = "returned an array") -> str:
    """A shape a student can act on: ``returned an array of shape (4, 4); expected (16,)``."""
    return f"{what} of shape {tuple(got)}; expected {tuple(expected)}"


def matrix(x) -> np.ndarray | None:
    """A probe's list of equal-length lists of numbers as a 2-D float64 array, or None."""
    if not isinstance(x, list) or not x:
        return None
    rows = [vector(r) for r in x]
    if any(r is None for r in rows) or len({r.size for r in rows}) != 1:
        return None
    return np.stack(rows)


def slice_at(values: np.ndarray, full: np.ndarray, rtol: float = 1e-6, atol: float = 1e-9):
    """The offset at which ``values`` is :func:`close` to a contiguous slice of ``full``
    shorter than the whole, or None: ``np.allclose``'s test (``full`` the reference),
    finite numbers only, at each offset whose first number matches (one or two, not every
    window: the ring's check tests a hundred messages per submission)."""
    m, full = values.size, np.asarray(full, dtype=np.float64)
    if values.ndim != 1 or not 0 < m < full.size or not np.all(np.isfinite(values)):
        return None
    firsts = full[: full.size - m + 1]
    for a in np.flatnonzero(np.abs(firsts - values[0]) <= atol + rtol * np.abs(firsts)):
        window = full[a : a + m]
        if np.all(np.abs(window - values) <= atol + rtol * np.abs(window)) and np.all(
            np.isfinite(window)
        ):
            return int(a)
    return None


def is_slice_of(values: np.ndarray, full: np.ndarray, rtol: float = 1e-6, atol: float = 1e-9):
    """Whether ``values`` is a contiguous slice of ``full`` shorter than the whole
    (:func:`slice_at`)."""
    return slice_at(values, full, rtol, atol) is not None
