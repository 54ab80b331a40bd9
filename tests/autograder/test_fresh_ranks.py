"""Fresh ranks (autograder/sandbox/inside/ranks.py): the processes of a multi-rank check are
started by the job's init, not forked from the student's process, and each runs the notebook
again in namespaces of its own.  What the issue asks of them (issue 36, item 1): a private,
empty working folder, /tmp and /dev/shm each; no descriptor beyond the channel to the probe
process; no process of the student's, nor another rank, within reach.

Each rank below reports what it finds after every rank has written a file of its own into
each scratch folder and S has written one too; in the process sandbox (no namespaces, no
init) the ranks are forked from S, as ``Student.ranks`` says, and this test does not apply.
"""

from __future__ import annotations

import os

import pytest

from autograder.sandbox import Limits, Plan, Probe
from tests.autograder.test_sandbox import notebook
from tests.sandboxes import everywhere, probed

LIMITS = Limits(wall_seconds=60.0, cpu_seconds=60, memory_bytes=3 << 30)
sandbox = everywhere(LIMITS)  # on the host, then in the grading image

WORLD = 4
PROBE = f"""
def probe(student, seed, params):
    out = student.ranks([(r,) for r in range({WORLD})], seconds=20)
    return [o if isinstance(o, dict) else f"{{type(o).__name__}}: {{o}}" for o in out]
"""
CELLS = """
import os, time, mmap, threading

SHARED = mmap.mmap(-1, 4096)  # MAP_SHARED: forked ranks would all see it
READ, WRITE = os.pipe()  # inherited by forked ranks
for folder in (".", "/tmp", "/dev/shm"):
    open(os.path.join(folder, f"made-by-{os.getpid()}-{time.monotonic_ns()}"), "w").close()
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
SHARED[0] += 1


def where(rank):
    for folder in (".", "/tmp", "/dev/shm"):
        open(os.path.join(folder, f"rank-{rank}"), "w").close()
    time.sleep(0.5)  # every rank has written its own by now
    return {
        "files": {f: sorted(n for n in os.listdir(f) if n.startswith("rank-"))
                  for f in (".", "/tmp", "/dev/shm")},
        "made": sum(n.startswith("made-by-") for f in (".", "/tmp", "/dev/shm")
                    for n in os.listdir(f)),
        "mapped": SHARED[0],
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "threads": threading.active_count(),
        "uid": os.getuid(),
    }
"""


def test_each_fresh_rank_has_its_own_folders_descriptors_and_processes(sandbox, tmp_path):
    if sandbox.isolation == "process":
        pytest.skip("the process sandbox has no init: its ranks are forked from S")
    reports = probed(sandbox, tmp_path, CELLS, "where", PROBE)
    assert len(reports) == WORLD and all(isinstance(r, dict) for r in reports), reports
    for rank, seen in enumerate(reports):
        mine = [f"rank-{rank}"]
        # its own scratch: the file it wrote, no other rank's, and only its own run's
        # made-by file in each folder (S's are not there)
        assert seen["files"] == {".": mine, "/tmp": mine, "/dev/shm": mine}, seen
        assert seen["made"] == 3, seen
        assert seen["mapped"] == 1, seen  # its own mapping, made by its own run of the cell
        # 0-2 on /dev/null, 3 to the probe process, its own pipe from the cell, and the
        # descriptor that lists them: nothing inherited
        assert len(seen["fds"]) == 7 and seen["fds"][:4] == [0, 1, 2, 3], seen
        assert seen["pids"] == [1], seen  # PID 1 of its own namespace: no S, no other rank
        assert seen["threads"] == 2, seen  # the main one and its own cell's sleeper
    assert len({r["uid"] for r in reports}) == 1


# A gloo set of fresh ranks: one network namespace made for the set (gloo needs a network),
# and nothing else in common.  Each rank passes every rank's number once round the ring over gloo
# (p − 1 steps, each ends with all of them); the notebook runs in each rank as a
# torch.multiprocessing.spawn worker runs its main module, its __main__ block in S alone.
GLOO_PROBE = f"""
def probe(student, seed, params):
    calls = [(r, {WORLD}, student.gloo_ring()) for r in range({WORLD})]
    out = student.ranks(calls, seconds=60, gloo=True)
    return [o if isinstance(o, dict) else f"{{type(o).__name__}}: {{o}}" for o in out]
"""
GLOO_CELLS = """
import os, time

MAIN_RAN = 0
if __name__ == "__main__":  # S runs it; a fresh rank does not
    MAIN_RAN = 1


def around(rank, world, comm):
    open(f"/tmp/rank-{rank}", "w").close()
    seen, carried = {rank}, [float(rank)]
    for _ in range(world - 1):
        carried = list(comm.send_recv(carried))
        seen.update(int(v) for v in carried)
    time.sleep(0.2)
    return {
        "seen": sorted(seen),
        "tmp": sorted(n for n in os.listdir("/tmp") if n.startswith("rank-")),
        "name": __name__,
        "main_ran": MAIN_RAN,
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    }
"""


def test_a_gloo_set_of_fresh_ranks_shares_its_network_alone(sandbox, tmp_path):
    if sandbox.isolation == "process":
        pytest.skip("the process sandbox has no init: its ranks are forked from S")
    plan = Plan(("MAIN_RAN",), (Probe("q1-around", "around", GLOO_PROBE, 7, {}, isolated=True),))
    outcome = sandbox.run(notebook(tmp_path / "nb.ipynb", GLOO_CELLS), plan)
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    assert outcome.harvest["answers"]["MAIN_RAN"]["value"] == 1  # S ran the __main__ block
    probe = outcome.harvest["probes"]["q1-around"]
    assert probe["ok"], probe
    for rank, seen in enumerate(probe["result"]):
        assert isinstance(seen, dict), seen
        assert seen["seen"] == list(range(WORLD)), seen  # the numbers went round over gloo
        assert seen["tmp"] == [f"rank-{rank}"], seen  # its own /tmp
        assert seen["name"] == "__mp_main__" and seen["main_ran"] == 0, seen
        assert seen["pids"] == [1], seen


# Fresh ranks of a run without gloo serve the next check's run, as forked ones do
# (prober.Channel._fresh_run), never the same check twice; a gloo set is a set of its own.
# Every fresh rank is PID 1 of its namespace: each tells itself by a token its own run of
# the cells drew.
POOL_PROBE = """
def probe(student, seed, params):
    out = []
    if "seed" in params:
        student.seed(params["seed"])  # asked of S: kept fresh ranks never see S, so no matter
    for world, gloo in params["runs"]:
        calls = [(r, student.gloo_ring() if gloo else None) for r in range(world)]
        got = student.ranks(calls, seconds=30, gloo=gloo)
        out.append([f"{type(o).__name__}: {o}" if isinstance(o, Exception) else o for o in got])
    return out
"""
POOL_CELLS = """
import os
TOKEN = os.urandom(8).hex()  # drawn again by each fresh rank's run of this cell


def token(rank, comm):
    return TOKEN
"""


def test_fresh_ranks_serve_the_next_check_never_the_same_one_twice(sandbox, tmp_path):
    if sandbox.isolation == "process":
        pytest.skip("the process sandbox has no init: its ranks are forked from S")
    runs = {
        "q3-ring": {"runs": [(3, False), (2, True)]},  # like the ring: simulated, then gloo
        "q4-tp": {"runs": [(5, False)], "seed": 7},  # like the tensor-parallel MLP's 8
        "q5-twice": {"runs": [(2, False), (2, False)]},
        "q6-after": {"runs": [(2, False)]},
    }
    probes = tuple(Probe(i, "token", POOL_PROBE, 7, p, isolated=True) for i, p in runs.items())
    outcome = sandbox.run(notebook(tmp_path / "nb.ipynb", POOL_CELLS), Plan(("TOKEN",), probes))
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    got = {i: p["result"] for i, p in outcome.harvest["probes"].items()}
    (ring, ring_gloo), (tp,) = got["q3-ring"], got["q4-tp"]
    (first, second), (after,) = got["q5-twice"], got["q6-after"]
    s = outcome.harvest["answers"]["TOKEN"]["value"]
    assert len(set(ring + ring_gloo + tp + second)) == 3 + 2 + 2 + 2  # one process each
    assert s not in ring + ring_gloo + tp + second  # none is S
    assert tp[:3] == ring  # the next check: the 3 kept (past the gloo set), 2 started
    assert first == tp[:2]  # another check: the ranks kept
    assert not set(second) & set(tp)  # the same check again: processes new to it
    assert after == second


# A fresh rank runs each cell of plain Python as a module's code, compiled once per job for
# every rank (harness.compiled_cells): what the cells define must be what S has.
CELLS_AS_WRITTEN = [
    "from __future__ import annotations\n\ndef typed(x: Later) -> Later:\n    return x\n",
    "import inspect\n\ndef shown():\n    return inspect.getsource(typed)\n",
    "%time MAGIC = 5",  # IPython's syntax: run by IPython, in the rank too
    "raise ValueError('a cell that raises')",
    "AFTER = 1  # the cells after it run",
    "def late(a: Later) -> Later:\n    return a\n",  # the __future__ import still holds
    """
def seen(rank):
    return {
        "annotations": [typed.__annotations__, late.__annotations__],
        "source": shown(),
        "magic": MAGIC,
        "after": AFTER,
        "ipython": get_ipython() is not None,
        "name": __name__,
    }
""",
]


def test_a_fresh_rank_runs_the_cells_as_the_student_process_does(sandbox, tmp_path):
    probe = "def probe(student, seed, params):\n    return student.ranks([(0,), (1,)])\n"
    plan = Plan(("AFTER",), (Probe("q1-seen", "seen", probe, 7, {}, isolated=True),))
    outcome = sandbox.run(notebook(tmp_path / "nb.ipynb", *CELLS_AS_WRITTEN), plan)
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    result = outcome.harvest["probes"]["q1-seen"]
    assert result["ok"], result
    strings = {"x": "Later", "return": "Later"}
    for seen in result["result"]:
        assert seen["annotations"] == [strings, {"a": "Later", "return": "Later"}], seen
        assert seen["source"].startswith("def typed(x: Later)"), seen
        assert seen["magic"] == 5 and seen["after"] == 1 and seen["ipython"], seen
        assert seen["name"] == "__mp_main__", seen


COMPILED = """
import codeop, json, marshal, sys
sys.path.insert(0, {root!r})
from autograder.sandbox.inside import harness
harness.prepare()
data = open({path!r}, "rb").read()
blob = harness.compiled_cells(data)  # as the job's compiling process does, once
cells = marshal.loads(blob)
compiled, call = [], codeop.Compile.__call__


def counted(self, source, *args):  # every compilation, of a cell's text or IPython's AST
    compiled.append(source if isinstance(source, str) else "<ast>")
    return call(self, source, *args)


codeop.Compile.__call__ = counted
records = harness.run_cells({path!r}, harness.SPAWNED_NAME, blob)  # as a rank does
with open({out!r}, "w") as fh:
    json.dump({{
        "plain": [code is not None for _, _, code in cells],
        "ok": [r["ok"] for r in records],
        "compiled": compiled,
        "late": harness._shell.user_ns["late"].__annotations__,
    }}, fh)
"""


def test_the_cells_are_compiled_once_for_every_rank(tmp_path):
    """harness.compiled_cells (the job's compiling process): each cell of plain Python
    compiled, in order, under the __future__ imports before it; the magic left to IPython.
    A rank given them runs them without compiling any of them again."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    path = notebook(tmp_path / "nb.ipynb", *CELLS_AS_WRITTEN)
    root, out = str(Path(__file__).resolve().parents[2]), tmp_path / "out.json"
    script = COMPILED.format(root=root, path=str(path), out=str(out))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["plain"] == [True, True, False, True, True, True, True]
    assert got["ok"] == [True, True, True, False, True, True, True]  # the cell that raises
    plain = {c for c, p in zip(CELLS_AS_WRITTEN, got["plain"], strict=True) if p}
    assert not set(got["compiled"]) & plain
    assert got["late"] == {"a": "Later", "return": "Later"}  # the __future__ import held


# Beyond the routes: a thread of S that finds the ranks in /proc (their PID
# namespaces are children of the job's, where S is), reads what each writes into its own
# name (/proc/PID/comm) and signals the others would relay between them.  The ranks run
# under a uid of their own (ranks.py): every signal S sends them is refused.
SPY_PROBE = """
def probe(student, seed, params):
    got = student.ranks([("publish", 0), ("publish", 1)], seconds=20)
    return {"ranks": got, "seen": student("seen", 0)}
"""
SPY_CELLS = """
import ctypes, os, signal, threading, time

SEEN, SIGNALLED = {}, []


def spy():
    while True:
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    name = fh.read().strip()
            except OSError:
                continue
            if name.startswith("rank-"):
                try:
                    os.kill(int(pid), signal.SIGUSR1)
                    SEEN[name] = "signalled"
                except OSError as err:
                    SEEN[name] = type(err).__name__
        time.sleep(0.02)


threading.Thread(target=spy, daemon=True).start()


def relay(mode, rank):
    if mode == "seen":
        return SEEN
    signal.signal(signal.SIGUSR1, lambda *_: SIGNALLED.append(1))
    ctypes.CDLL(None).prctl(15, f"rank-{rank}".encode(), 0, 0, 0)  # PR_SET_NAME
    time.sleep(1.0)
    return len(SIGNALLED)
"""


def test_the_student_process_cannot_signal_the_ranks_to_relay_between_them(sandbox, tmp_path):
    if sandbox.isolation == "process":
        pytest.skip("the process sandbox has no init: its ranks are forked from S")
    if os.geteuid() != 0:
        pytest.skip("not root: S and the ranks run under this account's uid")
    result = probed(sandbox, tmp_path, SPY_CELLS, "relay", SPY_PROBE)
    assert result["ranks"] == [0, 0], result  # no rank was signalled
    # S may find them, and may read their names, but each signal was refused
    assert set(result["seen"].values()) <= {"PermissionError"}, result
