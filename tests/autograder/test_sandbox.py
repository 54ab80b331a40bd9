"""The sandbox, for real (no mocks): honest notebooks come back; each cheat of the public
set (tests/autograder/cheats.py) meets the isolation, in the same batch as honest
notebooks whose outcomes must not change.  Short limits keep the file fast."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import socket
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import numpy as np
import pytest

from autograder.sandbox import (
    HarvestError,
    Limits,
    Plan,
    Probe,
    Sandbox,
    check_harvest,
    namespaces_available,
)
from autograder.sandbox.inside import UID_BASE, harness
from tests.autograder import cheats

NAMESPACES = namespaces_available()
needs_namespaces = pytest.mark.skipif(
    not NAMESPACES, reason="needs root and Linux namespaces (unshare)"
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

LIMITS = Limits(  # wall and CPU time leave room for a loaded 2-core CI machine
    wall_seconds=8.0,
    cpu_seconds=8,
    memory_bytes=1 << 30,
    processes=48,
    file_bytes=8 << 20,
    open_files=64,
    output_bytes=64 << 10,
    harvest_bytes=1 << 20,
)
SEED = 123456789
PLAN = Plan(
    variables=("q1_a", "q1_b", "q1_c", "q1_d"),
    probes=(Probe("q2-double", "double", cheats.PROBE_SOURCE, SEED, {"n": 5}),),
)
HONEST = cheats.HONEST_ANSWERS | {"q1_d": {"kind": "missing"}}


def expected_probe() -> dict:
    x = np.random.default_rng(SEED).integers(0, 100, size=5).tolist()
    return {"ok": True, "result": {"x": x, "y": [2 * v for v in x]}}


def notebook(path: Path, *cells: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)
    return path


def processes_named(comm: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as fh:
                    if fh.read().strip() == comm:
                        found.append(int(entry))
            except OSError:
                pass
    return found


def assert_honest(outcome, *, isolation: str = "namespaces") -> None:
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    assert outcome.isolation == isolation
    assert outcome.harvest["answers"] == HONEST
    assert outcome.harvest["probes"] == {"q2-double": expected_probe()}
    assert all(c["ok"] for c in outcome.harvest["cells"])


# --------------------------------------------------------------------------- fixtures


def _visible_dir() -> Path | None:
    """A folder outside what every sandbox hides anyway (temp, home, /run, the project),
    so that hiding it is what the test checks."""
    for parent in ("/var/lib", "/opt", "/srv", "/mnt", "/var/cache"):
        try:
            return Path(tempfile.mkdtemp(prefix="scalegrade-test-", dir=parent))
        except OSError:
            continue
    return None


@pytest.fixture(scope="module")
def course():
    """A fake course on disk: keys and output (hidden), a public folder with a root-only
    secret, and a port listening outside the sandbox."""
    base = _visible_dir() if os.geteuid() == 0 else None
    if base is None:
        pytest.skip("needs root and a writable folder outside the temporary directory")
    (base / "keys").mkdir()
    (base / "keys" / "ana.json").write_text('{"q1_a": 42.0}')
    os.chmod(base / "keys", 0o755)
    os.chmod(base / "keys" / "ana.json", 0o644)
    (base / "out").mkdir()
    (base / "later").mkdir()  # its "results" folder is made after the sandbox started
    os.chmod(base / "out", 0o777)  # even a world-writable output folder stays out of reach
    (base / "public").mkdir()
    os.chmod(base, 0o755)
    os.chmod(base / "public", 0o755)
    (base / "public" / "notes.txt").write_text("public notes")
    os.chmod(base / "public" / "notes.txt", 0o644)
    (base / "public" / "secret.txt").write_text("root only")
    os.chmod(base / "public" / "secret.txt", 0o600)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    ctx = cheats.Context(
        keys_dir=str(base / "keys"),
        out_dir=str(base / "out"),
        readable_dir=str(base / "public"),
        secret_file=str(base / "public" / "secret.txt"),
        port=listener.getsockname()[1],
        token=f"sg-{uuid.uuid4().hex[:10]}",
    )
    yield ctx, listener
    listener.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def sandbox(course):
    if not NAMESPACES:
        pytest.skip("needs root and Linux namespaces (unshare)")
    ctx, _ = course
    saved = os.environ.get("SCALEGRADE_SECRET")
    os.environ["SCALEGRADE_SECRET"] = "the-course-secret-0123456789"
    try:
        later = Path(ctx.out_dir).parent / "later" / "results"
        box = Sandbox(backend="namespaces", limits=LIMITS, hide=[ctx.keys_dir, ctx.out_dir, later])
    finally:
        if saved is None:
            del os.environ["SCALEGRADE_SECRET"]
        else:
            os.environ["SCALEGRADE_SECRET"] = saved
    with box:
        yield box


# --------------------------------------------------------------------------- honest runs


@needs_namespaces
def test_honest_notebook_answers_come_back(sandbox, tmp_path):
    outcome = sandbox.run(cheats.honest_notebook(tmp_path / "hw.ipynb"), PLAN)
    assert_honest(outcome)
    assert [c["index"] for c in outcome.harvest["cells"]] == [1, 2, 3, 4]  # 0 is markdown
    assert outcome.seconds < 2


@needs_namespaces
def test_a_failing_cell_is_recorded_and_later_cells_run(sandbox, tmp_path):
    nb = notebook(
        tmp_path / "fails.ipynb",
        "x = 1",
        "1 / 0",
        "q1_a = x + 1",
        "def broken(:",
        "q1_b = 'after'",
        "raise SystemExit(3)",
        "q1_c = 'still running'",
    )
    outcome = sandbox.run(nb, PLAN)
    assert outcome.error is None
    cells = outcome.harvest["cells"]
    assert [c["ok"] for c in cells] == [True, False, True, False, True, False, True]
    assert cells[1]["error"] == "ZeroDivisionError: division by zero"
    assert cells[3]["error"].startswith("SyntaxError")
    assert cells[5]["error"].startswith("SystemExit")
    answers = outcome.harvest["answers"]
    assert answers["q1_a"] == {"kind": "number", "value": 2}
    assert answers["q1_c"] == {"kind": "string", "value": "still running"}
    assert outcome.harvest["probes"]["q2-double"] == {
        "ok": False,
        "error": "function double is not defined",
    }


@needs_namespaces
def test_magics_work_or_are_refused_cleanly(sandbox, tmp_path):
    nb = notebook(
        tmp_path / "magics.ipynb",
        "!echo SHELL-RAN",
        "%%bash\necho SHELL-RAN",
        "%system echo SHELL-RAN",
        "listing = !ls",
        "%ls",
        "%run other.py",
        "%pip install requests",
        "%%script sh\necho SHELL-RAN",
        "%time q1_a = 1.5",
        "%%capture captured\nprint('captured output')",
        "%matplotlib inline\nq1_b = captured.stdout.strip()",
    )
    outcome = sandbox.run(nb, PLAN)
    assert outcome.error is None
    cells = outcome.harvest["cells"]
    for cell in cells[:8]:
        assert not cell["ok"]
        assert cell["error"].startswith("RefusedMagic: ")
        assert "not allowed in a graded notebook" in cell["error"]
    assert "%%bash" in cells[1]["error"] and "%run" in cells[5]["error"]
    assert all(c["ok"] for c in cells[8:])
    assert outcome.harvest["answers"]["q1_a"] == {"kind": "number", "value": 1.5}
    assert outcome.harvest["answers"]["q1_b"] == {"kind": "string", "value": "captured output"}
    assert "SHELL-RAN" not in outcome.log.replace("echo SHELL-RAN", "")


def test_cells_without_ipython_syntax_run_as_ipython_runs_them(sandbox, tmp_path):
    """harness._plain_python: a cell IPython would not transform skips the transformation
    and nothing else.  A single line that is an automagic still is one (refused), future
    imports carry to the next cells, IPython's builtins are there, a failing cell is
    recorded and the next one runs."""
    nb = notebook(
        tmp_path / "plain.ipynb",
        "ls",  # one line, a magic's name: %ls, refused
        "from __future__ import annotations\ndef f(x: Undefined) -> int:\n    return 2 * x",
        "def g(x: AlsoUndefined):\n    return f(x)\nq1_a = g(1.5)",  # the future import holds
        "display('shown')\nq1_b = type(get_ipython()).__name__",
        "1 / 0\nq1_c = 'not reached'",
        "q1_c = 'ran'",
    )
    outcome = sandbox.run(nb, PLAN)
    assert outcome.error is None, outcome.error
    cells = outcome.harvest["cells"]
    assert cells[0]["error"].startswith("RefusedMagic: ") and "%ls" in cells[0]["error"]
    assert [c["ok"] for c in cells[1:]] == [True, True, True, False, True]
    assert cells[4]["error"].startswith("ZeroDivisionError")
    answers = outcome.harvest["answers"]
    assert answers["q1_a"] == {"kind": "number", "value": 3.0}
    assert answers["q1_b"] == {"kind": "string", "value": "InteractiveShell"}
    assert answers["q1_c"] == {"kind": "string", "value": "ran"}


def test_only_what_ipython_would_not_transform_skips_its_transformation():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    plain = ["x = 1\ny = x % 2", "a = b != c\nd = 'why?'  # no help", "time_s = 3", "f(1)"]
    ipython = ["%time x = 1", "x = !ls", "x = %who_ls", "len?", "x = 1\nlen?", "ls", "exit"]
    ipython += ["  indented = 1\n  y = 2", ">>> x = 1\n>>> y = 2", "await g()\nx = 1", "", "\n"]
    ipython += ["x = 1\n%time y = 2", "x = 1\n!ls", "In [1]: x = 1\ny = 2", "len?  # help"]
    assert [harness._plain_python(shell, c) for c in plain] == [True] * len(plain)
    assert [harness._plain_python(shell, c) for c in ipython] == [False] * len(ipython)


@needs_namespaces
def test_the_student_sees_only_its_copy(sandbox, tmp_path):
    project = str(Path(__file__).resolve().parents[2] / "autograder")
    nb = notebook(
        tmp_path / "look.ipynb",
        f"""import os, json
q1_a = os.getuid()
q1_b = os.getcwd() + ' ' + ' '.join(sorted(os.listdir('.')))
pids = [p for p in os.listdir('/proc') if p.isdigit()]
try:
    project = os.listdir({project!r})
except OSError:
    project = []
q1_c = json.dumps([os.getpid(), len(pids) < 5, os.environ.get('HOME'), project])""",
        "import numpy as np\nimport fractions\nq1_d = float(fractions.Fraction(1, 4))",
    )
    outcome = sandbox.run(nb, PLAN)
    assert outcome.error is None, outcome.log
    answers = outcome.harvest["answers"]
    assert UID_BASE <= answers["q1_a"]["value"] < UID_BASE + 1000
    assert answers["q1_b"]["value"] == "/tmp/work look.ipynb"
    pid, few_processes, home, project = json.loads(answers["q1_c"]["value"])
    assert pid == 2 and few_processes and home == "/tmp/home"
    assert project == []  # the project's folders are covered (or absent)
    assert answers["q1_d"] == {"kind": "number", "value": 0.25}  # stdlib still importable


# --------------------------------------------------------------------------- the cheats


def _run_batch(sandbox, jobs, ctx):
    """Run (name, notebook) jobs two at a time; for the detached cheat, check right after
    its run() returned that its process is gone."""
    leftovers = {}

    def one(job):
        name, path = job
        outcome = sandbox.run(path, PLAN)
        if name.startswith("detached"):
            leftovers[name] = processes_named(ctx.token)
        return name, outcome

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(one, jobs))
    return results, leftovers


@needs_namespaces
def test_cheats_meet_the_isolation_and_honest_outcomes_are_unaffected(sandbox, course, tmp_path):
    ctx, listener = course
    honest = cheats.honest_notebook(tmp_path / "honest.ipynb")
    jobs = cheats.corpus(honest, tmp_path, ctx, honest_every=3)
    start = time.monotonic()
    results, leftovers = _run_batch(sandbox, jobs, ctx)
    elapsed = time.monotonic() - start
    by = dict(results)

    for name, outcome in results:
        if name.startswith("honest"):
            assert_honest(outcome)
    for name, outcome in results:  # none took the batch down or ran past its limit
        assert outcome.seconds < LIMITS.wall_seconds + 3, name
    assert elapsed < 30

    def answers(name):
        assert by[name].error is None, (name, by[name].error, by[name].log[-1500:])
        return by[name].harvest["answers"]

    def report(name):
        return answers(name)["q1_c"]["value"]

    # Reading keys from disk: the hidden folder is empty, the root-only file unreadable;
    # the wrong answer comes back as the wrong answer (compared in the trusted process).
    seen = report("read_keys")
    assert f"{ctx.keys_dir}: []" in seen
    assert f"{ctx.keys_dir}/ana.json: FileNotFoundError" in seen
    assert f"{ctx.secret_file}: PermissionError" in seen
    assert f"{ctx.readable_dir}/notes.txt: public notes" in seen  # the control: visible
    assert answers("read_keys")["q1_a"] == {"kind": "number", "value": 0.0}

    # Patched numpy.isclose: the raw (wrong) value is harvested; nothing is compared here.
    assert answers("patched_isclose")["q1_a"] == {"kind": "number", "value": 0.0}

    # Objects equal to everything are not numbers or strings.
    eq = answers("always_equal")
    assert eq["q1_a"] == {"kind": "unsupported", "type": "Anything"}
    assert eq["q1_b"] == {"kind": "unsupported", "type": "Str"}
    assert eq["q1_c"] == {"kind": "unsupported", "type": "Float"}

    # Ending or killing its own process: a cell error, the honest answers still count.
    assert answers("os_exit")["q1_a"] == HONEST["q1_a"]
    assert report("os_exit") == "after the exit"  # the next cells ran
    assert by["os_exit"].harvest["cells"][-2]["error"].startswith("NotebookExit: os._exit(0)")
    for name in ("killpg", "kill_self"):
        assert answers(name) == HONEST | {"q1_d": {"kind": "missing"}}, name
        assert by[name].harvest["cells"][-1]["error"].startswith("NotebookExit"), name
    # Past the guard, the process ends: that submission's recorded error, nobody else's.
    assert by["libc_exit"].harvest is None
    assert "exit code 0" in by["libc_exit"].error
    # The grader is out of reach: PID 1 of its namespace is root's, the grader is outside.
    assert report("kill_parent") == "ran"
    assert by["kill_parent"].harvest["cells"][-1]["error"].startswith("PermissionError")
    # kill(-1) reaches no one: its uid owns no other process, init is not its to kill,
    # and the probe process beside it has another uid (the kernel then reports success)
    assert answers("kill_all")["q1_a"] == HONEST["q1_a"]
    error = by["kill_all"].harvest["cells"][-1]["error"]
    assert error is None or error.startswith("ProcessLookupError")

    assert by["infinite_loop"].error == "timed out after 8 s"
    assert by["infinite_loop"].harvest is None

    bomb = by["memory_bomb"].harvest
    assert by["memory_bomb"].error is None and report("memory_bomb") == "survived"
    assert bomb["cells"][-2]["error"].startswith("MemoryError")

    assert report("fork_bomb") == "survived"
    assert by["fork_bomb"].harvest["cells"][-2]["error"].startswith("BlockingIOError")

    # Results files: the output folder is unreachable, the temp folders are private.
    wrote = report("write_results")
    assert f"{ctx.out_dir}/ana/results.json: " in wrote
    assert f"{ctx.out_dir}/results.json: " in wrote
    assert os.listdir(ctx.out_dir) == []
    for path in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not os.path.exists(f"{path}/scalegrade-fake-results.json")

    # The detached process died with the run (checked right after its run() returned).
    assert report("detached") == "detached"
    assert leftovers["detached"] == []
    assert not os.path.exists("/tmp/scalegrade-late.json")

    # 100 MB of output: drained and dropped, the answers intact.
    flood = by["huge_output"]
    assert flood.error is None and flood.harvest["answers"]["q1_a"]["value"] == 42.0
    assert len(flood.log) < LIMITS.output_bytes + 200
    assert "bytes of output dropped" in flood.log

    # No network: not even the grader's own port on 127.0.0.1.
    assert report("network") == "ConnectionRefusedError | OSError"
    with pytest.raises(BlockingIOError):
        listener.accept()

    assert by["forged_harvest"].harvest is None
    assert by["forged_harvest"].error.startswith("harvest is malformed")
    assert by["garbage_harvest"].error == "harvest is not valid JSON"
    assert report("env_secret") == "no secret"
    assert answers("patched_builtins")["q1_a"] == {"kind": "string", "value": "forty-two"}

    # The warm executor is not contaminated by what a notebook patched.
    check = notebook(
        tmp_path / "after.ipynb",
        "import numpy as np, math\n"
        "q1_c = str((bool(np.isclose(1.0, 2.0)), math.isclose(1.0, 2.0), type(1.0).__name__))",
    )
    after = sandbox.run(check, PLAN)
    assert after.harvest["answers"]["q1_c"]["value"] == "(False, False, 'float')"


@needs_namespaces
def test_a_hidden_folder_made_after_the_start_stays_hidden(sandbox, course, tmp_path):
    ctx, _ = course
    results = Path(ctx.out_dir).parent / "later" / "results"
    results.mkdir()
    (results / "ana.json").write_text('{"score": 69}')
    os.chmod(results, 0o755)
    os.chmod(results / "ana.json", 0o644)
    nb = notebook(
        tmp_path / "later.ipynb",
        f"""try:
    q1_c = open({str(results / "ana.json")!r}).read()
except OSError as err:
    q1_c = type(err).__name__""",
    )
    outcome = sandbox.run(nb, PLAN)
    assert outcome.harvest["answers"]["q1_c"] == {"kind": "string", "value": "FileNotFoundError"}


@needs_namespaces
def test_a_timeout_kills_detached_grandchildren(sandbox, course, tmp_path):
    ctx, _ = course
    token = f"sg-{uuid.uuid4().hex[:10]}"
    nb = notebook(
        tmp_path / "hang.ipynb",
        f"""import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open('/proc/self/comm', 'w').write({token!r})
        time.sleep(60)
    os._exit(0)
time.sleep(0.3)
while True:
    pass""",
    )
    outcome = sandbox.run(nb, PLAN)
    assert outcome.error == "timed out after 8 s"
    assert processes_named(token) == []


# --------------------------------------------------------------------------- lifecycle


def _mounts() -> list[str]:
    """The machine's mounts but a container engine's (a container test may run meanwhile)."""
    with open("/proc/self/mountinfo") as fh:
        return [m for m in fh if "/containers/" not in m and "/netns/" not in m]


@needs_namespaces
def test_close_leaves_no_process_mount_or_folder(tmp_path):
    mounts_before = _mounts()
    box = Sandbox(backend="namespaces", limits=LIMITS)
    executor = box._state.executors[0]
    base = box._state.base_dir
    outcome = box.run(cheats.honest_notebook(tmp_path / "hw.ipynb"), PLAN)
    assert_honest(outcome)
    box.close()
    assert executor.proc.poll() is not None
    assert not base.exists()
    assert _mounts() == mounts_before
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:  # the uid slot is free again (unless another grader on this machine took it)
        probe.bind(f"\0scalegrade-sandbox-uid-{UID_BASE}")
    except OSError:
        pass
    finally:
        probe.close()


def test_the_process_backend_says_what_it_does_not_isolate(tmp_path, caplog):
    limits = Limits(wall_seconds=3.0, cpu_seconds=3, memory_bytes=1 << 30, processes=48)
    caplog.set_level(logging.WARNING, logger="autograder.sandbox")
    token = f"sg-{uuid.uuid4().hex[:10]}"
    honest = cheats.honest_notebook(tmp_path / "honest.ipynb")
    ctx = cheats.Context(token=token)
    with Sandbox(backend="process", limits=limits) as box:
        assert "NOT isolated" in caplog.text and "network" in caplog.text
        jobs = [
            ("honest", honest),
            ("exit", cheats.cheating_notebook(honest, "libc_exit", tmp_path / "x.ipynb", ctx)),
            ("loop", cheats.cheating_notebook(honest, "infinite_loop", tmp_path / "l.ipynb", ctx)),
            ("detached", cheats.cheating_notebook(honest, "detached", tmp_path / "d.ipynb", ctx)),
            ("honest-2", honest),
        ]
        with ThreadPoolExecutor(max_workers=2) as pool:
            by = dict(pool.map(lambda job: (job[0], box.run(job[1], PLAN)), jobs))
        if os.geteuid() == 0:  # as root, every process of the run's uid is killed after it
            assert processes_named(token) == []
    assert_honest(by["honest"], isolation="process")
    assert_honest(by["honest-2"], isolation="process")
    assert "exit code 0" in by["exit"].error
    assert by["loop"].error == "timed out after 3 s"


def test_the_docker_backend_needs_an_image():
    with pytest.raises(ValueError, match="image"):
        Sandbox(backend="docker")


def test_the_system_cannot_be_hidden():
    with pytest.raises(ValueError, match="cannot hide /usr"):
        Sandbox(backend="docker", image="img", hide=[Path("/usr")])


# --------------------------------------------------------------------------- the schema


def _harvest(**changes):
    doc = {
        "cells": [{"index": 1, "ok": True, "error": None}],
        "answers": {
            "q1_a": {"kind": "number", "value": 1.5},
            "q1_b": {"kind": "string", "value": "21 GB"},
            "q1_c": {"kind": "number", "value": "nan"},
            "q1_d": {"kind": "unsupported", "type": "MyFloat"},
        },
        "probes": {"q2-double": {"ok": True, "result": {"y": [1, 2.5, None, "s", True]}}},
    }
    doc.update(changes)
    return doc


def test_a_wellformed_harvest_passes_unchanged():
    assert check_harvest(_harvest(), PLAN) == _harvest()


@pytest.mark.parametrize(
    "changes",
    [
        {"score": 100},
        {"cells": [{"index": 1, "ok": "yes", "error": None}]},
        {"cells": [{"index": 1, "ok": True, "error": "but failed"}]},
        {"answers": {"q1_a": {"kind": "number", "value": 1}}},  # variables missing
        {"answers": _harvest()["answers"] | {"extra": {"kind": "missing"}}},
        {"answers": _harvest()["answers"] | {"q1_a": {"kind": "number", "value": True}}},
        {"answers": _harvest()["answers"] | {"q1_a": {"kind": "number", "value": "1.5"}}},
        {"answers": _harvest()["answers"] | {"q1_a": {"kind": "number", "value": float("inf")}}},
        {"answers": _harvest()["answers"] | {"q1_a": {"kind": "equal", "value": 1}}},
        {"answers": _harvest()["answers"] | {"q1_b": {"kind": "string", "value": "x" * 5000}}},
        {"answers": _harvest()["answers"] | {"q1_d": {"kind": "missing", "value": 3}}},
        {"probes": {}},
        {"probes": {"q2-double": {"ok": True, "result": {1: 2}}}},
        {"probes": {"q2-double": {"ok": True}}},
        {"probes": {"q2-double": {"ok": 1, "result": 2}}},
    ],
)
def test_a_malformed_harvest_is_rejected(changes):
    with pytest.raises(HarvestError):
        check_harvest(_harvest(**changes), PLAN)


def test_deep_nesting_is_rejected():
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(HarvestError, match="deeper"):
        check_harvest(_harvest(probes={"q2-double": {"ok": True, "result": deep}}), PLAN)


# --------------------------------------------------------------------------- the harness


def test_answers_are_read_by_exact_type():
    class MyFloat(float):
        pass

    ns = {
        "f": 1.5,
        "i": 7,
        "big": 10**30,
        "huge": 10**400,
        "s": "21 GB",
        "b": True,
        "np64": np.float64(2.5),
        "np32": np.int32(3),
        "zero_d": np.array(4.0),
        "vec": np.array([1.0, 2.0]),
        "npbool": np.bool_(True),
        "nan": float("nan"),
        "ninf": -np.inf,
        "sub": MyFloat(1.0),
        "dots": ...,
        "long": "x" * 2000,
    }
    got = {name: harness.read_answer(ns, name) for name in [*ns, "absent"]}
    assert got["f"] == {"kind": "number", "value": 1.5}
    assert got["i"] == {"kind": "number", "value": 7}
    assert got["big"] == {"kind": "number", "value": 1e30}
    assert got["huge"]["kind"] == "unsupported"
    assert got["s"] == {"kind": "string", "value": "21 GB"}
    assert got["b"] == {"kind": "number", "value": 1}  # a yes/no answer: True is 1
    assert got["np64"] == {"kind": "number", "value": 2.5}
    assert got["np32"] == {"kind": "number", "value": 3.0}
    assert got["zero_d"] == {"kind": "number", "value": 4.0}
    assert got["vec"]["kind"] == "unsupported"
    assert got["npbool"] == {"kind": "unsupported", "type": "numpy.bool"}
    assert got["nan"] == {"kind": "number", "value": "nan"}
    assert got["ninf"] == {"kind": "number", "value": "-inf"}
    assert got["sub"]["kind"] == "unsupported" and got["sub"]["type"].endswith("MyFloat")
    assert got["dots"] == got["absent"] == {"kind": "missing"}
    assert got["long"]["kind"] == "unsupported"
    harvest = {"cells": [], "answers": got, "probes": {}}
    plan = Plan(variables=tuple(got))
    assert check_harvest(harvest, plan)["answers"] == got  # what the harness makes passes


def test_heavy_imports_are_preloaded_for_the_plan_and_for_code_that_uses_them(tmp_path):
    """torch (2 s) and torch._dynamo (1 s more, imported by the first checkpoint call) are
    imported once in the zygote for the batches that need them, not per submission: what the
    plan's checks preload, and what the notebook's code cells use.  Words in a markdown cell
    or a free-response answer preload nothing."""

    def wanted(cells: list, preloaded=frozenset(), probes=()) -> list[str]:
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_markdown_cell(c[3:])
            if c.startswith("md:")
            else nbformat.v4.new_code_cell(c)
            for c in cells
        ]
        path = tmp_path / "nb.ipynb"
        nbformat.write(nb, path)
        fd = os.open(path, os.O_RDONLY)
        try:
            return Sandbox._on_demand(set(preloaded), Plan(variables=(), probes=probes), fd)
        finally:
            os.close(fd)

    assert wanted(["x = 1"]) == []
    assert wanted(["import torch"]) == ["torch"]
    assert wanted(["torch.utils.checkpoint.checkpoint(f, x)"]) == ["torch", "torch._dynamo"]
    assert wanted(["import torch.utils.checkpoint"], {"torch"}) == ["torch._dynamo"]
    assert wanted(["from torch.utils import checkpoint"], {"torch"}) == ["torch._dynamo"]
    assert wanted(["import torch"], {"torch", "torch._dynamo"}) == []
    essay = "md:I used torch.utils.checkpoint: checkpointing trades compute for memory."
    assert wanted([essay, 'answer = "torch.utils.checkpoint halves the memory"']) == []
    probe = Probe("q1-f", "f", "def probe(s, seed, p):\n    return 1\n", 1, {}, True, ("torch",))
    assert wanted(["x = 1"], probes=(probe,)) == ["torch"]  # the plan's checks need it
    assert wanted(["x = 1"], {"torch"}, probes=(probe,)) == []


@needs_namespaces
def test_without_the_address_space_limit_the_jobs_cgroup_bounds_memory(tmp_path):
    """``Limits(address_space=False)`` (what `grade --gpus` asks, since CUDA reserves far
    more address space than it uses): no RLIMIT_AS where the job has a memory cgroup, which
    then stops a memory bomb by itself, killing the process instead of raising."""
    limits = Limits(wall_seconds=30, cpu_seconds=30, memory_bytes=512 << 20)
    look_cell = "import resource\nq1_c = str(resource.getrlimit(resource.RLIMIT_AS))"
    look = notebook(tmp_path / "look.ipynb", look_cell)
    bomb = notebook(tmp_path / "bomb.ipynb", "x = bytearray(3 << 29)\nq1_c = 'survived'")
    seen = {}
    for address_space in (True, False):
        with Sandbox(limits=dataclasses.replace(limits, address_space=address_space)) as box:
            if not box.memory.get("cgroup"):
                pytest.skip(f"no memory cgroup here: {box.memory.get('why')}")
            seen[address_space] = box.run(look, PLAN), box.run(bomb, PLAN)
    (limited, bombed), (unlimited, killed) = seen[True], seen[False]
    assert limited.harvest["answers"]["q1_c"]["value"] == str((512 << 20, 512 << 20))
    assert bombed.harvest["cells"][0]["error"].startswith("MemoryError")  # the rlimit
    assert unlimited.harvest["answers"]["q1_c"]["value"] == "(-1, -1)"
    assert killed.harvest is None and killed.error == "killed by signal 9 (memory?)"  # cgroup
