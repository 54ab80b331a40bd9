"""A served course: the released assignments of a folder, as `scalegrade generate` wrote them.

``COURSE/<folder>/keys/assignment.json`` makes ``<folder>`` an assignment: its keys (never
served), and ``COURSE/<folder>/release/<student>/<notebook>``, each student's current
notebook (a reseed writes the new one there).  Each is recorded in the gradebook as
`scalegrade grade` records it, with its results folder under the platform's data folder,
so `scalegrade late`, `marks`, `regrade` and the CSV exports work on a served course as
on any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autograder.grading.keys import Keys
from autograder.semester.gradebook import Gradebook
from contract import KeyFileError, Release


class CourseError(ValueError):
    """A course folder that cannot be served: which folder, and what to do."""


@dataclass(frozen=True)
class Served:
    """One released assignment of the course."""

    folder: Path  # COURSE/<folder>
    keys: Keys
    stamp: tuple = ()  # of its keys' files when read (:func:`keys_stamp`)

    @property
    def release(self) -> Release:
        return self.keys.release

    @property
    def name(self) -> str:
        return self.release.assignment

    @property
    def slug(self) -> str:
        """The assignment's name in URLs and file names: tdlsm/hw1 -> tdlsm-hw1."""
        return slug(self.name)

    def notebook(self, student_id: str) -> Path | None:
        """The student's current released notebook, if there is one."""
        path = self.folder / "release" / student_id / self.release.notebook
        return path if student_id in self.keys and path.is_file() else None


def keys_stamp(keys_dir: Path) -> tuple:
    """What changes when `scalegrade rekey` or `reseed` writes a keys folder: each file's
    name, size and modification time."""
    return tuple(
        sorted((p.name, st.st_size, st.st_mtime_ns) for p in keys_dir.iterdir()
               if p.is_file() and (st := p.stat())))  # fmt: skip


def _read(folder: Path) -> Served:
    keys_dir = folder / "keys"
    stamp = keys_stamp(keys_dir)
    return Served(folder, Keys(keys_dir), stamp)


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")


class Course:
    def __init__(self, root: Path):
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise CourseError(f"{self.root}: no such folder (the course's released assignments)")
        found: dict[str, Served] = {}
        problems = []
        for marker in sorted(self.root.glob("*/keys/assignment.json")):
            folder = marker.parent.parent
            try:
                served = _read(folder)
            except KeyFileError as err:
                problems.append(f"{folder}: {err}")
                continue
            if served.slug in {s.slug for s in found.values()}:
                problems.append(f"{folder}: a second release of {served.name}; keep one")
                continue
            found[served.name] = served
        if problems:
            raise CourseError("\n".join(problems))
        if not found:
            raise CourseError(
                f"{self.root}: no released assignment (a folder with keys/assignment.json: "
                "`scalegrade generate ASSIGNMENT --out COURSE/NAME` writes one)"
            )
        self.assignments = found

    def refresh(self) -> list[str]:
        """Read again the assignments whose keys changed since (a rekey, a reseed): the
        names read again.  A keys folder that no longer reads keeps what was read before,
        and the error is raised once the others are read."""
        changed, problems = [], []
        for name, served in list(self.assignments.items()):
            try:
                if keys_stamp(served.folder / "keys") == served.stamp:
                    continue
                self.assignments[name] = _read(served.folder)
                changed.append(name)
            except (OSError, KeyFileError) as err:
                problems.append(f"{served.folder}: {err}")
        if problems:
            raise CourseError("\n".join(problems))
        return changed

    def by_slug(self, name: str) -> Served | None:
        return next((s for s in self.assignments.values() if s.slug == name), None)

    def students(self) -> set[str]:
        return {sid for s in self.assignments.values() for sid in s.release.students}

    @property
    def preload(self) -> tuple[str, ...]:
        """What every assignment's checks need imported in the warm sandbox."""
        return tuple(dict.fromkeys(m for s in self.assignments.values() for m in s.keys.preload))

    def results_dir(self, data: Path, served: Served) -> Path:
        return Path(data) / "results" / served.slug

    def record(self, book: Gradebook, data: Path) -> None:
        """Record every assignment's release in the gradebook (its deadline and policy as
        released; the instructor's changes since are kept over them)."""
        for served in self.assignments.values():
            book.record_release(
                served.release, served.keys.folder, self.results_dir(data, served), reveal=None
            )
