"""`scalegrade sandbox-serve` and `scalegrade grade --executor service`: a warm sandbox
that outlives one command grades the tdlsm/hw1 batch exactly as the command's own
sandbox does, and refuses what would make a run differ (a folder it does not hide, other
limits, a client of another user).

The submissions are the demo's scenarios (scalegrade/demo.py): a misconception (GiB read
as GB), a code mistake (a sum() ring), the cheating notebook and an honest one.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from autograder.sandbox import Limits, Plan, Probe, Sandbox, SandboxError, service
from autograder.sandbox.inside import wire
from autograder.sandbox.service import ServiceRunner, plan_from_json, plan_to_json, serve
from scalegrade.cli import main
from tests.autograder.demo_course import HONEST, PICKED, grade_cli, picked_course

LIMITS = Limits(wall_seconds=120.0)  # `grade`'s default --timeout, no --gpus


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return picked_course(tmp_path_factory.mktemp("course"))


@pytest.fixture(scope="module")
def warm(course):
    """A service on a socket under the course folder, which its sandbox hides."""
    path = course / "sandbox.sock"
    sandbox = Sandbox(limits=LIMITS, hide=[course], preload=["torch"])
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(path, sandbox, stop), daemon=True)
    thread.start()
    for _ in range(100):
        if path.exists():
            break
        time.sleep(0.05)
    yield path, sandbox
    stop.set()
    thread.join(10)
    sandbox.close()
    assert not path.exists()  # the socket goes with the service


def test_the_warm_service_grades_exactly_like_the_commands_own_sandbox(course, warm):
    path, _ = warm
    local = grade_cli(course, "grades-local")
    served = grade_cli(course, "grades-service", "--executor", "service", "--service", str(path))
    again = grade_cli(course, "grades-again", "--executor", "service", "--service", str(path))

    assert [r["student_id"] for r in served] == sorted([*PICKED, HONEST])
    for mine, theirs, later in zip(local, served, again, strict=True):
        assert not mine["error"] and theirs["isolation"] == mine["isolation"]
        assert theirs["score"] == mine["score"] == later["score"]
        assert [p["verdict"] for p in theirs["parts"]] == [p["verdict"] for p in mine["parts"]]
    honest = next(r for r in served if r["student_id"] == HONEST)
    assert honest["score"] > next(r for r in served if r["student_id"] == "s06")["score"]


def test_the_plan_crosses_as_json_unchanged():
    plan = Plan(
        ("q1",), (Probe("q2-ring", "ring", "def probe(): ...", 7, {"p": 4}, True, ("torch",)),)
    )
    assert plan_from_json(plan_to_json(plan)) == plan


def test_a_batch_folder_the_service_does_not_hide_is_refused(warm, tmp_path_factory):
    path, _ = warm
    elsewhere = Path("/srv") / "course-not-hidden"  # outside the course, /tmp and /run
    with pytest.raises(
        SandboxError,
        match=f"does not hide {elsewhere} from the notebooks: start it with --hide {elsewhere}",
    ):
        ServiceRunner(path, hide=[elsewhere], limits=LIMITS)
    ServiceRunner(path, hide=[path.parent / "keys", tmp_path_factory.getbasetemp()], limits=LIMITS)


def test_other_limits_are_refused_with_the_flag_to_change(warm):
    path, _ = warm
    with pytest.raises(SandboxError, match=r"wall_seconds 120\.0 \(this command: 30\.0\)"):
        ServiceRunner(path, limits=dataclasses.replace(LIMITS, wall_seconds=30.0))


def test_no_service_says_how_to_start_one(tmp_path):
    with pytest.raises(SandboxError, match="start one with `scalegrade sandbox-serve"):
        ServiceRunner(tmp_path / "none.sock", limits=LIMITS)


def test_a_run_the_service_cannot_finish_is_that_submissions_error(warm, course, tmp_path):
    path, _ = warm
    runner = ServiceRunner(path, limits=LIMITS)
    missing = runner.run(tmp_path / "missing.ipynb", Plan(()))
    assert missing.harvest is None and "cannot read the notebook" in missing.error
    runner.path = tmp_path / "gone.sock"  # the service went away between two runs
    notebook = next((course / "subs" / HONEST).glob("*.ipynb"))
    gone = runner.run(notebook, Plan(()))
    assert gone.harvest is None and gone.error.startswith("the sandbox is unavailable: no sandbox")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to connect as another user")
def test_a_client_of_another_user_is_refused(warm):
    _, sandbox = warm
    folder = Path(tempfile.mkdtemp(prefix="scalegrade-service-test-"))
    os.chmod(folder, 0o755)  # a folder anyone may enter, unlike pytest's
    path, stop = folder / "s.sock", threading.Event()
    thread = threading.Thread(target=serve, args=(path, sandbox, stop), daemon=True)
    thread.start()
    try:
        while not path.exists():
            time.sleep(0.05)
        assert path.stat().st_mode & 0o777 == 0o600  # no one else may even connect
        os.chmod(path, 0o666)  # and were the socket open, the service checks who calls
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            try:
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect(str(path))
                wire.send(conn.fileno(), {"op": "hello"})
                msg, _ = wire.recv(conn.fileno(), time.monotonic() + 10)
                os.write(w, str(msg.get("why") or msg).encode())
            except BaseException as err:
                os.write(w, f"{type(err).__name__}: {err}".encode())
            finally:
                os._exit(0)
        os.close(w)
        why = os.read(r, 1000).decode()
        os.waitpid(pid, 0)
    finally:
        stop.set()
        thread.join(10)
        shutil.rmtree(folder, ignore_errors=True)
    assert why == "this service answers its own user only"


def test_service_and_its_socket_go_together():
    done = CliRunner().invoke(main, ["grade", "tdlsm/hw1", ".", "--keys", ".", "--out", ".",
                                     "--executor", "service"])  # fmt: skip
    assert done.exit_code != 0 and "--executor service and --service SOCKET go together" in (
        done.output
    )


def test_describe_names_what_a_client_checks():
    sandbox = Sandbox(limits=LIMITS, hide=["/srv/course"])
    try:
        info = service.describe(sandbox)
    finally:
        sandbox.close()
    assert info["protocol"] == service.PROTOCOL and info["jobs"] == 2
    assert "/srv/course" in info["hidden"] and "/run" in info["hidden"]
    assert info["limits"] == dataclasses.asdict(LIMITS)


def test_the_command_serves_until_sigterm_and_removes_its_socket(tmp_path):
    import signal
    import subprocess
    import sys

    sock = tmp_path / "s.sock"
    command = [sys.executable, "-m", "scalegrade.cli", "sandbox-serve", str(sock)]
    serving = subprocess.Popen([*command, "--hide", str(tmp_path)], stdout=subprocess.PIPE)
    try:
        for _ in range(200):
            if sock.exists() or serving.poll() is not None:
                break
            time.sleep(0.05)
        runner = ServiceRunner(sock, hide=[tmp_path], limits=LIMITS)  # grade's defaults
        assert runner.threads == 2 and runner.isolation in ("namespaces", "process")
    finally:
        serving.send_signal(signal.SIGTERM)
        out, _ = serving.communicate(timeout=30)
    assert serving.returncode == 0 and not sock.exists()
    assert f"sandbox service on {sock}" in out.decode()


def test_a_second_service_on_a_live_socket_is_refused(warm):
    path, sandbox = warm
    with pytest.raises(SandboxError, match=f"a sandbox service already listens on {path}"):
        serve(path, sandbox, threading.Event())
    assert path.is_socket()  # the first one's, untouched
    ServiceRunner(path, limits=LIMITS)
