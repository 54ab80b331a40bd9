"""A throwaway PostgreSQL server for the tests that run the gradebook on a real one.

Needs Debian's postgresql (initdb, pg_ctl); `.ci/run` installs it and sets
SCALEGRADE_REQUIRE_POSTGRES=1 so that CI fails rather than skips when it is missing.
The fixture ``postgres_url`` (tests/conftest.py) starts one server per test process.
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


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [shutil.which(name)]
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server():
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


def database(url: str, name: str) -> str:
    """A new, empty database on the server of ``url``: the URL of it."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return url.replace("/postgres?", f"/{name}?", 1)
