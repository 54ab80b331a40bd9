"""bench/serve_bench.py at its smallest size: the real `scalegrade serve` and `scalegrade
grade` on two students, so that the bench is known to run before anyone waits for its
default size.  Its numbers are not checked (a bench reports, it does not gate; the machine
running the tests is shared): that it measures each of them, and fails when something
fails."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "serve_bench.py"


def _bench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--students", "2", "--rounds", "2", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip


def test_the_bench_measures_each_number_against_its_target(tmp_path):
    done = _bench("--keep", str(tmp_path / "kept"))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    # (1): two rounds timed, with their target and the cold CLI's time
    assert re.search(r"upload to verdict, p50 of 2 +\d+\.\d\d s +<= 1\.5 s +(PASS|MISS)", out)
    assert re.search(r"cold `scalegrade grade`, one notebook +\d+\.\d\d s", out)
    # (2): both rates, and the ratio against its target; both with two sandboxes
    assert re.search(r"burst of 2, `serve` +\d+\.\d\d /s", out)
    assert re.search(r"`scalegrade grade --jobs 2` +\d+\.\d\d /s", out)
    assert re.search(r"serve / grade +\d+% +>= 90% +(PASS|MISS)", out)
    assert "serve --workers 2 (2 worker processes" in out
    # (3): the student's two pages at least, each with its target
    for page in ("/a/tdlsm-hw1", "/a"):
        assert re.search(rf"GET {page} during the burst, p95 of \d+ +\d+ ms +< 300 ms", out)
    # --keep keeps the course and the platform's data: the gradebook it recorded into
    assert (tmp_path / "kept" / "course" / "server" / "gradebook.sqlite").is_file()


def test_an_upload_the_server_refuses_fails_the_bench_with_the_servers_log():
    """Uploads over the server's cap (1 KiB here, set as an operator would) are refused:
    the bench names the refusal, shows the server's log and exits 1, not 0."""
    env = os.environ | {"SCALEGRADE_SERVE_UPLOAD_MAX_BYTES": "1024"}
    done = _bench(env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "upload was refused (413)" in done.stderr
    assert "the last lines of" in done.stderr and "serve.log" in done.stderr
    assert "PASS" not in done.stdout and "MISS" not in done.stdout
