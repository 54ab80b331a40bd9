"""A grading worker (scalegrade/server/worker.py): what it records when a job cannot be
graded, a job that killed workers, and a sandbox that breaks (the job goes back)."""

from __future__ import annotations

from autograder.sandbox import Sandbox, SandboxError
from scalegrade.server import store
from scalegrade.server.queue import MAX_TRIES
from scalegrade.server.worker import Worker


class _Broken:
    """A runner whose sandbox is gone (what a dead executor raises)."""

    def run(self, notebook, plan):
        raise SandboxError("the executor died")

    def close(self):
        pass


def _job(site, student: str, upload: str = "uploads/none.ipynb") -> int:
    return site.platform.queue.enqueue("tdlsm/hw1", student, upload, "0" * 64, store.now())


def test_a_job_for_an_assignment_no_longer_served_is_recorded_as_its_error(site, config):
    queue = site.platform.queue
    job = queue.enqueue("tdlsm/hw9", "s00", "uploads/x.ipynb", "0" * 64, store.now())
    worker = Worker(config, "w", runner=_Broken())
    worker.grade(queue.claim("w"))
    worker.close()
    done = queue.job(job)
    assert done.state == "failed" and "no longer served" in done.error
    attempt = site.platform.book.attempts("tdlsm/hw9", "s00")[0]
    assert attempt.id == done.attempt_id and "no longer served" in attempt.error


def test_a_job_that_killed_its_workers_is_failed_not_run_again(site, config):
    queue = site.platform.queue
    job = _job(site, "s00")
    for _ in range(MAX_TRIES):  # three workers claimed it and died
        queue.claim("dead")
        queue.release(job, "dead")
    worker = Worker(config, "w", runner=_Broken())  # never asked to run it
    worker.grade(queue.claim("w"))
    worker.close()
    done = queue.job(job)
    assert done.state == "failed" and f"stopped {MAX_TRIES} times" in done.error
    standing = site.platform.book.result("tdlsm/hw1", "s00")
    assert standing["score"] == 0 and "not graded" in standing["error"]


def test_a_broken_sandbox_gives_the_job_back_and_records_nothing(site, config, submissions):
    queue = site.platform.queue
    upload = config.data_dir / "uploads" / "s00.ipynb"
    upload.parent.mkdir(parents=True)
    upload.write_bytes((submissions / "s07" / "hw1.ipynb").read_bytes())
    job = _job(site, "s00", "uploads/s00.ipynb")
    worker = Worker(config, "w", runner=_Broken())
    worker.grade(queue.claim("w"))
    assert isinstance(worker.runner, Sandbox)  # a new, working sandbox in its place
    worker.close()
    assert queue.job(job).state == "queued" and queue.job(job).worker is None
    assert site.platform.book.attempts("tdlsm/hw1", "s00") == []


def test_a_worker_can_run_its_sandboxes_on_a_dask_cluster(site, config, submissions):
    """executor = "dask": the notebook runs on a real Dask LocalCluster's worker process;
    the keys and the judging stay with the platform's worker, and the result is the one a
    local sandbox gives."""
    from distributed import LocalCluster

    upload = config.data_dir / "uploads" / "s07.ipynb"
    upload.parent.mkdir(parents=True)
    upload.write_bytes((submissions / "s07" / "hw1.ipynb").read_bytes())
    with LocalCluster(n_workers=1, processes=True, threads_per_worker=1,
                      dashboard_address=":0") as cluster:  # fmt: skip
        on_dask = config.model_copy(
            update={"executor": "dask", "scheduler": cluster.scheduler_address}
        )
        worker = Worker(on_dask, "dask")
        _job(site, "s07", "uploads/s07.ipynb")
        worker.grade(site.platform.queue.claim("dask"))
        worker.close()
    remote = site.platform.book.result("tdlsm/hw1", "s07")
    here = Worker(config, "local")
    _job(site, "s07", "uploads/s07.ipynb")
    here.grade(site.platform.queue.claim("local"))
    here.close()
    local = site.platform.book.result("tdlsm/hw1", "s07")
    assert remote["error"] is None and remote["score"] > 0
    strip = ("seconds", "late")  # how long it ran, and when it was uploaded
    assert {k: v for k, v in remote.items() if k not in strip} == {
        k: v for k, v in local.items() if k not in strip
    }
