"""The shared cost-model core of ScaleGrade: one function per quantity of the courses.

Pure functions in SI units (bytes, FLOP, seconds, FLOP/s, bytes/s), no I/O.  Each is
addressed as ``"<module>.<function>"``::

    >>> import costmodel
    >>> costmodel.evaluate("transformer.param_count", n_layers=24, d_model=2048, vocab=50000)
    1310359552
    >>> costmodel.formulas()["memory.model_state_bytes"].cite
    '000 §1.2, Prop 1.2; 001 §1.4, def 1.4'
"""

from __future__ import annotations

from typing import Any

from costmodel import (  # noqa: F401  (importing a module registers its formulas)
    adaptation,
    agents,
    budget,
    collectives,
    compression,
    conv,
    diffusion,
    energy,
    memory,
    parallel,
    posttraining,
    rl,
    roofline,
    scaling,
    serving,
    transformer,
)
from costmodel._registry import ArgumentError, Formula, UnknownFormula, get, registry

__all__ = ["ArgumentError", "Formula", "UnknownFormula", "evaluate", "formula", "formulas"]


def formulas() -> dict[str, Formula]:
    """Every formula by name: signature, citation, SI unit, docstring, derivations."""
    return dict(sorted(registry().items()))


def formula(name: str) -> Formula:
    """One formula by name; :class:`UnknownFormula` names the fix if there is none."""
    return get(name)


def evaluate(name: str, **kwargs: Any) -> Any:
    """Evaluate formula ``name`` (``"<module>.<function>"``) with keyword arguments."""
    return get(name).func(**kwargs)
