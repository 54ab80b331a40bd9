"""Small sympy helpers shared by derivations (sympy is passed in, never imported here)."""

from __future__ import annotations

from typing import Any


def general_branch(sp: Any, expr: Any) -> Any:
    """The generic branch of a sum sympy returns as a Piecewise (e.g. a geometric sum at r ≠ 1)."""
    folded = sp.piecewise_fold(expr)
    return folded.args[-1][0] if isinstance(folded, sp.Piecewise) else folded
