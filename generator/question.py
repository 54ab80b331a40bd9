"""One folder = one question: ``templates/<topic>/<question-id>/``.

The folder holds ``question.yaml`` (parameters, constraints, answers as costmodel
formulas, tolerances, misconceptions, free-response and code parts, source),
``prompt.md`` (Jinja, Markdown with LaTeX) and optionally ``solution.md`` (Jinja: the
notes' interpretation, shown after the worked steps) and the code parts' files.  The
schema below validates every folder; an error names the folder, file and field.
"""

from __future__ import annotations

import inspect
import keyword
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from jinja2 import Environment, StrictUndefined, Template, TemplateSyntaxError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import costmodel
from contract import Tolerance
from costmodel import expression
from costmodel.hardware import gpu as lookup_gpu
from costmodel.units import UnitError, to_si
from generator.starter import CodeSources, RegionError, defines, split

SPEC_FILE = "question.yaml"


class QuestionError(ValueError):
    """A question folder that does not follow the format; the message says where and how."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Model):
    """Where the question comes from in the notes: a course's ``cite_as`` (the bank checks)."""

    notes: str  # "000"
    ref: str  # "Exercise 1(b)", "Example 1.3", "written exam Q2"


class Param(_Model):
    """One parameter: exactly one of ``choice``, ``range``, ``gpu``, ``expr``.

    ``range`` draws uniformly (log-uniformly with ``log``) between two bounds, on a grid
    of ``step`` when given, then rounds to ``nice`` significant figures; the rounded
    value is the one shown and used.  ``gpu`` picks a catalog GPU and adds
    ``<name>_peak_flops`` (in ``precision``), ``<name>_bandwidth``, ``<name>_memory``,
    ``<name>_watts``, ``<name>_nvlink`` and ``<name>_network``.  ``expr`` derives a
    value from earlier parameters.  ``unit`` is the SI unit of the value, ``show`` the
    unit it is shown in.  ``hidden`` keeps a helper of the draw (a ratio that makes two
    numbers divide) out of the Given cell: the prompt shows what the student works from.
    """

    choice: list[Any] | None = None
    range: tuple[float, float] | None = None
    step: float | None = None
    log: bool = False
    integer: bool = False
    nice: int | None = Field(default=None, ge=1, le=6)
    gpu: list[str] | None = None
    precision: str = "bf16"
    expr: str | None = None
    unit: str = ""
    show: str | None = None
    hidden: bool = False

    @model_validator(mode="after")
    def _one_kind(self) -> Param:
        kinds = [k for k in ("choice", "range", "gpu", "expr") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                f"give exactly one of choice, range, gpu, expr (got {kinds or 'none'})"
            )
        if self.range is not None and not self.range[0] < self.range[1]:
            raise ValueError(f"range {list(self.range)}: the low bound must be below the high one")
        if self.log and self.range is not None and self.range[0] <= 0:
            raise ValueError("a log range needs a positive low bound")
        if self.choice is not None and not self.choice:
            raise ValueError("choice must list at least one value")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("choice", "range", "gpu", "expr") if getattr(self, k) is not None)


class Constraint(_Model):
    expr: str
    message: str


class Misconception(_Model):
    """A known wrong transform of the key, and the feedback it earns.

    Exactly one of: ``use`` (a named transform of :mod:`generator.misconceptions`),
    ``args`` (the same formula with some arguments changed, e.g. 12 bytes/param),
    ``scale`` (the key times an expression) or ``value`` (an expression, SI units).
    """

    name: str | None = None  # defaults to the named transform
    feedback: str | None = None  # defaults to the named transform's feedback
    credit: float = Field(default=0.0, ge=0, lt=1)
    use: str | None = None
    args: dict[str, Any] | None = None
    scale: str | float | None = None
    value: str | float | None = None

    @model_validator(mode="after")
    def _one(self) -> Misconception:
        kinds = [k for k in ("use", "args", "scale", "value") if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(f"give exactly one of use, args, scale, value (got {kinds or 'none'})")
        if self.use is None and (self.feedback is None or self.name is None):
            raise ValueError("name and feedback are required (only a named transform has defaults)")
        return self


class Answer(_Model):
    """An answer: a costmodel formula (or an expression) over parameters and earlier answers.

    ``unit`` is the unit the student answers in (``"GB"``, ``"s"``, ``"days"``, ``"%"``,
    ``""``); keys hold SI values.  ``ask: false`` makes an intermediate the worked
    solution shows but the student is not asked for.  A draw where an asked part is 0, 1
    or a given number is drawn again (:func:`generator.leaks.guessed`), unless the part
    says why that is its point (``guessable``).
    """

    id: str
    prompt: str
    formula: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    output: int | None = None
    expr: str | None = None
    si_unit: str | None = None
    unit: str = ""
    tolerance: Tolerance | None = None
    points: float = Field(default=1.0, ge=0)
    ask: bool = True
    sign: Literal["positive", "nonnegative", "any"] = "positive"
    plausible: tuple[float, float] | None = None
    misconceptions: list[Misconception] = Field(default_factory=list)
    # why this part may equal 0, 1 or a given number (the point of the part, as "1F1B keeps
    # p micro-batches"): its draws are kept; without it, such draws are drawn again
    guessable: str | None = None
    # the notebook's own name the grader reads, which the question's code sets (an imported
    # question's `x`, compared with a number by its source's test); the notebook then has
    # no answer cell for it.  Default: q<index>_<id>, in an answer cell of its own
    variable: str | None = None

    @field_validator("id", "variable")
    @classmethod
    def _identifier(cls, v: str | None) -> str | None:
        if v is not None and (not v.isidentifier() or keyword.iskeyword(v)):
            raise ValueError(f"{v!r} must be a Python identifier (it names a notebook variable)")
        return v

    @model_validator(mode="after")
    def _formula_or_expr(self) -> Answer:
        if (self.formula is None) == (self.expr is None):
            raise ValueError("give exactly one of formula (a costmodel name) or expr")
        if self.expr is not None and self.args:
            raise ValueError("args belong to a formula, not to an expr")
        return self


class FreeResponse(_Model):
    """A part graded by a person, with the notes' expected answer as rubric."""

    id: str
    prompt: str
    points: float = Field(ge=0)
    rubric: str


class KnownWrong(_Model):
    """A mistake the author expects, and the points it should earn: the release check
    (``scalegrade/selfcheck.py``) grades the solution with ``replace`` applied (each key
    found once in the derived reference, replaced by its value) and warns when the checks
    are harsher, or more lenient, than ``earns``: the points, or ``[low, high]`` where what
    the variant earns depends on the seed (a statistic, an edge case drawn or not)."""

    name: str
    replace: dict[str, str] = Field(min_length=1)
    earns: float | tuple[float, float]

    @field_validator("earns")
    @classmethod
    def _a_range_of_points(cls, v):
        low, high = (v, v) if isinstance(v, float | int) else v
        if not 0 <= low <= high:
            raise ValueError("earns is points >= 0, or [low, high] with 0 <= low <= high")
        return v

    @property
    def range(self) -> tuple[float, float]:
        return (self.earns, self.earns) if isinstance(self.earns, float | int) else self.earns

    def shown(self) -> str:
        low, high = self.range
        return f"{low:g}" if low == high else f"{low:g} to {high:g}"


class CodePart(_Model):
    """Code the student writes.  ``solution`` is a file of the folder marking what the
    student writes (``### BEGIN SOLUTION`` / ``### END SOLUTION``): the starter is derived
    from it (:mod:`generator.starter`).  ``function`` names the function its checks call;
    without one, the checks read the notebook's names themselves (an imported question's
    test cells: :mod:`autograder.checklib.cells`)."""

    id: str
    prompt: str
    function: str | None = None
    solution: str
    checks: str | None = None
    points: float = Field(ge=0)
    known_wrong: list[KnownWrong] = Field(default_factory=list)

    @model_validator(mode="after")
    def _earns_at_most_the_points(self) -> CodePart:
        for w in self.known_wrong:
            if w.range[1] > self.points:
                raise ValueError(
                    f"known_wrong {w.name!r} earns {w.shown()}, more than the part's "
                    f"{self.points:g} points"
                )
        if self.known_wrong and self.checks is None:
            raise ValueError("known_wrong variants need checks to grade them")
        return self


class NotesExample(_Model):
    """The notes' own numbers: with the notes' parameters, the key must reproduce them.

    ``params`` gives every drawn parameter (a GPU pick by its catalog name; derived ones are
    computed); ``answers`` gives some answers as the notes state them, in each answer's
    ``unit``; ``rel`` is how far the notes' rounding may be from the key.
    """

    params: dict[str, Any]
    answers: dict[str, float] = Field(min_length=1)
    rel: float = Field(default=0.02, gt=0, lt=1)


class QuestionSpec(_Model):
    title: str
    source: Source
    params: dict[str, Param]
    constraints: list[Constraint] = Field(default_factory=list)
    answers: list[Answer] = Field(default_factory=list)
    free_response: list[FreeResponse] = Field(default_factory=list)
    code: list[CodePart] = Field(default_factory=list)
    notes_example: NotesExample | None = None


class Question:
    """A loaded, checked question folder."""

    def __init__(
        self,
        qid: str,
        folder: Path,
        spec: QuestionSpec,
        files: dict[str, str],
        code: dict[str, CodeSources],
    ):
        self.id = qid  # "budgets/model-1p3b": the folder under templates/
        self.folder = folder
        self.spec = spec
        self.files = files  # prompt.md, solution.md and code files, by name
        self.code = code  # each code part's starter and reference, by part id
        self._units: dict[str, str] = {}
        for name, p in spec.params.items():
            self._units[name] = p.unit
            if p.gpu is not None:
                self._units |= {f"{name}_{a}": u for a, u in GPU_ATTRIBUTES.items()}

    def __repr__(self) -> str:
        return f"Question({self.id!r})"

    def param_units(self) -> dict[str, str]:
        """The SI unit of every parameter, the catalog attributes of GPU picks included."""
        return self._units

    @property
    def points(self) -> float:
        asked = sum(a.points for a in self.spec.answers if a.ask)
        return asked + sum(p.points for p in (*self.spec.free_response, *self.spec.code))


_JINJA = Environment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


@cache
def template(source: str) -> Template:
    """A compiled Jinja template (compiled once per source text, not once per student)."""
    return _JINJA.from_string(source)


def shown_path(path: Path) -> str:
    """A path as an error message shows it: relative to the working folder when inside it."""
    path = Path(path)
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def _where(folder: Path, file: str, loc: tuple[Any, ...] = ()) -> str:
    field = ".".join(str(x) for x in loc)
    return shown_path(folder / file) + (f": {field}" if field else "")


def _check(folder: Path, spec: QuestionSpec) -> None:
    """Cross-field checks the schema cannot express: names, formulas, units, graph order."""
    where = lambda *loc: _where(folder, SPEC_FILE, loc)  # noqa: E731
    known: set[str] = set()
    for name, p in spec.params.items():
        if not name.isidentifier():
            raise QuestionError(f"{where('params', name)}: not a Python identifier")
        if p.expr is not None:
            _expr_names(p.expr, known, where("params", name, "expr"))
        if p.gpu is not None:
            for g in p.gpu:
                try:
                    lookup_gpu(g).peak(p.precision)
                except KeyError as err:
                    raise QuestionError(f"{where('params', name, 'gpu')}: {err.args[0]}") from None
            known |= {f"{name}_{a}" for a in GPU_ATTRIBUTES}
        for unit in filter(None, (p.unit, p.show)):
            _unit(unit, where("params", name))
        if p.show and p.unit:
            _convertible(p.show, p.unit, where("params", name, "show"))
        known.add(name)
    for i, c in enumerate(spec.constraints):
        _expr_names(c.expr, known | {a.id for a in spec.answers}, where("constraints", i))
    seen_answers: set[str] = set()
    for i, a in enumerate(spec.answers):
        loc = ("answers", i)
        if a.id in known or a.id in seen_answers:
            raise QuestionError(f"{where(*loc, 'id')}: {a.id!r} is already a parameter or answer")
        scope = known | seen_answers
        if a.formula is not None:
            try:
                f = costmodel.formula(a.formula)
            except KeyError:
                raise QuestionError(
                    f"{where(*loc, 'formula')}: unknown formula {a.formula!r} "
                    "(`scalegrade calc --list` lists them)"
                ) from None
            params = f.signature.parameters
            unknown = set(a.args) - set(params)
            if unknown:
                raise QuestionError(
                    f"{where(*loc, 'args')}: {a.formula} has no argument "
                    f"{', '.join(sorted(unknown))} (it takes {', '.join(params)})"
                )
            missing = [
                n
                for n, p in params.items()
                if p.default is inspect.Parameter.empty and n not in a.args
            ]
            if missing:
                raise QuestionError(f"{where(*loc, 'args')}: missing {', '.join(missing)}")
            for arg, src in a.args.items():
                if isinstance(src, str) and f.domains[arg].kind != "choice":
                    _expr_names(src, scope, where(*loc, "args", arg))
            si = f.unit
        else:
            _expr_names(a.expr, scope, where(*loc, "expr"))
            si = a.si_unit or ""
        _convertible(a.unit, si, where(*loc, "unit"))
        for j, m in enumerate(a.misconceptions):
            mloc = (*loc, "misconceptions", j)
            if m.use is not None and m.use not in misconception_library():
                raise QuestionError(
                    f"{where(*mloc, 'use')}: unknown transform {m.use!r} "
                    f"(known: {', '.join(sorted(misconception_library()))})"
                )
            if m.args is not None and a.formula is None:
                raise QuestionError(f"{where(*mloc, 'args')}: args need an answer with a formula")
            for arg in sorted(set(m.args or {}) - set(f.signature.parameters if a.formula else ())):
                raise QuestionError(f"{where(*mloc, 'args', arg)}: {a.formula} has no such arg")
            exprs = [  # a choice argument ("fp32", "zero3") is a literal, not an expression
                v for k, v in (m.args or {}).items() if f.domains[k].kind != "choice"
            ]
            for src in (m.scale, m.value, *exprs):
                if isinstance(src, str):
                    _expr_names(src, scope | {a.id}, where(*mloc))
        seen_answers.add(a.id)
    if spec.notes_example is not None:
        ex = spec.notes_example
        drawn = {n for n, p in spec.params.items() if p.expr is None}
        for name in sorted((drawn - set(ex.params)) | (set(ex.params) - drawn)):
            what = "is missing" if name in drawn else "is not a drawn parameter"
            raise QuestionError(f"{where('notes_example', 'params', name)}: {what}")
        for aid in ex.answers:
            if aid not in seen_answers:
                raise QuestionError(f"{where('notes_example', 'answers', aid)}: no such answer")
    ids = [x.id for x in (*spec.answers, *spec.free_response, *spec.code)]
    dupes = {x for x in ids if ids.count(x) > 1}
    if dupes:
        raise QuestionError(f"{where()}: part ids used twice: {', '.join(sorted(dupes))}")


# What a `gpu:` parameter adds, with SI units: <name>_peak_flops, <name>_bandwidth, ...
GPU_ATTRIBUTES = {
    "peak_flops": "FLOP/s",
    "bandwidth": "byte/s",
    "memory": "byte",
    "watts": "W",
    "nvlink": "byte/s",
    "network": "byte/s",
}


def misconception_library() -> dict[str, Any]:
    from generator.misconceptions import LIBRARY

    return LIBRARY


def _expr_names(src: str, scope: set[str], where: str) -> None:
    try:
        used = expression.names(src)
    except expression.ExpressionError as err:
        raise QuestionError(f"{where}: {err}") from None
    unknown = used - scope
    if unknown:
        raise QuestionError(
            f"{where}: {src!r} uses {', '.join(sorted(unknown))}, which is not a parameter "
            "or an earlier answer"
        )


def _unit(unit: str, where: str) -> None:
    try:
        to_si(f"1 {unit}", unit)
    except UnitError as err:
        raise QuestionError(f"{where}: unit {unit!r}: {err}") from None


def _convertible(display: str, si: str, where: str) -> None:
    try:
        to_si(f"1 {display}" if display else "1", si)
    except UnitError:
        raise QuestionError(
            f"{where}: {display or 'a plain number'!r} cannot express {si or 'a plain number'!r}"
        ) from None


def load(folder: Path, templates: Path | None = None) -> Question:
    """Load and check one question folder; its id is its path under ``templates``."""
    folder = folder.resolve()
    spec_path = folder / SPEC_FILE
    if not spec_path.is_file():
        raise QuestionError(f"{_where(folder, SPEC_FILE)}: missing")
    try:
        raw = yaml.safe_load(spec_path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise QuestionError(f"{_where(folder, SPEC_FILE)}: not valid YAML ({err})") from None
    try:
        spec = QuestionSpec.model_validate(raw or {})
    except ValidationError as err:
        first = err.errors()[0]
        raise QuestionError(
            f"{_where(folder, SPEC_FILE, first['loc'])}: {first['msg']}"
            + (f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else "")
        ) from None
    _check(folder, spec)
    files: dict[str, str] = {}
    needed = ["prompt.md", *(["solution.md"] if (folder / "solution.md").exists() else [])]
    for part in spec.code:
        needed += [part.solution] + ([part.checks] if part.checks else [])
    for name in needed:
        path = folder / name
        if not path.is_file():
            raise QuestionError(f"{_where(folder, name)}: missing (named in {SPEC_FILE})")
        files[name] = path.read_text(encoding="utf-8")
        if name.endswith(".md"):
            try:
                _JINJA.parse(files[name])
            except TemplateSyntaxError as err:
                raise QuestionError(
                    f"{_where(folder, name)}: line {err.lineno}: {err.message}"
                ) from None
    sources = {}
    for i, part in enumerate(spec.code):
        where = _where(folder, part.solution)
        try:
            sources[part.id] = split(files[part.solution], where)
        except RegionError as err:
            raise QuestionError(str(err)) from None
        for j, wrong in enumerate(part.known_wrong):
            for old in wrong.replace:
                found = sources[part.id].solution.count(old)
                if found != 1:
                    raise QuestionError(
                        f"{_where(folder, SPEC_FILE, ('code', i, 'known_wrong', j, 'replace'))}: "
                        f"{old!r} is found {found} times in the reference derived from "
                        f"{part.solution}; give text found exactly once"
                    )
        for kind in ("starter", "solution") if part.function else ():
            if not defines(getattr(sources[part.id], kind), part.function):
                raise QuestionError(
                    f"{_where(folder, SPEC_FILE, ('code', i, 'function'))}: the {kind} "
                    f"derived from {part.solution} defines no {part.function!r} at its top level"
                )
    root = Path(templates).resolve() if templates is not None else None
    qid = (
        folder.relative_to(root).as_posix() if root and folder.is_relative_to(root) else folder.name
    )
    return Question(qid, folder, spec, files, sources)


def discover(root: Path) -> list[Path]:
    """Every question folder under ``root`` (a folder with a question.yaml)."""
    return sorted(p.parent for p in root.rglob(SPEC_FILE))
