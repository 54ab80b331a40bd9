"""Canvas and Moodle gradebook CSVs: written, read back and matched to the roster.

The columns are the LMSs' documented ones: Canvas's gradebook importer
(canvas-lms ``lib/gradebook_importer.rb``: ``Student, ID, SIS User ID, SIS Login ID,
Section``, a ``Points Possible`` row, ``Title (id)`` assignment columns, read-only totals)
and Moodle's CSV grade export (``grade/export/lib.php``: the profile fields ``First name,
Last name, ID number, Institution, Department, Email address``, ``Item (Real)`` columns,
``Last downloaded from this course``).
"""

from __future__ import annotations

import csv
import io
import re

import pytest

from autograder.semester import lms

ROSTER = {
    "ana": {"name": "Ana Lima", "email": "ana@x.edu"},
    "ben": {"name": "Ben O", "email": "ben@x.edu"},
    "cy": {"name": "Cy de la Cruz", "email": "cy@x.edu"},
}
TITLE = "Homework 1: budgets (chapters 0-3)"


def _result(sid: str, scores: list[tuple[int, float, float]]) -> dict:
    parts = [
        {"index": i, "verdict": {"score": s, "points": p}, "question": f"q{i}", "title": ""}
        for i, s, p in scores
    ]
    return {
        "student_id": sid,
        "score": sum(s or 0 for _i, s, _p in scores),
        "max_score": sum(p for _i, _s, p in scores),
        "parts": parts,
        "error": None,
    }


RESULTS = [
    _result("ana", [(1, 2.0, 2.0), (1, 0.8, 1.0), (2, 4.5, 6.0), (3, None, 3.0)]),
    _result("ben", [(1, 0.0, 2.0), (1, 1.0, 1.0), (2, 6.0, 6.0), (3, None, 3.0)]),
    _result("cy", [(1, 2.0, 2.0), (1, 1.0, 1.0), (2, 0.25, 6.0), (3, None, 3.0)]),
]

# What Canvas's "Export Entire Gradebook" writes: the points row (with read-only totals), a
# student without SIS ids found by login (another case), the test student nobody rosters.
CANVAS_EXPORT = """\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,\
Homework 1: budgets (chapters 0-3) (4567),Quiz 1 (4568),Current Points,Final Points,\
Current Score,Unposted Current Score,Final Score,Unposted Final Score
    Points Possible,,,,,12.00,5.00,(read only),(read only),(read only),(read only),\
(read only),(read only)
"Lima, Ana",101,ana,ana@x.edu,Section A,,4.00,4.00,4.00,80.00,80.00,23.53,23.53
"O, Ben",102,,BEN@X.EDU,Section B,7.50,,7.50,7.50,62.50,62.50,44.12,44.12
"Student, Test",103,,,Section A,,,,,,,,
"""

MOODLE_EXPORT = """First name,Last name,ID number,Institution,Department,Email address,\
Assignment: Homework 1: budgets (chapters 0-3) (Real),Quiz: Quiz 1 (Real),Course total (Real),\
Last downloaded from this course
Ana,Lima,ana,Uni,CS,ana@x.edu,-,4.00,4.00,1767225600
Ben,O,S-0002,Uni,CS,Ben@X.edu,7.50,-,7.50,1767225600
Cy,de la Cruz,cy,Uni,Math,cy@elsewhere.edu,-,-,-,1767225600
"""


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_canvas_csv_is_what_canvas_importer_reads():
    text = lms.canvas_csv(RESULTS, ROSTER, TITLE)
    header, points, *students = _rows(text)
    # gradebook_importer.rb: row[0] holds "Student", row[1] "ID"; SIS User ID and SIS Login
    # ID follow, and the last student column is "Section"; then the assignments
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert header[5:] == [TITLE]
    assert "Points Possible" in points[0] and float(points[5]) == 12.0
    assert [r[2] for r in students] == ["ana", "ben", "cy"]
    assert [r[3] for r in students] == ["ana@x.edu", "ben@x.edu", "cy@x.edu"]
    back = lms.read_canvas(text)
    assert back.columns == (TITLE,) and back.points_possible == {TITLE: "12"}
    m = lms.match(back, ROSTER)
    assert not m.missing and not m.unmatched and set(m.how.values()) == {"SIS User ID"}
    for r in RESULTS:
        assert m.rows[r["student_id"]].score(TITLE) == pytest.approx(r["score"])


def test_moodle_csv_has_moodle_export_columns_and_reads_back():
    text = lms.moodle_csv(RESULTS, ROSTER, TITLE)
    header, *students = _rows(text)
    assert header == [*lms.MOODLE_IDENTITY, f"{TITLE} (Real)"]
    assert students[2][:3] == ["Cy de la", "Cruz", "cy"] and students[2][5] == "cy@x.edu"
    back = lms.read_moodle(text)
    assert back.columns == (f"{TITLE} (Real)",)
    m = lms.match(back, ROSTER)
    assert not m.missing and set(m.how.values()) == {"ID number"}
    assert m.rows["cy"].score(f"{TITLE} (Real)") == pytest.approx(0.25 + 3.0)
    # matched on the email alone (Moodle's "map from Email address")
    no_ids = text.replace(",ana,", ",,").replace(",ben,", ",,").replace(",cy,", ",,")
    m = lms.match(lms.read_moodle(no_ids), ROSTER)
    assert not m.missing and set(m.how.values()) == {"Email address"}


def test_per_question_columns_sum_to_the_total():
    for write, read in ((lms.canvas_csv, lms.read_canvas), (lms.moodle_csv, lms.read_moodle)):
        back = read(write(RESULTS, ROSTER, TITLE, per_question=True))
        assert len(back.columns) == 4  # the total, Q1, Q2, Q3
        assert re.search(r"Q3\b", back.columns[-1])
        for row in back.rows:
            total, *questions = (row.score(c) for c in back.columns)
            assert sum(questions) == pytest.approx(total)
    points = lms.read_canvas(lms.canvas_csv(RESULTS, ROSTER, TITLE, per_question=True))
    assert [float(points.points_possible[c]) for c in points.columns] == [12, 3, 6, 3]


def test_a_canvas_export_is_matched_to_the_roster_by_sis_id_then_login():
    export = lms.read_canvas(CANVAS_EXPORT)
    assert export.columns == (f"{TITLE} (4567)", "Quiz 1 (4568)")  # totals are read-only
    assert lms.canvas_assignment_id(export.columns[0]) == "4567"
    assert export.column_for(TITLE) == f"{TITLE} (4567)"
    m = lms.match(export, ROSTER)
    assert m.how == {"ana": "SIS User ID", "ben": "SIS Login ID"}
    assert m.missing == ("cy",)
    assert [r.identity["Student"] for r in m.unmatched] == ["Student, Test"]
    assert m.rows["ben"].score(f"{TITLE} (4567)") == 7.5
    assert m.rows["ana"].score(f"{TITLE} (4567)") is None  # blank: no grade yet
    # the upload reuses Canvas's user ids, sections and assignment column
    upload = lms.read_canvas(lms.canvas_csv(RESULTS, ROSTER, TITLE, existing=export))
    assert upload.columns == (f"{TITLE} (4567)",)
    ana, ben, cy = upload.rows
    assert (ana.identity["ID"], ana.identity["Section"]) == ("101", "Section A")
    assert ben.identity["SIS Login ID"] == "BEN@X.EDU" and ben.identity["SIS User ID"] == "ben"
    assert cy.identity["ID"] == "" and cy.identity["SIS User ID"] == "cy"


def test_a_moodle_export_is_matched_by_id_number_then_email():
    export = lms.read_moodle(MOODLE_EXPORT)
    assert export.columns[:2] == (f"Assignment: {TITLE} (Real)", "Quiz: Quiz 1 (Real)")
    m = lms.match(export, ROSTER)
    # ben's Moodle ID number is the university's, not the roster's: found by email instead;
    # cy's email differs but the ID number matches
    assert m.how == {"ana": "ID number", "ben": "Email address", "cy": "ID number"}
    assert m.rows["ben"].score(f"Assignment: {TITLE} (Real)") == 7.5
    upload = lms.read_moodle(lms.moodle_csv(RESULTS, ROSTER, TITLE, existing=export))
    assert upload.columns == (f"Assignment: {TITLE} (Real)",)
    ben = upload.rows[1]
    assert ben.identity["ID number"] == "S-0002" and ben.identity["Email address"] == "Ben@X.edu"
    assert lms.match(upload, ROSTER).how["ben"] == "Email address"
    assert ben.score(f"Assignment: {TITLE} (Real)") == pytest.approx(RESULTS[1]["score"])


def test_read_recognises_the_format_and_names_the_file_on_errors(tmp_path):
    (tmp_path / "c.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    (tmp_path / "m.csv").write_text(MOODLE_EXPORT.replace(",", ";"), encoding="utf-8")
    (tmp_path / "x.csv").write_text("name,score\nana,3\n", encoding="utf-8")
    assert lms.read(tmp_path / "c.csv").lms == "canvas"
    assert lms.read(tmp_path / "m.csv").rows[0].identity["Email address"] == "ana@x.edu"
    with pytest.raises(lms.LmsError, match=r"x\.csv: neither a Canvas"):
        lms.read(tmp_path / "x.csv")


def test_a_name_match_needs_one_roster_student():
    export = lms.read_canvas('Student,ID,SIS User ID,SIS Login ID,Section,A\n"Lima, Ana",1,,,S,3\n')
    assert lms.match(export, ROSTER).how == {"ana": "Student"}
    twins = {**ROSTER, "ana2": {"name": "Ana Lima", "email": ""}}
    m = lms.match(export, twins)
    assert not m.rows and m.ambiguous


def test_the_export_commands_read_the_gradebook(tmp_path):
    from click.testing import CliRunner

    import contract
    from autograder.grading.grade import grade_harvest
    from autograder.semester.gradebook import Gradebook
    from contract import Policy
    from generator import bank
    from generator.release import release
    from generator.roster import parse
    from scalegrade.cli import main

    roster = parse("student_id,name,email\nana,Ana Lima,ana@x.edu\nben,Ben O,ben@x.edu\n")
    release(bank.load().assignment("dl/hw1"), roster, secret=b"l" * 32, out=tmp_path / "hw1")
    (tmp_path / "grades").mkdir()
    book = Gradebook(f"sqlite:///{tmp_path / 'grades' / 'gradebook.sqlite'}")
    for key in contract.read_keys(tmp_path / "hw1" / "keys").values():
        answers = {
            a.variable: {"kind": "number", "value": a.display_value}
            for q in key.questions[:2]
            for a in q.answers
            if a.ask
        }
        result = grade_harvest(key, {"answers": answers}, policy=Policy(), checks={}, reveal=False)
        book.record("dl/hw1", result)
    book.close()
    (tmp_path / "canvas_export.csv").write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,Homework 1 (4567)\n"
        "    Points Possible,,,,,56.00\n"
        '"O, Ben",102,,ben@x.edu,Section B,\n'
        '"Student, Test",103,,,Section A,\n',
        encoding="utf-8",
    )
    common = ["--grades", str(tmp_path / "grades"), "--keys", str(tmp_path / "hw1" / "keys")]
    run = CliRunner().invoke
    done = run(
        main,
        [
            *("export", "canvas", "dl/hw1", *common, "--out", str(tmp_path / "c.csv")),
            *("--column", "Homework 1", "--per-question"),
            *("--lms-export", str(tmp_path / "canvas_export.csv")),
        ],
    )
    assert done.exit_code == 0, done.output
    assert "matched in" in done.output and "1 by SIS Login ID" in done.output
    assert "not in the canvas file" in done.output and "ana" in done.output
    canvas = lms.read(tmp_path / "c.csv")
    assert canvas.columns[0] == "Homework 1 (4567)" and len(canvas.columns) == 8  # + Q1..Q7
    ben = lms.match(canvas, {"ben": {"name": "Ben O", "email": "ben@x.edu"}}).rows["ben"]
    assert ben.identity["ID"] == "102" and ben.score("Homework 1 (4567)") > 0
    done = run(main, ["export", "moodle", "dl/hw1", *common, "--out", str(tmp_path / "m.csv")])
    assert done.exit_code == 0, done.output
    assert lms.read(tmp_path / "m.csv").columns[0].endswith("(Real)")
    done = run(
        main,
        [
            *("export", "moodle", "dl/hw1", *common, "--out", str(tmp_path / "x.csv")),
            *("--lms-export", str(tmp_path / "canvas_export.csv")),
        ],
    )
    assert done.exit_code == 2 and "a canvas file, not moodle" in done.output
