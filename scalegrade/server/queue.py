"""The grading queue: durable, in the database, drained by worker processes.

An upload is stored, then queued here (:meth:`Queue.enqueue`), then claimed by one worker
(:meth:`Queue.claim`) under a lease that the worker renews while it grades.  The result is
recorded by the gradebook in the same transaction that marks the job done
(:meth:`Queue.done_within`), on the condition that this worker still holds it, so:

- a worker or a server killed at any moment loses nothing: a job whose lease ran out is
  claimed again, and an upload already stored is never asked for again;
- a result is recorded exactly once: a worker that lost its lease (killed, or too slow)
  records nothing, even if it finishes;
- a student's attempts are graded in the order they came: a job waits while an older job
  of the same student runs, and a new upload supersedes their queued one;
- a job that killed ``MAX_TRIES`` workers is failed, and recorded as that attempt's error.

Claiming is one conditional UPDATE per candidate, which SQLite and PostgreSQL both
serialize: two workers never hold the same live job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, aliased

from scalegrade.server.store import Job, now

LEASE_SECONDS = 30.0  # renewed every LEASE_SECONDS / 3 while a worker grades
MAX_TRIES = 3  # workers that may die on one job before it is failed
CANDIDATES = 16  # queued jobs looked at per claim


class LostJob(RuntimeError):
    """This worker no longer holds the job (its lease ran out and another took it): what
    it graded is not recorded."""


@dataclass(frozen=True)
class Claimed:
    id: int
    assignment: str
    student_id: str
    upload: str
    sha256: str
    submitted_at: str
    tries: int


class Queue:
    def __init__(self, engine: Engine, *, lease: float = LEASE_SECONDS):
        self.engine = engine
        self.lease = lease

    def enqueue(
        self, assignment: str, student_id: str, upload: str, sha256: str, submitted_at: str
    ) -> int:
        """Queue an upload; the student's upload still queued for this assignment, if any,
        is superseded (a running one finishes first)."""
        with Session(self.engine) as s, s.begin():
            s.execute(
                update(Job)
                .where(
                    Job.assignment == assignment,
                    Job.student_id == student_id,
                    Job.state == "queued",
                )
                .values(state="superseded", finished_at=now())
            )
            job = Job(
                assignment=assignment,
                student_id=student_id,
                upload=upload,
                sha256=sha256,
                submitted_at=submitted_at,
                state="queued",
                tries=0,
            )
            s.add(job)
            s.flush()
            return job.id

    def claim(self, worker: str) -> Claimed | None:
        """The oldest job this worker may take, now held by it; None when there is none.

        Claimable: queued, or running under a lease that ran out (its worker died), and
        no other job of the same student running under a live lease."""
        moment = time.time()
        busy = aliased(Job)
        other_running = (
            select(busy.id)
            .where(
                busy.assignment == Job.assignment,
                busy.student_id == Job.student_id,
                busy.id != Job.id,
                busy.state == "running",
                busy.lease_until >= moment,
            )
            .exists()
        )
        claimable = or_(
            Job.state == "queued", and_(Job.state == "running", Job.lease_until < moment)
        )
        with Session(self.engine) as s:
            ids = list(
                s.scalars(
                    select(Job.id)
                    .where(claimable, ~other_running)
                    .order_by(Job.id)
                    .limit(CANDIDATES)
                )
            )
        for job_id in ids:
            with Session(self.engine) as s, s.begin():
                taken = s.execute(
                    update(Job)
                    .where(Job.id == job_id, claimable)
                    .values(
                        state="running",
                        worker=worker,
                        lease_until=moment + self.lease,
                        tries=Job.tries + 1,
                        started_at=now(),
                    )
                    .execution_options(synchronize_session=False)
                ).rowcount
                if taken != 1:
                    continue  # another worker was first
                job = s.get(Job, job_id)
                return Claimed(
                    job.id,
                    job.assignment,
                    job.student_id,
                    job.upload,
                    job.sha256,
                    job.submitted_at,
                    job.tries,
                )
        return None

    def renew(self, job_id: int, worker: str) -> bool:
        """Extend this worker's lease on a job; False when it no longer holds it."""
        with Session(self.engine) as s, s.begin():
            return (
                s.execute(
                    update(Job)
                    .where(Job.id == job_id, Job.worker == worker, Job.state == "running")
                    .values(lease_until=time.time() + self.lease)
                ).rowcount
                == 1
            )

    def release(self, job_id: int, worker: str) -> None:
        """Give a job back to the queue at once (the sandbox, not the submission, failed)."""
        with Session(self.engine) as s, s.begin():
            s.execute(
                update(Job)
                .where(Job.id == job_id, Job.worker == worker, Job.state == "running")
                .values(state="queued", worker=None, lease_until=None)
            )

    def done_within(
        self, job_id: int, worker: str, *, failed: str | None = None
    ) -> Callable[[Session, int], None]:
        """What the gradebook runs in the transaction that records the job's attempt
        (:meth:`~autograder.semester.gradebook.Gradebook.record`'s ``within``): the job
        is done (or ``failed``, with why), or :class:`LostJob` and nothing is recorded."""

        def mark(s: Session, attempt_id: int) -> None:
            changed = s.execute(
                update(Job)
                .where(Job.id == job_id, Job.worker == worker, Job.state == "running")
                .values(
                    state="failed" if failed else "done",
                    attempt_id=attempt_id,
                    finished_at=now(),
                    lease_until=None,
                    error=failed,
                )
                .execution_options(synchronize_session=False)
            ).rowcount
            if changed != 1:
                raise LostJob(f"job {job_id} is no longer held by {worker}")

        return mark

    def job(self, job_id: int) -> Job | None:
        with Session(self.engine) as s:
            return s.get(Job, job_id)

    def jobs_of(self, assignment: str, student_id: str, limit: int = 20) -> list[Job]:
        """A student's latest uploads of an assignment, newest first."""
        with Session(self.engine) as s:
            return list(
                s.scalars(
                    select(Job)
                    .where(Job.assignment == assignment, Job.student_id == student_id)
                    .order_by(Job.id.desc())
                    .limit(limit)
                )
            )

    def ahead_of(self, job_id: int) -> int:
        """How many jobs wait before this one (0 when it is running or done)."""
        with Session(self.engine) as s:
            return int(
                s.scalar(select(func.count(Job.id)).where(Job.state == "queued", Job.id < job_id))
                or 0
            )

    def counts(self) -> dict[str, int]:
        """Jobs per state."""
        with Session(self.engine) as s:
            rows = s.execute(select(Job.state, func.count(Job.id)).group_by(Job.state))
            return {state: int(n) for state, n in rows}
