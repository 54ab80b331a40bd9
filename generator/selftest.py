"""Offline exam self-tests: one HTML file with a variant, a timer, instant checking.

``scalegrade selftest ASSIGNMENT [--student ID | --seed N] --out exam.html`` writes a
page that works with no network: CSS, JavaScript and the math (MathML, rendered here at
build time) are inside the file, and its Content-Security-Policy forbids the browser any
request.  The page checks answers with the rules of the Python grader
(``autograder/grading/compare.py`` with the contract's tolerance and plausibility,
:mod:`contract.answers`), re-implemented in ``selftest_assets/checker.js`` and fed with
what that grader reads from a key: values, tolerances, misconceptions, the unit factors
of the course's pint registry, the plausibility bound, and each answer's formula over
earlier answers compiled to JavaScript (:mod:`generator.selftest_ecf`) for error carried
forward.  The tests grade the same typed answers with both and require equal scores.

What a student types is read by :func:`normalize` (the page's syntax: ``21 GB``,
``19.6 GiB``, ``1.2e9``, ``1,234``, ``1.2 × 10^9``, ``1.2×10⁹``, a unicode minus,
``2 TB per s``) and then exactly as the grader reads a string answer from a notebook.

Whose numbers.  A self-test is practice, and the page holds its answers.  So its
variant never equals a graded variant: the HMAC seed of the generator is computed for
the student id ``"<id>#selftest"``.  With the course secret (``--student ID``) a
student's practice numbers are personal and the instructor can rebuild the same page;
without it (``--seed N``, what any student can run) the secret is
:data:`PRACTICE_SECRET`, which is public: practice seed N is the same page for everyone.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from contract import PLAUSIBLE_FACTOR, Key, Student, unit_factor
from contract import Question as KeyQuestion
from contract.answers import COMMA_DECIMAL, COMMA_THOUSANDS, LEADING_NUMBER
from costmodel.units import registry
from generator.assignment import Assignment
from generator.html import markdown
from generator.release import student_key, variants_for
from generator.selftest_ecf import compile_carried
from generator.variant import Variant, unit_suffix

ASSETS = Path(__file__).resolve().parent / "selftest_assets"
PRACTICE_SECRET = b"scalegrade-public-practice-secret: self-tests only, never grading"
DEFAULT_MINUTES = 120
SUFFIX = "#selftest"  # appended to the student id: a self-test never shows a graded variant


class SelfTestError(ValueError):
    """A self-test that cannot be built; the message says what to do."""


class InputError(ValueError):
    """What a student typed does not follow the page's syntax (graded as a wrong unit)."""


# --- the page's input syntax (the same regular expressions run in Python and in JS) ---

# a number may hold commas (thousands, or a decimal comma): the grader reads them
# (contract.readings), and so does the page
_NUMBER = r"[+-]?(?:[0-9][0-9,]*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_NAME = "(?:[A-Za-z\\u00b5\\u03bc]+|%)"
_POWER = r"(?:(?:\^|\*\*)-?[0-9]+)?"
_SEP = r"(?: ?[*/] ?| )"
_LETTER = "A-Za-z\\u00b5\\u03bc%"
_MINUS = "\u2212\u2012\u2013\u2014\ufe63\uff0d"
_TIMES = "\u00d7\u22c5\u00b7\u2219"
# every character Python's str.strip() or JavaScript's trim() takes for white space
_SPACES = (
    "\t\n\v\f\r\x1c\x1d\x1e\x1f\x85\u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff"
    + "".join(map(chr, range(0x2000, 0x200B)))
)
_SUPER = "⁰¹²³⁴⁵⁶⁷⁸⁹"

SYNTAX: dict[str, Any] = {
    "charmap": {
        **{c: "-" for c in _MINUS},
        **{c: "*" for c in _TIMES},
        **{c: " " for c in _SPACES},
    },
    "superscript": "[⁺⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+",
    "supermap": {"⁺": "", "⁻": "-", **{c: str(i) for i, c in enumerate(_SUPER)}},
    "leading_number": LEADING_NUMBER,
    "comma_thousands": COMMA_THOUSANDS,
    "comma_decimal": COMMA_DECIMAL,
    # 1.2*10^9 (× and · became *, superscripts became ^), 1.2 x 10^9, then 10^9 alone
    "power_of_ten": r"^("
    + _NUMBER.replace("(?:[eE][+-]?[0-9]+)?", "")
    + r") ?[*xX] ?10 ?(?:\^|\*\*) ?([+-]?[0-9]+)",
    "bare_power_of_ten": r"^([+-]?)10 ?(?:\^|\*\*) ?([+-]?[0-9]+)",
    "per": f"(?<![{_LETTER}])per(?![{_LETTER}])",
    # a space between the number and its unit: "2.4e8J" is not read as a complex number
    "unit_space": f"^({_NUMBER})(?![0-9.]|[eE][+-]?[0-9]) ?(?=[{_LETTER}/])",
    "number": f"^{_NUMBER}$",
    "full": f"^({_NUMBER})(?: ?((?:/ ?)?{_NAME}{_POWER}(?:{_SEP}{_NAME}{_POWER})*))?$",
    # one unit term of the rest, with the operator before it (none: multiply)
    "term": f"( ?[*/] ?| )?({_NAME})(?:(?:\\^|\\*\\*)(-?[0-9]+))?",
}
_RE = {k: re.compile(v) for k, v in SYNTAX.items() if isinstance(v, str)}


def normalize(text: str) -> str:
    """What the page reads from ``text``: the grader then reads this string as it reads
    a string answer in a notebook (``autograder.grading.compare.read_value``).

    Unicode minus and spaces, ``×``/``·``, superscripts, powers of ten (``1.2 × 10^9``,
    ``10⁹``) and ``per`` are rewritten; commas stay, for the grader's reading of them
    (:func:`contract.readings`: thousands, or a decimal comma); the result must be a number,
    optionally followed by units joined by spaces, ``*`` or ``/`` with integer powers,
    each unit a name of the course's registry.  Anything else raises :class:`InputError`.
    Empty text is no answer (the caller's business).
    """
    s = "".join(SYNTAX["charmap"].get(c, c) for c in str(text))
    s = _RE["superscript"].sub(lambda m: "^" + "".join(SYNTAX["supermap"][c] for c in m[0]), s)
    s = re.sub(" +", " ", s).strip()
    s = _RE["power_of_ten"].sub(lambda m: f"{m[1]}e{m[2]}", s, count=1)
    s = _RE["bare_power_of_ten"].sub(lambda m: f"{m[1]}1e{m[2]}", s, count=1)
    s = _RE["per"].sub("/", s)
    s = re.sub(" +", " ", s).strip()
    s = _RE["unit_space"].sub(lambda m: f"{m[1]} ", s, count=1)
    m = _RE["full"].match(s)
    if not m:
        raise InputError(f"cannot read {s!r} as a number with a unit")
    table = unit_names()
    for term in _RE["term"].finditer(m[2] or ""):
        if term[2] not in table:
            raise InputError(f"unknown unit {term[2]!r} in {s!r}")
    return s


def harvested(text: str) -> dict[str, Any]:
    """What the Python grader is given for ``text`` typed on the page.

    Empty: no answer.  Not in the page's syntax: a string the grader cannot read either
    (it grades it as a wrong unit, as the page does).
    """
    if not "".join(SYNTAX["charmap"].get(c, c) for c in str(text)).strip():
        return {"kind": "missing"}
    try:
        return {"kind": "string", "value": normalize(text)}
    except InputError:
        return {"kind": "string", "value": ""}


# --- units: every name the registry resolves, with its factor to root units --------


@cache
def unit_names() -> dict[str, tuple[float, tuple[tuple[str, int], ...]]]:
    """Every unit name pint resolves in the course registry: factor to root units, dims.

    pint reads a name as prefix + unit + optional plural ``s`` (``GB``, ``gigabytes``,
    ``ms``, ``KiB``, ``hrs``); enumerating those combinations and asking pint for each
    gives exactly the names it accepts.  ``%`` is one name of its own.
    """
    ureg = registry()
    out: dict[str, tuple[float, tuple[tuple[str, int], ...]]] = {}
    roots: dict[str, tuple[float, tuple[tuple[str, int], ...]]] = {}
    units = [u for u in ureg._units if "%" not in u]
    for prefix in ureg._prefixes:
        for unit in units:
            for suffix in ("", "s"):
                name = prefix + unit + suffix
                if name in out:
                    continue
                candidates = ureg.parse_unit_name(name)
                if not candidates:
                    continue
                # pint takes the first candidate (get_name); a prefixed unit is the
                # prefix's factor times the unit's
                pre, base, _ = candidates[0]
                if base not in roots:
                    factor, _ = ureg.get_root_units(base)
                    dims = ureg.get_dimensionality(base)
                    roots[base] = (
                        float(factor),
                        tuple(sorted((k, int(v)) for k, v in dims.items())),
                    )
                scale = ureg._prefixes[pre].converter.scale if pre else 1
                out[name] = (scale * roots[base][0], roots[base][1])
    q = ureg.Quantity("1 %")
    out["%"] = (float(q.to_root_units().magnitude), ())
    return out


def _si_dims(si_unit: str) -> tuple[float, tuple[tuple[str, int], ...]]:
    ureg = registry()
    q = ureg.Quantity(1, si_unit) if si_unit else ureg.Quantity(1)
    dims = tuple(sorted((k, int(v)) for k, v in q.dimensionality.items()))
    return float(q.to_root_units().magnitude), dims


def _expected(si_unit: str) -> tuple[str, str]:
    """The words and example of ``costmodel.units.to_si``'s messages for ``si_unit``."""
    from costmodel.units import _WORDS, _example  # the same wording as the grader's

    return _WORDS.get(si_unit, si_unit), _example(si_unit)


def page_units(si_units: set[str]) -> dict[str, Any]:
    """The unit data of a page: the names of the dimensions its answers need."""
    targets = {u: _si_dims(u) for u in sorted(si_units)}
    wanted = {d for _, dims in targets.values() for d, _ in dims}
    dims_list: list[tuple[tuple[str, int], ...]] = [()]
    table: dict[str, list[Any]] = {}
    for name, (factor, dims) in unit_names().items():
        if not {d for d, _ in dims} <= wanted:
            continue
        if dims not in dims_list:
            dims_list.append(dims)
        table[name] = [factor, dims_list.index(dims)]
    si = {}
    for unit, (factor, dims) in targets.items():
        if dims not in dims_list:
            dims_list.append(dims)
        words, example = _expected(unit)
        si[unit] = {
            "factor": factor,
            "dims": dims_list.index(dims),
            "words": words,
            "example": example,
        }
    return {
        "syntax": SYNTAX,
        "table": table,
        "dims": [dict(d) for d in dims_list],
        "si": si,
    }


# --- whose variant -------------------------------------------------------------------


@dataclass(frozen=True)
class Practice:
    """Whose numbers a self-test shows: the secret and the id the variant is drawn for."""

    secret: bytes
    student: Student
    label: str  # on the page: "practice seed 7" or "ana"


def for_seed(seed: int) -> Practice:
    """Practice seed ``seed``: public, the same page for everyone who asks for it."""
    if seed < 0:
        raise SelfTestError(f"--seed {seed}: use a whole number >= 0")
    sid = f"practice-{seed}{SUFFIX}"
    return Practice(
        PRACTICE_SECRET, Student(id=sid, name=f"Practice seed {seed}"), f"practice seed {seed}"
    )


def for_student(student_id: str, secret: bytes, name: str | None = None) -> Practice:
    """A student's own practice numbers, from the course secret (never their graded ones)."""
    sid = f"{student_id}{SUFFIX}"
    return Practice(secret, Student(id=sid, name=name or student_id), student_id)


# --- the page ------------------------------------------------------------------------


@dataclass(frozen=True)
class SelfTest:
    html: str
    assignment: str
    label: str
    questions: int
    answers: int  # parts checked on the page
    carried: int  # of which with error carried forward compiled to JavaScript
    untraceable: int  # sample points of carried formulas that could not be recorded
    key: Key  # the key the page was built from (what a grader reads)


def _letters(n: int) -> list[str]:
    return [f"({chr(ord('a') + i)})" if i < 26 else f"({i + 1})" for i in range(n)]


_OWN_LABEL = re.compile(r"^\s*\(([a-z]{1,2}|[0-9]{1,2}|[ivx]{1,4})\)")


def _labels(v: Variant) -> list[tuple[str, bool]]:
    """Each shown part's label, and whether its prompt already starts with it."""
    out = []
    for letter, (kind, _, item) in zip(
        _letters(len(_part_labels(v))), _part_labels(v), strict=True
    ):
        prompt = item.prompt if kind == "answer" else item["prompt"]
        own = _OWN_LABEL.match(prompt)
        out.append((f"({own[1]})", True) if own else (letter, False))
    return out


def _obfuscate(data: dict[str, Any], key: bytes) -> str:
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    mixed = bytes(b ^ key[i % len(key)] for i, b in enumerate(raw))
    return base64.b64encode(mixed).decode("ascii")


def _question_data(q: KeyQuestion, labels: dict[str, str]) -> tuple[dict, int, int]:
    keys = {a.id: a for a in q.answers}
    answers = []
    carried = untraceable = 0
    for a in q.answers:
        ecf = None
        if a.ask and a.depends_on:
            compiled = compile_carried(a, q.params, keys, seed=int(q.seed[:8], 16))
            if compiled is not None:
                ecf = {"inputs": list(compiled.inputs), "js": compiled.js}
                carried += 1
                untraceable += compiled.untraceable
        answers.append(
            {
                "id": a.id,
                "variable": labels.get(a.id, a.variable),
                "ask": a.ask,
                "points": a.points,
                "value": a.value,
                "unit": a.unit,
                "si_unit": a.si_unit,
                "factor": unit_factor(a.unit, a.si_unit),
                "tolerance": a.tolerance.model_dump(),
                "misconceptions": [m.model_dump() for m in a.misconceptions],
                "depends_on": list(a.depends_on),
                "ecf": ecf,
            }
        )
    data = {
        "answers": answers,
        "solution_html": q.solution_html,
        "rubrics": {
            r.id: {"points": r.points, "html": markdown(r.rubric)} for r in q.free_response
        },
    }
    return data, carried, untraceable


def _part_labels(v: Variant) -> list[tuple[str, str, Any]]:
    """(kind, id, item) of each part shown, in order: answers, free response, code."""
    parts = [("answer", k.id, k) for k in v.answers if k.ask]
    parts += [("free", r["id"], r) for r in v.free_response]
    parts += [("code", c["id"], c) for c in v.code]
    return parts


def _question_html(v: Variant, q: KeyQuestion) -> str:
    points = {p.id: p.points for p in (*q.answers, *q.free_response, *q.code)}
    parts = _part_labels(v)
    labels = _labels(v)
    out = [
        f'<section class="question" id="q{v.index}" data-q="{v.index - 1}">'
        f'<h2>Question {v.index} <span class="pts">({q.points:g} points)</span>. '
        f"{html.escape(v.title)}</h2>",
        f'<div class="prompt">{markdown(v.prompt)}</div>',
    ]
    for (label, own), (kind, pid, item) in zip(labels, parts, strict=True):
        pts = f'<span class="pts">[{points[pid]:g} pt]</span>'
        label = "" if own else f"<b>{label}</b> "
        if kind == "answer":
            unit = unit_suffix(item.prompt, item.unit)
            example = "e.g. 21 GB" if item.si_unit == "byte" else "a number"
            placeholder = f"in {item.unit}, or with a unit" if item.unit else example
            out.append(
                f'<div class="part answer" data-a="{html.escape(pid)}">'
                f'<label for="in-{v.index}-{pid}">{label}'
                f"{markdown(item.prompt + unit).strip()} {pts}</label>"
                f'<div class="row"><input id="in-{v.index}-{pid}" type="text" autocomplete="off"'
                f' spellcheck="false" placeholder="{html.escape(placeholder)}">'
                f'<span class="verdict" aria-live="polite"></span></div>'
                f'<div class="feedback"></div></div>'
            )
        elif kind == "free":
            out.append(
                f'<div class="part free" data-r="{html.escape(pid)}">{label}'
                f"{markdown(item['prompt']).strip()} {pts}"
                f'<textarea rows="5" aria-label="your answer to {html.escape(pid)}"></textarea>'
                f'<div class="rubric" hidden></div></div>'
            )
        else:
            what = f"<code>{html.escape(item['function'])}</code>" if item["function"] else "it"
            out.append(
                f'<div class="part code">{label}{markdown(item["prompt"]).strip()} {pts}'
                f'<p class="note">Code: write {what} in the homework notebook, where it is '
                "run and checked; this page does not grade code.</p></div>"
            )
    out.append(
        '<div class="actions"><button type="button" class="check">Check</button>'
        '<span class="qscore"></span></div>'
        '<details class="solution" hidden><summary>Worked solution</summary>'
        '<div class="solution-body"></div></details></section>'
    )
    return "".join(out)


def build(assignment: Assignment, practice: Practice) -> SelfTest:
    """The self-test page of ``assignment`` for ``practice``'s numbers."""
    try:
        variants = variants_for(assignment, practice.student, practice.secret)
    except ValueError as err:
        raise SelfTestError(f"{assignment.id}: {err}") from None
    key = student_key(assignment, practice.student, variants)
    questions, carried, untraceable, n_answers = [], 0, 0, 0
    si_units = set()
    for v, q in zip(variants, key.questions, strict=True):
        labels = {
            pid: f"{v.index}{label}"
            for (_, pid, _), (label, _) in zip(_part_labels(v), _labels(v), strict=True)
        }
        data, c, u = _question_data(q, labels)
        questions.append(data)
        carried += c
        untraceable += u
        n_answers += sum(1 for a in q.answers if a.ask)
        si_units |= {a.si_unit for a in q.answers}
    seeds = "/".join(q.seed for q in key.questions)
    ident = hashlib.sha256(f"{assignment.id}|{practice.label}|{seeds}".encode()).digest()
    secret_data = {
        "policy": {
            "ecf": bool(assignment.policy.ecf),
            "ecf_credit": float(assignment.policy.ecf_credit),
            "plausible_factor": PLAUSIBLE_FACTOR,  # contract.plausible's bound
        },
        "questions": questions,
    }
    public = {
        "assignment": assignment.id,
        "label": practice.label,
        "minutes": assignment.spec.duration_minutes or DEFAULT_MINUTES,
        "storage": f"scalegrade-selftest:{assignment.id}:{ident[:8].hex()}",
        "points": key.points,
        "units": page_units(si_units),
    }
    page = _page(
        assignment,
        practice,
        variants,
        key,
        public,
        _obfuscate(secret_data, ident[8:24]),
        ident[8:24],
    )
    return SelfTest(
        html=page,
        assignment=assignment.id,
        label=practice.label,
        questions=len(variants),
        answers=n_answers,
        carried=carried,
        untraceable=untraceable,
        key=key,
    )


def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _script(text: str) -> str:
    return text.replace("</", "<\\/")


CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "script-src 'unsafe-inline' 'unsafe-eval'; base-uri 'none'; form-action 'none'"
)


def _page(assignment, practice, variants, key, public, blob, xor_key) -> str:
    spec, course = assignment.spec, assignment.course
    minutes = public["minutes"]
    title = f"{spec.title} — practice"
    body = "".join(_question_html(v, q) for v, q in zip(variants, key.questions, strict=True))
    timer_note = (
        f"of {minutes} min, as in the exam"
        if spec.duration_minutes
        else f"of {minutes} min (a written exam's length)"
    )
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{html.escape(title)}</title><style>{_asset('style.css')}</style></head><body>"
        f'<header><h1>{html.escape(spec.title)}</h1><p class="meta">{html.escape(course.title)}'
        f" · {html.escape(assignment.id)} · {minutes} minutes · {key.points:g} points · "
        f"variant: {html.escape(practice.label)}</p>"
        '<p class="print-only">Name: ______________________ &nbsp; ID: ____________</p>'
        '<p class="intro screen-only">A practice exam with your own numbers. Calculator and '
        "one sheet of notes, as in the written exam. Type answers as a number in the unit "
        "asked (<code>21</code>) or with any unit of the same kind (<code>19.6 GiB</code>, "
        "<code>8.8 days</code>, <code>1.2e9</code>, <code>1.2 × 10^9</code>). "
        "<b>Check</b> grades a question with the course's grader rules (tolerance, units, "
        "known misconceptions, error carried forward) and shows the worked solution; "
        "<b>Finish</b> grades everything. Your answers stay in this browser.</p></header>"
        '<div class="bar screen-only" role="toolbar" aria-label="exam controls">'
        '<span class="clock"><span id="time-left">--:--</span> left</span>'
        '<button type="button" id="start">Start</button>'
        '<button type="button" id="pause" disabled>Pause</button>'
        f'<span class="timer-note">{html.escape(timer_note)}</span>'
        '<span id="running-score"></span>'
        '<button type="button" id="finish">Finish</button></div>'
        f"<main>{body}</main>"
        '<section id="summary" class="screen-only" hidden><h2>Result</h2>'
        '<div id="summary-body"></div></section>'
        '<footer class="screen-only"><h2>About this page</h2><p>It works offline: everything '
        "it needs is in this one file, and it asks the network for nothing. Progress is "
        "saved in this browser's local storage; printing gives a paper exam "
        "(no answers or solutions are printed). "
        '<button type="button" id="clear" class="quiet">Clear my answers and the timer</button>'
        "</p>"
        "<p><b>Secrecy.</b> This is practice: the answers, misconceptions and worked "
        "solutions are inside this file, so that it can check you without a server. They "
        "are scrambled (XOR with a key stored in the same file, then base64) only so that "
        "a glance at the source does not spoil a question; anyone who wants them can "
        "decode them. Its numbers are never those of a graded assignment or exam.</p></footer>"
        f'<script id="sg-public" type="application/json">{_script(json.dumps(public))}</script>'
        f'<script id="sg-key" type="text/plain" data-k="{xor_key.hex()}">{blob}</script>'
        f"<script>{_script(_asset('checker.js'))}</script>"
        f"<script>{_script(_asset('page.js'))}</script>"
        "</body></html>\n"
    )


def check_out(out: Path) -> Path:
    """``out`` as a page's file name (``*.html``), or :class:`SelfTestError`."""
    out = Path(out)
    if out.suffix.lower() not in (".html", ".htm"):
        raise SelfTestError(f"{out}: the self-test is one HTML file; name it *.html")
    if out.is_dir():
        raise SelfTestError(f"{out}: is a folder; name the HTML file to write")
    return out


def write(test: SelfTest, out: Path) -> Path:
    out = check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(test.html, encoding="utf-8")
    return out
