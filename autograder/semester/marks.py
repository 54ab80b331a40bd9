"""Marks given by a person: the marking sheet a TA fills in, and what it gives.

``scalegrade marks export`` writes one row per student and part a person grades (the
free-response parts, and code parts without checks): the student's answer, the rubric,
the points, and empty ``score`` and ``comment`` columns.  ``scalegrade marks import``
reads it back: every problem of the sheet is reported at once (file, line, student,
part, the fix) and a bad sheet records nothing.  Rows left without a score are not
marked yet, and are skipped.  The platform's marking page (`scalegrade serve`) gives
marks one at a time, checked by the same :func:`check`.

A mark is kept with who gave it, when, and the SHA-256 of the answer it marked.  It
applies to the student's standing for as long as the answer is the same: a regrade of
the same notebook keeps it; a new answer (a resubmission) is pending again.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract import Key

COLUMNS = (
    "student_id",
    "name",
    "assignment",
    "question",
    "part",
    "points",
    "answer",
    "rubric",
    "score",
    "comment",
)


class MarksError(ValueError):
    """A marking sheet that cannot be recorded: one line per problem, nothing recorded."""


@dataclass(frozen=True)
class Mark:
    assignment: str
    student_id: str
    question: str
    part: str
    score: float
    comment: str
    marker: str
    answer_sha256: str  # of the answer text it marked
    source: str = ""  # "marks.csv:7"


def answer_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def marked_by_person(verdict: dict[str, Any]) -> bool:
    """A part a person grades: pending, or marked already."""
    return verdict["status"] in ("pending", "marked")


def rubrics(key: Key | None) -> dict[tuple[str, str], str]:
    """The rubric of each part a person grades, by (question, part), from a student's key."""
    if key is None:
        return {}
    return {(q.id, r.id): r.rubric for q in key.questions for r in q.free_response}


def sheet(assignment: str, results: list[dict], keys: dict[str, Key]) -> str:
    """The marking sheet of every standing's person-graded parts (marked ones with their
    mark, so that a sheet exported again shows what was given)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in results:
        key = keys.get(r["student_id"])
        rubric = rubrics(key)
        for g in r["parts"]:
            v = g["verdict"]
            if not marked_by_person(v):
                continue
            w.writerow(
                [
                    r["student_id"],
                    key.student.name if key else "",
                    assignment,
                    g["question"],
                    v["part"],
                    f"{v['points']:g}",
                    v["given"],
                    rubric.get((g["question"], v["part"]), ""),
                    "" if v["score"] is None else f"{v['score']:g}",
                    v["feedback"] if v["status"] == "marked" else "",
                ]
            )
    return out.getvalue()


@dataclass(frozen=True)
class Given:
    """One mark as a marker gave it, not checked yet: a row of the sheet, or the platform's
    marking form."""

    assignment: str
    student_id: str
    question: str
    part: str
    score: str  # as typed: "1.5", "1,5"
    comment: str
    answer_sha256: str  # of the answer the marker read (:func:`answer_digest`)
    source: str  # where it was given: "marks.csv:7"


@dataclass(frozen=True)
class Fixes:
    """How a marker puts right what :func:`check` refuses, in the words of where the mark
    was given (the sheet, a form)."""

    part: str  # the part is not one a person grades
    answer: str  # the answer read is not the one graded now
    twice: str  # the part was marked twice


SHEET = Fixes(
    part="keep the exported rows",
    answer="(edited in the sheet, or the student submitted again since): export the sheet again",
    twice="keep one row per part",
)


def check(
    given: Given,
    standings: dict[str, dict[str, dict]],
    *,
    marker: str,
    seen: dict[tuple[str, str, str, str], str],
    here: str = "",
    fixes: Fixes = SHEET,
) -> Mark:
    """``given`` as a mark by ``marker``, checked against the standings it was given on
    (assignment -> student -> standing): a part a person grades, a score that is a finite
    number from 0 to the part's points, the answer the marker read still the one graded,
    and the part not marked twice (``seen``: (assignment, student, question, part) -> the
    words saying where it was marked already; this mark is added to it, named ``here``).
    Raise :class:`MarksError` with the problem (not where it was given: the caller says)."""
    aid, sid, qid, pid = given.assignment, given.student_id, given.question, given.part
    raw = given.score.strip()
    standing = standings.get(aid, {}).get(sid)
    if aid not in standings:
        raise MarksError(f"no graded assignment {aid!r} in the gradebook")
    if standing is None:
        raise MarksError(f"no graded submission of this student in {aid}")
    verdict = next(
        (
            g["verdict"]
            for g in standing["parts"]
            if g["question"] == qid and g["verdict"]["part"] == pid
        ),
        None,
    )
    if verdict is None or not marked_by_person(verdict):
        raise MarksError(f"no such part graded by a person; {fixes.part}")
    try:
        score = float(raw.replace(",", ".")) if raw.count(",") <= 1 else math.nan
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise MarksError(f"score {raw!r} is not a number")
    if score < 0 or score > verdict["points"] + 1e-9:
        raise MarksError(f"score {raw} is outside 0 to {verdict['points']:g}, the part's points")
    graded = answer_digest(verdict["given"].strip())
    if given.answer_sha256 != graded:
        raise MarksError(f"the answer is not the one graded {fixes.answer}")
    pair = (aid, sid, qid, pid)
    if pair in seen:
        raise MarksError(f"{seen[pair]}; {fixes.twice}")
    seen[pair] = here
    return Mark(aid, sid, qid, pid, score, given.comment.strip(), marker, graded, given.source)


def read_sheet(path: Path, standings: dict[str, dict[str, dict]], *, marker: str) -> list[Mark]:
    """The marks of a filled-in sheet, checked against the standings it was exported from
    (assignment -> student -> standing) by :func:`check`.  Every problem is reported at
    once."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as err:
        raise MarksError(f"{path}: cannot read ({err.strerror})") from None
    except UnicodeDecodeError:
        raise MarksError(f"{path}: not UTF-8; save the sheet as UTF-8 CSV") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise MarksError(
            f"{path}: not a marking sheet (missing columns: {', '.join(missing)}); start "
            "from `scalegrade marks export`"
        )
    if not marker.strip():
        raise MarksError(f"{path}: say who marked it (--by NAME)")
    marks, problems, seen = [], [], {}
    for n, row in enumerate(reader, start=2):
        cell = {k: (row.get(k) or "") for k in COLUMNS}
        sid, aid, qid, pid = (
            cell[k].strip() for k in ("student_id", "assignment", "question", "part")
        )
        if not cell["score"].strip():
            continue  # not marked yet
        given = Given(
            aid,
            sid,
            qid,
            pid,
            cell["score"],
            cell["comment"],
            answer_digest(cell["answer"].strip()),
            f"{Path(path).name}:{n}",
        )
        try:
            marks.append(
                check(given, standings, marker=marker, seen=seen, here=f"also on line {n}")
            )
        except MarksError as err:
            where = f"{path}:{n}: student {sid or '?'}, {qid or '?'} part {pid or '?'}"
            problems.append(f"{where}: {err}")
    if problems:
        raise MarksError("\n".join(problems))
    return marks
