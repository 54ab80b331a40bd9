"""An nbgrader exchange that gives each student their own variant.

nbgrader's default exchange releases one folder to everyone.  These two subclasses of
its default classes release ScaleGrade's per-student notebooks instead; ``submit``,
``collect``, ``list`` and the feedback commands keep nbgrader's default classes.

In ``nbgrader_config.py``::

    exchange = "autograder.integrations.nbgrader_exchange"
    c.ExchangeFactory.release_assignment = f"{exchange}.ReleaseVariants"
    c.ExchangeFactory.fetch_assignment = f"{exchange}.FetchVariant"

Course folder (``scalegrade generate ASSIGNMENT --out COURSE/scalegrade/NAME`` writes it;
NAME is the assignment's name in nbgrader)::

    COURSE/scalegrade/NAME/release/<student>/<notebook>.ipynb   each student's variant
    COURSE/scalegrade/NAME/keys/                                 instructor only

Exchange (``nbgrader release_assignment NAME`` writes it)::

    EXCHANGE/<course>/outbound/NAME/<notebook>.ipynb       a placeholder: what `list` shows
                                                           and `submit` compares names with
    EXCHANGE/<course>/variants/NAME/<student>/<notebook>.ipynb

The ``variants`` folder is 0711 (students may enter it but not list it), each student's
folder 0755.  On a shared file system a student who guesses another id can read that
student's numbers (never an answer); give each student a private home exchange, or an
exchange with per-user permissions, when that matters.

``nbgrader fetch_assignment NAME`` copies the variant of the student nbgrader sees:
``--student`` (``CourseDirectory.student_id``) when given, else nbgrader's
``get_username()`` (the OS user; ``JUPYTERHUB_USER`` when the OS user is ``jovyan``),
which is also the id ``submit`` files the submission under.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from stat import S_IRGRP, S_IROTH, S_IRUSR, S_IWUSR, S_IXGRP, S_IXOTH, S_IXUSR

import nbformat
from nbgrader.exchange.default.fetch_assignment import ExchangeFetchAssignment
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.utils import get_username
from traitlets import Unicode

VARIANTS = "variants"  # beside outbound/ and inbound/ in the exchange's course folder
FILE_MODE = S_IRUSR | S_IWUSR | S_IRGRP | S_IROTH  # 0644
DIR_MODE = S_IRUSR | S_IWUSR | S_IXUSR | S_IRGRP | S_IXGRP | S_IROTH | S_IXOTH  # 0755
ENTER_ONLY = S_IRUSR | S_IWUSR | S_IXUSR | S_IXGRP | S_IXOTH  # 0711


def variants_root(course_dir: str | Path, assignment: str, directory: str = "scalegrade") -> Path:
    """``COURSE/scalegrade/NAME/release``: where `scalegrade generate` put the variants."""
    return Path(course_dir) / directory / assignment / "release"


def placeholder(notebook: str, assignment: str) -> nbformat.NotebookNode:
    text = (
        f"# {assignment}\n\n"
        "This assignment is personal: `nbgrader fetch_assignment` gives you your own "
        f"`{notebook}`, with your own numbers."
    )
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)])


class ReleaseVariants(ExchangeReleaseAssignment):
    """``nbgrader release_assignment NAME``: publish every student's own variant."""

    scalegrade_directory = Unicode(
        "scalegrade",
        help="Folder of the course directory holding NAME/release/<student>/ "
        "(what `scalegrade generate --out COURSE/scalegrade/NAME` wrote).",
    ).tag(config=True)

    def init_src(self) -> None:
        aid = self.coursedir.assignment_id
        src = variants_root(self.coursedir.root, aid, self.scalegrade_directory)
        students = sorted(p for p in src.glob("*") if p.is_dir()) if src.is_dir() else []
        if not students:
            self.fail(
                f"{src}: no per-student notebooks; run `scalegrade generate ASSIGNMENT "
                f"--roster ROSTER --out {src.parent}` first"
            )
        self.src_path = str(src)
        self.students = students
        self.notebooks = sorted({nb.name for s in students for nb in s.glob("*.ipynb")})

    def init_dest(self) -> None:
        super().init_dest()
        self.variants_path = os.path.join(self.course_path, VARIANTS, self.coursedir.assignment_id)

    def copy_files(self) -> None:
        aid = self.coursedir.assignment_id
        for path in (self.dest_path, self.variants_path):
            if os.path.isdir(path):
                if not self.force:
                    self.fail(f"{path}: already released; add --force to overwrite")
                shutil.rmtree(path)
        os.makedirs(self.dest_path)
        for name in self.notebooks:
            nbformat.write(placeholder(name, aid), os.path.join(self.dest_path, name))
        self.set_perms(self.dest_path, fileperms=FILE_MODE, dirperms=DIR_MODE)
        self.ensure_directory(os.path.join(self.course_path, VARIANTS), ENTER_ONLY)
        os.makedirs(self.variants_path)
        for student in self.students:
            dest = os.path.join(self.variants_path, student.name)
            self.do_copy(str(student), dest)
            self.set_perms(dest, fileperms=FILE_MODE, dirperms=DIR_MODE)
        os.chmod(self.variants_path, ENTER_ONLY)
        self.log.info(
            "Released %d personal variants as: %s %s",
            len(self.students),
            self.coursedir.course_id,
            aid,
        )


class FetchVariant(ExchangeFetchAssignment):
    """``nbgrader fetch_assignment NAME``: copy this student's own variant."""

    def init_src(self) -> None:
        super().init_src()  # course access, and the assignment is released
        student = self.coursedir.student_id
        if student in ("", "*"):
            student = get_username()
        if "*" in student or "+" in student or "/" in student:
            self.fail(f"The student ID should contain no '*', '+' nor '/'; got {student}")
        src = os.path.join(self.course_path, VARIANTS, self.coursedir.assignment_id, student)
        if not os.path.isdir(src):
            self.fail(
                f"No variant of {self.coursedir.assignment_id} for student {student!r}: "
                "ask your instructor to add you to the roster and release again"
            )
        self.src_path = src
