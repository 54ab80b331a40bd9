"""The notes' numbers (``tests/data/worked_examples.json``) and how to compare with them.

The file lists the numbers the notes state in their worked examples, exercise solutions
and exam answers, each with the inputs it follows from and an independent recomputation
(``computed``), a ``verdict`` (``ok``; ``rounding``: the notes rounded further) and the
rounding ``rule`` to compare by.  ``notes`` is "000" or "001" and ``where`` the section.

Each area module here (``counting.py``, ``memory.py``, ...) maps entry ids to a function
of the entry's ``inputs`` that computes the number through the core, returned in the
entry's ``unit`` (the conversion from SI happens here, at the edge), and lists the
entries it deliberately skips with the reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[2] / "data" / "worked_examples.json"

Case = Callable[[dict[str, Any]], Any]


def load_entries() -> dict[str, dict[str, Any]]:
    with DATA.open(encoding="utf-8") as fh:
        return {e["id"]: e for e in json.load(fh)}


def round_sig(x: float, digits: int) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def agrees(ours: Any, entry: dict[str, Any]) -> tuple[bool, str]:
    """Does ``ours`` reproduce the entry within its rounding rule?

    The reference is the entry's independent recomputation (``computed``); for ``sig``
    and ``dec`` rules ours must also round to the same digits as ``stated`` when the
    entry's verdict is ``ok`` (a ``rounding`` verdict means the notes rounded further).
    """
    rule, computed, stated = entry["rule"], entry["computed"], entry["stated"]
    kind = rule[0]
    if kind == "bool":
        return bool(ours) == bool(computed), f"{ours!r} vs {computed!r}"
    if isinstance(computed, list):
        same = len(ours) == len(computed) and all(
            math.isclose(a, b, rel_tol=1e-9) for a, b in zip(ours, computed, strict=True)
        )
        return same, f"{ours!r} vs {computed!r}"
    ours_f = float(ours)
    close = math.isclose(ours_f, float(computed), rel_tol=1e-6, abs_tol=1e-15)
    detail = f"{ours_f!r} vs computed {computed!r} (stated {stated!r} {entry['unit'] or ''})"
    if kind == "exact":
        return ours_f == float(computed) or close, detail
    if kind == "sig":
        digits = rule[1]
        ok = close or round_sig(ours_f, digits) == round_sig(float(computed), digits)
        if entry["verdict"] == "ok" and isinstance(stated, int | float):
            ok = ok and round_sig(ours_f, digits) == round_sig(float(stated), digits)
        return ok, detail
    if kind == "dec":
        ok = close or round(ours_f, rule[1]) == round(float(computed), rule[1])
        return ok, detail
    if kind == "abs":
        return abs(ours_f - float(computed)) <= rule[1], detail
    if kind == "rel_le":
        return abs(ours_f - float(stated)) <= rule[1] * abs(float(stated)), detail
    if kind == "oom":
        return math.floor(math.log10(abs(ours_f))) == math.floor(math.log10(abs(computed))), detail
    if kind in ("lt", "le", "gt"):
        return close, detail
    raise ValueError(f"{entry['id']}: unknown rule {rule}")
