"""Re-key an assignment after its questions were fixed: the same seeds, so the same numbers.

``scalegrade rekey ASSIGNMENT --out DIR`` releases the assignment again from the bank as it
is now, with the same secret and the roster of ``DIR/keys``, in a folder beside ``DIR``,
and compares every student's new key with the one released:

- what changed, per question: answers, tolerances, misconceptions, points, checks, the
  worked solution (:func:`key_changes`);
- whether any change would give a student other numbers (the parameters, or how they are
  drawn).  That is refused: the numbers are what the student already worked on.  With
  ``allow_new_numbers``, it is allowed for the students who have not submitted yet, who
  get a new notebook; anyone else whose numbers would change still refuses the whole.

Nothing is written unless the whole is accepted; then the released folder is replaced
and the old keys are kept under ``DIR/keys-history/<n>/``, so that every graded attempt's
key (its SHA-256 is in the gradebook) stays on disk.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import contract
from contract import Key
from generator.assignment import Assignment
from generator.release import HISTORY, OWNED, ReleaseError, release, released


@dataclass(frozen=True)
class Rekeyed:
    changes: dict[str, list[str]]  # question -> what changed (with how many students)
    new_numbers: list[str]  # students given other numbers (not yet submitted)
    archived: Path | None  # where the old keys now are (None: nothing changed)


def _differs(a: float, b: float) -> bool:
    return abs(a - b) > 1e-12 * max(abs(a), abs(b), 1e-300)


def key_changes(old: Key, new: Key) -> list[tuple[str, str]]:
    """(question, what changed) between two keys of one student with the same numbers."""
    out = []
    for qo, qn in zip(old.questions, new.questions, strict=True):
        q = qo.id
        if qo.params != qn.params:
            out.append((q, "numbers: the parameters drawn"))
        old_answers = {a.id: a for a in qo.answers}
        for a in qn.answers:
            b = old_answers.get(a.id)
            if b is None:
                out.append((q, f"answer {a.variable}: new"))
                continue
            if _differs(a.value, b.value):
                out.append((q, f"answer {a.variable}: the key"))
            if a.tolerance != b.tolerance:
                out.append((q, f"answer {a.variable}: the tolerance"))
            if a.misconceptions != b.misconceptions:
                out.append((q, f"answer {a.variable}: the misconceptions"))
            if a.points != b.points or a.ask != b.ask:
                out.append((q, f"answer {a.variable}: the points"))
            if (a.unit, a.sign, a.formula, a.expr) != (b.unit, b.sign, b.formula, b.expr):
                out.append((q, f"answer {a.variable}: its unit, sign or formula"))
        for gone in old_answers.keys() - {a.id for a in qn.answers}:
            out.append((q, f"answer {old_answers[gone].variable}: removed"))
        if qo.free_response != qn.free_response:
            out.append((q, "free-response parts (rubric or points)"))
        old_code = {c.id: c for c in qo.code}
        for c in qn.code:
            b = old_code.get(c.id)
            if b is None or b.checks != c.checks:
                out.append((q, f"code {c.function or c.id}: the checks"))
            elif b.points != c.points:
                out.append((q, f"code {c.function or c.id}: the points"))
        if qo.solution != qn.solution:
            out.append((q, "the worked solution"))
    return out


def _numbers_changed(old: Key, new: Key) -> list[str]:
    return [
        qo.id for qo, qn in zip(old.questions, new.questions, strict=True) if qo.params != qn.params
    ]


def rekey(
    assignment: Assignment,
    out: Path,
    *,
    secret: bytes,
    submitted: set[str],
    allow_new_numbers: bool = False,
    with_solutions: bool = True,
) -> Rekeyed:
    """Release ``assignment`` again over ``out`` after the bank changed (see the module)."""
    out = out.resolve()
    old_release = released(out, assignment, "rekey")
    try:
        old_keys = contract.read_keys(out / "keys")
    except contract.KeyFileError as err:
        raise ReleaseError(str(err)) from None
    if old_release.questions != tuple(q.id for q in assignment.questions):
        raise ReleaseError(
            f"{assignment.id}: its questions are not the ones released "
            f"({', '.join(old_release.questions)}); rekey fixes questions, it does not "
            "change which: release a new assignment instead"
        )
    students = [old_keys[sid].student for sid in old_release.students]
    staging = out.parent / f".{out.name}.rekey"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        release(
            assignment,
            students,
            secret=secret,
            out=staging,
            with_solutions=with_solutions or (out / "solutions").is_dir(),
        )
        new_keys = contract.read_keys(staging / "keys")
        changes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        new_numbers, refused = [], []
        for sid, old in old_keys.items():
            moved = _numbers_changed(old, new_keys[sid])
            if moved:
                if allow_new_numbers and sid not in submitted:
                    new_numbers.append(sid)
                else:
                    refused.append(f"{sid} ({', '.join(moved)})")
            for q, what in key_changes(old, new_keys[sid]):
                changes[q][what] += 1
        if refused:
            why = (
                "they have submitted already"
                if allow_new_numbers
                else "pass --allow-new-numbers to give them to students who have not submitted"
            )
            raise ReleaseError(
                f"{assignment.id}: the change gives other numbers to {len(refused)} students: "
                f"{', '.join(refused[:8])}{' ...' if len(refused) > 8 else ''}; refused, "
                f"nothing written ({why})"
            )
        report = {
            q: [f"{what} ({n} of {len(students)} students)" for what, n in sorted(kinds.items())]
            for q, kinds in changes.items()
        }
        if not report:
            return Rekeyed({}, [], None)
        history = out / HISTORY
        archived = history / str(len(list(history.glob("*"))) + 1 if history.is_dir() else 1)
        shutil.copytree(out / "keys", archived)  # before anything is replaced
        for name in OWNED:
            if (out / name).exists():
                shutil.rmtree(out / name)
            if (staging / name).exists():
                (staging / name).rename(out / name)
        return Rekeyed(report, new_numbers, archived)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
