"""The grading queue (scalegrade/server/queue.py) on SQLite and on a real PostgreSQL
server: supersession, per-student order, leases, and exactly-once recording under
concurrent claims."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import create_engine

from autograder.grading.grade import StudentResult
from autograder.semester.gradebook import Gradebook
from scalegrade.server import store
from scalegrade.server.queue import LostJob, Queue
from tests import postgres


@pytest.fixture(params=["sqlite", "postgresql"])
def book(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'gradebook.sqlite'}"
    else:
        server = request.getfixturevalue("postgres_url")
        url = postgres.database(server, f"queue_{abs(hash(request.node.name)) % 10**8}")
    opened = Gradebook(url)
    store.migrate(opened.engine)
    yield opened
    opened.close()


def _enqueue(queue: Queue, student: str, n: int = 1) -> int:
    return queue.enqueue("tdlsm/hw1", student, f"uploads/{student}-{n}.ipynb", "0" * 64,
                         store.now())  # fmt: skip


def _record(book: Gradebook, queue: Queue, job, worker: str) -> None:
    result = StudentResult(job.student_id, 1.0, 2.0, [], content_hash=f"h{job.id}")
    book.record("tdlsm/hw1", result, within=queue.done_within(job.id, worker))


def test_a_new_upload_supersedes_the_students_queued_one(book):
    queue = Queue(book.engine)
    first, other = _enqueue(queue, "ana", 1), _enqueue(queue, "ben")
    second = _enqueue(queue, "ana", 2)
    assert queue.job(first).state == "superseded"
    assert [queue.claim("w").id for _ in range(2)] == [other, second]
    assert queue.claim("w") is None


def test_a_students_next_job_waits_while_their_job_runs(book):
    queue = Queue(book.engine)
    _enqueue(queue, "ana", 1)
    running = queue.claim("w1")
    _enqueue(queue, "ana", 2)  # running jobs are not superseded: they finish first
    assert queue.claim("w2") is None
    _record(book, queue, running, "w1")
    assert queue.claim("w2").upload.endswith("ana-2.ipynb")


def test_a_dead_workers_job_is_claimed_again_and_only_the_holder_records(book):
    queue = Queue(book.engine, lease=1)
    _enqueue(queue, "ana")
    lost = queue.claim("dead")
    assert queue.claim("alive") is None  # under lease
    time.sleep(1.1)
    again = queue.claim("alive")
    assert again.id == lost.id and again.tries == 2
    with pytest.raises(LostJob):
        _record(book, queue, lost, "dead")  # too late: nothing recorded
    assert book.attempts("tdlsm/hw1", "ana") == []
    _record(book, queue, again, "alive")
    assert [a.id for a in book.attempts("tdlsm/hw1", "ana")] == [queue.job(again.id).attempt_id]
    assert not queue.renew(again.id, "alive")  # done: nothing to renew


def test_concurrent_workers_never_claim_a_job_twice(book):
    queue = Queue(book.engine)
    students = [f"s{i:03d}" for i in range(60)]
    for s in students:
        _enqueue(queue, s)
    claimed: list[int] = []
    lock = threading.Lock()

    def drain(name: str) -> None:
        mine = Queue(create_engine(book.engine.url))  # each worker its own connections
        while (job := mine.claim(name)) is not None:
            with lock:
                claimed.append(job.id)
        mine.engine.dispose()

    threads = [threading.Thread(target=drain, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == len(students)
    assert queue.counts() == {"running": len(students)}


def test_the_platforms_tables_from_the_models_are_the_ones_the_migrations_make(tmp_path):
    """A new database is made from the models; an old one is migrated by alembic: both
    must be the same schema."""
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.config import Config
    from alembic.migration import MigrationContext

    new = create_engine(f"sqlite:///{tmp_path / 'new.sqlite'}")
    store.migrate(new)
    migrated = create_engine(f"sqlite:///{tmp_path / 'migrated.sqlite'}")
    config = Config()
    config.set_main_option("script_location", str(store.MIGRATIONS))
    with migrated.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
    store.migrate(migrated)  # at HEAD: nothing to do
    for engine in (new, migrated):
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"version_table": store.VERSION_TABLE})
            assert compare_metadata(context, store.Base.metadata) == []
            assert context.get_current_revision() == store.HEAD
        engine.dispose()
