"""Canvas and Moodle gradebooks: CSV exports matched on the roster, and reading an LMS export.

Canvas, as its gradebook importer reads a CSV (``lib/gradebook_importer.rb``): the header
``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per assignment, named
``Title`` (a new assignment) or ``Title (123)`` (Canvas assignment 123); the row whose first
cell holds ``Points Possible`` gives each column's points.  A student is found by ``ID`` (the
Canvas user id), else ``SIS User ID``, else ``SIS Login ID``, else by name.  Canvas's own
export has the same columns, a ``Points Possible`` row (and sometimes a ``Manual Posting``
row) and read-only totals (``Current Score``, ``Final Points``, ...).

Moodle, as its CSV grade export writes (``grade/export/lib.php``) and its CSV import reads:
the user profile fields ``First name, Last name, ID number, Institution, Department, Email
address``, then one column per grade item, ``Item (Real)`` (``Assignment: Item (Real)`` for
an activity), then ``Last downloaded from this course``.  The import maps rows from
``Email address`` (to the user's email) or ``ID number`` (to the user's ID number).

Exports here fill both identities from the roster (the student id and the email), so either
mapping works; per-question columns are optional.  Reading an LMS export back matches its
rows to the roster (:func:`match`) and lets an export reuse the LMS's own user ids,
sections and assignment columns.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from contract import Key

Result = dict[str, Any]  # a result document, as the gradebook stores it
Roster = Mapping[str, Mapping[str, str]]  # student id -> {"name": ..., "email": ...}

CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_OPTIONAL_IDENTITY = ("Integration ID", "Root Account")
CANVAS_READ_ONLY = (  # Canvas's computed totals, ignored on import (also "Unposted ...")
    "Current Score",
    "Current Points",
    "Current Grade",
    "Final Score",
    "Final Points",
    "Final Grade",
    "Override Score",
    "Override Grade",
    "Override Status",
)
POINTS_POSSIBLE = "Points Possible"
MOODLE_IDENTITY = (
    "First name",
    "Last name",
    "ID number",
    "Institution",
    "Department",
    "Email address",
)
MOODLE_EXPORTED = "Last downloaded from this course"
MOODLE_DISPLAY_TYPES = ("Real", "Percentage", "Letter")
_MOODLE_COLUMN = re.compile(r"^(?P<name>.*) \((?P<kind>Real|Percentage|Letter|Feedback)\)$")
_CANVAS_TITLE_ID = re.compile(r"^(?P<title>.*?)\s+\((?P<id>\d+)\)$")


class LmsError(ValueError):
    """An LMS file that cannot be read; the message names the file and what is expected."""


# --- reading an LMS export -----------------------------------------------------------


@dataclass(frozen=True)
class LmsRow:
    """One student row of an LMS file: identity columns and grade cells, as written there."""

    identity: dict[str, str]
    grades: dict[str, str]

    def score(self, column: str) -> float | None:
        """The grade of ``column`` as a number (None when blank, ``-`` or excused)."""
        raw = self.grades.get(column, "").strip()
        if raw in ("", "-", "EX", "ex"):
            return None
        try:
            return float(raw.rstrip("%"))
        except ValueError:
            return None


@dataclass(frozen=True)
class LmsExport:
    """A Canvas or Moodle gradebook file read back."""

    lms: str  # "canvas" | "moodle"
    columns: tuple[str, ...]  # the grade columns, as headed in the file
    points_possible: dict[str, str]  # Canvas only: column -> points (or "(read only)")
    rows: tuple[LmsRow, ...]

    def column_for(self, title: str) -> str | None:
        """The file's column for an assignment titled ``title`` (``Title (123)`` in Canvas,
        ``Title (Real)`` or ``Assignment: Title (Real)`` in Moodle)."""
        for col in self.columns:
            name = column_title(self.lms, col)
            if name == title or (self.lms == "moodle" and name.endswith(f": {title}")):
                return col
        return None


def column_title(lms: str, header: str) -> str:
    """An assignment's title from its column header (LMS ids and display types removed)."""
    if lms == "canvas":
        m = _CANVAS_TITLE_ID.match(header)
        return m["title"] if m else header
    m = _MOODLE_COLUMN.match(header)
    return m["name"] if m else header  # "Assignment: Homework 1" for an activity


def canvas_assignment_id(header: str) -> str | None:
    """The Canvas assignment id in a column header ``Title (123)``, if any."""
    m = _CANVAS_TITLE_ID.match(header)
    return m["id"] if m else None


def _rows(text: str, where: str) -> list[list[str]]:
    if text.startswith("\ufeff"):
        text = text[1:]
    sample = text[:4096]
    # Canvas writes ';' where the decimal separator is a comma (its importer reads both)
    delimiter = ";" if sample.count(";") > sample.count(",") else ","
    try:
        return [row for row in csv.reader(io.StringIO(text), delimiter=delimiter)]
    except csv.Error as err:
        raise LmsError(f"{where}: not a CSV file ({err})") from None


def detect(header: Sequence[str]) -> str | None:
    """``canvas``, ``moodle`` or None, from a header row."""
    cells = [h.strip() for h in header]
    if len(cells) > 3 and "Student" in cells[0] and "ID" in cells[1]:
        return "canvas"
    if "Email address" in cells or "ID number" in cells:
        return "moodle"
    return None


def read_canvas(text: str, where: str = "Canvas CSV") -> LmsExport:
    rows = _rows(text, where)
    if not rows or detect(rows[0]) != "canvas":
        raise LmsError(
            f"{where}: not a Canvas gradebook CSV (its header must start with "
            f"{', '.join(CANVAS_IDENTITY)})"
        )
    header = [h.strip() for h in rows[0]]
    identity = [h for h in header if h in CANVAS_IDENTITY or h in CANVAS_OPTIONAL_IDENTITY]
    if "Section" not in identity:
        raise LmsError(f"{where}: line 1: no Section column (Canvas's importer requires it)")
    columns = [
        h
        for h in header
        if h
        and h not in identity
        and not any(h == r or h.startswith(f"Unposted {r}") for r in CANVAS_READ_ONLY)
    ]
    points: dict[str, str] = {}
    students = []
    for row in rows[1:]:
        cells = dict(zip(header, (c.strip() for c in row), strict=False))
        if not any(cells.values()):
            continue
        if POINTS_POSSIBLE in row[0]:
            points = {c: cells.get(c, "") for c in columns}
            continue
        if all(re.fullmatch(r"(Muted|Manual Posting.*)?", v, re.I) for v in cells.values()):
            continue  # Canvas's posting-policy row
        students.append(
            LmsRow({h: cells.get(h, "") for h in identity}, {c: cells.get(c, "") for c in columns})
        )
    return LmsExport("canvas", tuple(columns), points, tuple(students))


def read_moodle(text: str, where: str = "Moodle CSV") -> LmsExport:
    rows = _rows(text, where)
    if not rows or detect(rows[0]) != "moodle":
        raise LmsError(
            f"{where}: not a Moodle grade export (its header must hold 'Email address' or "
            "'ID number')"
        )
    header = [h.strip() for h in rows[0]]
    columns = [
        h for h in header if (m := _MOODLE_COLUMN.match(h)) and m["kind"] in MOODLE_DISPLAY_TYPES
    ]
    identity = [h for h in header if h and h != MOODLE_EXPORTED and not _MOODLE_COLUMN.match(h)]
    students = []
    for row in rows[1:]:
        cells = dict(zip(header, (c.strip() for c in row), strict=False))
        if not any(cells.values()):
            continue
        students.append(
            LmsRow({h: cells.get(h, "") for h in identity}, {c: cells.get(c, "") for c in columns})
        )
    return LmsExport("moodle", tuple(columns), {}, tuple(students))


def read(path: Path) -> LmsExport:
    """A Canvas or Moodle gradebook CSV, recognised by its header."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise LmsError(f"{path}: not UTF-8 (byte {err.start}); export the CSV as UTF-8") from None
    except OSError as err:
        raise LmsError(f"{path}: cannot read ({err.strerror})") from None
    rows = _rows(text, str(path))
    kind = detect(rows[0]) if rows else None
    if kind == "canvas":
        return read_canvas(text, str(path))
    if kind == "moodle":
        return read_moodle(text, str(path))
    raise LmsError(
        f"{path}: neither a Canvas gradebook CSV (header Student, ID, SIS User ID, SIS Login "
        "ID, Section, ...) nor a Moodle grade export (header with Email address or ID number)"
    )


# --- matching rows to the roster -----------------------------------------------------


def roster(keys: Mapping[str, Key]) -> dict[str, dict[str, str]]:
    """The roster the exports fill their identities from: each student's name and email,
    as the released keys hold them (``Keys.all()``, ``contract.read_keys``)."""
    return {sid: {"name": k.student.name, "email": k.student.email} for sid, k in keys.items()}


@dataclass(frozen=True)
class Match:
    """An LMS file's rows against the roster."""

    rows: dict[str, LmsRow]  # roster student id -> its row in the LMS file
    how: dict[str, str]  # roster student id -> the column that matched it
    unmatched: tuple[LmsRow, ...] = ()  # rows for nobody on the roster
    missing: tuple[str, ...] = ()  # roster ids without a row
    ambiguous: tuple[str, ...] = field(default=())  # rows that match several students


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _names(name: str) -> set[str]:
    """A roster name and Canvas's sortable form of it ("Lima, Ana")."""
    name = " ".join(name.split())
    first, _, last = name.rpartition(" ")
    return {_norm(name), _norm(f"{last}, {first}")} if first else {_norm(name)}


def match(export: LmsExport, roster: Roster) -> Match:
    """Each LMS row's roster student: by student id (SIS User ID / ID number), else by email
    (SIS Login ID / Email address, case-insensitive), else (Canvas) by name."""
    by_id = {_norm(sid): sid for sid in roster}
    by_email = defaultdict(list)
    by_name = defaultdict(list)
    for sid, s in roster.items():
        if s.get("email"):
            by_email[_norm(s["email"])].append(sid)
        by_name_keys = _names(s.get("name", "")) if s.get("name") else set()
        for key in by_name_keys:
            by_name[key].append(sid)
    if export.lms == "canvas":
        keys = (("SIS User ID", by_id), ("SIS Login ID", by_id), ("SIS Login ID", by_email))
    else:
        keys = (("ID number", by_id), ("Email address", by_email))
    rows: dict[str, LmsRow] = {}
    how: dict[str, str] = {}
    unmatched, ambiguous = [], []
    for row in export.rows:
        found: list[str] = []
        column = ""
        for column, index in keys:
            value = _norm(row.identity.get(column, ""))
            hit = index.get(value) if value else None
            if hit:
                found = [hit] if isinstance(hit, str) else list(hit)
                break
        if not found and export.lms == "canvas" and row.identity.get("Student"):
            column = "Student"
            found = by_name.get(_norm(row.identity["Student"]), [])
        if len(found) > 1:
            ambiguous.append(f"{column} {row.identity.get(column, '')!r}: {', '.join(found)}")
            continue
        if not found or found[0] in rows:
            unmatched.append(row)
            continue
        rows[found[0]] = row
        how[found[0]] = column
    missing = tuple(sid for sid in roster if sid not in rows)
    return Match(rows, how, tuple(unmatched), missing, tuple(ambiguous))


# --- writing -------------------------------------------------------------------------


def _num(x: float) -> str:
    return f"{x:g}"


def question_scores(result: Result) -> dict[int, tuple[float, float]]:
    """Question index -> (score, points) of one result (pending parts score 0)."""
    out: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for g in result["parts"]:
        out[g["index"]][0] += g["verdict"]["score"] or 0.0
        out[g["index"]][1] += g["verdict"]["points"]
    return {i: (s, p) for i, (s, p) in sorted(out.items())}


def _columns(
    results: Sequence[Result], column: str, per_question: bool
) -> list[tuple[str, float, Any]]:
    """(header, points, how to read a result) for each grade column."""
    cols: list[tuple[str, float, Any]] = [
        (column, results[0]["max_score"] if results else 0.0, lambda r: r["score"])
    ]
    if per_question and results:
        for i, (_s, points) in question_scores(results[0]).items():
            cols.append(
                (f"{column}: Q{i}", points, lambda r, i=i: question_scores(r).get(i, (0.0,))[0])
            )
    return cols


def canvas_csv(
    results: Sequence[Result],
    roster: Roster,
    column: str,
    *,
    per_question: bool = False,
    existing: LmsExport | None = None,
) -> str:
    """Canvas gradebook import: Student, ID, SIS User ID, SIS Login ID, Section, <column>.

    The SIS User ID is the roster's student id and the SIS Login ID its email, so Canvas
    finds each student by either.  With ``existing`` (Canvas's own export of the course,
    read with :func:`read_canvas`), a matched student's row carries Canvas's own identity
    cells (user ``ID``, SIS ids, ``Section``), and ``column`` is written as Canvas heads
    that assignment (``Title (123)``) so the import updates it rather than creating one.
    ``per_question`` adds one column per question (each a new Canvas assignment).
    """
    known = match(existing, roster).rows if existing else {}
    cols = _columns(results, column, per_question)
    if existing:
        cols = [(existing.column_for(h) or h, p, f) for h, p, f in cols]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([*CANVAS_IDENTITY, *(h for h, _p, _f in cols)])
    w.writerow([POINTS_POSSIBLE, "", "", "", "", *(_num(p) for _h, p, _f in cols)])
    for r in results:
        s = roster.get(r["student_id"], {})
        ident = {
            "Student": s.get("name", ""),
            "SIS User ID": r["student_id"],
            "SIS Login ID": s.get("email", ""),
        }
        row = known.get(r["student_id"])
        if row:  # Canvas's own identities win: they are what its importer looks up
            ident |= {k: v for k, v in row.identity.items() if v}
        w.writerow([*(ident.get(h, "") for h in CANVAS_IDENTITY), *(_num(f(r)) for *_x, f in cols)])
    return out.getvalue()


def split_name(name: str) -> tuple[str, str]:
    """(first name, last name) of a roster name: the last word is the last name."""
    first, _, last = " ".join(name.split()).rpartition(" ")
    return (first, last) if first else (last, "")


def moodle_csv(
    results: Sequence[Result],
    roster: Roster,
    column: str,
    *,
    per_question: bool = False,
    existing: LmsExport | None = None,
) -> str:
    """Moodle grade import, in the columns of Moodle's own CSV export.

    First name, Last name, ID number (the roster's student id), Institution, Department,
    Email address (the roster's email), then ``<column> (Real)`` (and ``<column>: Qn
    (Real)`` with ``per_question``).  In Moodle's import, map from "Email address" to the
    user's email, or from "ID number" to the user's ID number, and each grade column to its
    grade item.  With ``existing`` (Moodle's export, :func:`read_moodle`), a matched
    student's profile fields are Moodle's, and a matching grade column keeps its header.
    No "Last downloaded" column: Moodle would compare it with the grades' times and refuse
    the import without "force".
    """
    known = match(existing, roster).rows if existing else {}
    cols = [(f"{h} (Real)", p, f) for h, p, f in _columns(results, column, per_question)]
    if existing:
        cols = [(existing.column_for(h[: -len(" (Real)")]) or h, p, f) for h, p, f in cols]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow([*MOODLE_IDENTITY, *(h for h, _p, _f in cols)])
    for r in results:
        s = roster.get(r["student_id"], {})
        row = known.get(r["student_id"])
        first, last = split_name(s.get("name", ""))
        ident = {
            "First name": first,
            "Last name": last,
            "ID number": r["student_id"],
            "Email address": s.get("email", ""),
        }
        if row:  # Moodle's own profile fields win: they are what its import maps on
            ident |= {k: v for k, v in row.identity.items() if v}
        w.writerow([*(ident.get(h, "") for h in MOODLE_IDENTITY), *(_num(f(r)) for *_x, f in cols)])
    return out.getvalue()
