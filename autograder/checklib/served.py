"""What the probe process serves the student's code, safe by default: randomness the code
cannot read ahead (:class:`Draws`), and callbacks that log what they were given
(:class:`Logged`).  Passed as arguments, both stay in the probe process: the student's
process gets a stub whose calls come back here, so the check judges what the code did,
not only what it returned.  NumPy and the standard library only."""

from __future__ import annotations

import copy
import math

import numpy as np


class Draws:
    """An ``rng`` to hand to the student's function: it stays in the probe process, and
    the student's code gets a stub whose draws come back here, served from a generator
    seeded from the grading seed and logged.  It has methods only (a data attribute would
    be copied to the student's process): nothing of its state can be read there, so what
    is drawn is known only once it is drawn, and a check reads what the code did off
    what it drew (:meth:`_drawn`).  ``most``: the draws it serves in all (``most_note``
    says how many, for the error a student reads past it)."""

    def __init__(self, seed_words: list[int], most: int, most_note: str | None = None):
        self._gen = np.random.default_rng(seed_words)
        self._served: list[np.ndarray] = []  # each draw's values, flattened, in order
        self._left = most
        self._most_note = most_note or f"{most} draws"

    def _count(self, size) -> None:
        if size is None or type(size) is int:
            dims = [1 if size is None else size]
        elif isinstance(size, tuple | list) and all(type(x) is int for x in size[:9]):
            dims = list(size)[:9]
        else:
            raise TypeError("size must be None, an int or a tuple of ints")
        if len(dims) > 8 or min(dims, default=0) < 0:
            raise ValueError("size: at most 8 dimensions, none negative")
        if math.prod(dims) > self._left:
            raise ValueError(f"rng serves at most {self._most_note} in all")
        self._left -= math.prod(dims)

    def _served_as(self, values):
        self._served.append(np.asarray(values, dtype=np.float64).ravel())
        return values

    def random(self, size=None):
        """Uniform draws in [0, 1), as NumPy's ``Generator.random``."""
        self._count(size)
        return self._served_as(self._gen.random(size))

    def uniform(self, low=0.0, high=1.0, size=None):
        """Uniform draws in [low, high), as NumPy's ``Generator.uniform``."""
        low, high = float(low), float(high)
        self._count(size)
        return self._served_as(self._gen.uniform(low, high, size))

    def binomial(self, n, p, size=None):
        """Binomial draws, as NumPy's ``Generator.binomial`` (n = 1: Bernoulli(p))."""
        if type(n) is not int:
            raise TypeError("n must be an int")
        self._count(size)
        return self._served_as(self._gen.binomial(n, float(p), size))

    def choice(self, a, size=None, replace=True, p=None):
        """Draws among ``a`` (an int, or a few numbers), as NumPy's ``Generator.choice``."""
        few = (list, tuple, np.ndarray)
        if not (type(a) is int or isinstance(a, few) and np.ndim(a) == 1 and len(a) <= 16):
            raise TypeError("a must be an int or a list of at most 16 numbers")
        if not (p is None or isinstance(p, few) and np.ndim(p) == 1 and len(p) <= 16):
            raise TypeError("p must be None or a list of at most 16 probabilities")
        a = a if type(a) is int else [float(x) for x in a]
        p = None if p is None else [float(x) for x in p]
        self._count(size)
        return self._served_as(self._gen.choice(a, size, bool(replace), p))

    def _drawn(self) -> np.ndarray:
        """Every value served, in order (here only: a method with _ is not offered)."""
        return np.concatenate(self._served) if self._served else np.zeros(0)


class Logged:
    """A callback to hand to the student's function (an ``average``, a comm, an oracle),
    whose every call is logged with a copy of its arguments and of what it answered:
    ``calls`` is the list of ``(args, answer)``.  A check then judges what the callback
    was given (the workers' current models, not zeros), not how often it was called."""

    def __init__(self, fn):
        self._fn = fn
        self.calls: list[tuple[tuple, object]] = []

    def __call__(self, *args):
        answer = self._fn(*args)
        self.calls.append((copy.deepcopy(args), copy.deepcopy(answer)))
        return answer
