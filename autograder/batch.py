"""Grade a folder of submissions: sandbox each, compare, record, report.

``SUBMISSIONS/<student_id>/`` holds the student's notebook (``SUBMISSIONS/<id>.ipynb``
works too).  Submissions run in parallel; each result is written atomically and recorded
in the gradebook as soon as it is graded, so a killed grader loses nothing, and a rerun
skips what is unchanged.  One broken submission is that submission's recorded error.
"""

from __future__ import annotations

import hashlib
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
from typing import Protocol

from autograder import key as keys
from autograder import outputs
from autograder.grade import StudentResult, copy_signals, grade_harvest, plan_for
from autograder.gradebook import Gradebook, result_to_json
from autograder.sandbox import Outcome, Plan


class Runner(Protocol):
    """Runs one submission in the sandbox: a local ``Sandbox``, or a
    ``distributed.DaskRunner`` that runs the same sandbox on a Dask cluster's workers."""

    def run(self, notebook: Path, plan: Plan) -> Outcome: ...


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


def reveal_now(due: str | None, policy: dict) -> bool:
    """Expected values and worked solutions are shown after the due date, by policy."""
    if not policy.get("solutions_after_due", True) or due is None:
        return False
    deadline = datetime.fromisoformat(due)
    if deadline.tzinfo is None:  # a due date without a zone is read as UTC
        deadline = deadline.replace(tzinfo=UTC)
    return datetime.now(UTC) >= deadline


def grade_batch(
    keys_dir: Path,
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
    info = keys.load_info(keys_dir)
    all_keys = keys.load_all(keys_dir)
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
                student_id, 0.0, 0.0, [], error=f"no key for student {student_id!r} in {keys_dir}"
            )
        elif notebook is None:
            result = grade_harvest(
                key,
                None,
                policy=info.policy,
                reveal=reveal,
                error=f"no .ipynb in {submissions / student_id}",
            )
        else:
            content = notebook.read_bytes()
            digest = hashlib.sha256(content).hexdigest()
            if not regrade and book.unchanged(info.assignment, student_id, digest):
                with lock:
                    counts["skipped"] += 1
                if on_done:
                    on_done(None)
                return
            outcome = sandbox.run(notebook, plan_for(key))
            result = grade_harvest(
                key, outcome.harvest, policy=info.policy, reveal=reveal, error=outcome.error
            )
            result.content_hash = digest
            result.seconds = outcome.seconds
            result.isolation = outcome.isolation
            result.copy_signals = copy_signals(result, key, all_keys)
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
            book.record(info.assignment, result)
            counts["errors" if result.error else "graded"] += 1
        if on_done:
            on_done(result)

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for future in [pool.submit(one, sid, nb) for sid, nb in found.items()]:
                future.result()
        results = book.results(info.assignment)
        roster = {
            sid: {"name": k.student_name, "email": k.student_email} for sid, k in all_keys.items()
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
