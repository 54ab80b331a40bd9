"""Marks given by a person: the marking sheet a TA fills in, and what it gives.

``scalegrade marks export`` writes one row per student and part a person grades (the
free-response parts, and code parts without checks): the student's answer, the rubric,
the points, and empty ``score`` and ``comment`` columns.  ``scalegrade marks import``
reads it back: every problem of the sheet is reported at once (file, line, student,
part, the fix) and a bad sheet records nothing.  Rows left without a score are not
marked yet, and are skipped.

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


def _rubrics(key: Key | None) -> dict[tuple[str, str], str]:
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
        rubric = _rubrics(key)
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


def read_sheet(path: Path, standings: dict[str, dict[str, dict]], *, marker: str) -> list[Mark]:
    """The marks of a filled-in sheet, checked against the standings it was exported from
    (assignment -> student -> standing).  Every problem is reported at once."""
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
        where = f"{path}:{n}: student {sid or '?'}, {qid or '?'} part {pid or '?'}"
        raw = cell["score"].strip()
        if not raw:
            continue  # not marked yet
        standing = standings.get(aid, {}).get(sid)
        if aid not in standings:
            problems.append(f"{where}: no graded assignment {aid!r} in the gradebook")
            continue
        if standing is None:
            problems.append(f"{where}: no graded submission of this student in {aid}")
            continue
        verdict = next(
            (
                g["verdict"]
                for g in standing["parts"]
                if g["question"] == qid and g["verdict"]["part"] == pid
            ),
            None,
        )
        if verdict is None or not marked_by_person(verdict):
            problems.append(f"{where}: no such part graded by a person; keep the exported rows")
            continue
        try:
            score = float(raw.replace(",", ".")) if raw.count(",") <= 1 else math.nan
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            problems.append(f"{where}: score {raw!r} is not a number")
            continue
        if score < 0 or score > verdict["points"] + 1e-9:
            problems.append(
                f"{where}: score {raw} is outside 0 to {verdict['points']:g}, the part's points"
            )
            continue
        if cell["answer"].strip() != verdict["given"].strip():
            problems.append(
                f"{where}: the answer is not the one graded (edited in the sheet, or the "
                "student submitted again since): export the sheet again"
            )
            continue
        pair = (aid, sid, qid, pid)
        if pair in seen:
            problems.append(f"{where}: also on line {seen[pair]}; keep one row per part")
            continue
        seen[pair] = n
        marks.append(
            Mark(
                aid,
                sid,
                qid,
                pid,
                score,
                cell["comment"].strip(),
                marker,
                answer_digest(verdict["given"].strip()),
                f"{Path(path).name}:{n}",
            )
        )
    if problems:
        raise MarksError("\n".join(problems))
    return marks
