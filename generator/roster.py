"""Rosters: a CSV with header ``student_id,name,email``, checked before anything is written."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from contract import Student

REQUIRED = ("student_id", "name", "email")
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$")


class RosterError(ValueError):
    """A roster that cannot be used; the message names the file, line and fix."""


def read(path: Path) -> list[Student]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise RosterError(
            f"{path}: not UTF-8 (byte {err.start}); save the roster as UTF-8 CSV"
        ) from None
    except OSError as err:
        raise RosterError(f"{path}: cannot read the roster ({err.strerror})") from None
    return parse(text, str(path))


def parse(text: str, where: str = "roster") -> list[Student]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise RosterError(
            f"{where}: line 1: header {','.join(header) or '(empty)'} lacks {', '.join(missing)} "
            f"(the first line must be: {','.join(REQUIRED)})"
        )
    students, seen = [], {}
    for line, row in enumerate(reader, start=2):
        row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        sid = row["student_id"]
        if not sid:
            raise RosterError(f"{where}: line {line}: empty student_id")
        if ".." in sid or not _SAFE_ID.match(sid):
            raise RosterError(
                f"{where}: line {line}: student_id {sid!r} is not a safe folder name "
                "(letters, digits and . _ @ + - only, no '..', no '/')"
            )
        if sid in seen:
            raise RosterError(f"{where}: line {line}: student_id {sid!r} repeats line {seen[sid]}")
        seen[sid] = line
        students.append(Student(id=sid, name=row["name"], email=row["email"]))
    if not students:
        raise RosterError(f"{where}: no students (only a header)")
    return students
