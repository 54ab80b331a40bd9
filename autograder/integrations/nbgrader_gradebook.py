"""Grade an nbgrader course's submissions with ScaleGrade and record them in its gradebook.

``scalegrade grade --nbgrader COURSE NAME`` reads, in the nbgrader course folder COURSE::

    submitted/<student>/NAME/<notebook>.ipynb      what `nbgrader collect` gathered
    scalegrade/NAME/keys/                          what `scalegrade generate` wrote
    scalegrade/NAME/release/<student>/             the variants (their cells name the parts)

grades every submission in ScaleGrade's sandbox (:func:`autograder.semester.batch.grade_batch`,
results and feedback in ``scalegrade/NAME/grades/``) and writes nbgrader's gradebook
(``gradebook.db``, or ``db_url``): per student a submission whose grade cells are the
notebook's parts — an autograded part's ``auto_score``, a free-response part left for
a person (``needs_manual_grade``) — and ``autograded/<student>/NAME/`` holds the
notebook with those cells marked as grade cells, so formgrader shows each part's score
and the free-response parts to grade.  ``nbgrader export`` then lists the totals.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.api import Gradebook, MissingEntry
from traitlets.config.loader import PyFileConfigLoader

from autograder.grading.keys import Keys
from autograder.grading.submission import Runner
from autograder.semester.batch import Summary, grade_batch
from contract import KeyFileError


@dataclass(frozen=True)
class Cell:
    grade_id: str
    cell_type: str  # code | markdown
    points: float  # 0 for a cell nothing is graded in
    kind: str  # answer | code | free_response | "" (a solution cell that is not a part)


@dataclass(frozen=True)
class CourseLayout:
    course: Path
    name: str  # the assignment's name in nbgrader

    @property
    def root(self) -> Path:
        return self.course / "scalegrade" / self.name

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def release(self) -> Path:
        return self.root / "release"

    @property
    def grades(self) -> Path:
        return self.root / "grades"

    @property
    def submitted(self) -> Path:
        return self.course / "submitted"

    @property
    def autograded(self) -> Path:
        return self.course / "autograded"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{(self.course / 'gradebook.db').resolve()}"


def notebook_cells(nb: nbformat.NotebookNode) -> dict[tuple[str, str], Cell]:
    """(question, part) -> the cell; solution cells that are no part are keyed ("", id)."""
    cells: dict[tuple[str, str], Cell] = {}
    for cell in nb.cells:
        nbg = cell.metadata.get("nbgrader", {})
        part = cell.metadata.get("scalegrade")
        if not nbg.get("solution") and not nbg.get("grade"):
            continue
        gid = nbg["grade_id"]
        if part:
            cells[(part["question"], part["answer"])] = Cell(
                gid, cell.cell_type, float(part["points"]), part["kind"]
            )
        else:
            cells[("", gid)] = Cell(gid, cell.cell_type, float(nbg.get("points", 0)), "")
    return cells


def mark_grade_cells(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook with every part's cell an nbgrader grade cell (formgrader's view)."""
    for cell in nb.cells:
        part = cell.metadata.get("scalegrade")
        nbg = cell.metadata.get("nbgrader")
        if part and nbg is not None:
            nbg["grade"] = True
            nbg["points"] = float(part["points"])
    return nb


def nbgrader_config(course: Path) -> dict[str, str]:
    """``CourseDirectory.course_id`` and ``.db_url`` from ``COURSE/nbgrader_config.py``."""
    path = course / "nbgrader_config.py"
    if not path.is_file():
        return {}
    cfg = PyFileConfigLoader(path.name, path=str(course)).load_config()
    coursedir = cfg.get("CourseDirectory", {})
    return {k: str(coursedir[k]) for k in ("course_id", "db_url") if k in coursedir}


def _timestamp(folder: Path) -> str | None:
    path = folder / "timestamp.txt"
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def alembic_on_path() -> None:
    """Put this interpreter's scripts folder on PATH when ``alembic`` is not found there.

    nbgrader migrates its database by running the ``alembic`` command, which is installed
    beside this interpreter; a venv's ``bin/`` is not on PATH when ScaleGrade runs through
    ``make``, pipx or an absolute path.
    """
    scripts = os.path.dirname(sys.executable)
    if shutil.which("alembic") is None and shutil.which("alembic", path=scripts):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


def grade_course(
    course: Path,
    name: str,
    *,
    sandbox: Runner,
    db_url: str | None = None,
    course_id: str | None = None,
    jobs: int = 2,
    reveal: bool | None = None,
    regrade: bool = False,
    on_done: Any = None,
    **late_input: Any,
) -> Summary:
    """Grade ``COURSE/submitted/*/NAME`` and record the grades in nbgrader's gradebook.

    ``late_input``: the submission-time manifest and extensions, as
    :func:`autograder.semester.batch.grade_batch` takes them; each submission's time is otherwise
    its ``timestamp.txt``, and its late penalty (ScaleGrade's policy) is the notebook's
    ``late_submission_penalty`` in nbgrader's gradebook, in points."""
    lay = CourseLayout(course.resolve(), name)
    keys = Keys(lay.keys)
    info = keys.release
    notebook = info.notebook
    student_keys = keys.all()
    first = lay.release / info.students[0] / notebook
    cells = notebook_cells(nbformat.read(first, as_version=4))
    submitted = {
        d.parent.name: d
        for d in sorted(lay.submitted.glob(f"*/{name}"))
        if d.is_dir()  # a student not on the roster is graded 0 with "no key" as the error
    }
    # grade_batch reads SUBMISSIONS/<student>/<notebook>: a folder of links to nbgrader's
    with tempfile.TemporaryDirectory(prefix=".scalegrade-", dir=lay.root) as tmp:
        for student, folder in submitted.items():
            os.symlink(folder, Path(tmp) / student)
        summary = grade_batch(
            keys,
            Path(tmp),
            lay.grades,
            sandbox=sandbox,
            jobs=jobs,
            reveal=reveal,
            regrade=regrade,
            on_done=on_done,
            **late_input,
        )
    nb_name = Path(notebook).stem
    config = nbgrader_config(lay.course)
    db_url = db_url or config.get("db_url") or lay.db_url
    course_id = course_id or config.get("course_id") or "default_course"
    alembic_on_path()
    with Gradebook(db_url, course_id) as gb:
        gb.update_or_create_assignment(name, **({"duedate": info.due} if info.due else {}))
        gb.update_or_create_notebook(nb_name, name)
        for cell in cells.values():
            if cell.kind:
                gb.update_or_create_grade_cell(
                    cell.grade_id, nb_name, name, max_score=cell.points, cell_type=cell.cell_type
                )
            gb.update_or_create_solution_cell(cell.grade_id, nb_name, name)
        for result in summary.results:
            sid = result["student_id"]
            if sid not in submitted:
                continue
            k = student_keys.get(sid)
            first_name, _, last_name = (k.student.name if k else "").partition(" ")
            gb.update_or_create_student(
                sid,
                first_name=first_name or None,
                last_name=last_name or None,
                email=k.student.email if k else None,
            )
            stamp = _timestamp(submitted[sid])
            try:
                gb.find_submission(name, sid)
            except MissingEntry:
                with gb.db.no_autoflush:  # nbgrader's mirroring otherwise warns mid-build
                    gb.add_submission(name, sid, **({"timestamp": stamp} if stamp else {}))
            for graded in result["parts"]:
                verdict = graded["verdict"]
                cell = cells.get((graded["question"], verdict["part"]))
                if cell is None:
                    raise KeyFileError(
                        f"{first}: no cell for part {verdict['part']!r} of {graded['question']}"
                    )
                grade = gb.find_grade(cell.grade_id, nb_name, name, sid)
                # a person's manual_score (formgrader) is kept over a regrade
                if verdict["score"] is None:  # free response: a person grades it
                    grade.auto_score = None
                    grade.needs_manual_grade = grade.manual_score is None
                else:
                    grade.auto_score = float(verdict["score"])
                    grade.needs_manual_grade = False
                comment = gb.find_comment(cell.grade_id, nb_name, name, sid)
                comment.auto_comment = verdict["feedback"] or None
            lost = result.get("earned", result["score"]) - result["score"]
            gb.find_submission_notebook(nb_name, name, sid).late_submission_penalty = (
                lost if lost > 0 else None
            )
            gb.db.commit()
            target = lay.autograded / sid / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(submitted[sid], target)
            nb_path = target / notebook
            if nb_path.is_file():
                try:
                    nb = nbformat.read(nb_path, as_version=4)
                except (OSError, ValueError, json.JSONDecodeError):
                    continue  # unreadable: formgrader shows the raw file
                nbformat.write(mark_grade_cells(nb), nb_path)
    return summary
