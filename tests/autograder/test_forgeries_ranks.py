"""Ranks that talk outside the comm (issue 36): the ring all-reduce (000 §3.1, Theorem 3.3).

Forked from the student's process, the ranks of one submission could reach each other
through files in the working folder, /tmp or /dev/shm, memory mapped shared in an earlier
cell, pipes made in an earlier cell, or a thread of the student's process that relays
between them.  Each forgery below learns every rank's buffer that way, then sends exactly
the messages a ring would send (partial sums, completed chunks) and returns the exact sum:
against a check of the values alone it earned full marks.

Two things stop it now, each tested here: the ranks are fresh (autograder/sandbox/inside/
ranks.py), so each channel finds no other rank and the forgery, after waiting PATIENCE
seconds, goes on with its own buffer alone, as the plain code does; and, against ranks
forked from S (``fresh=False``, and the process sandbox, which has no init), the check
judges each message and result against what the comm delivered, offset in transit by the
router (templates/collectives/ring-allreduce-code/checks.py).  Either way each scores
exactly what the plain code scores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator import bank
from tests.autograder import test_forgeries
from tests.autograder.test_forgeries import LIMITS, graded, scored_alike
from tests.sandboxes import everywhere

sandbox = everywhere(LIMITS)  # on the host, then in the grading image


RING = "collectives/ring-allreduce-code"

# The ring's messages, worked out from every rank's buffer (``everyone``), and the exact sum.
FAKE_RING = """
import numpy as np


def ring_allreduce(x, rank, world, comm):
    x = np.asarray(x, dtype=np.float64)
    xs = everyone(x, rank, world)
    c = x.size // world
    total = np.sum(xs, axis=0)
    for s in range(world - 1):  # reduce-scatter: chunk rank - s, summed over s + 1 ranks
        i = (rank - s) % world
        partial = sum(xs[(rank - j) % world] for j in range(s + 1))
        comm.send_recv(partial[i * c : (i + 1) * c])
    for s in range(world - 1):  # all-gather: completed chunks
        i = (rank + 1 - s) % world
        comm.send_recv(total[i * c : (i + 1) * c])
    return total
"""

# The plain version: the channel shows a rank its own buffer alone.  A forgery whose
# channel finds no other rank within PATIENCE seconds (``met``) does the same.
ALONE = """
import os, select, time

PATIENCE = {patience}


def alone(x, rank, world):
    return [x if j == rank else np.zeros_like(x) for j in range(world)]


def met(ready):
    end = time.monotonic() + PATIENCE
    while not ready():
        if time.monotonic() > end:
            return False
        time.sleep(0.002)
    return True


def readable(fd):
    return lambda: bool(select.select([fd], [], [], 0)[0])
"""
PLAIN = FAKE_RING + ALONE + "\neveryone = alone\n"

# Files: each run's ranks meet in the first generation folder that lacks their own file.
FILES = """
def everyone(x, rank, world):
    g = 0
    while os.path.exists(f"{ROOT}/{world}-{g}/{rank}.npy"):
        g += 1
    folder = f"{ROOT}/{world}-{g}"
    os.makedirs(folder, exist_ok=True)
    np.save(f"{folder}/.{rank}.npy", x)
    os.replace(f"{folder}/.{rank}.npy", f"{folder}/{rank}.npy")
    paths = [f"{folder}/{j}.npy" for j in range(world)]
    if not met(lambda: all(os.path.exists(q) for q in paths)):
        return alone(x, rank, world)
    return [np.load(q) for q in paths]
"""

# Memory mapped shared in an earlier cell: slots of 64 values per rank, a flag each.
SHARED_MEMORY = """
import mmap

SHARED = mmap.mmap(-1, 1 << 20)  # MAP_SHARED: the ranks forked later all see it


def everyone(x, rank, world):
    view = np.frombuffer(SHARED, dtype=np.float64)
    flags, slots = view[:64], view[64 : 64 + 64 * 64].reshape(64, 64)
    slots[rank, : x.size] = x
    flags[rank] += 1
    mine = flags[rank]
    if not met(lambda: all(flags[j] >= mine for j in range(world))):
        return alone(x, rank, world)
    return [slots[j, : x.size].copy() for j in range(world)]
"""

# Pipes made in an earlier cell, one per rank, inherited by every rank.
PIPES = """
PIPES = [os.pipe() for _ in range(8)]


def everyone(x, rank, world):
    data = x.tobytes()
    for _ in range(world - 1):
        os.write(PIPES[rank][1], data)
    out = []
    for j in range(world):
        if j == rank:
            out.append(x)
            continue
        if not met(readable(PIPES[j][0])):
            return alone(x, rank, world)
        got = b""
        while len(got) < len(data):
            got += os.read(PIPES[j][0], len(data) - len(got))
        out.append(np.frombuffer(got, dtype=np.float64))
    return out
"""

# A thread of the student's process, started in an earlier cell, relays between the ranks.
RELAY = """
import struct, threading

UP = os.pipe()
DOWN = [os.pipe() for _ in range(8)]


def relay():
    batch = {}
    while True:
        head = os.read(UP[0], 12)
        world, rank, size = struct.unpack("iii", head)
        body = b""
        while len(body) < size:
            body += os.read(UP[0], size - len(body))
        batch[rank] = body
        if len(batch) == world:
            whole = b"".join(batch[j] for j in range(world))
            for j in range(world):
                os.write(DOWN[j][1], whole)
            batch = {}


threading.Thread(target=relay, daemon=True).start()


def everyone(x, rank, world):
    data = x.tobytes()
    os.write(UP[1], struct.pack("iii", world, rank, len(data)) + data)
    if not met(readable(DOWN[rank][0])):
        return alone(x, rank, world)
    whole = b""
    while len(whole) < world * len(data):
        whole += os.read(DOWN[rank][0], world * len(data) - len(whole))
    return list(np.frombuffer(whole, dtype=np.float64).reshape(world, -1))
"""


def routes(files: str, shared_memory: str, pipes: str, relay: str) -> dict:
    """The side channels tried between the ranks of a check, by name (``files`` reads
    ROOT, its folder)."""
    return {
        "files in the working folder": 'ROOT = "."\n' + files,
        "files in /dev/shm": 'ROOT = "/dev/shm"\n' + files,
        "files in /tmp": 'ROOT = "/tmp"\n' + files,
        "memory shared from an earlier cell": shared_memory,
        "pipes from an earlier cell": pipes,
        "a relay thread of the student's process": relay,
    }


ROUTES = routes(FILES, SHARED_MEMORY, PIPES, RELAY)


def forgery(route: str, patience: float = 1.0) -> str:
    return FAKE_RING + ALONE.format(patience=patience) + ROUTES[route]


def forked_checks(tmp_path, qid: str, *runs: str) -> Path:
    """A copy of the question's checks whose ``runs`` (each a call, as checks.py writes
    it) take ranks forked from S (``fresh=False``), where the side channels meet."""
    checks = (bank.load().templates / qid / "checks.py").read_text()
    forked = checks
    for run in runs:
        assert run in forked, run
        forked = forked.replace(run, run[:-1] + ", fresh=False)")
    folder = tmp_path / "forked"
    folder.mkdir(exist_ok=True)
    (folder / "checks.py").write_text(forked)
    return folder


def test_ranks_that_share_their_buffers_outside_the_comm_score_as_the_plain_code(sandbox, tmp_path):
    forgeries = {route: forgery(route) for route in ROUTES}
    plain = PLAIN.format(patience=1.0)
    plain = scored_alike(sandbox, tmp_path, RING, "ring_allreduce", plain, forgeries, part="ring")
    assert plain < 0.5  # the counts are right, the data flow is not (000 Theorem 3.3)


RING_RUNS = (
    "student.ranks(calls, seconds=SIM_SECONDS)",
    "student.ranks(calls, seconds=GLOO_SECONDS, gloo=True)",
)


@pytest.mark.parametrize("route", list(ROUTES))
def test_the_side_channels_carry_every_buffer_between_forked_ranks(sandbox, tmp_path, route):
    """The forgeries work where the ranks are forked from S: over gloo, where no router
    offsets the messages, each returns the exact sum (what the gloo property alone would
    have paid, before it was tied to the simulated ring's data flow); the simulated ring's
    router makes them score as the plain code all the same."""
    checks = forked_checks(tmp_path, RING, *RING_RUNS)
    cells = forgery(route, patience=30.0)
    props = test_forgeries.properties(sandbox, tmp_path, checks, "ring_allreduce", cells)
    gloo = next(p for p in props if "gloo" in p["name"])
    assert "return what dist.all_reduce returns" not in gloo["message"]  # the sum, over gloo
    assert "Counted only as far as" in gloo["message"] and gloo["score"] == 0
    plain = graded(sandbox, tmp_path, checks, "ring_allreduce", PLAIN.format(patience=30.0))
    assert test_forgeries.fraction(props) == plain


# --- the circular convolution's shift properties (001 ch. 1, prop. 1.8) ---------------------------
#
# Its equivariance compares outputs of calls made in separate ranks.  Joined by a side channel,
# a convolution that is not equivariant (zero padding) answers a rolled input with the rolled
# output of another rank: against ranks forked from S that earned the shift points (0.125 ->
# 0.5).  The ranks are fresh now (autograder/sandbox/inside/ranks.py): each finds nothing of the
# others, waits in vain, and answers what the plain code answers.

CONV = "vision/circular-conv-code"
CONV_RANKS = 7  # the calls the check makes in ranks: two pairs at stride 1, three at stride 2
JOINED = """
import os, pickle, time

ZP = circular_conv2d


def circular_conv2d(x, w, stride=1):
    y = ZP(x, w, stride)
    calls = sorted(everyone((x, w, stride, y)), key=lambda c: c[0].numpy().tobytes())
    for x0, w0, s0, y0 in calls:  # the same first one for every roll of an input
        if s0 != stride or x0.shape != x.shape or not torch.equal(w0, w):
            continue
        for a in range(0, x.shape[1], stride):  # x is x0 rolled: answer y0 rolled
            for b in range(0, x.shape[2], stride):
                if torch.equal(torch.roll(x0, (a, b), dims=(1, 2)), x):
                    return torch.roll(y0, (a // stride, b // stride), dims=(1, 2))
    return y
"""
# Files: each rank publishes its call, then reads every call published within 3 s.
JOIN_FILES = """
def everyone(item):
    name = f"{ROOT}/{os.getpid()}-{time.monotonic_ns()}"
    with open(name + ".tmp", "wb") as fh:
        pickle.dump(item, fh)
    os.replace(name + ".tmp", name + ".call")
    end = time.monotonic() + 3
    while time.monotonic() < end:
        found = [f for f in os.listdir(ROOT) if f.endswith(".call")]
        if len(found) >= CALLS:
            break
        time.sleep(0.01)
    items = []
    for f in found:
        with open(f"{ROOT}/{f}", "rb") as fh:
            items.append(pickle.load(fh))
    return items
"""
# Memory shared from an earlier cell, a slot per rank, claimed through a pipe of tokens.
JOIN_MEMORY = """
import mmap, os, pickle, time

SLOT = 1 << 16
SHARED = mmap.mmap(-1, 8 * SLOT)  # MAP_SHARED: the ranks forked later all see it
TOKENS = os.pipe()
os.write(TOKENS[1], bytes(range(8)))


def everyone(item):
    mine = os.read(TOKENS[0], 1)[0]  # one byte each: a slot of its own
    data = pickle.dumps(item)
    SHARED[mine * SLOT + 4 : mine * SLOT + 4 + len(data)] = data
    SHARED[mine * SLOT : mine * SLOT + 4] = len(data).to_bytes(4, "little")
    end = time.monotonic() + 3
    while time.monotonic() < end:
        full = [s for s in range(8) if SHARED[s * SLOT : s * SLOT + 4] != bytes(4)]
        if len(full) >= CALLS:
            break
        time.sleep(0.01)
    sizes = [int.from_bytes(SHARED[s * SLOT : s * SLOT + 4], "little") for s in full]
    return [pickle.loads(SHARED[s * SLOT + 4 : s * SLOT + 4 + n]) for s, n in zip(full, sizes)]
"""
CONV_PLAIN = test_forgeries.ZERO_PADDED
CALLS = f"CALLS = {CONV_RANKS}\n"
CONV_FORGERIES = {
    "files in the working folder": CONV_PLAIN + CALLS + 'ROOT = "."\n' + JOIN_FILES + JOINED,
    "files in /tmp": CONV_PLAIN + CALLS + 'ROOT = "/tmp"\n' + JOIN_FILES + JOINED,
    "files in /dev/shm": CONV_PLAIN + CALLS + 'ROOT = "/dev/shm"\n' + JOIN_FILES + JOINED,
    "memory shared from an earlier cell": CONV_PLAIN + CALLS + JOIN_MEMORY + JOINED,
}


def test_convolutions_joined_outside_the_comm_score_as_the_plain_code(sandbox, tmp_path):
    if sandbox.isolation == "process":
        pytest.skip("the process sandbox has no init: its ranks are forked from S")
    plain = scored_alike(
        sandbox, tmp_path, CONV, "circular_conv2d", CONV_PLAIN, CONV_FORGERIES, part="conv"
    )
    assert plain < 0.25  # wrong at the borders, and no shift equivariance


def test_the_convolutions_side_channels_join_forked_ranks(sandbox, tmp_path):
    """The forgeries work: with the check's ranks forked from S (``fresh=False``), each earns
    the shift points its plain version does not."""
    folder = forked_checks(tmp_path, CONV, "student.ranks(calls)")
    plain = graded(sandbox, tmp_path, folder, "circular_conv2d", CONV_PLAIN)
    for name in ("files in /tmp", "memory shared from an earlier cell"):
        assert (
            graded(sandbox, tmp_path, folder, "circular_conv2d", CONV_FORGERIES[name])
            > plain + 0.25
        )
