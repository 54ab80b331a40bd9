"""The formula registry: every quantity of the courses, addressed as ``"<module>.<function>"``.

A formula is a plain function decorated with :func:`formula`; the decorator records
its citation and SI unit, and checks each argument against its :class:`Domain`
(see :mod:`costmodel.arguments`) so that a negative size or an MFU of 1.5 is refused
with a sentence naming the argument.  A derivation, decorated with :func:`derivation`,
sits beside its formula and proves the closed form from the definitions with sympy;
``scalegrade verify`` runs them all (:mod:`costmodel.verify`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from costmodel.arguments import ArgumentError, Domain, domain_of


class UnknownFormula(KeyError):
    """A formula name that is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


@dataclass(frozen=True, eq=False)  # identity hash: derivations are cached by object
class Derivation:
    """A sympy derivation of one formula's closed form.

    ``derive(sp)`` receives the sympy module and returns ``(derived, closed_form)``:
    ``derived`` is built from the definitions (summing matrices, solving a stationarity
    condition, summing a series), ``closed_form`` is the expression the notes state.
    Both use sympy symbols named as the formula's keyword arguments (or as the keys of
    ``domains``).  They may be tuples for formulas that return tuples.

    ``call(func, values)`` maps a point (symbol name -> number) to a numeric call of the
    formula; by default it passes the point as keyword arguments plus ``fixed``.
    ``where`` filters random points (e.g. micro-batches >= stages).
    """

    formula: str
    derive: Callable[[Any], tuple[Any, Any]]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    domains: Mapping[str, Domain] = field(default_factory=dict)
    call: Callable[[Callable[..., Any], dict[str, Any]], Any] | None = None
    where: Callable[[dict[str, Any]], bool] | None = None
    title: str = ""


@dataclass(frozen=True)
class Formula:
    """One registered quantity."""

    name: str
    func: Callable[..., Any]
    cite: str
    unit: str
    summary: str
    doc: str
    signature: inspect.Signature
    domains: Mapping[str, Domain]

    @property
    def derivations(self) -> list[Derivation]:
        return _DERIVATIONS.get(self.name, [])

    @property
    def has_derivation(self) -> bool:
        return bool(self.derivations)


_FORMULAS: dict[str, Formula] = {}
_DERIVATIONS: dict[str, list[Derivation]] = {}


def _module_name(fn: Callable[..., Any]) -> str:
    return fn.__module__.rsplit(".", 1)[-1]


def formula(
    cite: str, unit: str, *, domains: Mapping[str, Domain] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as ``"<module>.<fn name>"``, citing the notes, with its SI result unit.

    Arguments are checked against their domains (by name, from
    :data:`costmodel.arguments.ARGUMENTS`, or ``domains`` for names whose meaning is
    local to this formula).
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = f"{_module_name(fn)}.{fn.__name__}"
        sig = inspect.signature(fn)
        local = dict(domains or {})
        doms = {p: local.get(p) or domain_of(p, where=name) for p in sig.parameters}

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as err:
                raise ArgumentError(f"{name}: {err}") from None
            for arg, value in bound.arguments.items():
                problem = doms[arg].problem(value)
                if problem:
                    raise ArgumentError(f"{name}: {arg} = {value!r}: {problem}")
            return fn(*bound.args, **bound.kwargs)

        doc = inspect.cleandoc(fn.__doc__ or "")
        if name in _FORMULAS:
            raise RuntimeError(f"formula {name} registered twice")
        _FORMULAS[name] = Formula(
            name=name,
            func=checked,
            cite=cite,
            unit=unit,
            summary=doc.splitlines()[0] if doc else "",
            doc=doc,
            signature=sig,
            domains=doms,
        )
        checked.formula_name = name  # type: ignore[attr-defined]
        return checked

    return decorate


def derivation(
    of: Callable[..., Any],
    *,
    fixed: Mapping[str, Any] | None = None,
    domains: Mapping[str, Domain] | None = None,
    call: Callable[[Callable[..., Any], dict[str, Any]], Any] | None = None,
    where: Callable[[dict[str, Any]], bool] | None = None,
) -> Callable[[Callable[[Any], tuple[Any, Any]]], Callable[[Any], tuple[Any, Any]]]:
    """Attach a sympy derivation to the formula ``of`` (see :class:`Derivation`)."""

    name = getattr(of, "formula_name", None)
    if name is None:
        raise TypeError(f"{of!r} is not a registered formula")

    def decorate(derive: Callable[[Any], tuple[Any, Any]]) -> Callable[[Any], tuple[Any, Any]]:
        doc = inspect.cleandoc(derive.__doc__ or "")
        _DERIVATIONS.setdefault(name, []).append(
            Derivation(
                formula=name,
                derive=derive,
                fixed=dict(fixed or {}),
                domains=dict(domains or {}),
                call=call,
                where=where,
                title=doc.splitlines()[0] if doc else "",
            )
        )
        return derive

    return decorate


def registry() -> dict[str, Formula]:
    """Every formula by name (the modules are imported by :mod:`costmodel`)."""
    return dict(_FORMULAS)


def get(name: str) -> Formula:
    try:
        return _FORMULAS[name]
    except KeyError:
        close = [n for n in _FORMULAS if name.split(".")[-1] in n]
        hint = f"; did you mean {', '.join(sorted(close)[:3])}?" if close else ""
        raise UnknownFormula(
            f"unknown formula {name!r}{hint} (`scalegrade calc --list` lists them)"
        ) from None


def all_derivations() -> list[Derivation]:
    return [d for name in sorted(_DERIVATIONS) for d in _DERIVATIONS[name]]
