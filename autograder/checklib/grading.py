"""The trusted half: properties, the probe's result read without guards, and comparisons
that write the student's message.

A property is a small function decorated with its name and weight; it returns its score
(a bool or a number in [0, 1]) and its message, and calling it gives a :class:`Property`::

    @check("loss value on random batches", 2.0)
    def value(result: Result, c: dict):
        verdicts = [expect_close(rec, ref, what=f"batch {i + 1}") for ...]
        return share(verdicts), "The loss matches." if all(verdicts) else notes(verdicts)

``grade(result, seed, params)`` then returns ``[value(Result(result), cases(seed)), ...]``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .record import Record


@dataclass(frozen=True)
class Property:
    """One graded property of a code part; the score is clipped to [0, 1]."""

    name: str
    weight: float
    score: float
    message: str

    def __post_init__(self):
        object.__setattr__(self, "weight", float(self.weight))
        object.__setattr__(self, "score", float(min(1.0, max(0.0, float(self.score)))))

    def plain(self) -> dict:
        return {
            "name": self.name,
            "weight": self.weight,
            "score": self.score,
            "message": self.message,
        }


def check(name: str, weight: float) -> Callable:
    """A property function: it returns ``(score, message)``; calling it gives a
    :class:`Property` named ``name``, of weight ``weight``."""

    def wrap(fn: Callable) -> Callable[..., Property]:
        @functools.wraps(fn)
        def graded(*args, **kwargs) -> Property:
            score, message = fn(*args, **kwargs)
            return Property(name, weight, float(score), message)

        graded.name, graded.weight = name, float(weight)
        return graded

    return wrap


class Verdict(NamedTuple):
    """A comparison's outcome: true when it holds, else why not (for the student)."""

    ok: bool
    why: str = ""

    def __bool__(self) -> bool:
        return self.ok


def share(verdicts: Iterable) -> float:
    """The fraction of true verdicts (or bools); 0 for none."""
    verdicts = list(verdicts)
    return sum(bool(v) for v in verdicts) / len(verdicts) if verdicts else 0.0


def notes(verdicts: Iterable[Verdict], most: int = 3, sep: str = " ") -> str:
    """The reasons of the false verdicts, the first ``most`` of them."""
    whys = [v.why for v in verdicts if not v]
    return listed(whys, most, sep)


def judged(verdicts: list, good: str, advice: str = "", most: int | None = None):
    """A property's (score, message) from one verdict per case: ``good`` when all hold;
    else the share that hold, the reasons of those that do not (the first ``most``, or
    all), then ``advice``."""
    if all(verdicts):
        return 1.0, good
    return share(verdicts), notes(verdicts, most or len(verdicts)) + advice


def per_case(name: str, weight: float, good: str, advice: str = "", most: int | None = None):
    """A property judged on one verdict per case (:func:`judged`): ``per_case(...)`` is a
    property function of the list of verdicts, declared in one statement::

        symmetric = per_case("W is symmetric", 2.0, "W is symmetric.", " W must be ...")
        props = [symmetric([expect_close(...) for case in cases]), ...]
    """

    @check(name, weight)
    def graded(verdicts: list) -> tuple[float, str]:
        return judged(verdicts, good, advice, most)

    return graded


def listed(lines: list[str], most: int = 3, sep: str = "; ") -> str:
    """The first ``most`` lines, joined, with how many more there are."""
    more = f" (and {len(lines) - most} more)" if len(lines) > most else ""
    return sep.join(lines[:most]) + more


class Result:
    """A probe's plain result, read without guards: a key that is missing or malformed
    reads as an absent record (or an empty list, or ``default``)."""

    def __init__(self, data):
        self.data = data if isinstance(data, dict) else {}

    def record(self, key: str) -> Record:
        return Record.read(self.data.get(key))

    def records(self, key: str, n: int | None = None) -> list[Record]:
        """The list of records under ``key``, cut or padded with absent records to ``n``."""
        raw = self.data.get(key)
        recs = [Record.read(d) for d in raw] if isinstance(raw, list) else []
        if n is None:
            return recs
        return (recs + [Record.absent()] * n)[:n]

    def part(self, key: str) -> Result:
        """A nested dict of the result, as a Result of its own."""
        return Result(self.data.get(key))

    def parts(self, key: str, n: int | None = None) -> list[Result]:
        """A nested list of dicts, each as a Result (padded with empty ones to ``n``)."""
        raw = self.data.get(key)
        out = [Result(d) for d in raw] if isinstance(raw, list) else []
        return out if n is None else (out + [Result(None)] * n)[:n]

    def get(self, key: str, default=None):
        return self.data.get(key, default)


def expect_array(rec: Record, what: str, shape: tuple[int, ...] | None = None) -> Verdict:
    """The call returned finite numbers (of ``shape``, if given); else why not."""
    if not rec.ok:
        return Verdict(False, f"{what}: {rec.error}")
    a = rec.array()
    if a is None:
        if rec.size is not None and rec.values is None:
            return Verdict(False, f"{what} has {rec.size} numbers, far more than asked for")
        return Verdict(False, f"{what} is {rec.returned()}, not numbers")
    if shape is not None and a.shape != tuple(shape):
        if a.size == math.prod(shape) and a.size > 0:
            pass  # the same numbers in another layout: read in the asked shape
        else:
            return Verdict(False, f"{what} has shape {a.shape}; expected {tuple(shape)}")
    if not np.all(np.isfinite(a)):
        bad = sorted({str(x) for x in a[~np.isfinite(a)].tolist()})
        return Verdict(False, f"{what} is not finite ({', '.join(bad)})")
    return Verdict(True)


def expect_close(
    rec: Record,
    reference,
    what: str,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    exact_shape: bool = False,
) -> Verdict:
    """The call returned ``reference``, to ``np.allclose``'s tolerances: checks that it
    did not raise, returned numbers (not None, not a string), of the reference's shape
    (any layout of as many numbers, unless ``exact_shape``), all finite; the message says
    which failed, or the largest relative error, never the expected value (as
    PrairieLearn's ``check_numpy_array_allclose``).  ``what`` is a noun phrase: "the
    loss" gives "the loss is not finite (nan)", "the loss is off by a relative error of
    0.12"."""
    ref = np.asarray(reference, dtype=np.float64)
    v = expect_array(rec, what, ref.shape)
    if not v:
        return v
    a = rec.array()
    if exact_shape and a.shape != ref.shape:
        return Verdict(False, f"{what} has shape {a.shape}; expected {ref.shape}")
    a = a.reshape(ref.shape)
    if np.allclose(a, ref, rtol=rtol, atol=atol):
        return Verdict(True)
    err = float(np.max(np.abs(a - ref) / np.maximum(np.abs(ref), 1e-12)))
    return Verdict(False, f"{what} is off by a relative error of {err:.2g}")


def close(a: np.ndarray | None, b, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """Same shape, finite, and ``np.allclose``; False for None."""
    b = np.asarray(b, dtype=np.float64)
    return (
        a is not None
        and a.shape == b.shape
        and bool(np.all(np.isfinite(a)))
        and bool(np.allclose(a, b, rtol=rtol, atol=atol))
    )
