"""Whole-number answers from float arithmetic: ⌈63.00000000000001⌉ is 63, not 64.

The notes' counts (micro-batches, accelerators, workers, rounds, sequences) are ceilings
and floors of ratios that are often whole in exact arithmetic but not in binary floats
(0.1 has no exact binary form).  A value within a relative 1e-12 of a whole number is
taken to be that number before rounding (float noise is ~1e-16 relative per operation;
a real fraction such as 7868101.0078 is never that close).
"""

from __future__ import annotations

import math

SNAP = 1e-12


def _snap(x: float) -> float:
    nearest = round(x)
    return float(nearest) if abs(x - nearest) <= SNAP * max(1.0, abs(x)) else x


def ceil(x: float) -> int:
    return math.ceil(_snap(x))


def floor(x: float) -> int:
    return math.floor(_snap(x))
