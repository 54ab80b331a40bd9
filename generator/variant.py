"""A student's variant of a question: sampled parameters, the key, the worked solution.

The seed is HMAC-SHA256(course secret, "course/assignment/question/student"), so a
variant is reproducible from the secret alone and unpredictable without it.  Parameters
are drawn (rejection-sampled until the constraints hold), then every answer is computed
from its costmodel formula over the parameters and earlier answers: the answer graph
that grades (error carried forward) and renders the worked solution.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

import contract
import costmodel
from contract import Answer as KeyAnswer
from contract import Misconception, Tolerance, unit_factor
from costmodel import expression
from costmodel.hardware import gpu as lookup_gpu
from costmodel.units import human, sig
from costmodel.units import sci as sci_text
from generator.leaks import guessed, leaked
from generator.misconceptions import LIBRARY
from generator.question import GPU_ATTRIBUTES, Answer, Param, Question, template

MAX_TRIES = 2000


class VariantError(ValueError):
    """No valid variant could be drawn; names the question and student."""


def seed_for(
    secret: bytes, course: str, assignment: str, qid: str, student: str, epoch: int = 0
) -> bytes:
    """HMAC-SHA256(secret, course/assignment/question/student), and ``#epoch`` after it
    once the student's variant of the question was reseeded (contract.Ledger)."""
    message = f"{course}/{assignment}/{qid}/{student}" + (f"#{epoch}" if epoch else "")
    return hmac.new(secret, message.encode(), hashlib.sha256).digest()


@dataclass(frozen=True)
class Variant:
    question_id: str
    index: int  # position in the assignment, 1-based
    title: str
    source: str
    student_id: str
    seed: str  # hex digest
    params: dict[str, Any]
    shown: dict[str, str]  # each parameter as the prompt shows it ("40.0 GB")
    answers: tuple[KeyAnswer, ...]
    prompt: str  # rendered Markdown, no answer values
    solution: str  # worked solution, rendered from the answer graph
    free_response: tuple[dict[str, Any], ...] = field(default=())
    code: tuple[dict[str, Any], ...] = field(default=())
    hidden: frozenset[str] = frozenset()  # helpers of the draw, not in the Given cell

    @property
    def given(self) -> dict[str, Any]:
        """The parameters the Given cell shows the student."""
        return {n: x for n, x in self.params.items() if n not in self.hidden}

    @property
    def points(self) -> float:
        parts = (*self.free_response, *self.code)
        return sum(a.points for a in self.answers if a.ask) + sum(p["points"] for p in parts)


# --- sampling ------------------------------------------------------------------------


def _round_sig(x: float, digits: int) -> float:
    if x == 0:
        return 0.0
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def _draw(name: str, p: Param, rng: random.Random, values: dict[str, Any]) -> None:
    if p.choice is not None:
        values[name] = rng.choice(p.choice)
    elif p.range is not None:
        lo, hi = p.range
        x = math.exp(rng.uniform(math.log(lo), math.log(hi))) if p.log else rng.uniform(lo, hi)
        if p.step:
            x = lo + round((x - lo) / p.step) * p.step
        if p.nice:
            x = _round_sig(x, p.nice)
        values[name] = int(round(x)) if p.integer else x
    elif p.gpu is not None:
        _pick_gpu(name, p, rng.choice(p.gpu), values)
    else:
        values[name] = expression.evaluate(p.expr, values)


def _pick_gpu(name: str, p: Param, gpu_name: str, values: dict[str, Any]) -> None:
    """``name`` = the GPU's name, and ``name_<attribute>`` its catalog figures."""
    g = lookup_gpu(gpu_name)
    values[name] = g.name
    attrs = (
        g.peak(p.precision),
        g.memory_bandwidth,
        g.memory_bytes,
        g.tdp_watts,
        g.nvlink_bandwidth,
        g.network_bandwidth,
    )
    values.update({f"{name}_{a}": v for a, v in zip(GPU_ATTRIBUTES, attrs, strict=True)})


def answer_value(a: Answer, scope: dict[str, Any], overrides: dict[str, Any] | None = None):
    """The SI value of answer ``a`` over ``scope``, and its resolved formula arguments."""
    result, args = contract.evaluate(a, scope, overrides)
    return float(result), args


def _constraints_hold(q: Question, scope: dict[str, Any], with_answers: bool) -> str | None:
    answers = {a.id for a in q.spec.answers}
    for c in q.spec.constraints:
        if bool(expression.names(c.expr) & answers) != with_answers:
            continue
        if not expression.evaluate(c.expr, scope):
            return c.message
    return None


def sample(q: Question, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """Draw parameters until every constraint holds; return (params, params + answers)."""
    last = ""
    for _ in range(MAX_TRIES):
        params: dict[str, Any] = {}
        for name, p in q.spec.params.items():
            _draw(name, p, rng, params)
        last = _constraints_hold(q, params, with_answers=False) or ""
        if last:
            continue
        scope = dict(params)
        try:
            for a in q.spec.answers:
                scope[a.id] = answer_value(a, scope)[0]
        except (costmodel.ArgumentError, ValueError, ZeroDivisionError, OverflowError) as err:
            last = str(err)
            continue
        last = _constraints_hold(q, scope, with_answers=True) or ""
        if not last:
            return params, scope
    raise VariantError(
        f"templates/{q.id}: no valid parameters in {MAX_TRIES} draws; last failure: {last}"
    )


def notes_example_scope(q: Question) -> dict[str, Any]:
    """Parameters and answers for the notes' own parameters (``notes_example``), undrawn."""
    ex = q.spec.notes_example
    if ex is None:
        raise ValueError(f"templates/{q.id}: no notes_example")
    scope: dict[str, Any] = {}
    for name, p in q.spec.params.items():
        if p.gpu is not None:
            _pick_gpu(name, p, ex.params[name], scope)
        elif p.expr is not None:
            scope[name] = expression.evaluate(p.expr, scope)
        else:
            scope[name] = ex.params[name]
    for a in q.spec.answers:
        scope[a.id] = answer_value(a, scope)[0]
    return scope


def notes_example_problems(q: Question) -> list[str]:
    """Where the key, on the notes' parameters, is not the number the notes state."""
    ex = q.spec.notes_example
    scope = notes_example_scope(q)
    by_id = {a.id: a for a in q.spec.answers}
    problems = []
    for aid, stated in ex.answers.items():
        a = by_id[aid]
        si = costmodel.formula(a.formula).unit if a.formula else (a.si_unit or "")
        key = scope[aid] / unit_factor(a.unit, si)
        if not math.isclose(key, stated, rel_tol=ex.rel, abs_tol=1e-12):
            problems.append(
                f"templates/{q.id}: notes_example: {aid} = {key:.4g} {a.unit or ''}".rstrip()
                + f", the notes state {stated:g} (rel {ex.rel:g})"
            )
    return problems


# --- the key ---------------------------------------------------------------------------


def _misconceptions(a: Answer, key: float, scope: dict[str, Any]) -> tuple[Misconception, ...]:
    out = []
    for m in a.misconceptions:
        if m.use is not None:
            value = LIBRARY[m.use].apply(key, scope)
        elif m.args is not None:
            value = answer_value(a, scope, overrides=m.args)[0]
        elif m.scale is not None:
            value = key * float(expression.evaluate(m.scale, scope))
        else:
            value = float(expression.evaluate(m.value, scope))
        feedback = m.feedback or LIBRARY[m.use].feedback
        out.append(
            Misconception(name=m.name or m.use, value=value, feedback=feedback, credit=m.credit)
        )
    return tuple(out)


def _key_answer(
    q: Question,
    index: int,
    a: Answer,
    scope: dict[str, Any],
    prompt_context: dict[str, Any],
    default_tolerance: Tolerance,
) -> KeyAnswer:
    value, resolved = answer_value(a, scope)
    f = costmodel.formula(a.formula) if a.formula else None
    graph = dict(a.args) if a.formula else {}
    depends = expression.names(a.expr) if a.expr else set()
    for arg, src in graph.items():
        if isinstance(src, str) and f.domains[arg].kind != "choice":
            depends |= expression.names(src)
    answer_ids = {x.id for x in q.spec.answers}
    return KeyAnswer(
        id=a.id,
        variable=a.variable or contract.answer_variable(index, a.id),
        prompt=template(a.prompt).render(**prompt_context),  # parameters only, no answers
        points=a.points,
        ask=a.ask,
        value=value,
        si_unit=f.unit if f else (a.si_unit or ""),
        unit=a.unit,
        tolerance=a.tolerance or default_tolerance,
        sign=a.sign,
        formula=a.formula,
        output=a.output,
        expr=a.expr,
        args=graph,
        resolved_args=resolved,
        depends_on=tuple(sorted(depends & answer_ids)),
        misconceptions=_misconceptions(a, value, scope),
        plausible=a.plausible,
    )


# --- rendering -------------------------------------------------------------------------


def _fmt_param(name: str, value: Any, q: Question) -> str:
    p = q.spec.params.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if p is not None and p.show:
        return f"{sig(value / unit_factor(p.show, p.unit))} {p.show}"
    unit = q.param_units().get(name, "")
    return human(value, unit) if unit else _num(value)


def _fmt_arg(formula: Any, arg: str, value: Any, q: Question) -> str:
    """A formula argument in the worked solution: as the prompt showed it, with its unit."""
    if arg in q.spec.params or arg in q.param_units():
        return _fmt_param(arg, value, q)
    unit = formula.domains[arg].unit
    if unit and isinstance(value, int | float) and not isinstance(value, bool):
        return human(value, unit)
    return _num(value)


def _context(q: Question, scope: dict[str, Any]) -> dict[str, Any]:
    fmt = {k: _fmt_param(k, v, q) for k, v in scope.items()}
    return {**scope, "fmt": fmt, "sig": sig, "sci": latex_sci, "num": sci_text}


def latex_sci(x: float, digits: int = 3) -> str:
    """LaTeX scientific notation as the notes write it: 1.31 \\times 10^{9}."""
    if x == 0:
        return "0"
    exp = math.floor(math.log10(abs(x)))
    if -2 <= exp <= 4:
        return sig(x, digits)
    return f"{x / 10**exp:.{digits - 1}f} \\times 10^{{{exp}}}"


def show_value(x: float, unit: str) -> str:
    """A value in a display unit, 3 significant figures: "17.9 GB", "1.12 × 10⁹"."""
    return f"{sci_text(x)} {unit}" if unit else sci_text(x)


def unit_suffix(prompt: str, unit: str) -> str:
    """ " [GB]" after a part's prompt, unless the prompt already asks "in GB"."""
    if not unit or re.search(rf"\bin {re.escape(unit)}(?![\w/])", prompt):
        return ""
    return f" [{unit}]"


def show_answer(k: KeyAnswer) -> str:
    """An answer in the unit the student is asked for, 3 significant figures."""
    return show_value(k.display_value, k.unit)


def worked_solution(q: Question, answers: tuple[KeyAnswer, ...], scope: dict[str, Any]) -> str:
    """Each answer as the notes write it: formula and proposition, numbers, result."""
    by_id = {a.id: a for a in answers}

    def shown(name: str) -> str:  # a name of an expression, as its value
        if name in by_id:
            return show_answer(by_id[name])
        return _fmt_param(name, scope[name], q) if name in scope else name

    lines = []
    for k in answers:
        label = k.prompt.strip()
        label += "" if label.endswith((".", "?", ":", "!")) else "."
        if k.formula:
            f = costmodel.formula(k.formula)
            numbers = ", ".join(
                f"{name} = {_fmt_arg(f, name, v, q)}" for name, v in k.resolved_args.items()
            )
            given = f"With {numbers}: " if numbers else ""
            lines.append(f"- **{label}** {f.summary} ({f.cite}). {given}**{show_answer(k)}**.")
        else:
            substituted = re.sub(r"[A-Za-z_]\w*", lambda m: shown(m[0]), k.expr)
            # read as arithmetic, not Python: 0.997 ** 5 -> 0.997^5, a * b -> a × b, √
            substituted = re.sub(r"\s*\*\*\s*", "^", substituted).replace(" * ", " × ")
            substituted = substituted.replace("sqrt(", "√(")
            lines.append(f"- **{label}** {substituted} = **{show_answer(k)}**.")
    solution = "\n".join(lines)
    extra = q.files.get("solution.md")
    if extra:
        ctx = _context(q, scope) | {"answer": {k.id: show_answer(k) for k in answers}}
        solution += "\n\n" + template(extra).render(**ctx).strip()
    return solution


def _num(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int) or float(v).is_integer() and abs(v) < 1e7:
        return f"{int(v):,}"
    return sci_text(v)


def build(
    q: Question,
    *,
    secret: bytes,
    course: str,
    assignment: str,
    student: str,
    index: int,
    default_tolerance: Tolerance,
    epoch: int = 0,
) -> Variant:
    """The variant of question ``q`` for ``student`` (``epoch``: how many times it was
    reseeded): same inputs, same variant.  A draw that gives a part away
    (:func:`giveaways`) is drawn again, from the same stream."""
    digest = seed_for(secret, course, assignment, q.id, student, epoch)
    rng = random.Random(int.from_bytes(digest, "big"))
    hidden = frozenset(name for name, p in q.spec.params.items() if p.hidden)
    why = ""
    for _ in range(MAX_TRIES):
        try:
            params, scope = sample(q, rng)
        except VariantError as err:
            raise VariantError(f"{err} (student {student})") from None
        ctx = _context(q, params)
        answers = tuple(
            _key_answer(q, index, a, scope, ctx, default_tolerance) for a in q.spec.answers
        )
        variant = Variant(
            question_id=q.id,
            index=index,
            title=q.spec.title,
            source=f"{q.spec.source.notes} {q.spec.source.ref}",
            student_id=student,
            seed=digest.hex(),
            params=params,
            shown=ctx["fmt"],
            answers=answers,
            prompt=template(q.files["prompt.md"]).render(**ctx).strip(),
            solution="",
            free_response=tuple(
                {
                    "id": r.id,
                    "prompt": template(r.prompt).render(**ctx).strip(),
                    "points": r.points,
                    "rubric": r.rubric,
                }
                for r in q.spec.free_response
            ),
            code=tuple(
                {
                    "id": c.id,
                    "prompt": template(c.prompt).render(**ctx).strip(),
                    "points": c.points,
                    "function": c.function,
                    "starter": q.code[c.id].starter,
                    "solution": q.code[c.id].solution,
                    "checks": c.checks,
                }
                for c in q.spec.code
            ),
            hidden=hidden,
        )
        given_away = giveaways(q, variant)
        if not given_away:
            return dataclasses.replace(variant, solution=worked_solution(q, answers, scope))
        why = f"{given_away[0][2]} ({given_away[0][1]})"
    raise VariantError(
        f"templates/{q.id}: every one of {MAX_TRIES} draws gives a part away (last: {why}; "
        f"student {student}): add a constraint, or say in the part's `guessable:` why that "
        "value is its point"
    )


def _python_value(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(int(value)) if abs(value) < 1e6 else f"{value:.6g}"
    return repr(value)


def given_units(q: Question) -> dict[str, str]:
    """The unit comment of each parameter of question ``q`` in its Given cell."""
    return {n: (p.unit or "") for n, p in q.spec.params.items()}


def given_cell(v: Variant, params_units: dict[str, str]) -> str:
    """The source of question ``v``'s Given cell: the student's numbers, in SI units."""
    lines = [f"# Given (question {v.index}): your numbers, in SI units. Do not edit this cell."]
    for name, value in v.given.items():
        unit = params_units.get(name, "")
        note = f"  # {unit} ({v.shown[name]})" if unit else ""
        lines.append(f"{name} = {_python_value(value)}{note}")
    return "\n".join(lines)


def question_text(v: Variant, params_units: dict[str, str]) -> str:
    """All the text of question ``v`` a student's notebook shows: what they can read."""
    parts = [v.prompt, given_cell(v, params_units)]
    parts += [k.prompt for k in v.answers if k.ask]
    parts += [p["prompt"] for p in (*v.free_response, *v.code)]
    return "\n".join(parts)


def giveaways(q: Question, v: Variant) -> list[tuple[str, str, str]]:
    """What of ``v``'s key its student gets without the work: an asked key printed in the
    question (a derived parameter of the Given cell, a number of the prompt), or equal to
    0, 1 or a given number unless its part says why that is its point (``guessable``):
    (part, "printed" or "no work", why)."""
    derived = {name for name, p in q.spec.params.items() if p.expr is not None}
    drawn = set(v.given) - derived
    text = question_text(v, given_units(q))
    spec = {a.id: a for a in q.spec.answers}
    out = []
    for k in v.answers:
        if not k.ask:
            continue
        if reason := leaked(k, text, v.given, drawn, v.shown):
            out.append((k.id, "printed", reason))
        elif spec[k.id].guessable is None and (
            reason := guessed(k, v.given, q.param_units(), drawn)
        ):
            out.append((k.id, "no work", reason))
    return out
