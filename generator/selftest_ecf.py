"""Error carried forward, offline: an answer's formula over earlier answers, as JavaScript.

The Python grader gives carried credit when a part equals its formula applied to the
student's own earlier answers (:func:`contract.evaluate`).  A self-test
page has no Python, so the page carries, per answer, the same computation compiled to
JavaScript at build time.

How: the answer's formula (a cost-model function or an expression over parameters and
answers) is *run* in Python on tracer numbers that stand for the student's earlier
answers.  Every arithmetic step on a tracer is recorded; every comparison a branch
depends on (``if alpha == 1``, ``min``, a domain check of a formula argument) is
recorded as a guard with the way it went.  Tracing at a few hundred points spread over
the range where carried credit is possible at all (within 10x of the key with its sign,
or a declared misconception: :func:`contract.plausible`) collects the paths through the
code into a decision tree: guards in the order Python evaluated them, and at each leaf the
recorded expression (or "raises", where Python raises and so gives no carried credit).
The JavaScript walks the same tree: on a path Python took, it computes what Python
computes, operation by operation.  A point whose path was never seen (a branch no
sample reached, or a search loop past its budget near a singular point) yields
"unknown", and the page then gives no carried credit there; the browser tests require
such points to be rarer than 1 in 100 random plausible points, and absent from the
graded answer sets.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import math
import random
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import costmodel
from contract import PLAUSIBLE_FACTOR, Answer, evaluate, plausible
from costmodel import _numeric, expression
from costmodel.arguments import Domain

# A path with more branches than this (a search loop near a singular point, such as the
# optimal draft length as the acceptance rate nears 1) is not recorded: the page then
# gives no carried credit there.
MAX_GUARDS = 120
# Budgets of one answer's compilation: bisection stops at this many distinct paths or
# samples (the page gives no carried credit on paths it has not seen).
MAX_PATHS = 80
MAX_BISECTIONS = 400


class TraceError(RuntimeError):
    """A formula did something with a traced value that cannot be recorded."""


class PathTooLong(TraceError):
    """A path with more than :data:`MAX_GUARDS` branches (not recorded, by design)."""


# --- the expression graph -----------------------------------------------------------


@dataclass(frozen=True)
class Node:
    js: str  # a JavaScript expression over v (the earlier answers) and $ (the helpers)


def _lit(x: Any) -> Node:
    if isinstance(x, bool):
        return Node("1" if x else "0")
    if isinstance(x, int):
        text = repr(x) if abs(x) < 2**53 else repr(float(x))
        return Node(f"({text})" if x < 0 else text)
    if isinstance(x, float):
        if math.isnan(x):
            return Node("NaN")
        if math.isinf(x):
            return Node("Infinity" if x > 0 else "(-Infinity)")
        return Node(f"({x!r})" if x < 0 or (x == 0 and math.copysign(1, x) < 0) else repr(x))
    raise TraceError(f"a traced value met a {type(x).__name__} ({x!r})")


def _node(x: Any) -> Node:
    return x.node if isinstance(x, Tracer) else _lit(x)


def _concrete(x: Any) -> Any:
    return x.value if isinstance(x, Tracer) else x


@dataclass
class _Recorder:
    guards: list[tuple[str, bool]] = field(default_factory=list)
    seen: dict[str, bool] = field(default_factory=dict)
    failed: str | None = None  # the expression whose evaluation raised, if any

    def guard(self, js: str, outcome: bool) -> bool:
        known = self.seen.get(js)
        if known is None:
            if len(self.guards) >= MAX_GUARDS:
                raise PathTooLong(f"more than {MAX_GUARDS} branches on one path")
            self.seen[js] = outcome
            self.guards.append((js, outcome))
        elif known != outcome:  # pragma: no cover - same expression, same value
            raise TraceError(f"guard {js} went both ways on one path")
        return outcome


_RECORDER: _Recorder | None = None


def _rec() -> _Recorder:
    if _RECORDER is None:  # pragma: no cover - tracers exist only while tracing
        raise TraceError("a tracer was used outside tracing")
    return _RECORDER


def _apply(js: str, fn: Callable[..., Any], *args: Any) -> Tracer:
    """A recorded operation: its JavaScript, and its value at the sample point."""
    try:
        value = fn(*(_concrete(a) for a in args))
    except (ValueError, ArithmeticError):
        _rec().failed = js
        raise
    return Tracer(value, Node(js))


def _binary(op: str, helper: str | None, fn: Callable[[Any, Any], Any]):
    def forward(self, other):
        if not isinstance(other, Tracer | int | float):
            return NotImplemented
        a, b = _node(self).js, _node(other).js
        js = f"$.{helper}({a}, {b})" if helper else f"({a} {op} {b})"
        return _apply(js, fn, self, other)

    def reflected(self, other):
        if not isinstance(other, int | float):
            return NotImplemented
        a, b = _node(other).js, _node(self).js
        js = f"$.{helper}({a}, {b})" if helper else f"({a} {op} {b})"
        return _apply(js, fn, other, self)

    return forward, reflected


def _compare(op: str, fn: Callable[[Any, Any], bool]):
    def method(self, other):
        if not isinstance(other, Tracer | int | float):
            return NotImplemented
        outcome = bool(fn(_concrete(self), _concrete(other)))
        return _rec().guard(f"({_node(self).js} {op} {_node(other).js})", outcome)

    return method


class Tracer:
    """A number standing for a student's answer (or a value computed from one)."""

    __slots__ = ("value", "node")

    def __init__(self, value: Any, node: Node):
        self.value = value
        self.node = node

    __add__, __radd__ = _binary("+", None, lambda a, b: a + b)
    __sub__, __rsub__ = _binary("-", None, lambda a, b: a - b)
    __mul__, __rmul__ = _binary("*", None, lambda a, b: a * b)
    __truediv__, __rtruediv__ = _binary("/", "div", lambda a, b: a / b)
    __floordiv__, __rfloordiv__ = _binary("//", "floordiv", lambda a, b: a // b)
    __mod__, __rmod__ = _binary("%", "mod", lambda a, b: a % b)
    __pow__, __rpow__ = _binary("**", "pow", lambda a, b: _pow(a, b))

    __lt__ = _compare("<", lambda a, b: a < b)
    __le__ = _compare("<=", lambda a, b: a <= b)
    __gt__ = _compare(">", lambda a, b: a > b)
    __ge__ = _compare(">=", lambda a, b: a >= b)
    __eq__ = _compare("===", lambda a, b: a == b)  # type: ignore[assignment]
    __ne__ = _compare("!==", lambda a, b: a != b)  # type: ignore[assignment]

    def __neg__(self):
        return _apply(f"(-{self.node.js})", lambda a: -a, self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _apply(f"Math.abs({self.node.js})", abs, self)

    def __bool__(self):
        return _rec().guard(f"({self.node.js} !== 0)", bool(self.value))

    def __round__(self, ndigits=None):
        if ndigits is not None:
            raise TraceError("round(x, ndigits) of a traced value")
        return _apply(f"$.round({self.node.js})", round, self)

    def __floor__(self):
        return _apply(f"$.floor({self.node.js})", math.floor, self)

    def __ceil__(self):
        return _apply(f"$.ceil({self.node.js})", math.ceil, self)

    def __float__(self):
        raise TraceError("float() of a traced value outside the cost model")

    def __int__(self):
        raise TraceError("int() of a traced value outside the cost model")

    def __index__(self):
        raise TraceError("a traced value used as an index or a count")

    def __hash__(self):
        raise TraceError("a traced value used as a dictionary key")

    def __repr__(self) -> str:
        return f"Tracer({self.value!r}, {self.node.js})"


def _pow(a, b):
    result = a**b
    if isinstance(result, complex):  # Python gives a complex root; the grader's float() fails
        raise ValueError("complex power")
    return result


# --- what the cost model calls on traced values -------------------------------------


def _unary(name: str, fn: Callable[[float], Any]) -> Callable[..., Any]:
    def shim(x, *rest):
        if isinstance(x, Tracer) and not rest:
            return _apply(f"$.{name}({x.node.js})", fn, x)
        if any(isinstance(r, Tracer) for r in (x, *rest)):
            raise TraceError(f"math.{name} with these traced arguments")
        return fn(x, *rest)

    return shim


def _log(x, *base):
    if not any(isinstance(v, Tracer) for v in (x, *base)):
        return math.log(x, *base)
    if base:
        return _log(x) / _log(base[0])  # math.log(x, b) is log(x) / log(b) in CPython
    return _apply(f"$.log({x.node.js})", math.log, x)


def _fsum(items):
    items = list(items)
    if not any(isinstance(v, Tracer) for v in items):
        return math.fsum(items)
    total: Any = 0.0  # the correctly rounded sum of fsum, here as left-to-right additions
    for v in items:
        total = total + v
    return total


def _prod(items, *, start=1):
    items = list(items)
    if not any(isinstance(v, Tracer) for v in items):
        return math.prod(items, start=start)
    total: Any = start
    for v in items:
        total = total * v
    return total


def _isfinite(x):
    if not isinstance(x, Tracer):
        return math.isfinite(x)
    return _rec().guard(f"isFinite({x.node.js})", math.isfinite(x.value))


def _isnan(x):
    if not isinstance(x, Tracer):
        return math.isnan(x)
    return _rec().guard(f"Number.isNaN({x.node.js})", math.isnan(x.value))


def _isinf(x):
    if not isinstance(x, Tracer):
        return math.isinf(x)
    js = f"(Math.abs({x.node.js}) === Infinity)"
    return _rec().guard(js, math.isinf(x.value))


class _MathShim(types.ModuleType):
    """``math`` as the cost model sees it while tracing: tracers pass through."""

    def __init__(self) -> None:
        super().__init__("math")
        for name in ("exp", "sqrt", "log2", "log10", "log1p", "sin", "cos", "tan", "atan"):
            setattr(self, name, _unary(name, getattr(math, name)))
        self.log = _log
        self.fsum = _fsum
        self.prod = _prod
        self.isfinite = _isfinite
        self.isnan = _isnan
        self.isinf = _isinf
        self.floor = math.floor  # __floor__ / __ceil__ record these
        self.ceil = math.ceil

    def __getattr__(self, name: str) -> Any:
        value = getattr(math, name)
        if callable(value):

            def guarded(*args, **kwargs):
                if any(isinstance(a, Tracer) for a in (*args, *kwargs.values())):
                    raise TraceError(f"math.{name} of a traced value")
                return value(*args, **kwargs)

            return guarded
        return value


def _float(x=0.0):
    if isinstance(x, Tracer):
        return _apply(f"(+{x.node.js})", float, x)
    return float(x)


def _int(x=0, *rest):
    if isinstance(x, Tracer):
        if rest:
            raise TraceError("int(x, base) of a traced value")
        return _apply(f"$.trunc({x.node.js})", int, x)
    return int(x, *rest)


def _snap(x):
    if isinstance(x, Tracer):
        return _apply(f"$.snap({x.node.js})", _ORIGINAL_SNAP, x)
    return _ORIGINAL_SNAP(x)


_ORIGINAL_SNAP = _numeric._snap
_ORIGINAL_PROBLEM = Domain.problem


def _problem(self: Domain, value: Any) -> str | None:
    """A formula argument's domain check; on a traced value, a guard."""
    if not isinstance(value, Tracer):
        return _ORIGINAL_PROBLEM(self, value)
    if self.kind not in ("int", "real"):
        raise TraceError(f"a traced value for a {self.kind} argument")
    problem = _ORIGINAL_PROBLEM(self, value.value)
    spec = ", ".join(
        _lit(x).js if x is not None else "null"
        for x in (self.low, self.high, self.low_open, self.high_open)
    )
    js = f"$.domain({value.node.js}, {'1' if self.kind == 'int' else '0'}, {spec})"
    ok = _rec().guard(js, problem is None)
    return None if ok else problem


class _ShimType(type):
    """``isinstance(x, float)`` and ``int | float`` keep working on the shims."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.real)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls.real)


class _FloatShim(metaclass=_ShimType):
    real = float

    def __new__(cls, x: Any = 0.0) -> Any:
        return _float(x)


class _IntShim(metaclass=_ShimType):
    real = int

    def __new__(cls, x: Any = 0, *rest: Any) -> Any:
        return _int(x, *rest)


def _formula_modules() -> list[types.ModuleType]:
    """The modules that define formulas (not the registry, units or expressions)."""
    names = {f.func.__module__ for f in costmodel.formulas().values()}
    return [sys.modules[n] for n in sorted(names)]


@contextlib.contextmanager
def _tracing() -> Iterator[_Recorder]:
    """Route math, float, int and the argument checks through tracer-aware versions.

    Each replacement behaves exactly as the original on plain numbers; they are in
    place only while one answer's formula is compiled (the build is single-threaded).
    """
    global _RECORDER
    shim = _MathShim()
    functions = {
        **{k: getattr(shim, k) for k in ("sqrt", "log2", "log10", "exp")},
        "log": _log,
        "int": _int,
        "float": _float,
    }
    saved_functions = {k: expression.FUNCTIONS[k] for k in functions}
    patched: list[tuple[types.ModuleType, str, Any]] = []
    for module in _formula_modules():
        for name, replacement in (("math", shim), ("float", _FloatShim), ("int", _IntShim)):
            patched.append((module, name, module.__dict__.get(name, _MISSING)))
            setattr(module, name, replacement)
    expression.FUNCTIONS.update(functions)
    _numeric._snap = _snap
    Domain.problem = _problem  # type: ignore[method-assign]
    _RECORDER = _Recorder()
    try:
        yield _RECORDER
    finally:
        _RECORDER = None
        Domain.problem = _ORIGINAL_PROBLEM  # type: ignore[method-assign]
        _numeric._snap = _ORIGINAL_SNAP
        expression.FUNCTIONS.update(saved_functions)
        for module, name, old in reversed(patched):
            if old is _MISSING:
                delattr(module, name)
            else:
                setattr(module, name, old)


_MISSING = object()


# --- one answer's carried value, traced ---------------------------------------------


Leaf = tuple[str, str | None]  # ("value", js) | ("raises", js of the failing step or None)


@dataclass
class _Tree:
    """Python's paths through one formula: guards in evaluation order, then a leaf.

    ``checks`` are steps that raised on some path reaching this node (and succeeded on
    the others): JavaScript evaluates them first, so that where Python raises, so does
    the page.
    """

    checks: list[str] = field(default_factory=list)
    cond: str | None = None
    branches: dict[bool, _Tree] = field(default_factory=dict)
    leaf: Leaf | None = None

    def insert(self, guards: list[tuple[str, bool]], leaf: Leaf) -> None:
        node = self
        for js, outcome in guards:
            if node.cond is None:
                if node.leaf is not None and node.leaf[0] == "value":
                    raise TraceError("a path continues past the end of another")
                node.cond, node.leaf = js, None
            elif node.cond != js:
                raise TraceError(f"two paths ask different questions: {node.cond} / {js}")
            node = node.branches.setdefault(outcome, _Tree())
        kind, failing = leaf
        if kind == "raises":
            if failing is not None and failing not in node.checks:
                node.checks.append(failing)
            if node.cond is None and node.leaf is None:
                node.leaf = leaf
            return
        if node.cond is not None or (node.leaf is not None and node.leaf[0] == "value"):
            if node.leaf != leaf:
                raise TraceError("two paths through the same guards end differently")
        node.leaf = leaf

    def js(self) -> str:
        if self.cond is not None:
            yes, no = self.branches.get(True), self.branches.get(False)
            body = (
                f"({self.cond} ? {yes.js() if yes else '$.unknown()'}"
                f" : {no.js() if no else '$.unknown()'})"
            )
        elif self.leaf is None:
            body = "$.unknown()"
        elif self.leaf[0] == "value":
            body = self.leaf[1] or "NaN"
        else:  # raises: the checks above raise where Python did; otherwise unknown
            body = "$.unknown()" if self.checks else "$.fail()"
        return f"({', '.join([*self.checks, body])})" if self.checks else body


@dataclass(frozen=True)
class Compiled:
    """The carried value of one answer as a JavaScript expression over ``v`` and ``$``."""

    inputs: tuple[str, ...]  # answer ids, in the order of v
    js: str
    paths: int
    samples: int
    untraceable: int  # sample points whose path could not be recorded (a gap to fix)
    too_long: int  # sample points beyond the branch budget (by design)


def trace_once(answer: Answer, params: dict[str, Any], own: dict[str, float]):
    """(guards, leaf) of one sample point; raises TraceError if it cannot be recorded."""
    with _tracing():
        return _trace(answer, params, own)


def _trace(answer: Answer, params: dict[str, Any], own: dict[str, float]):
    global _RECORDER
    rec = _RECORDER = _Recorder()
    inputs = sorted(own)
    tracers = {d: Tracer(own[d], Node(f"v[{i}]")) for i, d in enumerate(inputs)}
    try:
        result = evaluate(answer, {**params, **tracers})[0]  # the grader's, minus float()
    except (ValueError, ArithmeticError):  # costmodel.ArgumentError is a ValueError
        return list(rec.guards), ("raises", rec.failed)
    if isinstance(result, Tracer):
        return list(rec.guards), ("value", result.node.js)
    if isinstance(result, bool | int | float):
        try:
            return list(rec.guards), ("value", _lit(float(result)).js)
        except OverflowError:
            return list(rec.guards), ("raises", None)
    raise TraceError(f"the formula returned a {type(result).__name__}")


def _plausible(point: dict[str, float], keys: dict[str, Answer]) -> bool:
    """Where carried credit is possible at all: every input plausible for its answer."""
    return all(plausible(x, keys[o]) for o, x in point.items())


def _near_whole(x: float) -> list[float]:
    return [float(r) for r in {math.floor(x), math.ceil(x), round(x)} if r != 0]


# Ratios to the key worth a sample of their own: tolerance edges, factors of 2 and 8
# (bits and bytes), GiB read as GB and back.
_RATIOS = (
    1.0,
    0.999,
    1.001,
    0.99,
    1.01,
    0.995,
    1.005,
    0.5,
    2.0,
    0.125,
    8.0,
    1e9 / 2**30,
    2**30 / 1e9,
    0.1,
    10.0,
)


def compile_carried(
    answer: Answer,
    params: dict[str, Any],
    keys: dict[str, Answer],
    *,
    seed: int = 0,
    grid: int = 25,
    joint: int = 80,
) -> Compiled | None:
    """The carried value of ``answer`` (an answer of a key) as JavaScript.

    ``keys`` are the question's answers by id.  The inputs are the answers it depends
    on; an input the student is not asked for is fixed at its key (the grader treats it
    as answered correctly).  None when the answer depends on nothing.

    Samples: each input alone over a log grid spanning the plausible window (the others
    at their keys, as when one part is wrong), with bisection between neighbouring grid
    points that take different paths (to regions a 1e-7 of the value wide), so that the
    paths between grid points are found too; then whole numbers near each point (for count
    arguments), the input's misconceptions and telling ratios, and points where all
    inputs move at once.  Bisection stops within a budget (:data:`MAX_PATHS`,
    :data:`MAX_BISECTIONS`): a search loop can branch without end near a singular point.
    """
    deps = list(answer.depends_on)
    if not deps:
        return None
    asked = {d: keys[d].value for d in deps if keys[d].ask}
    fixed = {d: keys[d].value for d in deps if not keys[d].ask}
    scope = {**params, **fixed}
    tree = _Tree()
    seen: set[tuple] = set()
    counts = {"samples": 0, "untraceable": 0, "too_long": 0}

    def run(point: dict[str, float]) -> tuple | None:
        if not _plausible(point, keys):
            return None
        counts["samples"] += 1
        try:
            guards, leaf = _trace(answer, scope, point)
        except PathTooLong:
            counts["too_long"] += 1
            return ("too long",)
        except TraceError:
            counts["untraceable"] += 1
            return ("untraceable",)
        signature = (tuple(guards), leaf)
        if signature not in seen:
            seen.add(signature)
            tree.insert(guards, leaf)
        return signature

    intervals: list[tuple] = []  # (depth, distance from the key, order, lo, hi, sigs, d)
    order = itertools.count()

    def split(depth, d, lo, hi, s_lo, s_hi):
        mid = math.sqrt(lo * hi) if lo > 0 else -math.sqrt(lo * hi)
        distance = abs(math.log(mid / asked[d]))
        heapq.heappush(intervals, (depth, distance, next(order), lo, hi, s_lo, s_hi, d))

    def bisect_all():
        # breadth first, nearest the key first: coarse paths everywhere before fine ones;
        # paths, not boundaries, are what the page needs, so a budget of samples ends it
        budget = counts["samples"] + MAX_BISECTIONS
        while intervals and len(seen) < MAX_PATHS and counts["samples"] < budget:
            depth, _, _, lo, hi, s_lo, s_hi, d = heapq.heappop(intervals)
            mid = math.sqrt(lo * hi) if lo > 0 else -math.sqrt(lo * hi)
            s_mid = run({**asked, d: mid})
            if depth < 24:
                if s_mid != s_lo:
                    split(depth + 1, d, lo, mid, s_lo, s_mid)
                if s_mid != s_hi:
                    split(depth + 1, d, mid, hi, s_mid, s_hi)

    rng = random.Random(seed)
    span = math.log(PLAUSIBLE_FACTOR)
    with _tracing():
        if any(v == 0 for v in asked.values()):
            pass  # a zero key is never plausible: nothing is ever carried
        elif not asked:
            run({})
        else:
            for d, key in sorted(asked.items()):
                base = dict(asked)
                values = [key * math.exp(span * (2 * i / (grid - 1) - 1)) for i in range(grid)]
                values = sorted(values, key=lambda x: abs(x))
                sigs = [run({**base, d: x}) for x in values]
                for i in range(grid - 1):
                    if sigs[i] != sigs[i + 1]:
                        split(0, d, values[i], values[i + 1], sigs[i], sigs[i + 1])
                extra = [key * r for r in _RATIOS]
                extra += [m.value for m in keys[d].misconceptions]
                for x in [*values, *extra]:
                    for y in _near_whole(x):
                        run({**base, d: y})
                for x in extra:
                    run({**base, d: x})
                    if len(asked) > 1:  # the others right, but not exactly the key
                        run({**{o: k * 1.004 for o, k in asked.items()}, d: x})
            bisect_all()
            for _ in range(joint if len(asked) > 1 else 0):
                point = {o: k * math.exp(rng.uniform(-span, span)) for o, k in asked.items()}
                run(point)
                run({o: rng.choice(_near_whole(x) or [x]) for o, x in point.items()})
    return Compiled(
        tuple(sorted(asked)),
        tree.js(),
        len(seen),
        counts["samples"],
        counts["untraceable"],
        counts["too_long"],
    )
