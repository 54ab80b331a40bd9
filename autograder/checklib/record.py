"""What one call of the student's function did, as a typed record: both halves use it.

In the probe process, :meth:`Record.of` turns what a call returned (or raised) into a
record once, with its caps: the numbers as float64, their shape and dtype, the items of a
tuple, the gradients, the seconds.  The record crosses to the trusted process as plain
data (:meth:`Record.plain`), and :meth:`Record.read` reads it back there, whatever it
holds: a field that is missing or malformed reads as absent, never as an exception, so a
``grade`` needs no guards.

This module imports NumPy and the standard library only: the probe process loads it
without the rest of ScaleGrade (:mod:`autograder.checklib`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .reading import number, plain, vector

KEEP = 1 << 16  # numbers a record keeps, unless the call asks for another cap
ITEMS = 16  # items of a tuple or list a record keeps
DEPTH = 3  # tuples within tuples a record follows
ERROR_CHARS = 300  # an error's text, cut
TEXT_CHARS = 120  # a string's (or another value's) text, cut
NUMERIC = "biuf"  # the dtype kinds read as numbers: bool, int, unsigned, float


def error_text(err: BaseException) -> str:
    """``TypeError: message``, cut to :data:`ERROR_CHARS`; never raises."""
    try:
        text = str(err)
    except Exception:  # noqa: BLE001 - an exception whose __str__ fails
        text = ""
    return (f"{type(err).__name__}: {text}" if text else type(err).__name__)[:ERROR_CHARS]


@dataclass(frozen=True)
class Record:
    """One call: what it returned (its numbers, shape, dtype, items) or what it raised."""

    error: str | None = None  # "ZeroDivisionError: ...", or why the value cannot be read
    raised: str | None = None  # the type name of the exception raised, if any
    missing: bool = False  # no record at all (a call never made, a malformed result)
    type: str = "NoneType"  # the type name of the value returned
    shape: tuple[int, ...] | None = None  # the numbers' shape (() for one number)
    dtype: str | None = None  # e.g. "float32", "int64", "bool"
    values: np.ndarray | None = field(default=None, repr=False)  # float64, in ``shape``
    size: int | None = None  # how many numbers there were (kept or not)
    integer: int | None = None  # a Python int, exactly (beyond float64 too)
    text: str | None = None  # a string returned, or the repr of another value (cut)
    items: tuple[Record, ...] | None = None  # a tuple or list's elements
    grad: tuple[Record | None, ...] | None = None  # d(sum value)/d(each tensor input)
    grad_error: str | None = None  # why there is no gradient
    seconds: float | None = None  # the call's wall time, seen from the probe process

    # ------------------------------------------------------------------ probe side

    @classmethod
    def of(cls, outcome, *, seconds: float | None = None, keep: int = KEEP, depth: int = 0):
        """The record of what a call returned, or of the exception it raised."""
        if isinstance(outcome, BaseException):
            return cls(error=error_text(outcome), raised=type(outcome).__name__, seconds=seconds)
        rec = cls(type=type(outcome).__name__, seconds=seconds)
        if type(outcome) is int:
            rec = replace(rec, integer=outcome)
        if isinstance(outcome, str | bytes):
            return replace(rec, text=repr(outcome)[:TEXT_CHARS])
        if isinstance(outcome, tuple | list) and depth < DEPTH:
            items = tuple(cls.of(v, keep=keep, depth=depth + 1) for v in outcome[:ITEMS])
            rec = replace(rec, items=items)
        try:
            if hasattr(outcome, "detach"):  # a torch tensor (the wire's, in this process)
                outcome = outcome.detach().cpu()
                dtype = str(outcome.dtype).removeprefix("torch.")
                outcome = outcome.numpy() if dtype != "bfloat16" else outcome.float().numpy()
            else:
                dtype = None
            with np.errstate(all="ignore"):
                a = np.asarray(outcome)
        except Exception as err:  # noqa: BLE001 - a value that is not an array
            return rec if rec.items is not None else replace(rec, error=error_text(err))
        if a.dtype.kind not in NUMERIC:
            return rec if rec.items is not None else replace(rec, text=_text(outcome))
        with np.errstate(all="ignore"):
            numbers = a.astype(np.float64)
        rec = replace(rec, shape=tuple(a.shape), dtype=dtype or str(a.dtype), size=int(a.size))
        return replace(rec, values=numbers) if a.size <= keep else rec

    def with_grad(self, grads: tuple[Record | None, ...] | None, why: str | None) -> Record:
        """This record with the gradients of a differentiated call (or why there are none)."""
        return replace(self, grad=grads, grad_error=why if grads is None else None)

    def plain(self) -> dict:
        """The record as JSON data, for the trip to the trusted process."""
        out: dict = {"type": self.type}
        for name in ("error", "raised", "dtype", "size", "text", "grad_error", "seconds"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.missing:
            out["missing"] = True
        if self.shape is not None:
            out["shape"] = list(self.shape)
        if self.values is not None:
            out["values"] = plain(self.values.reshape(-1).tolist())
        if self.integer is not None:
            out["integer"] = hex(self.integer)
        if self.items is not None:
            out["items"] = [r.plain() for r in self.items]
        if self.grad is not None:
            out["grad"] = [None if g is None else g.plain() for g in self.grad]
        return out

    # ------------------------------------------------------------------ grade side

    @classmethod
    def absent(cls, why: str = "no result") -> Record:
        """A record of nothing: a call not made, or a probe's result that is malformed."""
        return cls(error=why, missing=True)

    @classmethod
    def read(cls, data, depth: int = 0) -> Record:
        """A record back from its plain data; whatever is malformed reads as absent."""
        if not isinstance(data, dict) or depth > DEPTH + 1:
            return cls.absent()
        text = {k: data.get(k) if type(data.get(k)) is str else None for k in _TEXTS}
        shape, values = data.get("shape"), data.get("values")
        rec = cls(
            missing=data.get("missing") is True,
            type=text["type"] or "unknown",
            error=text["error"],
            raised=text["raised"],
            dtype=text["dtype"],
            text=text["text"],
            grad_error=text["grad_error"],
            size=data["size"] if type(data.get("size")) is int and data["size"] >= 0 else None,
            seconds=_seconds(data.get("seconds")),
            integer=_hex(data.get("integer")),
        )
        if isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape):
            rec = replace(rec, shape=tuple(shape))
            numbers = vector(values)
            if numbers is not None and numbers.size == math.prod(shape) == rec.size:
                rec = replace(rec, values=numbers.reshape(shape))
        if isinstance(data.get("items"), list):
            rec = replace(rec, items=tuple(cls.read(d, depth + 1) for d in data["items"]))
        if isinstance(data.get("grad"), list):
            grads = tuple(None if g is None else cls.read(g, depth + 1) for g in data["grad"])
            rec = replace(rec, grad=grads)
        return rec

    @property
    def ok(self) -> bool:
        """The call returned (whatever it returned)."""
        return self.error is None and not self.missing

    def array(self, shape: tuple[int, ...] | None = None) -> np.ndarray | None:
        """The numbers as a float64 array (reshaped to ``shape`` when it has that many);
        None when the call raised, returned no numbers, or too many to keep."""
        if not self.ok or self.values is None:
            return None
        if shape is None:
            return self.values
        return self.values.reshape(shape) if self.values.size == math.prod(shape) else None

    def number(self) -> float | None:
        """The one number returned (a float, an int, a 0-d or one-element array), or None."""
        a = self.array()
        return float(a.reshape(-1)[0]) if a is not None and a.size == 1 else None

    def as_float(self) -> float | None:
        """``float()`` of the value returned, by Python's rules: a float, a bool, an int
        (exactly read, while float64 holds it), a 0-d array or a one-element tensor
        converts; a list, a longer array, a string or None does not (None then, as for a
        call that raised)."""
        if not self.ok:
            return None
        if self.integer is not None:
            try:
                return float(self.integer)
            except OverflowError:
                return None
        if self.type in ("float", "bool", "Tensor") or (self.type, self.shape) == ("ndarray", ()):
            return self.number()
        return None

    def item(self, i: int) -> Record:
        """The ``i``-th element of a tuple or list returned; absent when there is none."""
        if not self.ok:
            return self
        if self.items is None or not -len(self.items) <= i < len(self.items):
            return Record.absent(f"returned {self.type}, not a tuple of {i + 1} or more values")
        return self.items[i]

    def gradient(self, i: int, unused: str = "the value does not depend on this input") -> Record:
        """The gradient with respect to the ``i``-th differentiated input; absent, saying
        why, when there is none (``unused``: the value does not depend on that input)."""
        if not self.ok:
            return self
        if self.grad_error is not None:
            return Record.absent(self.grad_error)
        if self.grad is None or not 0 <= i < len(self.grad):
            return Record.absent("no gradient")
        return self.grad[i] or Record.absent(unused)

    def returned(self) -> str:
        """What the call returned, in words: ``a float32 array of shape (4, 4)``, ``a str``."""
        if self.type == "NoneType":
            return "None"
        if self.shape is not None and self.shape != ():
            return f"a {self.dtype} array of shape {self.shape}"
        if self.shape == ():
            return f"a {self.type}"
        return f"a {self.type}" if self.text is None else f"a {self.type} ({self.text})"


_TEXTS = ("type", "error", "raised", "dtype", "text", "grad_error")


def _text(value) -> str:
    try:
        return repr(value)[:TEXT_CHARS]
    except Exception:  # noqa: BLE001 - a repr that fails
        return type(value).__name__


def _seconds(x) -> float | None:
    v = number(x)
    return v if v is not None and math.isfinite(v) and v >= 0 else None


def _hex(x) -> int | None:
    if type(x) is not str or len(x) > 4096:
        return None
    try:
        return int(x, 16)
    except ValueError:
        return None
