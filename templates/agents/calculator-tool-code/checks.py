"""Checks of the calculator tool code part (000 §7.1, §7.4 (agent loop code)).

``probe`` runs in the probe process, beside the student's: it calls the student's
``calculator(expression)`` on expressions drawn from the seed (chains of + and −, unary
minus, + and * with parentheses, products beyond 64 bits, invalid input, long input), in
one round trip, and records each result or exception.  Then it sends code: expressions
that take half a second when Python evaluates them, with or without builtins, and times
each call on its own clock.  A parser answers at once; eval runs them, whatever the
student's process does to its own modules.  ``grade`` runs in the trusted process: it redraws the
expressions and their values from the seed.

The properties are separated on purpose: the precedence cases use only + and *, so that
a right-to-left chain costs only the chain property; values are compared as numbers, so
that a float result costs only the exact-integer property.
"""

from __future__ import annotations

import builtins
import math
import time

import numpy as np

from autograder.checklib import Property, Record, Result, check, count, listed

ISOLATED = True  # probe() runs in the probe process; calculator, in the student's

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def _op(rng: np.random.Generator, ops: str) -> str:
    op = str(rng.choice(list(ops)))
    return f" {op} " if rng.random() < 0.7 else op


def _chain(rng: np.random.Generator, n: int, high: int = 1000) -> tuple[str, int]:
    """a ± b ± c ..., evaluated from left to right."""
    terms = [int(t) for t in rng.integers(0, high, n)]
    text, value = str(terms[0]), terms[0]
    for t in terms[1:]:
        op = _op(rng, "+-")
        text += f"{op}{t}"
        value = value + t if op.strip() == "+" else value - t
    return text, value


def _tree(rng: np.random.Generator, depth: int) -> tuple[str, int, str]:
    """A random + / * expression: (text, value, top operator); parentheses where needed."""
    if depth == 0 or rng.random() < 0.25:
        v = int(rng.integers(1, 100))
        return str(v), v, "atom"
    op = "+" if rng.random() < 0.5 else "*"
    (lt, lv, lo), (rt, rv, ro) = _tree(rng, depth - 1), _tree(rng, depth - 1)
    if op == "*":
        lt = f"({lt})" if lo == "+" else lt
        rt = f"({rt})" if ro == "+" else rt
    return f"{lt}{_op(rng, op)}{rt}", (lv + rv if op == "+" else lv * rv), op


def _big(rng: np.random.Generator, digits: int) -> int:
    return int(rng.integers(1, 10)) * 10 ** (digits - 1) + int(rng.integers(0, 10**15))


# fmt: off
INVALID = [
    "", "   ", "2 +", "* 3", "(1 + 2", "1 + 2)", "1 2",  # malformed
    "2 ** 10", "2 ** 2 ** 10", "7 / 2", "7 // 2", "7 % 2", "1 << 3",  # other operators
    "1.5 + 1", "1e3", "x + 1", "abs(-3)", "__import__('math').factorial(5)",  # floats, names
    "[1, 2]", "'a' * 3", "1 if 1 else 2", "2 < 3", "~5",  # other syntax
]
# fmt: on


def cases(seed: int) -> dict:
    """Expressions and their values for one grading seed."""
    rng = np.random.default_rng([seed, 60])
    chains = [_chain(rng, int(rng.integers(3, 9))) for _ in range(6)]
    a, b, c = (int(v) for v in rng.integers(1, 1000, 3))
    unary = [
        (f"-{a}", -a),
        (f"-{a} - {b}", -a - b),
        (f"-{a} + {b} - {c}", -a + b - c),
        (f"-({a} + {b}) - {c}", -(a + b) - c),
        (f"{a} * -{b}", a * -b),
    ]
    precedence = []
    while len(precedence) < 8:
        text, value, top = _tree(rng, 3)
        if top != "atom" and ("+" in text and "*" in text):
            precedence.append((text, value))
    x, y, z, w = _big(rng, 21), _big(rng, 22), _big(rng, 19), _big(rng, 25)
    exact = [
        (f"{x} * {y}", x * y),
        (f"{x} * {y} * {z} - {w}", x * y * z - w),
        (f"{x} * {z} + {w}", x * z + w),  # products first: precedence is not at stake
        (f"{a} * {b}", a * b),
    ]
    long_text, long_value = _chain(rng, 200, 100)
    return {
        "chains": chains,
        "unary": unary,
        "precedence": precedence,
        "exact": exact,
        "invalid": INVALID,
        "long_valid": (long_text, long_value),
        "long_any": [  # a value (right) or a ValueError, nothing else
            " + ".join(["7"] * 5000),
            "1+" * 20000 + "1",
            "-" * 3000 + "7",
            "(" * 300 + "7" + ")" * 300,
            "9" * 5000,
        ],
    }


# Code an eval-based calculator would run: pure syntax, no name to patch or to take away
# (eval(text, {"__builtins__": {}}) runs it all the same): about half a second of work
# (0.75 s and 0.6 s on the reference machine), and a 240 MB list, allocated at once, which
# an eval cut short by a timer (in a thread, in a child) still takes.  The probe process
# times each call on its own clock and reads the memory from outside (the job's cgroup): a
# parser refuses at once and takes nothing, whatever the student's process does to its
# modules.  The forms are drawn from the seed, so no fixed string can be singled out.
RAN_SECONDS = 0.15  # a parser answers in about a millisecond
RAN_BYTES = 16 << 20  # and takes no memory; the list takes 240 MB at once, even cut short
PEAK_MAX = 1 << 62  # bytes: a peak beyond it is no measurement
CODE_PROPERTY = "never runs its input as code"


def code_payloads(seed: int) -> list[str]:
    rng = np.random.default_rng([seed, 61])
    a, b = (str(x) for x in rng.choice(list("abcdefghijkmnpqrstuvwxyz"), 2, replace=False))
    n = int(rng.integers(10_000, 11_000))
    base = int(rng.choice([6, 7]))
    return [
        f"[{a} for {a} in [0]*{n} for {b} in [0]*{n} if {b}]",  # 10⁸ steps of a loop
        f"{base}**(12*8**6)*0+{int(rng.integers(2, 99))}",  # an 8-million-bit power, times 0
        f"([0]*{int(rng.integers(30, 40))}000000)[0]+{int(rng.integers(2, 99))}",  # 240 MB
    ]


def _timed(student, text: str) -> dict:
    """One payload's answer, with the time it took and the memory it made the student's
    process take, both measured from this process."""
    start, peak = time.monotonic(), None
    try:
        answer, peak = student.measured(text)
    except Exception as err:  # noqa: BLE001 - what the student's function raised
        answer, peak = err, getattr(err, "peak_bytes", None)
    return {"call": Record.of(answer, seconds=time.monotonic() - start), "peak": peak}


GROUPS = ("chains", "unary", "precedence", "exact", "invalid", "long_valid", "long_any")


def _texts(c: dict, group: str) -> list[str]:
    items = c[group] if group != "long_valid" else [c[group]]
    return [x if isinstance(x, str) else x[0] for x in items]


def probe(student, seed: int, params: dict) -> dict:
    """Call ``calculator`` on the seed's expressions (one round trip), then on the code
    payloads, each timed here; a record of each call."""
    c = cases(seed)
    texts = {group: _texts(c, group) for group in GROUPS}
    recs = iter(student.calls([(t,) for group in GROUPS for t in texts[group]]))
    out: dict = {group: [next(recs) for _ in texts[group]] for group in GROUPS}
    out["long_valid"] = out["long_valid"][0]
    out["code"] = [_timed(student, text) for text in code_payloads(seed)]
    return out


# --- grade (trusted) ---------------------------------------------------------------------

# what the probe process reads back as a ValueError: the built-in ones (a class of the
# student's own crosses as a RuntimeError naming it)
_BUILTINS = [t for t in vars(builtins).values() if isinstance(t, type)]
VALUE_ERRORS = {t.__name__ for t in _BUILTINS if issubclass(t, ValueError)}


def _float_value(rec: Record) -> float | None:
    """The float a value that is neither an int nor a bool converts to, or None."""
    return None if rec.type in ("int", "bool") else rec.as_float()


def _value(rec: Record) -> int | float | None:
    """The number a record holds (an int when it is one, a finite float), or None."""
    if rec.ok and rec.type == "int":
        return rec.integer
    v = _float_value(rec)
    return v if v is not None and math.isfinite(v) else None


def _matches(rec: Record, expected: int) -> bool:
    v = _value(rec)
    if isinstance(v, float):
        return abs(expected) < 2**53 and v == float(expected)
    return v is not None and v == expected


def _said(rec: Record) -> str:
    """What the calculator did, in words (never the expected value)."""
    v = _value(rec)
    if rec.missing:
        return "no result"
    if not rec.ok:  # the exception's message, cut to 120 characters
        raised = rec.raised or ""
        return f"raised {raised}: {rec.error[len(raised) + 2 :][:120]}"
    if v is None:
        return f"returned a {rec.type}"
    if abs(v) < 10**30:
        return f"returned {v}"
    return f"returned a number of about {int(int(abs(v)).bit_length() * 0.30103) + 1} digits"


def _group(r: Result, name: str, expected: list) -> tuple[int, list[str]]:
    """How many values of the group match; what the first two that do not gave."""
    recs = r.records(name, len(expected))
    notes = [
        f"{t!r} {_said(rec)}"
        for rec, (t, v) in zip(recs, expected, strict=True)
        if not _matches(rec, v)
    ]
    return len(expected) - len(notes), notes[:2]


@check("+ and − from left to right, unary minus", 1.0)
def left_to_right(r: Result, c: dict):
    hits_c, notes_c = _group(r, "chains", c["chains"])
    hits_u, notes_u = _group(r, "unary", c["unary"])
    score = (hits_c + hits_u) / (len(c["chains"]) + len(c["unary"]))
    if score == 1:
        return score, "Sums and differences are evaluated from left to right, with unary minus."
    return score, "; ".join(notes_c + notes_u) + (
        ". + and − group from the left (a − b − c = (a − b) − c), and a leading minus negates "
        "(the agent's running total may be negative: '-17 - 25')."
    )


@check("* before + and −, parentheses", 2.0)
def precedence(r: Result, c: dict):
    hits, notes = _group(r, "precedence", c["precedence"])
    if hits == len(c["precedence"]):
        return 1.0, "* binds tighter than +, and parentheses group."
    return hits / len(c["precedence"]), "; ".join(notes) + (
        ". * is evaluated before + and −, and parentheses first: 2 + 3 * 4 = 14, (2 + 3) * 4 = 20."
    )


@check("exact integers of any size", 1.0)
def exact_ints(r: Result, c: dict):
    recs = r.records("exact", len(c["exact"]))
    oks = [
        rec.type == "int" and _matches(rec, v) for rec, (_, v) in zip(recs, c["exact"], strict=True)
    ]
    if all(oks):
        return 1.0, "Results are Python ints, exact beyond 64 bits."
    i = oks.index(False)
    kind = f" (a {recs[i].type}, not an int)" if _float_value(recs[i]) is not None else ""
    return sum(oks) / len(oks), (
        f"{c['exact'][i][0]!r} {_said(recs[i])}{kind}. Return a Python int: it is exact at any "
        "size, where floats keep 53 bits and NumPy's int64 overflows."
    )


@check("ValueError on anything else", 2.0)
def invalid(r: Result, c: dict):
    recs = r.records("invalid", len(c["invalid"]))
    bad = [
        f"{t!r} {_said(rec)}"
        for t, rec in zip(c["invalid"], recs, strict=True)
        if rec.raised not in VALUE_ERRORS
    ]
    if not bad:
        return 1.0, (
            f"All {len(c['invalid'])} invalid expressions raise ValueError (other operators, "
            "names, calls, floats, malformed input)."
        )
    return 1 - len(bad) / len(c["invalid"]), (
        f"{len(bad)} of {len(c['invalid'])} invalid expressions do not raise ValueError: "
        f"{listed(bad)}. The tool accepts integers, + − *, unary minus and parentheses, and "
        "raises ValueError on anything else, including what does not parse (turn ast.parse's "
        "SyntaxError into a ValueError)."
    )


@check("long input: a value or a ValueError", 1.0)
def long_input(r: Result, c: dict):
    """Robustness only: the values themselves are the other properties' business.  An int
    too long for a record's digits is a value all the same."""
    text, rec = c["long_valid"][0], r.record("long_valid")
    calls = [(f"a chain of 200 terms ({len(text)} characters)", rec, False)] + [
        (f"{t[:12]!r}… ({len(t)} characters)", rec, True)
        for t, rec in zip(c["long_any"], r.records("long_any", len(c["long_any"])), strict=True)
    ]
    notes = [
        f"{what} {_said(rec)}"
        for what, rec, may_raise in calls
        if not (_value(rec) is not None or (rec.ok and rec.type == "int"))
        and not (may_raise and rec.raised in VALUE_ERRORS)
    ]
    if not notes:
        return 1.0, (
            "A 200-term chain gives a number; thousands of terms or deep nesting give a number "
            "or a ValueError."
        )
    return 1 - len(notes) / len(calls), "; ".join(notes[:3]) + (
        ". A chain of 200 terms must give a number, and longer or deeper input a number or a "
        "ValueError, never another exception: ast.parse raises RecursionError on deep trees, "
        "and so does a recursive evaluator; catch it and raise ValueError."
    )


@check(CODE_PROPERTY, 2.0)
def never_runs_code(r: Result, seed: int):
    ran = []
    for text, part in zip(code_payloads(seed), r.parts("code", 3), strict=True):
        rec, peak = part.record("call"), count(part.get("peak"), PEAK_MAX)
        if rec.seconds is None or rec.seconds >= RAN_SECONDS or (peak or 0) >= RAN_BYTES:
            ran.append((text, rec.seconds, peak))
    if not ran:
        return True, (
            "Code written in the input never ran: a loop, a huge power and a huge list written "
            "as Python came back at once, taking no memory."
        )
    text, seconds, peak = ran[0]
    if peak is not None and peak >= RAN_BYTES:
        took = f"made your process take {peak / 2**20:.0f} MB"
    else:
        took = f"took {seconds:.2f} s" if seconds is not None else "did not come back"
    return False, (
        f"The calculator ran code written in its input: {text!r} {took}, the time Python takes "
        "to run it, where a parser refuses it at once. A tool's input is data, not code (§7.4): "
        "eval, even with {'__builtins__': {}}, runs whatever the model writes. Parse it "
        "(ast.parse, then evaluate only the allowed nodes, as the notes' code does)."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score results and exceptions against the values redrawn from the seed."""
    r, c = Result(result), cases(seed)
    first = [left_to_right(r, c), precedence(r, c), exact_ints(r, c)]
    if not any(p.score for p in first):  # without a valid expression computed right, the
        why = "Cannot tell: the calculator never computes a valid expression right."  # rest
        later = (invalid, long_input, never_runs_code)  # says nothing
        return first + [Property(f.name, f.weight, 0, why) for f in later]
    return first + [invalid(r, c), long_input(r, c), never_runs_code(r, seed)]
