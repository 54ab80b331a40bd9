"""The gradebook on a real PostgreSQL server (a throwaway cluster started for the test).

Needs Debian's postgresql (initdb, pg_ctl); `.ci/run` installs it and sets
SCALEGRADE_REQUIRE_POSTGRES=1 so that CI fails rather than skips when it is missing.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from autograder.grade import StudentResult
from autograder.gradebook import Gradebook


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres_url():
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not initdb or not pg_ctl:
        message = "PostgreSQL server binaries (initdb, pg_ctl) are not installed"
        if os.environ.get("SCALEGRADE_REQUIRE_POSTGRES"):
            pytest.fail(message)
        pytest.skip(message)
    # not under pytest's tmp folder: that one is private to root, and the server's user
    # must reach its data directory
    base = Path(tempfile.mkdtemp(prefix="scalegrade-pg-"))
    data = base / "data"
    run_as: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root
        shutil.chown(base, "postgres")
        run_as = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run(
        [*run_as, initdb, "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    options = f"-k {data} -p {port} -c listen_addresses=''"
    # the server's output goes to a log file: a pipe would be held open by the server
    # and the call would never return
    log = str(base / "server.log")
    start = [*run_as, pg_ctl, "-D", str(data), "-o", options, "-l", log, "-w", "start"]
    subprocess.run(start, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"postgresql+psycopg://postgres@/postgres?host={data}&port={port}"
    finally:
        stop = [*run_as, pg_ctl, "-D", str(data), "-m", "immediate", "stop"]
        subprocess.run(stop, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_gradebook_round_trip_on_postgresql(postgres_url):
    book = Gradebook(postgres_url)
    first = StudentResult("ana", 3.0, 10.0, [], content_hash="h1")
    book.record("tdlsm/hw1", first)
    book.record("tdlsm/hw1", StudentResult("ben", 7.5, 10.0, [], content_hash="h2"))
    book.record("tdlsm/hw1", StudentResult("ana", 9.0, 10.0, [], content_hash="h3"))  # regrade
    assert book.unchanged("tdlsm/hw1", "ana", "h3") and not book.unchanged("tdlsm/hw1", "ana", "h1")
    assert [(r["student_id"], r["score"]) for r in book.results("tdlsm/hw1")] == [
        ("ana", 9.0),
        ("ben", 7.5),
    ]
    book.close()
