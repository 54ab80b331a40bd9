"""The measured call (autograder/sandbox/inside/measuring.py): ``student.measured`` runs the
call in a process forked into a memory cgroup of its own, every other process of the job
stopped while it runs, and a process that ran all the same voids the measure.

The notebook's function reports what it finds from inside the call: its own cgroup against
the notebook process's, the state of that process (its parent), whether the cgroup
filesystem is within reach; and it takes a known amount of memory, which the measure must
show.  Then the routes the job-wide meter left open (docs/security.md): the notebook's
process freeing its memory as the call starts, at the call's request, and the call waking it
to do so.
"""

from __future__ import annotations

import os

import pytest

from autograder.sandbox import Limits, namespaces_available
from tests.sandboxes import everywhere, probed

LIMITS = Limits(wall_seconds=60.0, cpu_seconds=60, memory_bytes=3 << 30)
sandbox = everywhere(LIMITS)  # on the host, then in the grading image

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not namespaces_available(), reason="needs root (a memory cgroup)"
)

PROBE = """
def probe(student, seed, params):
    out = {{}}
    for mib in {sizes}:
        try:
            found, peak = student.measured(mib)
            out[mib] = {{"found": found, "peak": peak}}
        except Exception as err:
            out[mib] = {{"raised": f"{{type(err).__name__}}: {{err}}"}}
    out["meter"] = student.meter
    return out
"""
CELLS = """
import os

MAIN = os.getpid()


with open("/proc/self/cgroup") as fh:
    JOB = next(x for x in fh.read().splitlines() if "memory" in x or x.startswith("0::"))
    JOB = JOB.rpartition("/")[2]


def where(mib):
    block = bytearray(mib << 20)  # written: resident
    block[::4096] = b"x" * len(block[::4096])
    with open(f"/proc/{MAIN}/stat") as fh:
        state = fh.read().rpartition(")")[2].split()[0]
    with open("/proc/self/cgroup") as fh:  # the job's: where the notebook's process was
        apart = not any(x.rstrip("/").endswith(JOB) for x in fh.read().splitlines())
    reach = [top for root in ("/sys/fs/cgroup", "/cgroup") for top, dirs, _ in os.walk(root)
             if JOB in dirs]  # the job's cgroup, where a process could move itself
    return {"state": state, "apart": apart, "reach": reach, "pid": os.getpid() != MAIN}
"""


def _measured(sandbox, tmp_path, cells: str, sizes: tuple = (0, 64)) -> dict:
    """``where(mib)`` measured for each size, in turn (MiB)."""
    return probed(sandbox, tmp_path, cells, "where", PROBE.format(sizes=sizes))


def test_the_call_runs_apart_while_the_notebook_process_is_stopped(sandbox, tmp_path):
    got = _measured(sandbox, tmp_path, CELLS)
    for mib in ("0", "64"):
        found = got[mib]["found"]
        assert found["pid"] and found["apart"], got  # a process of its own, in its own cgroup
        assert found["state"] == "T", got  # the notebook's process, stopped meanwhile
        assert found["reach"] == [], got  # no cgroup of the job's to move itself into
    # what the call took, and little else: its fork's page tables and copied pages
    assert got["0"]["peak"] < 16 << 20, got
    assert 64 << 20 <= got["64"]["peak"] < (64 + 16) << 20, got


# A process the notebook started holds 1 GiB, charged to the job before the call, and frees
# it when the call signals it: with the job-wide meter this made room for 1 GiB.  Now that
# process is stopped: the signal waits, and the call's own memory shows; woken by the call
# (SIGCONT), it ran, and the measure is void.
FREED = """
import os, signal, time

READY, TOLD = os.pipe()
HELPER = os.fork()
if HELPER == 0:
    signal.signal(signal.SIGUSR1, lambda *_: os._exit(0))  # its gibibyte freed with it
    BALLAST = bytearray(1 << 30)
    for at in range(0, len(BALLAST), 4096):
        BALLAST[at] = 1  # resident
    os.write(TOLD, b"1")
    while True:
        time.sleep(1)
os.read(READY, 1)


def where(mib):
    os.kill(HELPER, signal.SIGUSR1)  # free your gibibyte: I take its room
    if {wake}:
        os.kill(HELPER, signal.SIGCONT)
    time.sleep(0.5)
    block = bytearray(mib << 20)
    block[::4096] = b"x" * len(block[::4096])
    return {{"apart": True}}
"""


def test_memory_a_process_of_the_notebook_frees_during_the_call_makes_no_room(sandbox, tmp_path):
    got = _measured(sandbox, tmp_path, FREED.format(wake=False), (64,))
    assert got["64"]["peak"] >= 64 << 20, got  # the call's 64 MiB, whatever S was told
    woken = _measured(sandbox, tmp_path, FREED.format(wake=True), (64,))
    assert woken["64"]["raised"].startswith("RuntimeError: a process of the notebook ran"), woken


# A process the notebook started in an earlier cell, that computes for the call: stopped
# during the call, it answers nothing, and the call falls back on its own work, measured.
HELPER = """
import os, select, time

ASK_R, ASK_W = os.pipe()
ANSWER_R, ANSWER_W = os.pipe()
if os.fork() == 0:  # the helper: takes the memory the call asks for, then answers
    while True:
        mib = int.from_bytes(os.read(ASK_R, 4), "little")
        block = bytearray(mib << 20)
        block[::4096] = b"x" * len(block[::4096])
        os.write(ANSWER_W, b"done")
        del block


def where(mib):
    while select.select([ANSWER_R], [], [], 0)[0]:
        os.read(ANSWER_R, 4)  # a late answer to an earlier call
    os.write(ASK_W, mib.to_bytes(4, "little"))
    if select.select([ANSWER_R], [], [], 2.0)[0]:
        os.read(ANSWER_R, 4)
        return {"helped": True}
    block = bytearray(mib << 20)  # the helper is stopped: the call does its own work
    block[::4096] = b"x" * len(block[::4096])
    return {"helped": False}
"""


def test_a_process_of_the_notebook_cannot_work_for_the_call(sandbox, tmp_path):
    got = _measured(sandbox, tmp_path, HELPER, (64,))
    assert got["64"]["found"] == {"helped": False}, got
    assert got["64"]["peak"] >= 64 << 20, got
