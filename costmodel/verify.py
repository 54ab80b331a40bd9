"""Check every derivation: the derived expression equals the notes' closed form
(symbolically), and the numeric function equals the closed form at random points.

``closed_form(name)`` and ``evaluate_symbolic(name, **kwargs)`` give the symbolic path
the generator uses to recompute keys independently of the numeric functions.
"""

from __future__ import annotations

import math
import random
import time
import zlib
from dataclasses import dataclass
from functools import cache
from typing import Any

from costmodel._registry import Derivation, all_derivations, get
from costmodel.arguments import ARGUMENTS, Domain

REL_TOL = 1e-9


@dataclass(frozen=True)
class Check:
    """The outcome of one derivation."""

    formula: str
    title: str
    symbolic_ok: bool
    numeric_ok: bool
    points: int
    seconds: float
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.symbolic_ok and self.numeric_ok


def _as_tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, tuple | list) else (x,)


@cache
def _derived(d: Derivation) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    import sympy

    derived, closed = d.derive(sympy)
    return _as_tuple(derived), _as_tuple(closed)


def _same(sp: Any, a: Any, b: Any) -> bool:
    diff = sp.simplify(sp.sympify(a) - sp.sympify(b))
    if diff == 0:
        return True
    eq = sp.sympify(a).equals(sp.sympify(b))
    return bool(eq)


def closed_form(name: str) -> tuple[Any, ...]:
    """The closed form(s) of formula ``name`` from its first derivation (sympy exprs)."""
    derivations = get(name).derivations
    if not derivations:
        raise LookupError(f"formula {name} has no derivation")
    return _derived(derivations[0])[1]


def evaluate_symbolic(name: str, **kwargs: Any) -> Any:
    """Evaluate ``name`` through its closed form (exact rational arithmetic where possible)."""
    import sympy as sp

    exprs = closed_form(name)
    subs = {}
    for expr in exprs:
        for s in expr.free_symbols:
            if s.name not in kwargs:
                raise ValueError(f"{name}: symbolic path needs {s.name!r}")
            subs[s] = sp.nsimplify(kwargs[s.name], rational=True)
    values = tuple(float(sp.N(e.subs(subs), 30)) for e in exprs)
    return values if len(values) > 1 else values[0]


@cache
def _lambdified(d: Derivation) -> tuple[tuple[str, ...], Any]:
    """The closed form as a function of its symbols' values, compiled once.

    Closed forms with a ceiling or floor are evaluated in exact rational arithmetic
    instead: float noise must not move ⌈(p − 1)(1 − β)/β⌉ = 12 to 13.
    """
    import sympy as sp

    closed = _derived(d)[1]
    symbols = sorted({s for e in closed for s in e.free_symbols}, key=lambda s: s.name)
    if any(e.has(sp.ceiling, sp.floor) for e in closed):

        def exact(*values: Any) -> tuple[float, ...]:
            # the decimal a value is written as, exactly: 0.1 is 1/10, not 0.1000000000000000055
            subs = {s: sp.Rational(repr(v)) for s, v in zip(symbols, values, strict=True)}
            return tuple(float(e.subs(subs)) for e in closed)

        return tuple(s.name for s in symbols), exact
    fn = sp.lambdify(symbols, closed, modules="math")
    return tuple(s.name for s in symbols), fn


def _applicable(name: str, kwargs: dict[str, Any]) -> tuple[Any, list[Any]] | None:
    """The compiled closed form that applies to this call, and its arguments, or None.

    A derivation applies when its ``fixed`` arguments equal the call's (a closed form
    proved for ``biases=False`` says nothing about ``biases=True``), its ``where`` holds
    for the call (the output size without its floor holds only where the stride divides),
    it needs no adapter, and the call supplies every symbol.
    """
    f = get(name)
    call = {
        k: p.default for k, p in f.signature.parameters.items() if p.default is not p.empty
    } | dict(kwargs)
    for d in f.derivations:
        if d.call is not None or any(call.get(k) != v for k, v in d.fixed.items()):
            continue
        symbols, fn = _lambdified(d)
        if all(s in call for s in symbols) and (d.where is None or d.where(call)):
            return fn, [call[s] for s in symbols]
    return None


def has_symbolic_path(name: str, kwargs: dict[str, Any]) -> bool:
    """Whether :func:`symbolic_value` can recompute this call (without computing it)."""
    return _applicable(name, kwargs) is not None


def symbolic_value(name: str, kwargs: dict[str, Any]) -> tuple[float, ...] | None:
    """``name`` at ``kwargs`` through a closed form that applies to this call, or None.

    Lambdified once per derivation, so checking every student's key this way costs
    microseconds, not a sympy substitution (closed forms with a ceiling or floor are
    evaluated exactly, at about a millisecond).
    """
    found = _applicable(name, kwargs)
    if found is None:
        return None
    fn, args = found
    return tuple(float(v) for v in fn(*args))


def _domain(d: Derivation, name: str) -> Domain:
    return d.domains.get(name) or get(d.formula).domains.get(name) or ARGUMENTS[name]


def _draw(rng: random.Random, dom: Domain) -> Any:
    if dom.kind == "bool":
        return rng.random() < 0.5
    if dom.kind == "choice":
        return rng.choice(dom.choices)
    lo, hi = dom.sample
    if dom.log and lo > 0:
        x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
    else:
        x = rng.uniform(lo, hi)
    return max(int(lo), round(x)) if dom.kind == "int" else x


def _close(got: Any, want: Any) -> bool:
    got, want = _as_tuple(got), _as_tuple(want)
    if len(got) != len(want):
        return False
    return all(
        math.isclose(float(g), float(w), rel_tol=REL_TOL, abs_tol=1e-12)
        for g, w in zip(got, want, strict=True)
    )


def check(d: Derivation, points: int = 12) -> Check:
    """Run one derivation: symbolic identity, then ``points`` random numeric comparisons."""
    import sympy as sp

    start = time.perf_counter()
    f = get(d.formula)
    try:
        derived, closed = _derived(d)
        symbolic_ok = len(derived) == len(closed) and all(
            _same(sp, a, b) for a, b in zip(derived, closed, strict=True)
        )
    except Exception as err:  # a broken derivation is a failed check, not a crash
        return Check(d.formula, d.title, False, False, 0, time.perf_counter() - start, repr(err))

    symbols = sorted({s for e in closed for s in e.free_symbols}, key=lambda s: s.name)
    lam = sp.lambdify(symbols, closed if len(closed) > 1 else closed[0], modules="math")
    rng = random.Random(zlib.crc32(f"{d.formula}:{d.title}".encode()))
    done, detail = 0, ""
    for _ in range(points * 50):
        if done == points:
            break
        values = {s.name: _draw(rng, _domain(d, s.name)) for s in symbols}
        if d.where is not None and not d.where(values):
            continue
        try:
            got = d.call(f.func, values) if d.call else f.func(**{**values, **d.fixed})
            want = lam(*(values[s.name] for s in symbols))
        except (ValueError, ZeroDivisionError, OverflowError):
            continue  # outside the formula's domain: draw again
        if not _close(got, want):
            detail = f"at {values}: numeric {got!r} != closed form {want!r}"
            break
        done += 1
    numeric_ok = done == points and not detail
    if not numeric_ok and not detail:
        detail = f"only {done} of {points} random points were valid"
    if not symbolic_ok:
        detail = "derived expression does not simplify to the closed form; " + detail
    return Check(
        d.formula, d.title, symbolic_ok, numeric_ok, done, time.perf_counter() - start, detail
    )


def verify_all(points: int = 12) -> list[Check]:
    """Check every registered derivation."""
    import costmodel  # noqa: F401  (imports every module, filling the registry)

    return [check(d, points) for d in all_derivations()]
