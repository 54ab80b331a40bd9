"""Grade a folder of submissions: sandbox each, compare, record, report.

``SUBMISSIONS/<student_id>/`` holds the student's notebook (``SUBMISSIONS/<id>.ipynb``
works too).  Submissions run in parallel; each result is written atomically and recorded
in the gradebook as soon as it is graded, so a killed grader loses nothing, and a rerun
skips what is unchanged.  One broken submission is that submission's recorded error.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from autograder import outputs
from autograder.grade import StudentResult
from autograder.gradebook import Gradebook, result_to_json
from autograder.keys import Keys
from autograder.submission import Runner, content_hash, grade_one
from contract import Policy


@dataclass(frozen=True)
class Summary:
    graded: int
    skipped: int  # unchanged since the last run
    errors: int  # could not be run (recorded, scored 0)
    seconds: float
    out: Path
    results: list[dict]


def find_submissions(root: Path, notebook: str) -> dict[str, Path | None]:
    """Student id -> their notebook (None when the folder holds no notebook)."""
    found: dict[str, Path | None] = {}
    for entry in sorted(root.iterdir()):
        if entry.is_dir():
            preferred = entry / notebook
            notebooks = sorted(entry.glob("*.ipynb"))
            found[entry.name] = preferred if preferred.is_file() else (notebooks or [None])[0]
        elif entry.suffix == ".ipynb":
            found[entry.stem] = entry
    return found


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def reveal_now(due: str | None, policy: Policy) -> bool:
    """Expected values and worked solutions are shown after the due date, by policy."""
    if not policy.solutions_after_due or due is None:
        return False
    deadline = datetime.fromisoformat(due)
    if deadline.tzinfo is None:  # a due date without a zone is read as UTC
        deadline = deadline.replace(tzinfo=UTC)
    return datetime.now(UTC) >= deadline


def grade_batch(
    keys: Keys,
    submissions: Path,
    out: Path,
    *,
    sandbox: Runner,
    db_url: str | None = None,
    jobs: int = 2,
    reveal: bool | None = None,
    regrade: bool = False,
    on_done: Callable[[StudentResult | None], None] | None = None,
) -> Summary:
    start = time.perf_counter()
    info = keys.release
    all_keys = keys.all()
    reveal = reveal_now(info.due, info.policy) if reveal is None else reveal
    out.mkdir(parents=True, exist_ok=True)
    book = Gradebook(db_url or f"sqlite:///{(out / 'gradebook.sqlite').resolve()}")
    found = find_submissions(submissions, info.notebook)
    counts = {"graded": 0, "skipped": 0, "errors": 0}
    lock = threading.Lock()  # counts and gradebook writes, from the worker threads

    def one(student_id: str, notebook: Path | None) -> None:
        key = all_keys.get(student_id)
        if key is None:
            result = StudentResult(
                student_id,
                0.0,
                0.0,
                [],
                error=f"no key for student {student_id!r} in {keys.folder}",
            )
        else:
            if (
                notebook is not None
                and not regrade
                and book.unchanged(info.assignment, student_id, content_hash(notebook))
            ):
                with lock:
                    counts["skipped"] += 1
                if on_done:
                    on_done(None)
                return
            try:
                result = grade_one(
                    key, notebook, keys=keys, runner=sandbox, reveal=reveal, others=all_keys
                )
            except Exception as err:  # noqa: BLE001 - one submission's trouble, not the batch's
                result = StudentResult(
                    student_id,
                    0.0,
                    key.points,
                    [],
                    error=f"the grader failed on this submission: {type(err).__name__}: {err}",
                )
        doc = result_to_json(result)
        target = out / student_id
        _write_atomic(
            target / "results.json",
            json.dumps(outputs.gradescope(doc, reveal=reveal), indent=1) + "\n",
        )
        solutions = {q.id: q.solution_html for q in key.questions} if (key and reveal) else None
        _write_atomic(
            target / "feedback.html",
            outputs.feedback_html(doc, title=f"{info.title} — {student_id}", solutions=solutions),
        )
        with lock:
            book.record(info.assignment, result, doc)
            counts["errors" if result.error else "graded"] += 1
        if on_done:
            on_done(result)

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for future in [pool.submit(one, sid, nb) for sid, nb in found.items()]:
                future.result()
        results = book.results(info.assignment)
        roster = {
            sid: {"name": k.student.name, "email": k.student.email} for sid, k in all_keys.items()
        }
        signals = {r["student_id"]: r["copy_signals"] for r in results if r["copy_signals"]}
        _write_atomic(out / "summary.csv", outputs.summary_csv(results))
        _write_atomic(out / "canvas.csv", outputs.canvas_csv(results, roster, info.title))
        _write_atomic(out / "moodle.csv", outputs.moodle_csv(results, roster, info.title))
        _write_atomic(
            out / "report.html",
            outputs.instructor_report(results, title=info.title, signals=signals),
        )
    finally:
        book.close()
    return Summary(
        counts["graded"],
        counts["skipped"],
        counts["errors"],
        time.perf_counter() - start,
        out,
        results,
    )
