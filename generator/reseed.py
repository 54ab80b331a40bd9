"""Give one student new numbers: for one question or all, nobody else's changing.

``scalegrade reseed ASSIGNMENT STUDENT [--question Q] --by NAME --why TEXT --out DIR``
appends an entry to the seed ledger (``DIR/keys/ledger.json``, :class:`contract.Ledger`):
the student's epoch of each question it covers goes up by one, and the epoch feeds the
question's HMAC, so the new numbers are as unpredictable as the first.  Then it writes
that student's files again: their new notebook (and solutions, exam sheet), their new
key, and their key before it under ``keys/reseeded/``, which grades what they submitted
before the reseed.  Every other file is left as it was; a release again from the secret
and the ledger gives the same files byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import contract
from contract import Ledger, Reseed
from generator.assignment import Assignment
from generator.release import (
    Layout,
    ReleaseError,
    released,
    student_key,
    variants_for,
    write_file,
    write_student,
)


@dataclass(frozen=True)
class Reseeded:
    student: str
    version: int  # the student's variant version now
    changed: list[str]  # the questions whose numbers changed
    notebook: Path


def reseed(
    assignment: Assignment,
    out: Path,
    *,
    secret: bytes,
    student: str,
    question: str | None,
    by: str,
    why: str,
    at: datetime | None = None,
) -> Reseeded:
    """See the module.  ``at``: from when the new numbers hold (default: now)."""
    out = out.resolve()
    keys = out / "keys"
    info = released(out, assignment, "reseed")
    try:
        ledger = contract.read_ledger(keys)
        current = contract.read_key(keys / f"{student}.json") if student in info.students else None
    except contract.KeyFileError as err:
        raise ReleaseError(str(err)) from None
    if current is None:
        raise ReleaseError(
            f"{assignment.id}: no student {student!r} on the roster released "
            f"({len(info.students)} students: {', '.join(info.students[:5])}...)"
        )
    if question is not None and question not in info.questions:
        raise ReleaseError(
            f"{assignment.id}: no question {question!r} (it has: {', '.join(info.questions)})"
        )
    if not by.strip() or not why.strip():
        raise ReleaseError("say who reseeds and why (--by NAME --why TEXT): both are recorded")
    if info.questions != tuple(q.id for q in assignment.questions):
        raise ReleaseError(f"{assignment.id}: the bank's questions are not those released")
    # the bank must still make this student's key as released: a reseed is not a re-key
    epochs = ledger.epochs(student, info.questions)
    if (
        student_key(
            assignment, current.student, variants_for(assignment, current.student, secret, epochs)
        ).to_json()
        != current.to_json()
    ):
        raise ReleaseError(
            f"{assignment.id}: the bank no longer makes {student}'s key as released (or the "
            "secret is another): `scalegrade rekey` first, then reseed"
        )
    when = (at or datetime.now(UTC)).isoformat()  # to the microsecond: before or after
    entry = Reseed(student=student, question=question, at=when, by=by, why=why)
    new = Ledger(reseeds=(*ledger.reseeds, entry))
    notebook = out / "release" / student / f"{assignment.spec.notebook}.ipynb"
    lay = Layout.of(
        assignment,
        secret,
        new,
        solutions=(out / "solutions").is_dir(),
        otter=notebook.is_file() and '"otter":' in notebook.read_text(encoding="utf-8"),
    )
    variants = write_student(lay, current.student, out, check=True)
    write_file(keys / contract.LEDGER_FILE, new.to_json())
    changed = [
        v.question_id
        for v, old in zip(variants, current.questions, strict=True)
        if v.params != old.params
    ]
    return Reseeded(student, new.version(student), changed, notebook)
