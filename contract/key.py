"""The key schema: what release writes to ``keys/`` and grading reads, and nothing else.

``keys/`` is the whole contract between generator and autograder::

    keys/assignment.json            the Release: assignment, policy, roster, points, checks
    keys/<student>.json             one Key per student: per question the parameters, the
                                    answers in SI with tolerance, unit, misconceptions and
                                    answer graph, the free-response and code parts
    keys/checks/<question>/<file>   each code part's checks (probe and grade), as released
    keys/ledger.json                the seed ledger: each reseed of a student's variant
                                    (absent: none); keys/reseeded/<student>/<n>.json
                                    their key before the n+1-th reseed

Every file is plain JSON (the grader never unpickles); each carries ``schema_version``,
and a reader refuses any other version with a sentence naming the file.  A key names
each code part's checks by path and SHA-256, so grading runs exactly the checks that
were released: editing a question's ``checks.py`` afterwards changes nothing until the
assignment is re-keyed.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    computed_field,
    field_validator,
    model_validator,
)

from contract import times
from contract.answers import Tolerance, unit_factor

SCHEMA_VERSION = 3
# older schemas this grader still reads: what they lack has a default (schema 2: the
# course's time zone, UTC, and no late-day pool, the late policy as it was written)
_READABLE = {2}
RELEASE_FILE = "assignment.json"
CHECKS_DIR = "checks"
LEDGER_FILE = "ledger.json"
RESEEDED_DIR = "reseeded"

# What each older schema lacks, for the refusal: re-keying is the way forward.
_OLD_SCHEMAS = {
    1: "ScaleGrade 0.1's keys, whose code checks were read from templates/ at grading time",
}


class KeyFileError(ValueError):
    """A key folder or file that cannot be used; the message names the file and the fix."""


class _Model(BaseModel):
    # a value outside the reals (a misconception's 1/0) is written as JSON's Infinity, as
    # Python's json writes it, and read back
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class Policy(_Model):
    """How an assignment is graded: the course's defaults, overridden per assignment."""

    ecf: bool = True  # error carried forward along the answer graph
    ecf_credit: float = Field(default=0.8, ge=0, le=1)  # share of the points carried earns
    # lateness (autograder.semester.lateness): each started day late costs this share of the score
    # earned, or each started hour 1/24 of it (late_charge: hour); later than
    # late_days_max days, nothing is earned; a student's late_days_pool free days, shared
    # by the course's assignments, are spent first, in submission order
    late_penalty_per_day: float = Field(default=0.1, ge=0, le=1)
    late_charge: Literal["day", "hour"] = "day"
    late_days_max: int = Field(default=3, ge=0)
    late_days_pool: int = Field(default=0, ge=0)
    solutions_after_due: bool = True  # expected values and worked solutions in feedback


class Misconception(_Model):
    """A known wrong answer (SI ``value``) and the feedback and credit it earns."""

    name: str
    value: float
    feedback: str
    credit: float = Field(ge=0, lt=1)


def answer_variable(index: int, answer_id: str) -> str:
    """The notebook variable of answer ``answer_id`` of question ``index``, in an answer
    cell of its own (``q3_states_gb``), unless the question names its own."""
    return f"q{index}_{answer_id}"


class Answer(_Model):
    """One answer of one student's key: SI ``value``; ``unit`` is what the student writes.

    ``args`` is the answer graph (each formula argument as an expression over parameters
    and answers); ``resolved_args`` the same arguments as numbers (the worked solution).
    ``plausible`` is the question author's range of the key in ``unit`` (release checks
    every variant against it).
    """

    id: str
    variable: str  # the notebook variable: q3_states_gb (answer_variable), or the question's
    prompt: str
    points: float = Field(ge=0)
    ask: bool  # False: an intermediate the worked solution shows, not asked
    value: float
    si_unit: str
    unit: str
    tolerance: Tolerance
    sign: Literal["positive", "nonnegative", "any"]
    formula: str | None
    output: int | None
    expr: str | None
    args: dict[str, Any]
    resolved_args: dict[str, Any]
    depends_on: tuple[str, ...]
    misconceptions: tuple[Misconception, ...]
    plausible: tuple[float, float] | None

    @model_validator(mode="before")
    @classmethod
    def _recompute_display(cls, data: Any) -> Any:
        if isinstance(data, dict) and "display_value" in data:  # written for people only
            data = {k: v for k, v in data.items() if k != "display_value"}
        return data

    @computed_field
    @property
    def display_value(self) -> float:
        """The key in ``unit``: what a correct student writes."""
        return self.value / unit_factor(self.unit, self.si_unit)


class FreeResponse(_Model):
    """A part graded by a person, with the notes' expected answer as rubric."""

    id: str
    prompt: str
    points: float = Field(ge=0)
    rubric: str


class Checks(_Model):
    """A code part's checks as released: ``file`` under ``keys/``, and its SHA-256."""

    file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class CodePart(_Model):
    """Code the student writes; ``checks`` None: a person grades it.  ``function`` None:
    the checks read the notebook's names themselves (an imported question's tests)."""

    id: str
    function: str | None
    points: float = Field(ge=0)
    checks: Checks | None


class Question(_Model):
    id: str  # the question's folder in the bank: "collectives/ring-allreduce-code"
    index: int  # 1-based position in the assignment
    title: str
    source: str  # "000 Exercise 8"
    points: float
    seed: str  # hex HMAC digest of the variant
    params: dict[str, Any]
    shown: dict[str, str]  # each parameter as the prompt shows it ("40.0 GB")
    answers: tuple[Answer, ...]
    free_response: tuple[FreeResponse, ...]
    code: tuple[CodePart, ...]
    solution: str  # Markdown, rendered from the answer graph
    solution_html: str  # the same as HTML (MathML, no script), for feedback


class Student(_Model):
    id: str
    name: str
    email: str = ""


class Key(_Model):
    """One student's key: every question of the assignment with that student's numbers."""

    schema_version: int = SCHEMA_VERSION
    course: str
    assignment: str  # "tdlsm/hw1"
    student: Student
    points: float
    questions: tuple[Question, ...]

    def to_json(self) -> str:
        return _dumps(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any], where: str) -> Key:
        return _parse(cls, doc, where)


class Release(_Model):
    """``keys/assignment.json``: what was released, to whom, graded how."""

    schema_version: int = SCHEMA_VERSION
    course: str
    assignment: str
    title: str
    kind: Literal["homework", "exam", "selftest"]
    notebook: str  # the released notebook's file name: hw1.ipynb
    due: str | None  # ISO 8601 with its offset (contract.times)
    timezone: str = "UTC"  # the course's: times written without a zone are read in it
    policy: Policy
    points: float
    questions: tuple[str, ...]
    students: tuple[str, ...]
    checks: dict[str, str] = Field(default_factory=dict)  # file under keys/ -> SHA-256

    @field_validator("timezone")
    @classmethod
    def _a_zone(cls, name: str) -> str:
        times.zone(name)
        return name

    def due_at(self) -> datetime | None:
        """The deadline as an instant (a due date written without a zone: the course's)."""
        return None if self.due is None else times.parse(self.due, self.timezone)

    def to_json(self) -> str:
        return _dumps(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any], where: str) -> Release:
        return _parse(cls, doc, where)


class Reseed(_Model):
    """One entry of the seed ledger: a student given new numbers, for one question or all."""

    student: str
    question: str | None  # None: every question of the assignment
    at: str  # ISO 8601 with offset: submissions from then on are graded with the new key
    by: str
    why: str


class Ledger(_Model):
    """``keys/ledger.json``: every reseed, in order.  A student's variant version is the
    number of their reseeds; each question's epoch, which feeds its HMAC, the number of
    their reseeds that covered it.  Version 0, epoch 0: the numbers of the first release."""

    schema_version: int = SCHEMA_VERSION
    reseeds: tuple[Reseed, ...] = ()

    def of(self, student: str) -> list[Reseed]:
        return [r for r in self.reseeds if r.student == student]

    def version(self, student: str) -> int:
        return len(self.of(student))

    def epochs(self, student: str, questions: tuple[str, ...], version: int | None = None):
        """Question -> epoch of ``student``'s variant ``version`` (default: the latest)."""
        mine = self.of(student)[:version]
        return {q: sum(1 for r in mine if r.question in (None, q)) for q in questions}

    def version_at(self, student: str, at: datetime | None) -> int:
        """The version current at ``at`` (a submission time; None: the latest)."""
        if at is None:
            return self.version(student)
        return sum(1 for r in self.of(student) if datetime.fromisoformat(r.at) <= at)

    def to_json(self) -> str:
        return _dumps(self)


def read_ledger(keys_dir: Path) -> Ledger:
    path = Path(keys_dir) / LEDGER_FILE
    if not path.is_file():
        return Ledger()
    return _parse(Ledger, _read_json(path), str(path))


def reseeded_key_file(student: str, version: int) -> str:
    """Where a student's key of an earlier variant version lies under ``keys/``."""
    return f"{RESEEDED_DIR}/{student}/{version}.json"


def _dumps(model: _Model) -> str:
    # compact, in the schema's field order (deterministic), UTF-8: read by programs
    return model.model_dump_json() + "\n"


def _parse(cls: type[_Model], doc: Any, where: str) -> Any:
    version = doc.get("schema_version") if isinstance(doc, dict) else None
    if version != SCHEMA_VERSION and version not in _READABLE:
        what = _OLD_SCHEMAS.get(version, f"key schema {version!r}")
        raise KeyFileError(
            f"{where}: {what}; this grader reads key schema {SCHEMA_VERSION}. Re-key: run "
            "`scalegrade generate` again with the same secret and roster (--force): every "
            "student keeps the same numbers unless the questions changed"
        )
    try:
        return cls.model_validate({**doc, "schema_version": SCHEMA_VERSION})
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(x) for x in first["loc"])
        more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
        raise KeyFileError(f"{where}: malformed key: {field}: {first['msg']}{more}") from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KeyFileError(
            f"{path}: missing; --keys must be the keys/ folder `scalegrade generate` wrote"
        ) from None
    except OSError as err:
        raise KeyFileError(f"{path}: cannot read the key ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise KeyFileError(f"{path}: not valid JSON ({err})") from None


def read_release(keys_dir: Path) -> Release:
    path = Path(keys_dir) / RELEASE_FILE
    return Release.from_json(_read_json(path), str(path))


def read_key(path: Path) -> Key:
    return Key.from_json(_read_json(path), str(path))


def read_keys(keys_dir: Path) -> dict[str, Key]:
    """Every student's key, by student id."""
    keys_dir = Path(keys_dir)
    return {sid: read_key(keys_dir / f"{sid}.json") for sid in read_release(keys_dir).students}


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def checks_file(question_id: str, name: str) -> str:
    """Where a question's checks file lies under ``keys/``: ``checks/<question>/<name>``."""
    return f"{CHECKS_DIR}/{question_id}/{name}"


def read_checks(keys_dir: Path, checks: Checks) -> str:
    """The source of released checks, verified against the key's SHA-256."""
    path = Path(keys_dir) / checks.file
    if not path.resolve().is_relative_to(Path(keys_dir).resolve() / CHECKS_DIR):
        raise KeyFileError(f"{path}: outside {keys_dir}/{CHECKS_DIR}; the key is not ScaleGrade's")
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as err:
        raise KeyFileError(
            f"{path}: cannot read the released checks ({err.strerror}); keys/ must be copied "
            f"whole, {CHECKS_DIR}/ included"
        ) from None
    if sha256(source) != checks.sha256:
        raise KeyFileError(
            f"{path}: changed since release (SHA-256 {sha256(source)[:12]}…, the keys say "
            f"{checks.sha256[:12]}…); grading runs only the checks that were released: "
            "restore the file, or re-key with `scalegrade generate`"
        )
    return source
