"""Checks every variant must pass before anyone sees it (R/exams' stresstest, STACK's
deployed variants): finite, sensible signs, plausible, and the key recomputed through
the sympy closed form equal to the numeric one."""

from __future__ import annotations

import math

from contract import Answer as KeyAnswer
from costmodel.verify import has_symbolic_path, symbolic_value
from generator.variant import Variant

SYMBOLIC_REL_TOL = 1e-9


def answer_problems(k: KeyAnswer) -> list[str]:
    """What is wrong with one answer of a key (empty when nothing)."""
    problems = []
    x = k.value
    if not math.isfinite(x):
        return [f"{k.id} = {x}: not a finite number"]
    if k.sign == "positive" and x <= 0:
        problems.append(f"{k.id} = {x:g}: must be positive")
    if k.sign == "nonnegative" and x < 0:
        problems.append(f"{k.id} = {x:g}: must not be negative")
    if k.plausible is not None:
        lo, hi = k.plausible
        shown = k.display_value
        if not lo <= shown <= hi:
            problems.append(
                f"{k.id} = {shown:.4g} {k.unit}: outside the plausible [{lo:g}, {hi:g}]"
            )
    if k.formula is not None:
        sym = symbolic_value(k.formula, k.resolved_args)
        if sym is not None:
            expected = sym[k.output or 0]
            if not math.isclose(x, expected, rel_tol=SYMBOLIC_REL_TOL, abs_tol=1e-300):
                problems.append(
                    f"{k.id}: numeric {x!r} != symbolic {expected!r} ({k.formula} closed form)"
                )
    return problems


def symbolic_checked(k: KeyAnswer) -> bool:
    """Whether the key of ``k`` was recomputed through a closed form."""
    return k.formula is not None and has_symbolic_path(k.formula, k.resolved_args)


def variant_problems(v: Variant) -> list[str]:
    where = f"templates/{v.question_id} (student {v.student_id})"
    return [f"{where}: {p}" for k in v.answers for p in answer_problems(k)]
