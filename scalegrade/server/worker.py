"""A grading worker: claims queued uploads and grades each as `scalegrade grade` does.

Each worker is a process of its own with one warm sandbox (one submission at a time), so
``workers`` bounds the sandboxes that ever run, however long the queue.  A job is graded
by the batch's own two steps, :func:`~autograder.grading.submission.run_notebook` then
:func:`~autograder.grading.submission.judge`, with the key of the variant current when it
was uploaded, and recorded by the gradebook in the transaction that marks the job done
(:mod:`.queue`).  The sandbox step may run elsewhere: with ``executor = "dask"`` it runs on
the workers of a Dask cluster (``scheduler``), the keys staying here.

`scalegrade serve` starts ``workers`` of them and starts again one that dies; `scalegrade
serve --workers 0` on the web machine and `scalegrade work` on others share the queue
through a PostgreSQL gradebook.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from datetime import datetime
from pathlib import Path

from autograder.grading.grade import StudentResult
from autograder.grading.submission import Runner, judge, run_notebook
from autograder.sandbox import Limits, Sandbox, SandboxError
from autograder.semester.batch import reveal_now
from autograder.semester.gradebook import Gradebook
from autograder.semester.submitted_at import SubmittedAt
from contract import KeyFileError
from scalegrade.server import store
from scalegrade.server.config import ServeConfig
from scalegrade.server.course import Course, CourseError
from scalegrade.server.queue import MAX_TRIES, Claimed, LostJob, Queue

log = logging.getLogger(__name__)

POLL_SECONDS = 0.05  # between two looks at an empty queue
TIME_SOURCE = "uploaded to ScaleGrade"


def open_sandbox(config: ServeConfig, course: Course) -> Runner:
    """The worker's one warm sandbox (or its Dask cluster), hiding the course and the
    platform's data from the notebooks."""
    hide = [course.root, config.data_dir]
    limits = Limits(wall_seconds=config.timeout)
    if config.executor == "dask":
        from autograder.sandbox.distributed import DaskRunner, SandboxSpec

        spec = SandboxSpec(
            backend=config.sandbox,
            limits=limits,
            hide=tuple(str(p) for p in hide),
            image=config.image,
            preload=course.preload,
        )
        return DaskRunner.connect(config.scheduler or "", spec)
    return Sandbox(
        backend=config.sandbox,
        limits=limits,
        hide=hide,
        image=config.image,
        preload=course.preload,
        jobs=1,
    )


class Worker:
    def __init__(self, config: ServeConfig, name: str | None = None, runner: Runner | None = None):
        self.config = config
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.book = Gradebook(config.db_url)
        store.migrate(self.book.engine)
        self.queue = Queue(self.book.engine, lease=config.lease_seconds)
        self.course = Course(config.course)
        self.course.record(self.book, config.data_dir)
        self.runner = runner or open_sandbox(config, self.course)

    def close(self) -> None:
        close = getattr(self.runner, "close", None)
        if close is not None:
            close()
        self.book.close()

    def run(self, stop: threading.Event) -> None:
        """Grade queued jobs until ``stop`` is set."""
        while not stop.is_set():
            job = self.queue.claim(self.name)
            if job is None:
                stop.wait(POLL_SECONDS)
                continue
            self.grade(job)

    def grade(self, job: Claimed) -> None:
        """Grade one claimed job and record it, renewing the lease meanwhile; a job this
        worker lost is not recorded, and one the sandbox could not take goes back."""
        done = threading.Event()
        renewing = threading.Thread(target=self._renew, args=(job, done), daemon=True)
        renewing.start()
        try:
            result, when, path, key = self._result(job)
            self._record(job, result, when, path, key)
        except LostJob as err:
            log.warning("%s", err)
        except SandboxError as err:  # the sandbox broke, not the submission: try again
            log.error("job %s: the sandbox failed (%s); starting a new one", job.id, err)
            self.queue.release(job.id, self.name)
            self._restart()
        finally:
            done.set()
            renewing.join()

    def _renew(self, job: Claimed, done: threading.Event) -> None:
        while not done.wait(self.queue.lease / 3):
            if not self.queue.renew(job.id, self.name):
                return

    def _restart(self) -> None:
        close = getattr(self.runner, "close", None)
        if close is not None:
            close()
        self.runner = open_sandbox(self.config, self.course)

    def _result(self, job: Claimed):
        """The job's result (an error result when it cannot be graded), its submission
        time, notebook and key, with the keys as they are now (re-read after a rekey or
        a reseed)."""
        try:
            self.course.refresh()
        except CourseError as err:
            log.error("%s (grading with the keys read before)", err)
        when = SubmittedAt(datetime.fromisoformat(job.submitted_at), TIME_SOURCE)
        path = self.config.data_dir / job.upload
        served = self.course.assignments.get(job.assignment)
        if served is None:
            return self._error(job, f"{job.assignment} is no longer served"), when, path, None
        try:
            key, version = served.keys.key_at(job.student_id, when.at)
        except KeyFileError as err:
            return self._error(job, str(err)), when, path, None
        if job.tries > MAX_TRIES:
            why = f"the grader stopped {MAX_TRIES} times on this submission; it is not graded"
            return self._error(job, why, key.points), when, path, key
        row = self.book.assignment(job.assignment)
        ran = run_notebook(key, path, keys=served.keys, runner=self.runner)
        result = judge(
            key,
            path,
            ran,
            keys=served.keys,
            reveal=reveal_now(row.due_override or row.due, row.policy, row.timezone),
            others=served.keys.all(),
            version=version,
        )
        return result, when, path, key

    @staticmethod
    def _error(job: Claimed, why: str, points: float = 0.0) -> StudentResult:
        return StudentResult(job.student_id, 0.0, points, [], error=why)

    def _record(self, job: Claimed, result: StudentResult, when, path: Path, key) -> None:
        served = self.course.assignments.get(job.assignment)
        keys = served.keys if served else None
        failed = result.error if (key is None or job.tries > MAX_TRIES) else None
        self.book.record(
            job.assignment,
            result,
            submitted=when,
            notebook=path,
            key_sha256=keys.digest(key) if key and keys else None,
            checks=keys.checks_used(key) if key and keys else None,
            policy=served.release.policy if served else None,
            within=self.queue.done_within(job.id, self.name, failed=failed),
        )


def main(config: ServeConfig, name: str | None = None) -> None:
    """One worker process until SIGTERM (`scalegrade serve` starts them)."""
    import signal

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    worker = Worker(config, name)
    try:
        worker.run(stop)
    except KeyboardInterrupt:
        pass
    finally:
        worker.close()


def _die_with_the_server() -> None:
    """SIGTERM when the server that started this worker dies, however it died (Linux's
    PR_SET_PDEATHSIG): its job then finishes, or its lease runs out."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the server died before that
        sys.exit(0)


if __name__ == "__main__":  # `scalegrade serve` starts each worker so
    from scalegrade.server.run import config_from_argv

    _die_with_the_server()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    worker_name, worker_config = config_from_argv(sys.argv[1:])
    main(worker_config, worker_name)
