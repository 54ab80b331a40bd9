"""The executor's memory cgroups, for real (inside/memory.py): one per
job, holding the student's process S and every process it starts, never the probe process
P; P alone resets and reads its peak (``prober.Student.measured``); nothing is left behind
after the job, the sandbox, or a grader that died.  Where no cgroup can be made, P falls
back to S's VmHWM (weaker, and the meter says so), and with no meter at all, to None and
the reason.

The allocations are NumPy arrays of MB megabytes, every page written (``np.ones``): the
cgroup sees that much more, give or take SLACK: the call's arguments decoded and its value
encoded in S, what the previous call left for S to free, and the charges the kernel
batches per CPU (64 pages each; measured here: 0.2 MB under to 1.4 MB over).  VmHWM is
the resident set, so it also counts the library pages a call touches first (file-backed,
not allocated by anyone): RSS_SLACK (measured: 0.1 MB under here; 5.7 MB over on CI
before the cell paged NumPy's paths in, which it now does before anything is measured).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograder.sandbox import Limits, Plan, Probe, Sandbox, namespaces_available
from autograder.sandbox.inside import jobs, memory
from tests.autograder.test_sandbox import notebook

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="needs root (uids, cgroups)")
BACKENDS = ["process"] + (["namespaces"] if ROOT and namespaces_available() else [])
LIMITS = Limits(wall_seconds=20.0, cpu_seconds=20, memory_bytes=1 << 30)
MB = 40
SLACK = 4_000_000
ALLOCATED = range(MB * 1_000_000 - 1_000_000, MB * 1_000_000 + SLACK)
RSS_SLACK = 8_000_000
RESIDENT = range(MB * 1_000_000 - 1_000_000, MB * 1_000_000 + RSS_SLACK)

PROBE = """
ISOLATED = True


def probe(student, seed, params):
    out = {"meter": student.meter}
    for how in params["hows"]:
        try:
            value, peak = student.measured(how, params["mb"])
        except Exception as err:
            value, peak = f"{type(err).__name__}: {err}", None
        out[how] = {"value": value, "peak": peak}
    return out
"""

GROW = """
import ctypes, os
import numpy as np

np.ones(1000).sum()  # the paths the calls take, paged in before anything is measured

def own_cgroup():
    for line in open("/proc/self/cgroup"):
        number, controllers, path = line.rstrip("\\n").split(":", 2)
        if "memory" in controllers.split(",") or (number == "0" and not controllers):
            found = path
            if "memory" in controllers.split(","):
                return path
    return found


def grow(how, mb):
    n = mb * 1_000_000 // 8
    if how == "nothing":
        return 0.0
    if how == "child":  # a child process allocates, the function waits for it
        pid = os.fork()
        if pid == 0:
            np.ones(n)
            os._exit(0)
        os.waitpid(pid, 0)
        return 0.0
    a = np.ones(n)
    total = float(a.sum())
    del a
    if how == "then reset":  # every reset S may try: its own VmHWM, its cgroup's peak
        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self/* is its own again
        folder = BASE + "/" + os.path.basename(own_cgroup())
        for path, text in (
            ("/proc/self/clear_refs", "5"),
            (folder + "/memory.max_usage_in_bytes", "0"),
            (folder + "/memory.peak", "0"),
        ):
            try:
                with open(path, "w") as fh:
                    fh.write(text)
            except OSError:
                pass
    return total
"""


def _sandbox(backend: str, meter: str = "auto") -> Sandbox:
    return Sandbox(backend=backend, limits=LIMITS, memory_meter=meter)


@pytest.fixture(scope="module", params=BACKENDS)
def box(request):
    with _sandbox(request.param) as sandbox:
        yield sandbox


def _measure(sandbox: Sandbox, tmp_path: Path, hows: list[str]) -> dict:
    cells = f"BASE = {sandbox.memory.get('cgroup') or ''!r}\n" + GROW
    plan = Plan((), (Probe("q1-grow", "grow", PROBE, 1, {"hows": hows, "mb": MB}, True),))
    outcome = sandbox.run(notebook(tmp_path / "nb.ipynb", cells), plan)
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    probe = outcome.harvest["probes"]["q1-grow"]
    assert probe["ok"], probe
    return probe["result"]


def _cgroup_or_skip(sandbox: Sandbox) -> str:
    base = sandbox.memory.get("cgroup")
    if not base:
        pytest.skip(f"no memory cgroup here: {sandbox.memory.get('why')}")
    return base


# --- the cgroup ----------------------------------------------------------------------------


def test_the_probe_process_sees_what_the_students_process_allocates(box, tmp_path):
    _cgroup_or_skip(box)
    got = _measure(box, tmp_path, ["nothing", "array", "child", "then reset"])
    assert "memory cgroup" in got["meter"]
    assert got["nothing"]["peak"] < SLACK
    assert got["array"]["value"] == MB * 1_000_000 // 8  # a sum of ones
    for how in ("array", "child", "then reset"):  # a child is in the cgroup; no reset works
        assert got[how]["peak"] in ALLOCATED, (how, got)


@needs_root
def test_the_students_process_cannot_reset_its_peak_raise_its_limit_or_leave(box, tmp_path):
    base = _cgroup_or_skip(box)
    v1 = box.memory["version"] == 1
    peak, limit = (
        ("memory.max_usage_in_bytes", "memory.limit_in_bytes")
        if v1
        else (
            "memory.peak",
            "memory.max",
        )
    )
    tries = f"""
import json, os
folder = BASE + "/" + os.path.basename(own_cgroup())
tried = {{}}
for name, path, text in (
    ("peak", folder + "/{peak}", "0"),
    ("limit", folder + "/{limit}", str(1 << 40)),
    ("leave", BASE + "/cgroup.procs", str(os.getpid())),
    ("leave to the grader's", os.path.dirname(BASE) + "/cgroup.procs", str(os.getpid())),
):
    try:
        with open(path, "w") as fh:
            fh.write(text)
        tried[name] = "ok"
    except OSError as err:
        tried[name] = type(err).__name__
try:
    os.mkdir(folder + "/mine")
    tried["mkdir"] = "ok"
except OSError as err:
    tried["mkdir"] = type(err).__name__
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, own_cgroup().encode())
    os._exit(0)
os.waitpid(pid, 0)
fds = []
for fd in os.listdir("/proc/self/fd"):
    try:
        fds.append(os.readlink(f"/proc/self/fd/{{fd}}"))
    except OSError:
        pass
q1 = json.dumps({{"folder": folder, "mine": own_cgroup(), "child": os.read(r, 4096).decode(),
                 "tried": tried, "fds": fds}})
"""
    cells = f"BASE = {base!r}\n" + GROW + tries
    outcome = box.run(notebook(tmp_path / "nb.ipynb", cells), Plan(("q1",)))
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    got = json.loads(outcome.harvest["answers"]["q1"]["value"])
    assert os.path.dirname(got["folder"]) == base and os.path.basename(got["folder"]) == (
        os.path.basename(got["mine"])
    )
    assert os.path.basename(got["mine"]).startswith("job-")
    assert got["child"] == got["mine"]  # what S starts is in it too
    # refused; with a job init, the cgroup filesystem is not even in sight (measuring.hide)
    hidden = {"namespaces": "FileNotFoundError", "process": "PermissionError"}[box.isolation]
    assert set(got["tried"].values()) == {hidden}, got["tried"]
    assert not [t for t in got["fds"] if t.startswith("/sys/fs/cgroup")], got["fds"]
    assert not os.path.exists(got["folder"])  # removed with the job


@needs_root
def test_no_cgroup_is_left_behind_by_the_sandbox_or_a_grader_that_died(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        version, own, mount = memory._grader_memory_cgroup()
        parent = own if version == 1 else memory.Memory._v2_parent(own, mount)
    except OSError as err:
        pytest.skip(f"no memory cgroup here: {err}")
    stale = Path(parent) / f"{memory.CGROUP_PREFIX}{dead.pid}"  # a grader that died mid-job
    try:
        (stale / "job-3").mkdir(parents=True)
    except OSError as err:
        pytest.skip(f"no memory cgroup can be made here: {err}")
    with _sandbox(BACKENDS[-1]) as sandbox:
        base = _cgroup_or_skip(sandbox)
        assert not stale.exists()  # swept when the executor started
        got = _measure(sandbox, tmp_path, ["array"])
        assert got["array"]["peak"] in ALLOCATED
        assert os.path.dirname(base) == str(parent)
        assert not [e for e in os.listdir(base) if e.startswith("job-")]  # gone with its job
    assert not os.path.exists(base)


# --- without a cgroup ------------------------------------------------------------------------


def test_without_a_cgroup_the_probe_process_reads_the_students_vmhwm(tmp_path):
    """The fallback (sandbox.MEMORY_METERS "proc"; what "auto" does where no cgroup can be
    made): S's own VmHWM, reset through its /proc/PID/clear_refs, opened by its parent.  It
    sees what S allocates; by its nature it misses S's children, and S can reset it."""
    with _sandbox(BACKENDS[-1], "proc") as sandbox:
        assert sandbox.memory["cgroup"] is None
        got = _measure(sandbox, tmp_path, ["nothing", "array", "child", "then reset"])
    assert "VmHWM" in got["meter"] and "can reset it" in got["meter"]
    assert got["nothing"]["peak"] < SLACK
    assert got["array"]["peak"] in RESIDENT, got
    assert got["child"]["peak"] < SLACK  # what the meter says it cannot see
    assert got["then reset"]["peak"] < SLACK


def test_with_no_meter_the_peak_is_none_and_the_meter_says_why(tmp_path):
    with _sandbox(BACKENDS[-1], "off") as sandbox:
        got = _measure(sandbox, tmp_path, ["array"])
    assert got["array"] == {"value": MB * 1_000_000 // 8, "peak": None}
    assert got["meter"].startswith("no memory meter")


@pytest.mark.skipif(not ROOT or not namespaces_available(), reason="needs a mount namespace")
def test_a_read_only_cgroupfs_degrades_to_vmhwm(tmp_path):
    """A grader where the memory cgroup cannot be made (here: its mount read-only, as in a
    container) still grades: the executor says why, and P falls back to VmHWM."""
    try:
        _, _, mount = memory._grader_memory_cgroup()
    except OSError as err:
        pytest.skip(f"no memory cgroup here: {err}")
    script = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from autograder.sandbox.inside import linux
        from tests.autograder import test_executor as t
        linux.unshare(linux.CLONE_NEWNS)
        linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE, None)
        flags = linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY
        linux.mount(None, {mount!r}, None, flags, None)
        with t._sandbox({BACKENDS[-1]!r}) as box:
            got = t._measure(box, Path({str(tmp_path)!r}), ["array"])
            print(json.dumps({{"memory": box.memory, "got": got}}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["memory"]["cgroup"] is None and "Read-only" in out["memory"]["why"], out
    assert "VmHWM" in out["got"]["meter"]
    assert out["got"]["array"]["peak"] in RESIDENT, out


def _child(seconds: float) -> int:
    pid = os.fork()
    if pid == 0:
        import time

        time.sleep(seconds)
        os._exit(7)
    return pid


def _waits(pidfd: bool) -> None:
    """In a process whose only children are these (waitpid(-1) reaps any child)."""
    import time

    if not pidfd:

        def refused(pid):
            raise OSError("pidfd_open refused")

        os.pidfd_open = refused
    pid = _child(0.2)
    start = time.monotonic()
    done, status = jobs._waitpid_timeout(5.0, pid)
    assert done == pid and os.waitstatus_to_exitcode(status) == 7
    assert time.monotonic() - start < 2.0
    pid = _child(30.0)
    start = time.monotonic()
    try:
        assert jobs._waitpid_timeout(0.1, pid) == (0, 0)
        assert 0.1 <= time.monotonic() - start < 2.0
        # P asked for fresh ranks (its socket readable): woken at once, with or without a
        # timeout, while the child runs on
        r, w = os.pipe()
        os.write(w, b"x")
        for timeout in (5.0, None):
            start = time.monotonic()
            assert jobs._waitpid_timeout(timeout, pid, listen=r) == (-1, 0)
            assert time.monotonic() - start < 2.0
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "polled"])
def test_waiting_with_a_timeout_returns_as_the_child_ends_or_empty_at_the_timeout(pidfd):
    """The job's init waits out the student's grace so (jobs._wait_pair): woken by the
    child's end, through its pidfd where the kernel has them, else by polling, and by the
    probe process's requests for fresh ranks."""
    import traceback

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            _waits(pidfd)
        except BaseException:
            os.write(w, traceback.format_exc().encode())
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        why = fh.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, why
