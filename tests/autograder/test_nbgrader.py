"""ScaleGrade inside a real nbgrader 0.9.6 course, end to end.

Two students; every nbgrader step runs nbgrader's own app (`nbgrader ARGS`, in process)
with the course's and each student's ``nbgrader_config.py``: release_assignment (the
ScaleGrade exchange: one variant per student), fetch_assignment as each student, submit,
collect, then `scalegrade grade --nbgrader` and `nbgrader export`.  The honest student
submits their solutions notebook; the other the same with one answer wrong, which costs
exactly that part's points (its points are in the key the generator wrote).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from nbgrader.api import Gradebook

from autograder.integrations.nbgrader_gradebook import alembic_on_path
from scalegrade.cli import main
from tests.nbgrader_app import config, nbgrader

NAME = "hw1"  # the assignment's name in nbgrader
COURSE_ID = "sg101"
STUDENTS = ("s01", "s02", "s03")
# s03 submits 1 d 13 h after tdlsm/hw1's deadline (2026-12-18 23:59 in Zurich, 22:59 UTC):
# two started days at the course's 10 % a day
LATE = "2026-12-20 12:00:00.000000 UTC"
EXCHANGE = (
    'exchange = "autograder.integrations.nbgrader_exchange"\n'
    'c.ExchangeFactory.release_assignment = f"{exchange}.ReleaseVariants"\n'
    'c.ExchangeFactory.fetch_assignment = f"{exchange}.FetchVariant"\n'
)


def _parts(nb) -> dict[str, nbformat.NotebookNode]:
    return {c.metadata.nbgrader.grade_id: c for c in nb.cells if "scalegrade" in c.metadata}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nbgrader")
    env = {
        "HOME": str(tmp),  # nothing of the test user's jupyter or nbgrader setup
        "JUPYTER_CONFIG_DIR": str(tmp / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(tmp / "jupyter-data"),
        "SCALEGRADE_SECRET": "nbgrader-test-secret-" + "x" * 16,
    }
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            mp.setenv(name, value)
        # an nbgrader user runs `nbgrader` from its own scripts folder, where nbgrader's
        # database migrations find `alembic`; pytest may run without it on PATH (make, CI)
        mp.setenv("PATH", os.environ.get("PATH", ""))
        alembic_on_path()
        yield _flow(tmp, env)


def _flow(tmp: Path, env: dict[str, str]):
    course, exchange, homes = tmp / "course", tmp / "exchange", tmp / "home"

    config(
        course,
        f"c.CourseDirectory.root = {str(course)!r}\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n" + EXCHANGE,
    )
    roster = tmp / "roster.csv"
    roster.write_text(
        "student_id,name,email\n" + "".join(f"{s},Student {s},{s}@uni.example\n" for s in STUDENTS)
    )
    cli = CliRunner(env={"SCALEGRADE_SECRET": env["SCALEGRADE_SECRET"]})
    gen = cli.invoke(
        main,
        [
            "generate",
            "tdlsm/hw1",
            "--roster",
            str(roster),
            "--out",
            str(course / "scalegrade" / NAME),
            "--with-solutions",
        ],
    )
    assert gen.exit_code == 0, gen.output
    nbgrader(course, "release_assignment", NAME)

    solutions = course / "scalegrade" / NAME / "solutions"
    fetched, wrong_part = {}, None
    for sid in STUDENTS:
        home = homes / sid
        config(
            home,
            f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
            f"c.CourseDirectory.student_id = {sid!r}\n"
            f"c.Exchange.root = {str(exchange)!r}\n"
            f"c.Exchange.cache = {str(home / '.nbgrader-cache')!r}\n" + EXCHANGE,
        )
        nbgrader(home, "fetch_assignment", NAME)
        path = home / NAME / "hw1.ipynb"
        fetched[sid] = nbformat.read(path, as_version=4)
        answered = nbformat.read(solutions / sid / "hw1.ipynb", as_version=4)
        if sid == "s02":  # one answer wrong: the first asked number, times ten
            cell = next(
                c for c in _parts(answered).values() if c.metadata.scalegrade.kind == "answer"
            )
            variable, rest = cell.source.split(" = ", 1)
            value, hint = rest.split("  # ", 1)
            cell.source = f"{variable} = {float(value) * 10!r}  # {hint}"
            wrong_part = cell.metadata.scalegrade
        nbformat.write(answered, path)
        nbgrader(home, "submit", NAME)

    nbgrader(course, "collect", NAME)
    (course / "submitted" / "s03" / NAME / "timestamp.txt").write_text(LATE, encoding="utf-8")
    graded = cli.invoke(main, ["grade", "--nbgrader", str(course), NAME])
    assert graded.exit_code == 0, graded.output
    nbgrader(course, "export", "--to", str(tmp / "grades.csv"))
    with open(tmp / "grades.csv", newline="") as fh:
        export = {row["student_id"]: row for row in csv.DictReader(fh)}
    return course, fetched, wrong_part, export


def test_each_student_fetches_their_own_variant(course):
    root, fetched, _, _ = course
    for sid, nb in fetched.items():
        own = nbformat.read(root / "scalegrade" / NAME / "release" / sid / "hw1.ipynb", 4)
        assert nb.cells == own.cells
    given = {
        sid: [c.source for c in nb.cells if c.metadata.nbgrader.grade_id.endswith("-given")]
        for sid, nb in fetched.items()
    }
    assert given["s01"] and given["s01"] != given["s02"]


def test_export_lists_scalegrades_scores(course):
    root, _, wrong_part, export = course
    key = json.loads((root / "scalegrade" / NAME / "keys" / "s01.json").read_text())
    free = sum(r["points"] for q in key["questions"] for r in q["free_response"])
    total = key["points"]
    honest, mistaken = export["s01"], export["s02"]
    assert float(honest["max_score"]) == pytest.approx(total)
    # free-response parts wait for a person: everything else is earned by the honest one
    assert float(honest["score"]) == pytest.approx(total - free)
    assert float(mistaken["score"]) == pytest.approx(total - free - wrong_part.points)
    assert honest["email"] == "s01@uni.example"
    # ScaleGrade's late policy is nbgrader's late_submission_penalty, in points
    late = export["s03"]
    assert float(late["raw_score"]) == pytest.approx(total - free)
    assert float(late["late_submission_penalty"]) == pytest.approx(0.2 * (total - free))
    assert float(late["score"]) == pytest.approx(0.8 * (total - free))
    assert float(honest["late_submission_penalty"] or 0) == 0


def test_gradebook_has_autograded_and_manual_parts_for_formgrader(course):
    root, fetched, wrong_part, _ = course
    parts = _parts(fetched["s02"])
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE_ID) as gb:
        sub = gb.find_submission(NAME, "s02")
        grades = {g.name: g for g in sub.notebooks[0].grades}
        assert set(grades) == set(parts)
        for gid, cell in parts.items():
            g = grades[gid]
            if cell.metadata.scalegrade.kind == "free_response":
                assert g.needs_manual_grade and g.auto_score is None
            else:
                assert not g.needs_manual_grade and g.auto_score is not None
        wrong = next(
            g
            for gid, g in grades.items()
            if parts[gid].metadata.scalegrade.answer == wrong_part.answer
            and parts[gid].metadata.scalegrade.question == wrong_part.question
        )
        assert wrong.auto_score == 0
        assert sub.needs_manual_grade
    shown = nbformat.read(root / "autograded" / "s02" / NAME / "hw1.ipynb", 4)
    assert all(c.metadata.nbgrader.grade for c in _parts(shown).values())
    # what the instructor keeps is not in the exchange
    assert not list((root.parent / "exchange").rglob("*.json"))


def test_variants_folder_is_not_listable_and_grading_again_keeps_a_persons_score(course):
    root, fetched, _, export = course
    variants = root.parent / "exchange" / COURSE_ID / "variants" / NAME
    assert variants.stat().st_mode & 0o777 == 0o711
    free = next(
        gid
        for gid, c in _parts(fetched["s01"]).items()
        if c.metadata.scalegrade.kind == "free_response"
    )
    url = f"sqlite:///{root / 'gradebook.db'}"
    with Gradebook(url, COURSE_ID) as gb:
        gb.find_grade(free, "hw1", NAME, "s01").manual_score = 1.0  # a TA, in formgrader
        gb.db.commit()
    again = CliRunner().invoke(main, ["grade", "--nbgrader", str(root), NAME, "--regrade"])
    assert again.exit_code == 0, again.output
    with Gradebook(url, COURSE_ID) as gb:
        grade = gb.find_grade(free, "hw1", NAME, "s01")
        assert grade.manual_score == 1.0 and not grade.needs_manual_grade
        assert gb.find_submission(NAME, "s01").score == pytest.approx(
            float(export["s01"]["score"]) + 1.0
        )
