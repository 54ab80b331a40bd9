"""Grade one harvested submission against its key (trusted side, plain data only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autograder.grading import checks as code_checks
from autograder.grading.checks import Checks
from autograder.grading.compare import Verdict, compare, read_value, shown, shows_work
from autograder.grading.keys import probe_seed
from contract import Answer, Key, Policy, Question, unit_factor, within


@dataclass(frozen=True)
class Graded:
    """One part's verdict, with where it sits in the assignment."""

    question: str
    index: int
    title: str
    verdict: Verdict


@dataclass(frozen=True)
class StudentResult:
    """One student's graded submission, built whole, once: by :func:`grade_harvest`, or by
    the batch for a submission that was never judged; never patched after (a changed copy
    is :func:`dataclasses.replace`'s)."""

    student_id: str
    score: float
    max_score: float
    parts: list[Graded]
    error: str | None = None  # the sandbox's, when the notebook could not be run
    cell_errors: list[str] = field(default_factory=list)
    # the checks' own failures (probe() or grade() raised): the batch's errors, for the
    # instructor; those parts are pending, not 0
    check_errors: list[str] = field(default_factory=list)
    copy_signals: list[str] = field(default_factory=list)  # instructor only
    content_hash: str = ""
    seconds: float = 0.0
    isolation: str = ""
    # the student id in the notebook's own metadata, when it is not the student graded:
    # graded as the student who submitted it, with their numbers (shown in the report)
    released_to: str | None = None
    # the variant version the notebook's metadata claims, when it is not the one graded
    # (the seed ledger's at its submission time): flagged in the report, never trusted
    claimed_version: int | None = None
    # what the sandbox returned (plain data), kept in the gradebook's attempt, not the result
    harvest: dict[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Provenance:
    """Where a harvest came from, as its result keeps it: the notebook run (its SHA-256),
    the sandbox's time and isolation, and the metadata's claims where they are not the
    student graded and the variant version graded."""

    content_hash: str = ""
    seconds: float = 0.0
    isolation: str = ""
    released_to: str | None = None
    claimed_version: int | None = None


def _in_asked_unit(a: Answer, harvested: dict[str, Any]) -> float | None:
    value = read_value(a, harvested)[0]
    return None if value is None else value / unit_factor(a.unit, a.si_unit)


def _grade_answers(q: Question, answers: dict[str, Any], policy: Policy, reveal: bool):
    keys_by_id = {a.id: a for a in q.answers}
    earlier: dict[str, tuple[float | None, bool]] = {}
    missing = {"kind": "missing"}
    asked = [a for a in q.answers if a.ask]
    work = shows_work([_in_asked_unit(a, answers.get(a.variable, missing)) for a in asked])
    out = []
    for a in q.answers:
        if not a.ask:
            # an intermediate the student is not asked for: as if they had it right
            earlier[a.id] = (a.value, True)
            continue
        harvested = answers.get(a.variable, missing)
        verdict, value = compare(
            a,
            harvested,
            params=q.params,
            earlier=earlier,
            keys_by_id=keys_by_id,
            ecf=policy.ecf and work,
            ecf_credit=policy.ecf_credit,
            reveal=reveal,
        )
        earlier[a.id] = (value, verdict.status == "correct")
        out.append(verdict)
    return out


CHECK_FAILED = (
    "Not graded yet: the grader's check of this part failed, through no fault of your "
    "code. Your instructor has been told; the part will be graded once the check is fixed."
)


def _grade_code(
    q: Question, probes: dict[str, Any], checks: Mapping[str, Checks], failures: list[str]
) -> list[Verdict]:
    """The code parts' verdicts.  A check that fails (its ``probe()`` raised in the probe
    process, or its ``grade()`` here) is the batch's error, appended to ``failures``: the
    part stays pending, never a silent 0."""
    out = []
    for c in q.code:
        pid = f"q{q.index}-{c.id}"
        probe = probes.get(pid)
        base = dict(part=c.id, variable=c.function or "", points=c.points)
        if c.checks is None and c.points == 0:  # context the question's answers read
            continue
        if c.checks is None:
            out.append(
                Verdict(score=None, status="pending", feedback="Graded by a person.", **base)
            )
            continue
        pending = Verdict(score=None, status="pending", feedback=CHECK_FAILED, **base)
        if probe and probe.get("fault") == "checks":
            failures.append(f"{c.checks.file}: probe() failed: {probe.get('error')}")
            out.append(pending)
            continue
        if not probe or not probe.get("ok"):
            reason = (probe or {}).get("error") or "the probe did not run"
            out.append(Verdict(score=0.0, status="code", feedback=f"Not graded: {reason}.", **base))
            continue
        try:
            props = code_checks.grade_result(
                checks[c.checks.file].grade, probe["result"], probe_seed(q.seed, c.id), q.params
            )
        except code_checks.ChecksError as err:  # the instructor's checks failed, not the student
            failures.append(str(err))
            out.append(pending)
            continue
        fraction = code_checks.fraction(props)
        failed = [p for p in props if p["score"] < 1]
        feedback = (
            "All checks passed."
            if not failed
            else "; ".join(f"{p['name']}: {p['message']}" for p in failed)
        )
        out.append(
            Verdict(
                score=c.points * fraction,
                status="code",
                feedback=feedback,
                details=tuple(props),
                **base,
            )
        )
    return out


def grade_harvest(
    key: Key,
    harvest: dict[str, Any] | None,
    *,
    policy: Policy,
    checks: Mapping[str, Checks],
    reveal: bool,
    error: str | None = None,
    provenance: Provenance | None = None,
    others: dict[str, Key] | None = None,
) -> StudentResult:
    """Every part of one student's key against what the sandbox harvested, by the
    release's ``policy`` and with its ``checks`` (file under keys/ -> loaded checks).

    A submission that could not be run (``harvest`` None) scores 0 with its error
    recorded; free-response parts stay pending for a person.  ``provenance``: where the
    harvest came from, kept in the result with the harvest itself (for the gradebook's
    attempt).  ``others``: the other students' keys, for the copy signals.
    """
    parts, check_errors = _grade_parts(key, harvest or {}, policy, checks, reveal)
    cell_errors = [
        f"cell {c['index']}: {c['error']}"
        for c in (harvest or {}).get("cells", [])
        if not c.get("ok")
    ]
    came = provenance or Provenance()
    return StudentResult(
        student_id=key.student.id,
        score=sum(p.verdict.score or 0.0 for p in parts),
        max_score=key.points,
        parts=parts,
        error=error,
        cell_errors=cell_errors,
        check_errors=check_errors,
        copy_signals=_copy_signals(parts, key, others) if others else [],
        content_hash=came.content_hash,
        seconds=came.seconds,
        isolation=came.isolation,
        released_to=came.released_to,
        claimed_version=came.claimed_version,
        harvest=harvest if provenance is not None else None,
    )


def _grade_parts(
    key: Key,
    harvest: dict[str, Any],
    policy: Policy,
    checks: Mapping[str, Checks],
    reveal: bool,
) -> tuple[list[Graded], list[str]]:
    """Every part's verdict, in the key's order, and the checks' own failures."""
    answers = harvest.get("answers", {})
    written = harvest.get("written", {})  # free-response texts, read from the notebook
    probes = harvest.get("probes", {})
    parts: list[Graded] = []
    check_errors: list[str] = []
    for q in key.questions:
        verdicts = _grade_answers(q, answers, policy, reveal)
        verdicts += _grade_code(q, probes, checks, check_errors)
        verdicts += [
            Verdict(
                part=r.id,
                variable="",
                points=r.points,
                score=None,
                status="pending",
                feedback="Graded by a person.",
                given=written.get(q.id, {}).get(r.id, ""),
            )
            for r in q.free_response
        ]
        parts += [Graded(q.id, q.index, q.title, v) for v in verdicts]
    return parts, check_errors


def copy_signals(result: StudentResult, key: Key, others: dict[str, Key]) -> list[str]:
    """Wrong answers that equal another student's key: flagged for the instructor, never scored."""
    return _copy_signals(result.parts, key, others)


def _copy_signals(parts: list[Graded], key: Key, others: dict[str, Key] | None) -> list[str]:
    if not others:
        return []
    own = {(q.id, a.id): a for q in key.questions for a in q.answers}
    signals = []
    for g in parts:
        v = g.verdict
        a = own.get((g.question, v.part))
        if v.status not in ("wrong", "misconception") or v.value is None or a is None:
            continue
        value = v.value
        for sid, other in others.items():
            if sid == key.student.id:
                continue
            theirs = _answer(other, g.question, v.part)
            if theirs is not None and within(value, theirs.value, a):
                signals.append(
                    f"{g.question} {v.variable}: {v.given} is {sid}'s answer, not yours "
                    f"({shown(a.value, a)})"
                )
                break
    return signals


def _answer(key: Key, question: str, part: str) -> Answer | None:
    for q in key.questions:
        if q.id == question:
            return next((a for a in q.answers if a.id == part), None)
    return None
