"""A student's standing on an assignment: what the grader and the markers gave, after the
late policy.

The gradebook keeps each graded attempt as the grader made it (its raw result), the
marks people gave (:mod:`autograder.semester.marks`), and the student's current standing, made
here from the three and the lateness (:mod:`autograder.semester.lateness`).  Every export reads
the standing: ``score`` is the final score, ``earned`` what was earned before the late
penalty (``autograded`` plus ``marked``), ``late`` what the policy decided and why.
"""

from __future__ import annotations

from typing import Any

from autograder.semester.lateness import Lateness
from autograder.semester.marks import Mark, answer_digest, marked_by_person

REMARK = "Marked before your answer changed: waiting to be marked again."


def _with_mark(graded: dict[str, Any], mark: Mark | None) -> dict[str, Any]:
    v = graded["verdict"]
    if mark is None or not marked_by_person(v):
        return graded
    if mark.answer_sha256 != answer_digest(v["given"].strip()):
        return {**graded, "verdict": {**v, "feedback": REMARK}}
    marked = {
        **v,
        "score": mark.score,
        "status": "marked",
        "feedback": mark.comment or "Marked by a person.",
        "marked_by": mark.marker,
    }
    return {**graded, "verdict": marked}


def standing(
    raw: dict[str, Any],
    late: Lateness | None,
    zone: str,
    marks: dict[tuple[str, str], Mark] | None = None,
) -> dict[str, Any]:
    """The result document every export reads, from an attempt's raw result, the marks of
    that student and assignment by (question, part), and the lateness."""
    marks = marks or {}
    doc = dict(raw)
    doc["parts"] = [
        _with_mark(g, marks.get((g["question"], g["verdict"]["part"]))) for g in raw["parts"]
    ]
    doc["autograded"] = raw["score"]
    doc["marked"] = sum(
        g["verdict"]["score"] for g in doc["parts"] if g["verdict"]["status"] == "marked"
    )
    doc["earned"] = doc["autograded"] + doc["marked"]
    doc["late"] = None if late is None else late.as_json() | {"note": late.note(zone)}
    doc["score"] = doc["earned"] * (1 - (late.penalty if late else 0.0))
    return doc
