"""The online-softmax check (templates/systems/online-softmax-code) through the real sandbox:
its probe runs in the probe process, and the memory of the notebook's process during the
large call is read from outside it, by the job's memory cgroup (executor.py, "memory, from
outside").

The corpus: a naive softmax that forms the whole score matrix, then the same naive code
with every trick that beat the check when it measured inside the notebook's process (a
torch function mode and tracemalloc there): the mode disabled, tracemalloc patched, NumPy
instead of torch, the process's own VmHWM reset, the caller's frames walked, the cgroup's
peak written or left, the matrix formed in a child process.  Each scores exactly what the
plain naive code scores.  So do memory made in an earlier cell and freed as the call
starts, by the call or by the notebook's process, scratch files deleted, and a buffer filled
in an earlier cell, reused through ``out=``: the measured call runs in a process forked for
it into a cgroup of its own, every other process of the job stopped meanwhile.
What the meter admits it cannot see (docs/security.md, "What it leaves open") is shown
beating it, so that the docs change when that does.
"""

from __future__ import annotations

import os

import pytest

from autograder.grading.checks import fraction, grade_result, load_checks
from autograder.sandbox import Limits, Plan, Probe, Sandbox, namespaces_available
from tests.autograder.test_sandbox import notebook
from tests.sandboxes import WHERE, sandbox_at
from tests.templates.codecheck import TEMPLATES, lost, sources

ATTENTION = TEMPLATES / "systems" / "online-softmax-code"
FUNCTION = "online_softmax_attention"
MEMORY = "never materialises the n × n score matrix"
SEEDS = (1, 2024)
LIMITS = Limits(wall_seconds=30.0, cpu_seconds=30, memory_bytes=4 << 30)

needs_cgroup = pytest.mark.skipif(
    os.geteuid() != 0 or not namespaces_available(), reason="needs root (a memory cgroup)"
)
pytestmark = needs_cgroup

NAIVE = """
import math
import torch


def online_softmax_attention(q, k, v, block):
    return torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=1) @ v
"""

# The corpus's plain version: the whole matrix, then summed over blocks of keys, so that
# its result depends on the block size (one that does not, the check refuses as well): only
# the memory measure tells it from the online softmax.
BLOCKED = """
import math
import torch


def naive(q, k, v, block):
    p = torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=1)  # the m × n matrix
    return sum(p[:, j : j + block] @ v[j : j + block] for j in range(0, k.shape[0], block))
"""
PLAIN = BLOCKED + "\nonline_softmax_attention = naive\n"

FORGERIES = {
    # the torch function mode that watched the tensors, switched off
    "torch function mode disabled": BLOCKED
    + """

def online_softmax_attention(q, k, v, block):
    with torch._C.DisableTorchFunction():
        return naive(q, k, v, block)
""",
    # the tracemalloc that watched NumPy's arrays, lying
    "tracemalloc patched": PLAIN
    + """
import tracemalloc
tracemalloc.start = tracemalloc.stop = tracemalloc.reset_peak = lambda *a: None
tracemalloc.is_tracing = lambda: True
tracemalloc.get_traced_memory = lambda: (0, 0)
""",
    "NumPy": """
import numpy as np


def online_softmax_attention(q, k, v, block):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = q @ k.T / np.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return sum(p[:, j : j + block] @ v[j : j + block] for j in range(0, k.shape[0], block))
""",
    # the peak RSS the kernel keeps for the process, reset after the matrix is gone
    "VmHWM reset": BLOCKED
    + """
import ctypes


def online_softmax_attention(q, k, v, block):
    out = naive(q, k, v, block)
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: /proc/self is its own again
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return out
""",
    # whatever measures, looked for up the stack and among the objects: nothing is here
    "frames": BLOCKED
    + """
import gc
import sys


def online_softmax_attention(q, k, v, block):
    out = naive(q, k, v, block)
    frame = sys._getframe()
    while frame is not None:
        for name in list(frame.f_locals):
            if name in ("peak", "base", "largest", "python_peak_bytes", "meter", "gauge"):
                frame.f_locals[name] = 0
        frame = frame.f_back
    for obj in gc.get_objects():
        if type(obj).__name__ in ("Meter", "Sizes"):
            obj.reset = obj.since = lambda *a: 0
    return out
""",
    # the cgroup itself: its peak written, the process moved out (all root's: refused)
    "cgroup written or left": BLOCKED
    + """
import os


def online_softmax_attention(q, k, v, block):
    for line in open("/proc/self/cgroup"):
        number, controllers, path = line.rstrip("\\n").split(":", 2)
        if "memory" in controllers.split(","):
            break
    for folder in ("/sys/fs/cgroup/memory" + path, "/sys/fs/cgroup" + path):
        for name, text in (
            ("memory.max_usage_in_bytes", "0"),
            ("memory.peak", "0"),
            ("../cgroup.procs", str(os.getpid())),
        ):
            try:
                with open(os.path.join(folder, name), "w") as fh:
                    fh.write(text)
            except OSError:
                pass
    return naive(q, k, v, block)
""",
    # the matrix in a child process, which sends back only the result
    "child process": BLOCKED
    + """
import os


def online_softmax_attention(q, k, v, block):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        data = naive(q, k, v, block).numpy().tobytes()
        while data:
            data = data[os.write(w, data) :]
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 20):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    out = torch.frombuffer(bytearray(b"".join(chunks)), dtype=torch.float64)
    return out.reshape(q.shape[0], v.shape[1])
""",
}

# Memory made in an earlier cell and freed as the call starts, to make room for the matrix
# (issue 36): the call runs in a process forked for it, where that memory is shared with
# the notebook's process, so freeing it there gives nothing back to the cgroup.
MADE_ROOM = {
    "a tensor freed at the call": BLOCKED
    + """
BALLAST = [torch.ones(1 << 27, dtype=torch.float64)]  # 1 GiB, resident


def online_softmax_attention(q, k, v, block):
    if q.shape[0] * k.shape[0] > 10**6:  # the large call, the one measured
        BALLAST.clear()  # freed: the cgroup's usage falls below its value at the reset
    return naive(q, k, v, block)
""",
    "an mmap unmapped at the call": BLOCKED
    + """
import mmap

BALLAST = [mmap.mmap(-1, 1 << 30)]
BALLAST[0].write(b"x" * (1 << 30))  # resident


def online_softmax_attention(q, k, v, block):
    while BALLAST and q.shape[0] * k.shape[0] > 10**6:
        BALLAST.pop().close()
    return naive(q, k, v, block)
""",
}

# Memory the forked process takes itself before the call, freed as the call starts: a hook
# of the notebook's run by os.fork in the child.  The meter is reset before the fork (the
# fork's own page tables and copied pages, about 3 MB, counted), so what the hook takes is
# counted, and freeing it makes no room.
MADE_ROOM["a ballast taken in the forked process"] = (
    BLOCKED
    + """
import os

BALLAST = []


def take():
    BALLAST.append(torch.ones(1 << 25, dtype=torch.float64))  # 256 MiB, resident


os.register_at_fork(after_in_child=take)


def online_softmax_attention(q, k, v, block):
    if q.shape[0] * k.shape[0] > 10**6:  # the large call, the one measured
        BALLAST.clear()  # freed: the cgroup's usage falls below its value at a later reset
    return naive(q, k, v, block)
"""
)

# A buffer made resident in an earlier cell and reused through out=: the check measures
# what the process takes during the call, so memory it already holds is not seen.  The
# sizes drawn from the seed only mean that the buffer must hold the largest m × n that the
# question's bounds allow (2560 × 2560): one sized for a fixed, published size (the check's
# former m = n = 384) falls back to a fresh matrix and scores what the naive code scores.
# (Summed over blocks of keys, so that the result is not the same bit for bit for every
# block size, which the check also refuses.)
PREALLOCATED = """
import math
import torch

BUFFER = torch.zeros({elements}, dtype=torch.float64)  # written: resident from now on


def online_softmax_attention(q, k, v, block):
    m, n = q.shape[0], k.shape[0]
    if m * n > BUFFER.numel():
        return torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=1) @ v
    s = BUFFER[: m * n].view(m, n)
    torch.matmul(q, k.T, out=s)
    s.div_(math.sqrt(q.shape[1]))
    s.sub_(s.max(dim=1, keepdim=True).values).exp_()
    s.div_(s.sum(dim=1, keepdim=True))
    out = torch.zeros(m, v.shape[1], dtype=q.dtype)
    for j in range(0, n, block):  # summed by blocks: the result depends on the block size
        out += s[:, j : j + block] @ v[j : j + block]
    return out
"""

# Memory the job held at the reset and gives back during the call, from outside the call's
# process: files of a scratch folder (a tmpfs charged to the job) deleted as the call starts,
# and a process the notebook started freeing its own when the call asks.  The call runs in a
# cgroup of its own (measuring.py), which neither gives anything back to.
MADE_ROOM["scratch files deleted at the call"] = (
    BLOCKED
    + """
import os

BALLAST = []
for i in range(64):  # what /tmp holds, up to four times the file-size limit
    try:
        with open(f"/tmp/ballast-{i}", "wb") as fh:
            fh.write(b"\\1" * (8 << 20))
        BALLAST.append(f"/tmp/ballast-{i}")
    except OSError:
        break


def online_softmax_attention(q, k, v, block):
    if q.shape[0] * k.shape[0] > 10**6:  # the large call, the one measured
        while BALLAST:
            os.remove(BALLAST.pop())
    return naive(q, k, v, block)
"""
)
MADE_ROOM["a process of the notebook's freeing its own at the call's word"] = (
    BLOCKED
    + """
import os, time

MAIN = os.getpid()
READY, TOLD = os.pipe()
if os.fork() == 0:  # a helper, from an earlier cell: 1 GiB of its own, freed when asked
    BALLAST = torch.ones(1 << 27, dtype=torch.float64)
    os.write(TOLD, b"1")
    while not os.path.exists("/tmp/free-it"):
        time.sleep(0.001)
    os._exit(0)
os.read(READY, 1)  # the helper holds its gibibyte


def online_softmax_attention(q, k, v, block):
    if q.shape[0] * k.shape[0] > 10**6 and os.getpid() != MAIN:
        open("/tmp/free-it", "w").close()  # the helper is stopped: it frees nothing
        time.sleep(0.5)
    return naive(q, k, v, block)
"""
)

# What docs/security.md ("What it leaves open") admits the meter cannot see: memory charged
# before the call and written again by it (a mapping shared with the notebook's process).
# It earns the memory points; when it stops, the docs must say so.
ADMITTED = {
    # the resident buffer above, made as a mapping shared with S: the forked process's
    # writes copy nothing
    "a shared mapping written again": "import mmap\n"
    + PREALLOCATED.format(elements=2560 * 2560).replace(
        "BUFFER = torch.zeros(6553600, dtype=torch.float64)",
        "RAW = mmap.mmap(-1, 6553600 * 8)\nRAW.write(b'\\1' * len(RAW))\n"
        "BUFFER = torch.frombuffer(RAW, dtype=torch.float64)",
    ),
}


@pytest.fixture(scope="module", params=WHERE)
def sandbox(request):
    """The warm sandbox on the host, and in the grading image (where the grader gives the
    container a memory cgroup of its own: cgroup v1, as root)."""
    with sandbox_at(request, LIMITS) as box:
        if not box.memory.get("cgroup"):
            pytest.skip(f"no memory cgroup here: {box.memory.get('why')}")
        yield box


@pytest.fixture(scope="module")
def checks():
    loaded = load_checks(ATTENTION, "checks.py")
    assert loaded.isolated
    return loaded


def _graded(sandbox, checks, tmp_path, cells: str, seed: int = SEEDS[0]) -> list[dict]:
    plan = Plan((), (Probe("q1-online", FUNCTION, checks.source, seed, {}, isolated=True),))
    outcome = sandbox.run(notebook(tmp_path / "nb.ipynb", cells), plan)
    assert outcome.error is None, (outcome.error, outcome.log[-2000:])
    probe = outcome.harvest["probes"]["q1-online"]
    assert probe["ok"], probe
    return grade_result(checks.grade, probe["result"], seed, {})


def test_the_reference_scores_full_marks_the_same_each_time_and_the_starter_zero(
    sandbox, checks, tmp_path
):
    code = sources(ATTENTION)
    for seed in SEEDS:
        first = _graded(sandbox, checks, tmp_path, code.solution, seed)
        assert fraction(first) == 1, [p["message"] for p in first if p["score"] < 1]
        assert _graded(sandbox, checks, tmp_path, code.solution, seed) == first
    assert fraction(_graded(sandbox, checks, tmp_path, code.starter)) == 0


def test_forgeries_of_the_memory_measure_score_what_the_naive_code_scores(
    sandbox, checks, tmp_path
):
    plain = _graded(sandbox, checks, tmp_path, PLAIN)
    assert lost(plain) == {MEMORY}  # the naive code is right, and forms the matrix
    assert "at least half the" in next(p["message"] for p in plain if p["name"] == MEMORY)
    assert lost(_graded(sandbox, checks, tmp_path, NAIVE)) == {MEMORY}  # refused twice over
    for name, cells in FORGERIES.items():
        props = _graded(sandbox, checks, tmp_path, cells)
        assert fraction(props) == fraction(plain) and lost(props) == lost(plain), name


def test_a_buffer_sized_for_a_fixed_size_does_not_help(sandbox, checks, tmp_path):
    plain = _graded(sandbox, checks, tmp_path, PLAIN)
    props = _graded(sandbox, checks, tmp_path, PREALLOCATED.format(elements=384 * 384))
    assert fraction(props) == fraction(plain) and lost(props) == lost(plain)


def test_memory_freed_or_reused_from_before_the_call_does_not_help(sandbox, checks, tmp_path):
    """The measured call runs in a process forked for it into a cgroup of its own, every
    other process of the job stopped (prober.Student.measured, measuring.py): memory the
    notebook made before is shared with its process there, so freeing it makes no room,
    nor does what the job gives back elsewhere, and writing the matrix into a buffer made
    before copies its pages, which count."""
    plain = _graded(sandbox, checks, tmp_path, PLAIN)
    tried = {**MADE_ROOM, "resident buffer": PREALLOCATED.format(elements=2560 * 2560)}
    for name, cells in tried.items():
        props = _graded(sandbox, checks, tmp_path, cells)
        assert fraction(props) == fraction(plain) and lost(props) == lost(plain), name


def test_the_routes_the_docs_admit_still_beat_the_cgroup_meter(sandbox, checks, tmp_path):
    for name, cells in ADMITTED.items():
        assert fraction(_graded(sandbox, checks, tmp_path, cells)) == 1, name


def test_without_a_cgroup_the_forgeries_that_beat_vmhwm_are_the_ones_it_admits(checks, tmp_path):
    """The same corpus against the fallback meter (S's VmHWM, sandbox.MEMORY_METERS "proc"):
    the forgeries are real, and beat exactly what that meter says it cannot see."""
    with Sandbox(limits=LIMITS, memory_meter="proc") as box:
        beaten = {
            name
            for name, cells in FORGERIES.items()
            if MEMORY not in lost(_graded(box, checks, tmp_path, cells))
        }
    assert beaten == {"VmHWM reset", "child process"}
