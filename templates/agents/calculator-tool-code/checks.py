"""Checks of the calculator tool code part (000 §7.1, §7.4 (agent loop code)).

The properties are separated on purpose: the precedence cases use only + and *, so that
a right-to-left chain costs only the chain property; values are compared as numbers, so
that a float result costs only the exact-integer property.
"""

import builtins
import math
import time

import numpy as np

from autograder.checklib import Property, Record, Result, check, count, listed

GROUPS = ("chains", "unary", "precedence", "exact", "invalid", "long_valid", "long_any")
INVALID = [
    *("", "   ", "2 +", "* 3", "(1 + 2", "1 + 2)", "1 2"),  # malformed
    *("2 ** 10", "2 ** 2 ** 10", "7 / 2", "7 // 2", "7 % 2", "1 << 3"),  # other operators
    *("1.5 + 1", "1e3", "x + 1", "abs(-3)", "__import__('math').factorial(5)"),  # floats, names
    *("[1, 2]", "'a' * 3", "1 if 1 else 2", "2 < 3", "~5"),  # other syntax
]
DEEP = "(" * 300 + "7" + ")" * 300  # long input: a value (right) or a ValueError, nothing else
LONG_ANY = [" + ".join(["7"] * 5000), "1+" * 20000 + "1", "-" * 3000 + "7", DEEP, "9" * 5000]


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
        lt, rt = (f"({t})" if o == "+" else t for t, o in ((lt, lo), (rt, ro)))
    return f"{lt}{_op(rng, op)}{rt}", (lv + rv if op == "+" else lv * rv), op


def cases(seed: int) -> dict:
    """Expressions and their values for one grading seed."""
    rng = np.random.default_rng([seed, 60])
    chains = [_chain(rng, int(rng.integers(3, 9))) for _ in range(6)]
    a, b, c = (int(v) for v in rng.integers(1, 1000, 3))
    unary = [(f"-{a}", -a), (f"-{a} - {b}", -a - b), (f"-{a} + {b} - {c}", -a + b - c)]
    unary += [(f"-({a} + {b}) - {c}", -(a + b) - c), (f"{a} * -{b}", a * -b)]
    precedence = []
    while len(precedence) < 8:
        text, value, top = _tree(rng, 3)
        if top != "atom" and ("+" in text and "*" in text):
            precedence.append((text, value))
    x, y, z, w = (  # beyond 64 bits: 21, 22, 19 and 25 digits
        int(rng.integers(1, 10)) * 10 ** (d - 1) + int(rng.integers(0, 10**15))
        for d in (21, 22, 19, 25)
    )
    exact = [(f"{x} * {y}", x * y), (f"{x} * {y} * {z} - {w}", x * y * z - w)]
    exact += [(f"{x} * {z} + {w}", x * z + w), (f"{a} * {b}", a * b)]  # products first
    groups = (chains, unary, precedence, exact, INVALID, _chain(rng, 200, 100), LONG_ANY)
    return dict(zip(GROUPS, groups, strict=True))


# Code that eval runs even without builtins: half a second of work, and a 240 MB list (which an
# eval cut short still takes), timed and measured from outside; drawn from the seed.
RAN_SECONDS = 0.15  # a parser answers in about a millisecond
RAN_BYTES = 16 << 20  # and takes no memory; the list takes 240 MB at once, even cut short
PEAK_MAX = 1 << 62  # bytes: a peak beyond it is no measurement


def code_payloads(seed: int) -> list[str]:
    rng = np.random.default_rng([seed, 61])
    a, b = (str(x) for x in rng.choice(list("abcdefghijkmnpqrstuvwxyz"), 2, replace=False))
    n, base = int(rng.integers(10_000, 11_000)), int(rng.choice([6, 7]))
    return [
        f"[{a} for {a} in [0]*{n} for {b} in [0]*{n} if {b}]",  # 10⁸ steps of a loop
        f"{base}**(12*8**6)*0+{int(rng.integers(2, 99))}",  # an 8-million-bit power, times 0
        f"([0]*{int(rng.integers(30, 40))}000000)[0]+{int(rng.integers(2, 99))}",  # 240 MB
    ]


def probe(student, seed: int, params: dict) -> dict:
    """The seed's expressions in one round trip, then the code payloads one by one."""
    c = cases(seed)
    c["long_valid"] = [c["long_valid"]]
    texts = {g: [x if isinstance(x, str) else x[0] for x in c[g]] for g in GROUPS}
    recs = iter(student.calls([(t,) for g in GROUPS for t in texts[g]]))
    out: dict = {g: [next(recs) for _ in texts[g]] for g in GROUPS}
    out["long_valid"] = out["long_valid"][0]
    out["code"] = []
    for text in code_payloads(seed):  # each timed, and its memory read, from here
        start, peak = time.monotonic(), None
        try:
            answer, peak = student.measured(text)
        except Exception as err:  # noqa: BLE001 - what the student's function raised
            answer, peak = err, getattr(err, "peak_bytes", None)
        call = Record.of(answer, seconds=time.monotonic() - start)
        out["code"].append({"call": call, "peak": peak})
    return out


VALUE_ERRORS = {  # the built-in ones (a class of the student's own crosses as a RuntimeError)
    t.__name__ for t in vars(builtins).values() if isinstance(t, type) and issubclass(t, ValueError)
}


def _value(rec: Record) -> int | float | None:
    """The number a record holds (an int when it is one, a finite float), or None."""
    if rec.ok and rec.type == "int":
        return rec.integer
    v = None if rec.type in ("int", "bool") else rec.as_float()
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


def _scored(r: Result, c: dict, *groups: str) -> tuple[float, str]:
    """The share of the groups' values that match; what the first two misses of each gave."""
    notes, hits = [], 0
    for g in groups:
        pairs = zip(r.records(g, len(c[g])), c[g], strict=True)
        bad = [f"{t!r} {_said(rec)}" for rec, (t, v) in pairs if not _matches(rec, v)]
        notes += bad[:2]
        hits += len(c[g]) - len(bad)
    return hits / sum(len(c[g]) for g in groups), "; ".join(notes)


@check("+ and − from left to right, unary minus", 1.0)
def left_to_right(r: Result, c: dict):
    score, said = _scored(r, c, "chains", "unary")
    if score == 1:
        return score, "Sums and differences are evaluated from left to right, with unary minus."
    return score, said + (
        ". + and − group from the left (a − b − c = (a − b) − c), and a leading minus negates "
        "(the agent's running total may be negative: '-17 - 25')."
    )


@check("* before + and −, parentheses", 2.0)
def precedence(r: Result, c: dict):
    score, said = _scored(r, c, "precedence")
    if score == 1:
        return 1.0, "* binds tighter than +, and parentheses group."
    return score, said + (
        ". * is evaluated before + and −, and parentheses first: 2 + 3 * 4 = 14, (2 + 3) * 4 = 20."
    )


@check("exact integers of any size", 1.0)
def exact_ints(r: Result, c: dict):
    recs = r.records("exact", len(c["exact"]))
    pairs = zip(recs, c["exact"], strict=True)
    oks = [rec.type == "int" and _matches(rec, v) for rec, (_, v) in pairs]
    if all(oks):
        return 1.0, "Results are Python ints, exact beyond 64 bits."
    i = oks.index(False)
    floats = recs[i].type not in ("int", "bool") and recs[i].as_float() is not None
    kind = f" (a {recs[i].type}, not an int)" if floats else ""
    return sum(oks) / len(oks), (
        f"{c['exact'][i][0]!r} {_said(recs[i])}{kind}. Return a Python int: it is exact at any "
        "size, where floats keep 53 bits and NumPy's int64 overflows."
    )


@check("ValueError on anything else", 2.0)
def invalid(r: Result, c: dict):
    recs = zip(c["invalid"], r.records("invalid", len(c["invalid"])), strict=True)
    bad = [f"{t!r} {_said(rec)}" for t, rec in recs if rec.raised not in VALUE_ERRORS]
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
    """Robustness only: the values are the other properties' business."""
    text, rec = c["long_valid"][0], r.record("long_valid")
    calls = [(f"a chain of 200 terms ({len(text)} characters)", rec, False)] + [
        (f"{t[:12]!r}… ({len(t)} characters)", rec, True)
        for t, rec in zip(c["long_any"], r.records("long_any", len(c["long_any"])), strict=True)
    ]
    notes = [
        f"{what} {_said(rec)}"
        for what, rec, may_raise in calls
        if not (_value(rec) is not None or (rec.ok and rec.type == "int"))  # any int is a value
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


@check("never runs its input as code", 2.0)
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
    if not any(p.score for p in first):  # no valid expression computed right: the rest
        why = "Cannot tell: the calculator never computes a valid expression right."
        later = (invalid, long_input, never_runs_code)  # tells nothing
        return first + [Property(f.name, f.weight, 0, why) for f in later]
    return first + [invalid(r, c), long_input(r, c), never_runs_code(r, seed)]
