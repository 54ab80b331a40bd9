"""A semester on ScaleGrade, end to end, on SQLite and on a real PostgreSQL server.

Two assignments released to a roster; submissions at different times (nbgrader's
timestamp.txt for the first, a submissions.csv for the second); an extension; the late
policy with a late-day pool shared by the course; a policy change and a second extension
made afterwards, each recomputing the standings from the gradebook without running a
notebook; bad input refused with nothing changed.

Every expected score is worked from the policy (autograder/semester/lateness.py): each started
day late costs 10 % of the earned score (20 % after the change), each started hour 1/24
of that on the second assignment (late_charge: hour), nothing after 3 days, and each
student's 2 free days are spent first, whole days, in the order they submitted.
"""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest
from click.testing import CliRunner

from autograder.grading.keys import Keys
from autograder.sandbox import Limits, Sandbox
from autograder.semester.batch import grade_batch
from autograder.semester.gradebook import Gradebook
from autograder.semester.lateness import read_extensions
from autograder.semester.submitted_at import read_manifest
from generator.release import release
from generator.roster import parse
from scalegrade.cli import main
from tests import postgres
from tests.banks import copy_bank

ROSTER = parse(
    "student_id,name,email\n"
    + "".join(f"{s},{s.title()},{s}@x.edu\n" for s in ("ana", "ben", "cem", "dan"))
)
ASSIGNMENTS = {
    # due without a zone: the course's (Europe/Zurich, summer time: UTC+2)
    "sem1": (
        "due: 2026-10-02T23:59\npolicy: {late_days_pool: 2}\n"
        "questions:\n  - question: budgets/model-budget\n"
    ),
    "sem2": (
        "due: 2026-10-16T23:59\npolicy: {late_days_pool: 2, late_charge: hour}\n"
        "questions:\n  - question: systems/ridge-point\n"
    ),
}
# sem1's times, as nbgrader submit writes them (in UTC); the deadline is 21:59 UTC
NBGRADER_TIMES = {
    "ana": "2026-10-02 20:00:00.000000 UTC",  # on time
    "ben": "2026-10-04 09:59:00.000000 UTC",  # 1 d 12 h late: both free days
    "cem": "2026-10-06 23:00:00.000000 UTC",  # 4 d 1 h 1 min late: 2 free, 3 started days
    "dan": "2026-10-05 10:00:00.000000 UTC",  # 2 d 12 h late, but 3 more days granted
}
# sem2's, in the course's zone; due 23:59 there
MANIFEST = (
    "student_id,submitted_at\n"
    "ana,2026-10-17T02:30\n"  # 2 h 31 min late: one free day (whole days are spent)
    "ben,2026-10-17T03:00\n"  # 3 h 1 min late, no free day left: 4 started hours
    "cem,2026-10-16T12:00\n"  # on time; dan submits nothing
)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'course.sqlite'}"
    return postgres.database(request.getfixturevalue("postgres_url"), "semester")


def _release(root):
    b = copy_bank(root / "bank", link_templates=True)
    for name, body in ASSIGNMENTS.items():
        (b.root / "assignments" / "tdlsm" / f"{name}.yaml").write_text(
            f"title: {name}\nkind: homework\nnotebook: {name}\n{body}", encoding="utf-8"
        )
        release(
            b.assignment(f"tdlsm/{name}"),
            ROSTER,
            secret=b"s" * 32,
            out=root / name,
            with_solutions=True,
        )


def _submit(root, name, students, timestamps=None):
    """Each student hands in their solutions notebook (every autograded point)."""
    subs = root / f"{name}-subs"
    for sid in students:
        (subs / sid).mkdir(parents=True)
        shutil.copy(root / name / "solutions" / sid / f"{name}.ipynb", subs / sid)
        if timestamps:
            (subs / sid / "timestamp.txt").write_text(timestamps[sid], encoding="utf-8")
    return subs


def _grade(root, name, subs, db_url, **late_input):
    keys = Keys(root / name / "keys")
    with Sandbox(limits=Limits(wall_seconds=60), hide=[root / name]) as sandbox:
        return grade_batch(
            keys,
            subs,
            root / f"{name}-grades",
            sandbox=sandbox,
            db_url=db_url,
            reveal=False,
            **late_input,
        )


def _scores(db_url, name):
    book = Gradebook(db_url)
    try:
        return {r["student_id"]: r for r in book.results(f"tdlsm/{name}")}
    finally:
        book.close()


def _cli(*args):
    """`scalegrade ARGS`, in this process."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _late(db_url, *args):
    return _cli("late", *args, "--db", db_url)


def test_a_semester_of_deadlines_extensions_and_late_work(tmp_path, db_url):
    root = tmp_path
    _release(root)
    zone = Keys(root / "sem1" / "keys").release.timezone
    assert zone == "Europe/Zurich"
    extensions = root / "extensions.csv"
    extensions.write_text(
        "student_id,assignment,extra_days,granted_by,reason\n"
        "dan,tdlsm/sem1,3,Prof. Ada,medical certificate\n",
        encoding="utf-8",
    )
    subs1 = _submit(root, "sem1", ["ana", "ben", "cem", "dan"], NBGRADER_TIMES)
    first = _grade(root, "sem1", subs1, db_url, extensions=read_extensions(extensions, zone))
    assert first.graded == 4 and not first.errors
    (root / "submissions.csv").write_text(MANIFEST, encoding="utf-8")
    subs2 = _submit(root, "sem2", ["ana", "ben", "cem"])
    _grade(root, "sem2", subs2, db_url, manifest=read_manifest(root / "submissions.csv", zone))

    s1, s2 = _scores(db_url, "sem1"), _scores(db_url, "sem2")
    e1, e2 = s1["ana"]["autograded"], s2["ana"]["autograded"]
    assert e1 > 0 and e2 > 0 and all(r["earned"] == e1 for r in s1.values())
    assert {sid: r["score"] for sid, r in s1.items()} == {
        "ana": e1,
        "ben": e1,  # both free days
        "cem": pytest.approx(0.7 * e1),  # 3 started days after the 2 free ones
        "dan": e1,  # on time with the extension
    }
    assert {sid: r["score"] for sid, r in s2.items()} == {
        "ana": e2,  # one free day covers 2 h 31 min
        "ben": pytest.approx(e2 * (1 - 4 * 0.1 / 24)),  # the pool was spent on sem1
        "cem": e2,
    }  # dan submitted nothing: no standing (a batch grades the folders it is given)
    assert s1["ben"]["late"]["pool_days"] == 2 and s2["ana"]["late"]["pool_days"] == 1
    assert s1["ben"]["late"]["time_source"] == "nbgrader"
    assert s2["ben"]["late"]["time_source"] == "submissions.csv:3"

    # what the students and the LMS see is the standing
    grades1 = root / "sem1-grades"
    cem = json.loads((grades1 / "cem" / "results.json").read_text())
    assert cem["score"] == pytest.approx(round(0.7 * e1, 4))
    assert "3 started days charged, 30 % off" in cem["output"]
    feedback = (grades1 / "dan" / "feedback.html").read_text()
    assert "Extension: 3 more days, granted by Prof. Ada (medical certificate)." in feedback
    summary = {
        r["student_id"]: r
        for r in csv.DictReader(io.StringIO((grades1 / "summary.csv").read_text()))
    }
    assert float(summary["cem"]["total"]) == pytest.approx(0.7 * e1, abs=1e-3)
    assert summary["cem"]["late_penalty"] == "0.3" and summary["ben"]["late_days_spent"] == "2"
    canvas = list(csv.reader(io.StringIO((grades1 / "canvas.csv").read_text())))
    assert float(next(r for r in canvas if r[2] == "cem")[-1]) == pytest.approx(0.7 * e1, abs=1e-2)

    # a TA marks the free-response part of sem1, (e), 2 points; a broken sheet first
    sheet_file = root / "marks.csv"
    done = _cli("marks", "export", "tdlsm/sem1", "--db", db_url, "--out", str(sheet_file))
    assert done.exit_code == 0, done.output
    rows = list(csv.DictReader(io.StringIO(sheet_file.read_text(encoding="utf-8"))))
    assert [(r["student_id"], r["part"], r["points"]) for r in rows] == [
        (sid, "fits", "2") for sid in ("ana", "ben", "cem", "dan")
    ]
    assert "FlashAttention" in rows[0]["rubric"] and rows[0]["answer"].startswith("*Expected:*")
    given = {"ana": ("2", "both remedies"), "ben": ("1.5", "one remedy"), "cem": ("1", "")}
    for r in rows:
        r["score"], r["comment"] = given.get(r["student_id"], ("", ""))
    _write_sheet(sheet_file, rows)
    broken = root / "broken.csv"
    _write_sheet(broken, [{**rows[0], "score": "5"}, {**rows[1], "student_id": "zoe"}])
    bad = _cli("marks", "import", str(broken), "--db", db_url, "--by", "Bo")
    assert bad.exit_code == 2 and "nothing recorded" in bad.output
    assert "broken.csv:2: student ana" in bad.output and "broken.csv:3: student zoe" in bad.output
    assert _scores(db_url, "sem1")["ana"]["score"] == e1
    done = _cli("marks", "import", str(sheet_file), "--db", db_url, "--by", "TA Bo")
    assert done.exit_code == 0, done.output
    assert "3 marks recorded by TA Bo" in done.output
    s1 = _scores(db_url, "sem1")
    assert {sid: r["score"] for sid, r in s1.items()} == {
        "ana": e1 + 2,
        "ben": e1 + 1.5,
        "cem": pytest.approx(0.7 * (e1 + 1)),  # the late penalty is of all that was earned
        "dan": e1,  # not marked yet: pending
    }
    fits = next(g["verdict"] for g in s1["ben"]["parts"] if g["verdict"]["part"] == "fits")
    assert (fits["status"], fits["feedback"], fits["marked_by"]) == (
        "marked",
        "one remedy",
        "TA Bo",
    )
    assert "one remedy" in (grades1 / "ben" / "feedback.html").read_text()

    # the instructor doubles the penalty: standings move, no notebook runs again
    attempts = _attempts(db_url)
    done = _late(
        db_url,
        "tdlsm/sem1",
        "--set",
        "late_penalty_per_day=0.2",
        "--by",
        "Prof. Ada",
        "--why",
        "the syllabus says 20 % a day",
    )
    assert done.exit_code == 0, done.output
    assert "scores changed: 1" in done.output and "cem" in done.output
    assert _scores(db_url, "sem1")["cem"]["score"] == pytest.approx(0.4 * (e1 + 1))
    cem = json.loads((grades1 / "cem" / "results.json").read_text())
    assert cem["score"] == pytest.approx(round(0.4 * (e1 + 1), 4))  # written again
    assert _attempts(db_url) == attempts

    # an extension for ben's sem1 frees his pool for sem2: that standing moves too
    (root / "more.csv").write_text(
        "student_id,assignment,extra_days,reason\nben,tdlsm/sem1,2,exchange travel\n",
        encoding="utf-8",
    )
    done = _late(db_url, "tdlsm/sem1", "--extensions", str(root / "more.csv"), "--by", "TA Bo")
    assert done.exit_code == 0, done.output
    s2 = _scores(db_url, "sem2")
    assert s2["ben"]["score"] == e2 and s2["ben"]["late"]["pool_days"] == 1
    assert _scores(db_url, "sem1")["ben"]["late"]["pool_days"] == 0
    assert _scores(db_url, "sem1")["ben"]["score"] == e1 + 1.5
    assert "tdlsm/sem2" in done.output and "ben" in done.output
    ben2 = json.loads((root / "sem2-grades" / "ben" / "results.json").read_text())
    assert ben2["score"] == pytest.approx(round(e2, 4))
    assert _attempts(db_url) == attempts
    book = Gradebook(db_url)
    assert [c["by"] for c in book.changes("tdlsm/sem1")] == ["Prof. Ada"]
    assert book.extensions()[("tdlsm/sem1", "ben")].granted_by == "TA Bo"
    book.close()

    # bad input: one clear error, nothing changed
    before = (_scores(db_url, "sem1"), _scores(db_url, "sem2"))
    (root / "bad.csv").write_text(
        "student_id,assignment,extra_days,granted_by,reason\n"
        "zoe,tdlsm/sem1,2,Ada,ill\nana,tdlsm/sem1,soon,Ada,ill\n",
        encoding="utf-8",
    )
    bad = _late(db_url, "tdlsm/sem1", "--extensions", str(root / "bad.csv"))
    assert bad.exit_code == 2 and "bad.csv:3: student ana" in bad.output
    (root / "bad.csv").write_text(
        "student_id,assignment,extra_days,granted_by,reason\nzoe,tdlsm/sem1,2,Ada,ill\n",
        encoding="utf-8",
    )
    bad = _late(db_url, "tdlsm/sem1", "--extensions", str(root / "bad.csv"))
    assert bad.exit_code == 2 and "student zoe is not on the roster of tdlsm/sem1" in bad.output
    bad = _late(db_url, "tdlsm/sem1", "--due", "next week", "--by", "Ada", "--why", "x")
    assert bad.exit_code == 2 and "'next week' is not a time" in bad.output
    bad = _late(db_url, "tdlsm/sem1", "--set", "late_days_max=-1", "--by", "Ada", "--why", "x")
    assert bad.exit_code == 2 and "late_days_max" in bad.output
    bad = _late(db_url, "tdlsm/sem1", "--set", "late_days_max=5")
    assert bad.exit_code == 2 and "say who changes it and why" in bad.output
    assert (_scores(db_url, "sem1"), _scores(db_url, "sem2")) == before

    # a regrade runs the notebooks again: a new attempt each, and no mark is lost
    _grade(root, "sem1", subs1, db_url, regrade=True)
    assert _attempts(db_url) == attempts + 4
    assert {sid: r["score"] for sid, r in _scores(db_url, "sem1").items()} == {
        sid: r["score"] for sid, r in before[0].items()
    }
    book = Gradebook(db_url)
    assert [m.score for m in book.marks("tdlsm/sem1", "ben")] == [1.5]
    book.close()


def _write_sheet(path, rows):
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def _attempts(db_url):
    book = Gradebook(db_url)
    try:
        return sum(len(book.attempts(f"tdlsm/{n}", s)) for n in ASSIGNMENTS for s in ROSTER_IDS)
    finally:
        book.close()


ROSTER_IDS = [s.id for s in ROSTER]


BROKEN = {
    # a tolerance far too tight for (a), and the "blocks only" misconception with a wrong
    # formula (it never fires), no credit either
    "tolerance: {rel: 0.01}\n    misconceptions:\n      - name: blocks only\n"
    '        value: "12 * n_layers * d_model**2"\n': (
        "tolerance: {rel: 0.00001}\n    misconceptions:\n      - name: blocks only\n"
        '        value: "12 * n_layers * d_model"\n'
    ),
}
FIXED = {
    "tolerance: {rel: 0.01}\n    misconceptions:\n      - name: blocks only\n"
    '        value: "12 * n_layers * d_model**2"\n': (
        "tolerance: {rel: 0.01}\n    misconceptions:\n      - name: blocks only\n"
        '        value: "12 * n_layers * d_model**2"\n        credit: 0.25\n'
    ),
}


def _edit_question(bank_root, edits):
    path = bank_root / "templates" / "budgets" / "model-budget" / "question.yaml"
    text = (bank_root.parent / "model-budget.yaml").read_text(encoding="utf-8")
    for old, new in edits.items():
        assert old in text
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")


def test_a_wrong_question_is_fixed_rekeyed_and_regraded_without_running_a_notebook(
    tmp_path, db_url
):
    """(a) of model-budget was released with a tolerance of 1e-5 and a misconception whose
    formula is wrong: ben's n_params, 0.3 % off, is marked wrong, and cem's blocks-only
    count (12·L·d², the notes' classic slip) earns nothing and names nothing.  The
    instructor fixes both in the bank, re-keys and regrades: ben gains (a)'s points, cem
    gains 25 % of them with the misconception's feedback, ana (honest) stays, and ana's
    TA mark stays.  The submissions are deleted before the regrade: no notebook runs."""
    import nbformat

    from contract import read_key
    from scalegrade.demo import _set

    b = copy_bank(tmp_path / "bank")
    original = b.root / "templates" / "budgets" / "model-budget" / "question.yaml"
    shutil.copy(original, tmp_path / "model-budget.yaml")
    _edit_question(b.root, BROKEN)
    (b.root / "assignments" / "tdlsm" / "fix.yaml").write_text(
        "title: fix\nkind: homework\nnotebook: fix\n"  # no deadline: no lateness here
        "questions:\n  - question: budgets/model-budget\n",
        encoding="utf-8",
    )
    secret = tmp_path / "secret.txt"
    secret.write_text("f" * 64, encoding="utf-8")
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email\nana,Ana,a@x\nben,Ben,b@x\ncem,Cem,c@x\n")
    done = _cli(
        "generate",
        "tdlsm/fix",
        "--bank",
        str(b.root),
        "--roster",
        str(roster),
        "--out",
        str(tmp_path / "fix"),
        "--secret-file",
        str(secret),
        "--with-solutions",
    )
    assert done.exit_code == 0, done.output
    subs = _submit(tmp_path, "fix", ["ana", "ben", "cem"])
    for sid, factor in (("ben", 1.003), ("cem", None)):
        nb_path = subs / sid / "fix.ipynb"
        nb = nbformat.read(nb_path, as_version=4)
        key = read_key(tmp_path / "fix" / "keys" / f"{sid}.json")
        (q,) = key.questions
        a = next(x for x in q.answers if x.id == "n_params")
        blocks = 12 * q.params["n_layers"] * q.params["d_model"] ** 2
        _set(nb, a.variable, a.value * factor if factor else blocks)
        nbformat.write(nb, nb_path)
    _grade(tmp_path, "fix", subs, db_url)
    before = _scores(db_url, "fix")

    def n_params(doc):
        return next(g["verdict"] for g in doc["parts"] if g["verdict"]["part"] == "n_params")

    assert n_params(before["ana"])["status"] == "correct"
    assert n_params(before["ben"])["status"] == "wrong" and n_params(before["ben"])["score"] == 0
    assert n_params(before["cem"])["status"] == "wrong"
    points = n_params(before["ana"])["points"]
    rows = list(csv.DictReader(io.StringIO(_export_marks(db_url, tmp_path))))
    rows[0]["score"], rows[0]["comment"] = "2", "both remedies"  # ana's (e)
    _write_sheet(tmp_path / "marks.csv", rows)
    done = _cli("marks", "import", str(tmp_path / "marks.csv"), "--db", db_url, "--by", "TA Bo")
    assert done.exit_code == 0, done.output
    ana_before = _scores(db_url, "fix")["ana"]["score"]

    # a change of the numbers' sampling is refused, naming who would get other numbers
    _edit_question(b.root, {**FIXED, "range: [12, 48]": "range: [14, 48]"})
    released = ["--bank", b.root, "--out", tmp_path / "fix", "--secret-file", secret]
    rekey = ["rekey", "tdlsm/fix", *released]
    keys_before = (tmp_path / "fix" / "keys" / "ben.json").read_bytes()
    refused = _cli(*rekey)
    assert refused.exit_code == 2 and "gives other numbers to" in refused.output, refused.output
    refused = _cli(*rekey, "--allow-new-numbers", "--db", db_url)
    assert refused.exit_code == 2 and "they have submitted already" in refused.output
    assert (tmp_path / "fix" / "keys" / "ben.json").read_bytes() == keys_before

    # the fix itself: same numbers, a new tolerance and misconception
    _edit_question(b.root, FIXED)
    done = _cli(*rekey)
    assert done.exit_code == 0, done.output
    assert "answer q1_n_params: the tolerance (3 of 3 students)" in done.output
    assert "answer q1_n_params: the misconceptions (3 of 3 students)" in done.output
    assert (tmp_path / "fix" / "keys-history" / "1" / "ben.json").read_bytes() == keys_before

    shutil.rmtree(subs)  # nothing to run: the regrade works from the stored harvests
    attempts = _attempts_of(db_url, "fix")
    done = _cli(
        "regrade",
        "tdlsm/fix",
        "--db",
        db_url,
        "--by",
        "Prof. Ada",
        "--why",
        "tolerance and misconception of (a) fixed",
    )
    assert done.exit_code == 0, done.output
    assert "3 graded again from their harvests (no notebook run), 0 notebooks run" in done.output
    assert "2 gained, 0 lost" in done.output
    after = _scores(db_url, "fix")
    assert n_params(after["ben"])["status"] == "correct"
    assert after["ben"]["score"] == pytest.approx(before["ben"]["score"] + points)
    assert n_params(after["cem"])["status"] == "misconception"
    assert "embedding" in n_params(after["cem"])["feedback"]
    assert after["cem"]["score"] == pytest.approx(before["cem"]["score"] + 0.25 * points)
    assert after["ana"]["score"] == ana_before  # the TA's mark is still there
    assert _attempts_of(db_url, "fix") == attempts + 3
    grades = tmp_path / "fix-grades"
    diff = list(csv.DictReader(io.StringIO((grades / "regrade-1.csv").read_text())))
    assert [(r["student_id"], r["part"], r["old_status"], r["new_status"]) for r in diff] == [
        ("ben", "n_params", "wrong", "correct"),
        ("cem", "n_params", "wrong", "misconception"),
    ]
    assert float(json.loads((grades / "ben" / "results.json").read_text())["score"]) == (
        pytest.approx(after["ben"]["score"], abs=1e-3)
    )
    report = (grades / "report.html").read_text()
    assert "regrade: 3 from stored harvests, 0 notebooks run again; 2 gained, 0 lost" in report
    assert "by Prof. Ada (tolerance and misconception of (a) fixed)" in report

    # ana's variant leaks: she is reseeded; nobody else's numbers change
    first_notebook = (tmp_path / "fix" / "solutions" / "ana" / "fix.ipynb").read_bytes()
    others = {s: (tmp_path / "fix" / "keys" / f"{s}.json").read_bytes() for s in ("ben", "cem")}
    done = _cli(
        "reseed",
        "tdlsm/fix",
        "ana",
        *released,
        "--by",
        "Prof. Ada",
        "--why",
        "her variant was posted online",
    )
    assert done.exit_code == 0, done.output
    assert "ana: variant version 1; new numbers for budgets/model-budget" in done.output
    assert others == {
        s: (tmp_path / "fix" / "keys" / f"{s}.json").read_bytes() for s in ("ben", "cem")
    }
    # what she submitted before the reseed is still graded with the numbers she had then
    again = _cli("regrade", "tdlsm/fix", "--db", db_url, "--by", "Ada", "--why", "after the reseed")
    assert again.exit_code == 0 and "3 unchanged" in again.output, again.output
    assert _scores(db_url, "fix")["ana"]["score"] == ana_before

    # after the reseed, her old notebook is graded with her new numbers, and flagged
    resub = tmp_path / "fix-resub"
    (resub / "ana").mkdir(parents=True)
    (resub / "ana" / "fix.ipynb").write_bytes(first_notebook)
    later = tmp_path / "later.csv"
    later.write_text("student_id,submitted_at\nana,2030-01-01T12:00\n", encoding="utf-8")
    manifest = read_manifest(later, "Europe/Zurich")
    _grade(tmp_path, "fix", resub, db_url, manifest=manifest)
    stale = _scores(db_url, "fix")["ana"]
    assert stale["claimed_version"] == 0 and n_params(stale)["status"] != "correct"
    assert "Notebooks claiming another variant" in (grades / "report.html").read_text()
    assert "ana&#x27;s notebook says variant version 0" in (grades / "report.html").read_text()
    # her new notebook earns every autograded point, with her new numbers
    shutil.copy(tmp_path / "fix" / "solutions" / "ana" / "fix.ipynb", resub / "ana")
    _grade(tmp_path, "fix", resub, db_url, manifest=manifest)
    fresh = _scores(db_url, "fix")["ana"]
    assert fresh["claimed_version"] is None and n_params(fresh)["status"] == "correct"
    assert fresh["autograded"] == before["ana"]["autograded"]


def _export_marks(db_url, root):
    path = root / "sheet.csv"
    done = _cli("marks", "export", "tdlsm/fix", "--db", db_url, "--out", str(path))
    assert done.exit_code == 0, done.output
    return path.read_text(encoding="utf-8")


def _attempts_of(db_url, name):
    book = Gradebook(db_url)
    try:
        return sum(len(book.attempts(f"tdlsm/{name}", s)) for s in ("ana", "ben", "cem"))
    finally:
        book.close()
