"""Marks given by people: the sheet, its checks (every problem at once, nothing recorded
from a bad sheet), and how a mark enters the standing and stays there."""

from __future__ import annotations

import csv
import io

import pytest

from autograder.semester.marks import MarksError, answer_digest, read_sheet, sheet
from autograder.semester.standing import REMARK, standing


def _standing(sid: str, text: str) -> dict:
    def part(pid, points, status, score, given=""):
        verdict = dict(
            part=pid,
            variable="" if status == "pending" else f"q1_{pid}",
            points=points,
            score=score,
            status=status,
            feedback="Graded by a person.",
            given=given,
            value=None,
            expected="",
            misconception=None,
            details=(),
        )
        return {"question": "budgets/model-budget", "index": 1, "title": "M", "verdict": verdict}

    return {
        "student_id": sid,
        "score": 4.0,
        "max_score": 8.0,
        "parts": [
            part("states_gb", 4.0, "correct", 4.0),
            part("fits", 2.0, "pending", None, text),
            part("why", 2.0, "pending", None, ""),
        ],
        "error": None,
        "cell_errors": [],
        "copy_signals": [],
    }


STANDINGS = {
    "tdlsm/hw1": {
        "ana": _standing("ana", "No: 84 GB > 80 GB.\nUse ZeRO."),
        "ben": _standing("ben", "Yes."),
    }
}


def _rows(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_sheet_has_a_row_per_part_a_person_grades():
    rows = _rows(sheet("tdlsm/hw1", list(STANDINGS["tdlsm/hw1"].values()), {}))
    assert [(r["student_id"], r["part"], r["points"], r["score"]) for r in rows] == [
        ("ana", "fits", "2", ""),
        ("ana", "why", "2", ""),
        ("ben", "fits", "2", ""),
        ("ben", "why", "2", ""),
    ]
    assert rows[0]["answer"] == "No: 84 GB > 80 GB.\nUse ZeRO."  # multi-line, quoted


def _filled(tmp_path, edits: dict[tuple[str, str], dict]) -> tuple:
    rows = _rows(sheet("tdlsm/hw1", list(STANDINGS["tdlsm/hw1"].values()), {}))
    for r in rows:
        r.update(edits.get((r["student_id"], r["part"]), {}))
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path = tmp_path / "marks.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    return path, rows


def test_a_filled_sheet_gives_marks_and_skips_blank_rows(tmp_path):
    path, _ = _filled(tmp_path, {("ana", "fits"): {"score": "1,5", "comment": "one remedy"}})
    (mark,) = read_sheet(path, STANDINGS, marker="TA Bo")
    assert (mark.student_id, mark.part, mark.score, mark.comment, mark.marker) == (
        "ana",
        "fits",
        1.5,
        "one remedy",
        "TA Bo",
    )  # a decimal comma, as the TA typed it
    assert mark.answer_sha256 == answer_digest("No: 84 GB > 80 GB.\nUse ZeRO.")
    assert mark.source == "marks.csv:2"


def test_a_bad_sheet_names_every_problem_and_records_nothing(tmp_path):
    path, rows = _filled(
        tmp_path,
        {
            ("ana", "fits"): {"score": "3"},  # above the part's 2 points
            ("ana", "why"): {"score": "-1"},
            ("ben", "fits"): {"score": "two", "comment": "?"},
            ("ben", "why"): {"score": "1", "answer": "edited by the TA"},
        },
    )
    extra = [
        {**rows[0], "student_id": "zoe", "score": "1"},
        {**rows[0], "part": "colour", "score": "1"},
        {**rows[1], "score": "1"},  # ana why, rightly this time
        {**rows[1], "score": "2"},  # and again
        {**rows[0], "assignment": "tdlsm/hw9", "score": "1"},
    ]
    with path.open("a", encoding="utf-8", newline="") as fh:
        csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n").writerows(extra)
    with pytest.raises(MarksError) as err:
        read_sheet(path, STANDINGS, marker="TA Bo")
    who = "budgets/model-budget part"
    assert str(err.value).splitlines() == [
        f"{path}:2: student ana, {who} fits: score 3 is outside 0 to 2, the part's points",
        f"{path}:3: student ana, {who} why: score -1 is outside 0 to 2, the part's points",
        f"{path}:4: student ben, {who} fits: score 'two' is not a number",
        f"{path}:5: student ben, {who} why: the answer is not the one graded (edited in the "
        "sheet, or the student submitted again since): export the sheet again",
        f"{path}:6: student zoe, {who} fits: no graded submission of this student in tdlsm/hw1",
        f"{path}:7: student ana, {who} colour: no such part graded by a person; keep the "
        "exported rows",
        f"{path}:9: student ana, {who} why: also on line 8; keep one row per part",
        f"{path}:10: student ana, {who} fits: no graded assignment 'tdlsm/hw9' in the gradebook",
    ]


def test_a_sheet_that_is_not_one_says_so(tmp_path):
    path = tmp_path / "marks.csv"
    path.write_text("student,points\nana,2\n", encoding="utf-8")
    with pytest.raises(MarksError, match="not a marking sheet .*start from `scalegrade marks"):
        read_sheet(path, STANDINGS, marker="TA Bo")
    path.write_bytes("student_id\n\xe9".encode("latin-1"))
    with pytest.raises(MarksError, match="not UTF-8"):
        read_sheet(path, STANDINGS, marker="TA Bo")


def test_a_mark_counts_while_the_answer_is_the_one_marked(tmp_path):
    path, _ = _filled(tmp_path, {("ana", "fits"): {"score": "1.5", "comment": "one remedy"}})
    (mark,) = read_sheet(path, STANDINGS, marker="TA Bo")
    marks = {(mark.question, mark.part): mark}
    doc = standing(STANDINGS["tdlsm/hw1"]["ana"], None, "UTC", marks)
    fits = doc["parts"][1]["verdict"]
    assert (fits["status"], fits["score"], fits["feedback"], fits["marked_by"]) == (
        "marked",
        1.5,
        "one remedy",
        "TA Bo",
    )
    assert (doc["autograded"], doc["marked"], doc["earned"], doc["score"]) == (4.0, 1.5, 5.5, 5.5)
    resubmitted = _standing("ana", "Yes, it fits.")
    doc = standing(resubmitted, None, "UTC", marks)
    assert doc["parts"][1]["verdict"]["status"] == "pending"
    assert doc["parts"][1]["verdict"]["feedback"] == REMARK and doc["score"] == 4.0
