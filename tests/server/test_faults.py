"""Killing the platform loses nothing (scalegrade/server/queue.py, worker.py, run.py): the
real `scalegrade serve` (uvicorn and two worker processes) is SIGKILLed, one worker first,
in the middle of grading a burst of uploads, then started again.  Every upload is graded
exactly once (one attempt per job, none without a job), and what was recorded before the
kill is still there, unchanged."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from autograder.semester.gradebook import Gradebook
from scalegrade.server import store
from scalegrade.server.security import add_account
from tests.server.conftest import STUDENTS
from tests.server.site import PASSWORD, csrf_of

EMPTY = "s05"  # the demo's untouched notebook, which an upload refuses: s07's instead
LEASE = 3  # seconds: a killed worker's job is claimed again after it (default 30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`scalegrade serve` as a process of its own."""

    def __init__(self, course: Path, port: int):
        self.course, self.port = course, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = os.environ | {"SCALEGRADE_SERVE_LEASE_SECONDS": str(LEASE)}
        args = ["--course", str(self.course), "--port", str(self.port), "--workers", "2"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scalegrade.cli", "serve", *args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/signin", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise AssertionError("scalegrade serve did not answer within 60 s")

    def workers(self) -> dict[str, int]:
        """The server's worker processes: name -> pid."""
        out = {}
        for pid in Path("/proc").iterdir():
            try:
                cmd = (pid / "cmdline").read_bytes().split(b"\0")
                parent = int((pid / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if parent == self.proc.pid and b"scalegrade.server.worker" in cmd:
                out[cmd[cmd.index(b"scalegrade.server.worker") + 1].decode()] = int(pid.name)
        return out

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _upload(url: str, student: str, notebook: bytes) -> None:
    with httpx.Client(base_url=url, timeout=30) as c:
        token = csrf_of(c.get("/signin").text)
        r = c.post("/signin", data={"login": student, "password": PASSWORD, "csrf": token})
        assert r.status_code == 303, r.text
        token = csrf_of(c.get("/a/tdlsm-hw1").text)
        r = c.post(
            "/a/tdlsm-hw1/submit",
            data={"csrf": token},
            files={"notebook": ("hw1.ipynb", notebook)},
        )
        assert r.status_code == 303, r.text


def _rows(engine, sql: str) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql))]


def _wait(engine, done, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out; jobs: {_rows(engine, 'SELECT id, state, tries FROM jobs')}")


def test_killing_the_server_and_a_worker_mid_burst_loses_and_repeats_nothing(config, submissions):
    config.data_dir.mkdir(parents=True, exist_ok=True)
    book = Gradebook(config.db_url)
    store.migrate(book.engine)
    for i in range(STUDENTS):
        add_account(book.engine, f"s{i:02d}", "student", password=PASSWORD)
    book.close()
    engine = create_engine(config.db_url)
    server = Server(config.course, _free_port())
    honest = (submissions / "s07" / "hw1.ipynb").read_bytes()
    try:
        server.start()
        students = [f"s{i:02d}" for i in range(STUDENTS)]
        for student in students:  # the burst: eight uploads, two workers
            mine = submissions / student / "hw1.ipynb"
            _upload(server.url, student, honest if student == EMPTY else mine.read_bytes())
        _wait(engine, lambda: _rows(engine, "SELECT count(*) FROM jobs WHERE state = 'done'")
              [0][0] >= 1)  # fmt: skip
        running = _rows(engine, "SELECT worker FROM jobs WHERE state = 'running'")
        workers = server.workers()
        victim = running[0][0] if running else next(iter(workers))
        os.kill(workers[victim], signal.SIGKILL)  # a worker, mid-job when one was running
        server.kill()  # then the server itself
        before = _rows(engine, "SELECT id, student_id, score, result_json FROM attempts")
        left = _rows(engine, "SELECT count(*) FROM jobs WHERE state != 'done'")[0][0]
        assert left > 0, "the burst was drained before the kill: nothing was tested"

        server.start()
        for student in students[:3]:  # the platform takes uploads again at once
            _upload(server.url, student, honest)
        _wait(engine, lambda: not _rows(engine, "SELECT id FROM jobs WHERE state IN "
                                         "('queued', 'running')"))  # fmt: skip
    finally:
        server.stop()
    jobs = _rows(engine, "SELECT id, state, attempt_id, upload FROM jobs")
    attempts = _rows(engine, "SELECT id FROM attempts")
    assert len(jobs) == STUDENTS + 3
    assert {state for _, state, _, _ in jobs} <= {"done", "superseded"}
    done = [attempt for _, state, attempt, _ in jobs if state == "done"]
    # exactly once: each done job names its own attempt, and no attempt is without a job
    assert len(set(done)) == len(done) == len(attempts)
    assert set(done) == {a for (a,) in attempts}
    # every student of the burst has a standing, and what was recorded before is unchanged
    standings = _rows(engine, "SELECT student_id FROM submissions")
    assert {s for (s,) in standings} == set(students)
    after = {r[0]: r for r in _rows(engine, "SELECT id, student_id, score, result_json "
                                     "FROM attempts")}  # fmt: skip
    assert all(after[r[0]] == r for r in before)
    for *_, upload in jobs:  # every upload is still stored
        assert (config.data_dir / upload).is_file()
    engine.dispose()
