"""Grade a folder of submissions: sandbox each, compare, record, report.

``SUBMISSIONS/<student_id>/`` holds the student's notebook (``SUBMISSIONS/<id>.ipynb``
works too).  Submissions run in parallel; each is recorded in the gradebook as an attempt
with its submission time (:mod:`autograder.semester.submitted_at`) as soon as it is graded, and
the student's standing (after the late policy) is written atomically, so a killed grader
loses nothing, and a rerun skips what is unchanged.  One broken submission is that
submission's recorded error.  :func:`publish` writes an assignment's files again from
the gradebook alone, after a deadline, an extension or the policy changed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.analysis import item_report
from autograder.grading.grade import StudentResult
from autograder.grading.keys import Keys
from autograder.grading.submission import Ran, Runner, content_hash, judge, run_notebook
from autograder.sandbox import clean_text
from autograder.semester import lms, outputs
from autograder.semester.lateness import Extension
from autograder.semester.submitted_at import SubmittedAt, submitted_at
from contract import Key, KeyFileError, Policy, Release, times

if TYPE_CHECKING:
    from autograder.semester.gradebook import Gradebook

GRADEBOOK = "gradebook.sqlite"  # in the output folder, without a database URL
MAX_WARNING_CHARS = 500

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Summary:
    graded: int
    skipped: int  # unchanged since the last run
    errors: int  # could not be run (recorded, scored 0)
    seconds: float
    out: Path
    results: list[dict]
    warnings: list[str] = field(default_factory=list)

    @property
    def check_errors(self) -> list[str]:
        """The checks' own failures in the standings (the grader's errors, not the
        students': those parts are pending until the check is fixed and re-keyed)."""
        return [f"{r['student_id']}: {e}" for r in self.results for e in r.get("check_errors", [])]


def find_submissions(
    root: Path, notebook: str, skipped: list[str] | None = None
) -> dict[str, Path | None]:
    """Student id -> their notebook (None when the folder holds no notebook).  A name that
    is not UTF-8 is no roster's id: it is left out, said in ``skipped``."""
    found: dict[str, Path | None] = {}
    for entry in sorted(root.iterdir()):
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError:
            if skipped is not None:
                skipped.append(f"{clean_text(str(entry))}: not a student id (not UTF-8); skipped")
            continue
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
    try:
        # errors="replace": the last line of defence; the sandbox's boundary (clean_text)
        # leaves no lone surrogate to write, but one that slipped by is a "?", not a crash
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _warn(warnings: list[str] | None, message: str) -> None:
    """A file not written: told to the caller (``warnings``, which the CLI prints), else
    logged."""
    message = clean_text(message[:MAX_WARNING_CHARS])
    if warnings is None:
        log.warning("%s", message)
    else:
        warnings.append(message)


def _write_each(
    files: dict[Path, Callable[[], str]], whose: str, warnings: list[str] | None
) -> None:
    """Write each of ``files`` (its path: what makes its text) on its own: one that cannot
    be made or written is a warning naming ``whose`` file it is, never an exception that
    stops the batch, and the others are still written."""
    for path, text in files.items():
        try:
            _write_atomic(path, text())
        except Exception as err:  # noqa: BLE001 - one file's trouble, not the batch's
            _warn(warnings, f"{whose}{path.name} was not written: {type(err).__name__}: {err}")


def reveal_now(due: str | None, policy: Policy, zone: str = "UTC") -> bool:
    """Expected values and worked solutions are shown after the due date, by policy."""
    if not policy.solutions_after_due or due is None:
        return False
    return datetime.now(UTC) >= times.parse(due, zone)


def write_student(
    out: Path,
    doc: dict,
    info: Release,
    key: Key | None,
    reveal: bool,
    warnings: list[str] | None = None,
) -> None:
    """One student's results.json and feedback.html, from their standing; a file that
    cannot be written is a warning in ``warnings`` (logged when None), not an exception."""
    sid = doc["student_id"]
    solutions = {q.id: q.solution_html for q in key.questions} if (key and reveal) else None
    _write_each(
        {
            out / sid / "results.json": lambda: (
                json.dumps(outputs.gradescope(doc, reveal=reveal), indent=1) + "\n"
            ),
            out / sid / "feedback.html": lambda: outputs.feedback_html(
                doc, title=f"{info.title} — {sid}", solutions=solutions
            ),
        },
        f"student {sid}: ",
        warnings,
    )


def write_reports(
    out: Path,
    results: list[dict],
    keys: Keys,
    history: list[dict] | None = None,
    warnings: list[str] | None = None,
) -> None:
    """summary.csv, canvas.csv, moodle.csv and report.html of every standing (``history``:
    the assignment's recorded changes, for the report), each on its own: one that cannot
    be written is a warning in ``warnings`` (logged when None), not an exception."""
    info = keys.release
    roster = lms.roster(keys.all())

    def report() -> str:
        signals = {r["student_id"]: r["copy_signals"] for r in results if r["copy_signals"]}
        found = item_report.analysis(results, keys.all())
        return outputs.instructor_report(
            results,
            title=info.title,
            signals=signals,
            history=history or [],
            analysis=item_report.section(found),
        )

    _write_each(
        {
            out / "summary.csv": lambda: outputs.summary_csv(results),
            out / "canvas.csv": lambda: outputs.canvas_csv(results, roster, info.title),
            out / "moodle.csv": lambda: outputs.moodle_csv(results, roster, info.title),
            out / "report.html": report,
        },
        "",
        warnings,
    )


def publish(
    book: Gradebook,
    assignment: str,
    students: set[str] | None = None,
    keys: Keys | None = None,
    warnings: list[str] | None = None,
) -> Path:
    """Write an assignment's files again from the gradebook (no notebook runs): the named
    students' results.json and feedback (everyone's when None), and the reports.
    ``keys``: the assignment's, where loaded already (else read where it was graded).
    A file that cannot be written is a warning in ``warnings`` (logged when None); the
    others, and the reports, are written all the same."""
    from autograder.semester.gradebook import GradebookError

    row = book.assignment(assignment)
    if not row.keys_dir or not row.out_dir:
        raise GradebookError(f"{assignment}: the gradebook does not say where its files are")
    try:
        keys = keys or Keys(Path(row.keys_dir))
    except KeyFileError as err:
        raise GradebookError(f"{assignment}: {err}") from None
    info, out = keys.release, Path(row.out_dir)
    reveal = (
        reveal_now(row.due_override or info.due, info.policy, info.timezone)
        if row.reveal is None
        else row.reveal
    )
    results = book.results(assignment)
    for doc in results:
        if students is None or doc["student_id"] in students:
            sid = doc["student_id"]
            key = keys.key(sid) if sid in keys else None
            write_student(out, doc, info, key, reveal, warnings)
    write_reports(out, results, keys, book.changes(assignment), warnings)
    return out


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
    manifest: dict[str, SubmittedAt] | None = None,
    extensions: list[Extension] | None = None,
    on_done: Callable[[StudentResult | None], None] | None = None,
) -> Summary:
    """Grade every submission under ``submissions`` into ``out`` and the gradebook.

    ``manifest``: submission times by student (a ``submissions.csv``), over what the
    submissions' own files say.  ``extensions``: recorded before anything is graded (a
    bad one raises :class:`GradebookError` and nothing is graded).  ``reveal`` None: by
    the policy and the due date.
    """
    start = time.perf_counter()
    info = keys.release
    shown = reveal_now(info.due, info.policy, info.timezone) if reveal is None else reveal
    out.mkdir(parents=True, exist_ok=True)
    batch = _Batch(
        keys,
        out,
        sandbox=sandbox,
        db_url=db_url,
        reveal=shown,
        chosen=reveal,
        regrade=regrade,
        manifest=manifest,
        extensions=extensions,
        on_done=on_done,
    )
    if not batch.fresh:
        batch.book = batch.open_book()
    found = find_submissions(submissions, info.notebook, batch.warnings)
    results = batch.grade_all(found, jobs)
    return Summary(
        batch.counts["graded"],
        batch.counts["skipped"],
        batch.counts["errors"],
        time.perf_counter() - start,
        out,
        results,
        batch.warnings,
    )


def _grader_failed(err: Exception) -> str:
    return f"the grader failed on this submission: {type(err).__name__}: {err}"


class _Batch:
    """One run of :func:`grade_batch`: its gradebook, counts and warnings.  Submissions run
    in the sandbox in a pool of threads; each run is judged, recorded and its student's
    files written in one thread of its own (``judging``), so a sandbox slot never waits
    for the grader's side of a result."""

    def __init__(
        self,
        keys: Keys,
        out: Path,
        *,
        sandbox: Runner,
        db_url: str | None,
        reveal: bool,
        chosen: bool | None,
        regrade: bool,
        manifest: dict[str, SubmittedAt] | None,
        extensions: list[Extension] | None,
        on_done: Callable[[StudentResult | None], None] | None,
    ):
        self.keys, self.info, self.all_keys = keys, keys.release, keys.all()
        self.out, self.sandbox, self.db_url = out, sandbox, db_url
        self.reveal, self.chosen = reveal, chosen  # chosen: the caller's, None by policy
        self.regrade, self.manifest, self.extensions = regrade, manifest, extensions
        self.on_done = on_done
        # A gradebook not made yet holds no attempt, so nothing can be unchanged: the
        # first submissions then run while it is made (SQLAlchemy's import and the
        # tables, 0.2 s), and what they graded before it opened is recorded then
        self.fresh = db_url is None and not extensions and not (out / GRADEBOOK).exists()
        self.book: Gradebook | None = None
        self.early: list[tuple] = []  # graded before a fresh book opened: recorded once it has
        self.moved: dict[str, set[str]] = {}  # standings that changed besides those graded now
        self.warnings: list[str] = []
        self.counts = {"graded": 0, "skipped": 0, "errors": 0}
        self.lock = threading.Lock()  # the book, counts and gradebook writes, from the threads
        self.judging: ThreadPoolExecutor | None = None

    def open_book(self) -> Gradebook:
        """The gradebook, with this release (and the batch's extensions) recorded."""
        from autograder.semester.gradebook import Gradebook

        opened = Gradebook(self.db_url or f"sqlite:///{(self.out / GRADEBOOK).resolve()}")
        try:
            opened.record_release(self.info, self.keys.folder, self.out, reveal=self.chosen)
            if self.extensions:
                opened.add_extensions(self.extensions)
                for m in opened.restate({e.student_id for e in self.extensions}):
                    self.moved.setdefault(m.assignment, set()).add(m.student_id)
        except BaseException:
            opened.close()
            raise
        return opened

    def grade_all(self, found: dict[str, Path | None], jobs: int) -> list[dict]:
        """Grade every submission ``found``, publish the standings that moved, and return
        the assignment's standings; the gradebook is closed after."""
        try:
            with (
                ThreadPoolExecutor(max_workers=1) as judging,
                ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
            ):
                self.judging = judging
                futures = [pool.submit(self.run_submission, sid, nb) for sid, nb in found.items()]
                if self.fresh:
                    self.open_fresh_book(futures)
                for future in futures:
                    judged = future.result()
                    if judged is not None:
                        judged.result()
            self.publish_moved()
            return self.book.results(self.info.assignment)
        finally:
            if self.book is not None:
                self.book.close()

    def open_fresh_book(self, futures: list[Future]) -> None:
        """Open the book being made while the first submissions run, and record what was
        graded before it opened (``early``); if it cannot be opened, nothing more runs."""
        try:
            opened = self.open_book()
        except BaseException:  # nothing recorded: the batch says why
            for future in futures:
                future.cancel()
            raise
        with self.lock:
            self.book = opened
            docs = [(self.record(*entry), entry[3]) for entry in self.early]
        for doc, key in docs:
            write_student(self.out, doc, self.info, key, self.reveal, self.warnings)

    def publish_moved(self) -> None:
        """Write again the files of every standing that changed besides those graded: this
        assignment's, and other assignments' (a late-day pool spent anew)."""
        from autograder.semester.gradebook import GradebookError

        assignment = self.info.assignment
        students = self.moved.pop(assignment, set())
        publish(self.book, assignment, students, self.keys, self.warnings)
        for other, students in sorted(self.moved.items()):
            try:
                publish(self.book, other, students, warnings=self.warnings)
            except GradebookError as err:
                self.warnings.append(f"{other}: its files were not written again: {err}")

    def key_of(self, student_id: str, when: SubmittedAt | None) -> tuple[Key | None, int, str]:
        """The student's key, the variant current when it was submitted (the ledger's), its
        version, and why there is none."""
        key, version = None, 0
        problem = f"no key for student {student_id!r} in {self.keys.folder}"
        if student_id in self.keys:
            try:
                key, version = self.keys.key_at(student_id, when.at if when else None)
            except KeyFileError as err:  # e.g. a reseeded key file missing from keys/
                problem = str(err)
        return key, version, problem

    def unchanged(self, student_id: str, notebook: Path, key: Key) -> bool:
        """Graded already, from this notebook and with this key."""
        graded = content_hash(notebook)  # the key's digest only then: it needs pint
        assignment = self.info.assignment
        return self.book.unchanged(assignment, student_id, graded) and self.book.unchanged(
            assignment, student_id, graded, self.keys.digest(key)
        )

    def run_submission(self, student_id: str, notebook: Path | None) -> Future | None:
        """Run the submission in the sandbox, and hand the rest to ``judging``: the
        judging's future, or None when the submission is unchanged."""
        when = submitted_at(student_id, notebook, manifest=self.manifest, zone=self.info.timezone)
        key, version, problem = self.key_of(student_id, when)
        ran = None
        if key is not None:
            if (
                notebook is not None
                and not (self.fresh or self.regrade)
                and self.unchanged(student_id, notebook, key)
            ):
                with self.lock:
                    self.counts["skipped"] += 1
                if self.on_done:
                    self.on_done(None)
                return None
            try:
                ran = run_notebook(key, notebook, keys=self.keys, runner=self.sandbox)
            except Exception as err:  # noqa: BLE001 - one submission's trouble, not the batch's
                problem = _grader_failed(err)
        return self.judging.submit(
            self.finish, student_id, when, notebook, key, version, ran, problem
        )

    def finish(
        self,
        student_id: str,
        when: SubmittedAt | None,
        notebook: Path | None,
        key: Key | None,
        version: int,
        ran: Ran | None,
        problem: str,
    ) -> None:
        """Judge a run, record it and write the student's files (one thread: ``judging``)."""
        result = None
        if ran is not None:
            try:
                result = judge(
                    key,
                    notebook,
                    ran,
                    keys=self.keys,
                    reveal=self.reveal,
                    others=self.all_keys,
                    version=version,
                )
            except Exception as err:  # noqa: BLE001 - one submission's trouble, not the batch's
                problem = _grader_failed(err)
        if result is None:
            points = key.points if key else 0.0
            result = StudentResult(student_id, 0.0, points, [], error=problem)
        digest = self.keys.digest(key) if key else None  # pint: not under the lock
        with self.lock:
            if self.book is None:  # a fresh book still being made
                self.early.append((result, when, notebook, key, digest))
                doc = None
            else:
                doc = self.record(result, when, notebook, key, digest)
        if doc is not None:
            write_student(self.out, doc, self.info, key, self.reveal, self.warnings)
        if self.on_done:
            self.on_done(result)

    def record(
        self,
        result: StudentResult,
        when: SubmittedAt | None,
        notebook: Path | None,
        key: Key | None,
        digest: str | None,
    ) -> dict:
        """Record one result in the open book (``lock`` held); the student's standing."""
        from autograder.semester.gradebook import result_to_json

        doc, also = self.book.record(
            self.info.assignment,
            result,
            result_to_json(result),
            submitted=when,
            notebook=notebook,
            key_sha256=digest,
            checks=self.keys.checks_used(key) if key else None,
            policy=self.info.policy,
        )
        self.counts["errors" if result.error else "graded"] += 1
        for m in also:
            self.moved.setdefault(m.assignment, set()).add(m.student_id)
        return doc
