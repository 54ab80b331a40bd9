"""When a submission was submitted, from the first source that says so.

1. the instructor's manifest, ``submissions.csv`` (``student_id,submitted_at``), when
   given: it overrides everything below;
2. nbgrader's ``timestamp.txt`` beside the notebook (what ``nbgrader submit`` wrote and
   ``nbgrader collect`` kept);
3. Gradescope's ``submission_metadata.json`` ``created_at``;
4. last, the notebook file's modification time, with a warning in the report: a copy or
   an unzip may have changed it.

A time without a zone is read in the course's (:mod:`contract.times`).  A source that is
there but unreadable is skipped with a warning naming the file, never the batch's end.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from contract import times

NBGRADER_FILE = "timestamp.txt"
GRADESCOPE_FILE = "submission_metadata.json"


class ManifestError(ValueError):
    """A submissions.csv that cannot be used: one line per problem."""


@dataclass(frozen=True)
class SubmittedAt:
    at: datetime
    source: str  # "submissions.csv:3", "nbgrader timestamp.txt", ...
    warning: str | None = None


def read_manifest(path: Path, zone: str) -> dict[str, SubmittedAt]:
    """``student_id,submitted_at`` rows, by student; every problem reported at once."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except OSError as err:
        raise ManifestError(f"{path}: cannot read ({err.strerror})") from None
    reader = csv.DictReader(io.StringIO(text))
    if [h.strip() for h in reader.fieldnames or []][:2] != ["student_id", "submitted_at"]:
        raise ManifestError(f"{path}: the header must be student_id,submitted_at")
    out: dict[str, SubmittedAt] = {}
    problems = []
    for n, row in enumerate(reader, start=2):
        sid = (row.get("student_id") or "").strip()
        raw = (row.get("submitted_at") or "").strip()
        if not sid:
            problems.append(f"{path}:{n}: no student_id")
        elif sid in out:
            problems.append(f"{path}:{n}: student {sid} is also on {out[sid].source}")
        else:
            try:
                out[sid] = SubmittedAt(times.parse(raw, zone), f"{Path(path).name}:{n}")
            except times.TimeError as err:
                problems.append(f"{path}:{n}: student {sid}: {err}")
    if problems:
        raise ManifestError("\n".join(problems))
    return out


def _nbgrader(folder: Path, zone: str) -> SubmittedAt | str | None:
    path = folder / NBGRADER_FILE
    if not path.is_file():
        return None
    try:
        return SubmittedAt(times.parse(path.read_text(encoding="utf-8"), zone), "nbgrader")
    except (OSError, UnicodeDecodeError, times.TimeError) as err:
        return f"{path}: {err}"


def gradescope_time(path: Path, zone: str) -> SubmittedAt | str | None:
    """``created_at`` of a Gradescope ``submission_metadata.json`` (a warning if unreadable)."""
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))["created_at"]
        return SubmittedAt(times.parse(str(raw), zone), "Gradescope")
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"{path}: no readable created_at ({err})"


def submitted_at(
    student_id: str,
    notebook: Path | None,
    *,
    manifest: dict[str, SubmittedAt] | None,
    zone: str,
) -> SubmittedAt | None:
    """The submission time of ``student_id``'s ``notebook`` (None: nothing submitted)."""
    if manifest and student_id in manifest:
        return manifest[student_id]
    if notebook is None:
        return None
    warnings = []
    for found in (
        _nbgrader(notebook.parent, zone),
        gradescope_time(notebook.parent / GRADESCOPE_FILE, zone),
    ):
        if isinstance(found, SubmittedAt):
            return found
        if found:
            warnings.append(found)
    try:
        mtime = datetime.fromtimestamp(notebook.stat().st_mtime, UTC)
    except OSError:
        return None
    warnings.append(
        "submission time read from the file's modification time (no manifest, nbgrader "
        "timestamp or Gradescope metadata): give a submissions.csv to be sure"
    )
    return SubmittedAt(mtime, "file time", "; ".join(warnings))
