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

import math
import time

import numpy as np

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


INVALID = [
    "",
    "   ",
    "2 +",
    "* 3",
    "(1 + 2",
    "1 + 2)",
    "1 2",
    "2 ** 10",
    "2 ** 2 ** 10",
    "7 / 2",
    "7 // 2",
    "7 % 2",
    "1 << 3",
    "1.5 + 1",
    "1e3",
    "x + 1",
    "abs(-3)",
    "__import__('math').factorial(5)",
    "[1, 2]",
    "'a' * 3",
    "1 if 1 else 2",
    "2 < 3",
    "~5",
]


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


def _record(answer) -> dict:
    """The student's answer on one expression (the value returned, or the exception
    raised), as plain data."""
    if isinstance(answer, BaseException):
        return {
            "kind": "error",
            "type": type(answer).__name__,
            "value_error": isinstance(answer, ValueError),
            "message": str(answer)[:120],
        }
    v = answer
    if type(v) is int:
        return {"kind": "int", "value": hex(v)}
    if isinstance(v, bool | str | bytes):  # "42" is not a number
        return {"kind": "other", "type": type(v).__name__}
    rec: dict = {"kind": "number", "type": type(v).__name__}
    try:
        f = float(v)
        rec["float"] = f if math.isfinite(f) else str(f)
        return rec
    except BaseException:  # noqa: BLE001
        return {"kind": "other", "type": type(v).__name__}


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
    rec = _record(answer)
    rec["seconds"] = time.monotonic() - start
    rec["peak"] = peak
    return rec


GROUPS = ("chains", "unary", "precedence", "exact", "invalid", "long_valid", "long_any")


def _texts(c: dict, group: str) -> list[str]:
    items = c[group] if group != "long_valid" else [c[group]]
    return [x if isinstance(x, str) else x[0] for x in items]


def probe(student, seed: int, params: dict) -> dict:
    """Call ``calculator`` on the seed's expressions (one round trip), then on the code
    payloads, each timed here; the results as plain data."""
    c = cases(seed)
    texts = {group: _texts(c, group) for group in GROUPS}
    answers = iter(student.map([(t,) for group in GROUPS for t in texts[group]]))
    out: dict = {group: [_record(next(answers)) for _ in texts[group]] for group in GROUPS}
    out["long_valid"] = out["long_valid"][0]
    out["code"] = [_timed(student, text) for text in code_payloads(seed)]
    return out


# --- grade (trusted) ---------------------------------------------------------------------


def _value(rec) -> int | float | None:
    """The number a record holds (an int when it is one), or None."""
    if not isinstance(rec, dict):
        return None
    try:
        if rec.get("kind") in ("int", "number") and isinstance(rec.get("value"), str):
            return int(rec["value"], 16)
        if rec.get("kind") == "number" and type(rec.get("float")) is float:
            return rec["float"]
    except ValueError:
        return None
    return None


def _matches(rec, expected: int) -> bool:
    v = _value(rec)
    if v is None:
        return False
    if isinstance(v, float):
        return abs(expected) < 2**53 and v == float(expected)
    return v == expected


def _said(rec) -> str:
    """What the calculator did, in words (never the expected value)."""
    if not isinstance(rec, dict):
        return "no result"
    if rec.get("kind") == "error":
        return f"raised {rec.get('type')}: {rec.get('message')}"
    v = _value(rec)
    if v is None:
        return f"returned a {rec.get('type')}"
    if abs(v) < 10**30:
        return f"returned {v}"
    return f"returned a number of about {int(int(abs(v)).bit_length() * 0.30103) + 1} digits"


def _group(result: dict, name: str, expected: list) -> tuple[int, list[str]]:
    recs = result.get(name) if isinstance(result.get(name), list) else []
    recs = (recs + [None] * len(expected))[: len(expected)]
    hits, notes = 0, []
    for rec, (text, value) in zip(recs, expected, strict=True):
        if _matches(rec, value):
            hits += 1
        elif len(notes) < 2:
            notes.append(f"{text!r} {_said(rec)}")
    return hits, notes


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score results and exceptions against the values redrawn from the seed."""
    from autograder.checktools import count, prop

    c = cases(seed)
    result = result if isinstance(result, dict) else {}
    props = []
    computed = 0  # valid expressions computed right: without any, the other checks say nothing

    hits_c, notes_c = _group(result, "chains", c["chains"])
    hits_u, notes_u = _group(result, "unary", c["unary"])
    computed += hits_c + hits_u
    total = len(c["chains"]) + len(c["unary"])
    msg = (
        "Sums and differences are evaluated from left to right, with unary minus."
        if hits_c + hits_u == total
        else "; ".join(notes_c + notes_u) + ". + and − group from the left (a − b − c = "
        "(a − b) − c), and a leading minus negates (the agent's running total may be "
        "negative: '-17 - 25')."
    )
    props.append(
        prop("+ and − from left to right, unary minus", 1.0, (hits_c + hits_u) / total, msg)
    )

    hits, notes = _group(result, "precedence", c["precedence"])
    computed += hits
    msg = (
        "* binds tighter than +, and parentheses group."
        if hits == len(c["precedence"])
        else "; ".join(notes) + ". * is evaluated before + and −, and parentheses first: "
        "2 + 3 * 4 = 14, (2 + 3) * 4 = 20."
    )
    props.append(prop("* before + and −, parentheses", 2.0, hits / len(c["precedence"]), msg))

    recs = result.get("exact") if isinstance(result.get("exact"), list) else []
    recs = (recs + [None] * len(c["exact"]))[: len(c["exact"])]
    exact_ok = [
        isinstance(rec, dict) and rec.get("kind") == "int" and _matches(rec, value)
        for rec, (_, value) in zip(recs, c["exact"], strict=True)
    ]
    computed += sum(exact_ok)
    if all(exact_ok):
        msg = "Results are Python ints, exact beyond 64 bits."
    else:
        i = exact_ok.index(False)
        rec = recs[i]
        kind = rec.get("type") if isinstance(rec, dict) and rec.get("kind") == "number" else None
        msg = (
            f"{c['exact'][i][0]!r} {_said(rec)}"
            + (f" (a {kind}, not an int)" if kind else "")
            + ". Return a Python int: it is exact at any size, where floats keep 53 bits "
            "and NumPy's int64 overflows."
        )
    props.append(prop("exact integers of any size", 1.0, sum(exact_ok) / len(exact_ok), msg))

    if not computed:
        why = "Cannot tell: the calculator never computes a valid expression right."
        for name, w in (
            ("ValueError on anything else", 2.0),
            ("long input: a value or a ValueError", 1.0),
            (CODE_PROPERTY, 2.0),
        ):
            props.append(prop(name, w, 0, why))
        return props

    recs = result.get("invalid") if isinstance(result.get("invalid"), list) else []
    recs = (recs + [None] * len(c["invalid"]))[: len(c["invalid"])]
    bad = [
        (text, rec)
        for text, rec in zip(c["invalid"], recs, strict=True)
        if not (isinstance(rec, dict) and rec.get("kind") == "error" and rec.get("value_error"))
    ]
    if not bad:
        msg = (
            f"All {len(c['invalid'])} invalid expressions raise ValueError (other operators, "
            "names, calls, floats, malformed input)."
        )
    else:
        shown = "; ".join(f"{text!r} {_said(rec)}" for text, rec in bad[:3])
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        msg = (
            f"{len(bad)} of {len(c['invalid'])} invalid expressions do not raise ValueError: "
            f"{shown}{more}. The tool accepts integers, + − *, unary minus and parentheses, "
            "and raises ValueError on anything else, including what does not parse (turn "
            "ast.parse's SyntaxError into a ValueError)."
        )
    score = 1 - len(bad) / len(c["invalid"])
    props.append(prop("ValueError on anything else", 2.0, score, msg))

    # robustness only: the values themselves are the other properties' business
    text, _ = c["long_valid"]
    rec = result.get("long_valid")
    notes = (
        []
        if _value(rec) is not None
        else [f"a chain of 200 terms ({len(text)} characters) {_said(rec)}"]
    )
    recs = result.get("long_any") if isinstance(result.get("long_any"), list) else []
    recs = (recs + [None] * len(c["long_any"]))[: len(c["long_any"])]
    for text, rec in zip(c["long_any"], recs, strict=True):
        raised = isinstance(rec, dict) and rec.get("kind") == "error" and rec.get("value_error")
        if not raised and _value(rec) is None:
            notes.append(f"{text[:12]!r}… ({len(text)} characters) {_said(rec)}")
    total = 1 + len(c["long_any"])
    if not notes:
        msg = (
            "A 200-term chain gives a number; thousands of terms or deep nesting give a number "
            "or a ValueError."
        )
    else:
        msg = (
            "; ".join(notes[:3]) + ". A chain of 200 terms must give a number, and longer or "
            "deeper input a number or a ValueError, never another exception: ast.parse raises "
            "RecursionError on deep trees, and so does a recursive evaluator; catch it and "
            "raise ValueError."
        )
    props.append(prop("long input: a value or a ValueError", 1.0, 1 - len(notes) / total, msg))

    payloads = code_payloads(seed)
    recs = result.get("code") if isinstance(result.get("code"), list) else []
    recs = (recs + [None] * len(payloads))[: len(payloads)]
    ran = [
        (text, rec)
        for text, rec in zip(payloads, recs, strict=True)
        if not (isinstance(rec, dict) and type(rec.get("seconds")) is float)
        or rec["seconds"] >= RAN_SECONDS
        or (count(rec.get("peak"), PEAK_MAX) or 0) >= RAN_BYTES
    ]
    if not ran:
        msg = (
            "Code written in the input never ran: a loop, a huge power and a huge list written "
            "as Python came back at once, taking no memory."
        )
    else:
        text, rec = ran[0]
        took = rec.get("seconds") if isinstance(rec, dict) else None
        peak = count(rec.get("peak"), PEAK_MAX) if isinstance(rec, dict) else None
        if peak is not None and peak >= RAN_BYTES:
            took = f"made your process take {peak / 2**20:.0f} MB"
        else:
            took = f"took {took:.2f} s" if type(took) is float else "did not come back"
        msg = (
            f"The calculator ran code written in its input: {text!r} {took}, the time Python "
            "takes to run it, where a parser refuses it at once. A tool's input is data, not code "
            "(§7.4): eval, even with {'__builtins__': {}}, runs whatever the model writes. "
            "Parse it (ast.parse, then evaluate only the allowed nodes, as the notes' code "
            "does)."
        )
    props.append(prop(CODE_PROPERTY, 2.0, not ran, msg))
    return props
