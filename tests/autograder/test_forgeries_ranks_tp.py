"""Ranks that talk outside the comm (issue 36): the tensor-parallel MLP (000 §3.3).

Forked from the student's process, the ranks of one submission could reach each other
through files in the working folder, /tmp or /dev/shm, memory mapped shared in an earlier
cell, pipes made in an earlier cell, a thread of the student's process that relays between
them, or sockets of their own.  Each forgery below has every rank publish its own blocks of
W₁ and W₂ that way and rebuild the whole matrices from what the others published, so that
a wrong layout that reads the other ranks' blocks (every rank computes the whole MLP, rank
0 computes it for everyone, the rows of W₁ split, the result computed locally) sends and
returns, with the other blocks set to NaN in its own copy, exactly what it does with the
real matrices: against the check of that alone it earned full marks.

Two things stop it now.  The ranks are fresh (autograder/sandbox/inside/ranks.py): each
channel finds no other rank, and the forgery, after waiting PATIENCE seconds, goes on with
its own arguments, as the plain code does.  And against ranks forked from S (``fresh=False``,
and the process sandbox, which has no init) the check redraws real blocks of the other
ranks between rounds (a rank whose own blocks did not change must send what it sent), and
its all_reduce adds an offset of its own to the sum, so that only a result that came
through it counts (templates/parallel/tensor-parallel-mlp-code/checks.py).  Either way each
forgery scores exactly what the same code scores when it reads its own arguments.
"""

from __future__ import annotations

import pytest

from tests.autograder import test_forgeries
from tests.autograder.test_forgeries import graded, scored_alike
from tests.autograder.test_forgeries_ranks import forked_checks, routes
from tests.sandboxes import everywhere

sandbox = everywhere(test_forgeries.LIMITS)  # on the host, then in the grading image

TP = "parallel/tensor-parallel-mlp-code"
FN = "tp_mlp_forward"
WAIT = "student.rounds(rounds, seconds=WAIT_S)"  # the check's run of the ranks

# The wrong layouts, reading the whole W₁ and W₂ through ``whole(w1, w2, rank, t)``.
NO_SPLIT = """
def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):  # every rank the whole MLP, averaged
    w1, w2 = whole(w1, w2, rank, t)
    return all_reduce(F.gelu(x @ w1) @ w2 / t)
"""
RANK_ZERO = """
def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):  # rank 0 computes it for everyone
    w1, w2 = whole(w1, w2, rank, t)
    y = F.gelu(x @ w1) @ w2
    return all_reduce(y if rank == 0 else torch.zeros_like(y))
"""
ROW_SPLIT = """
def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):  # rows of W1 sent, the MLP kept
    w1, w2 = whole(w1, w2, rank, t)
    pre = x.chunk(t, dim=1)[rank] @ w1.chunk(t, dim=0)[rank]
    all_reduce(F.gelu(pre) @ w2)
    return F.gelu(x @ w1) @ w2
"""
# The row split's result given the grader's offset: the answer less the sum of the
# messages, which the ranks also publish (``exchange``).
OFFSET_RECOVERED = """
def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):  # rows of W1 sent, the MLP + offset
    w1, w2 = whole(w1, w2, rank, t)
    pre = x.chunk(t, dim=1)[rank] @ w1.chunk(t, dim=0)[rank]
    message = F.gelu(pre) @ w2
    answer = all_reduce(message)
    sent = exchange(1, t, rank, message.numpy().ravel())
    if sent is None:  # alone: the row split's result
        return F.gelu(x @ w1) @ w2
    offset = answer - torch.from_numpy(np.sum(sent, axis=0).reshape(tuple(answer.shape)))
    return F.gelu(x @ w1) @ w2 + offset
"""

# What the channels carry, shown where it earns nothing: the zero-padded layout takes the
# other blocks through a channel instead of its NaN copy, and the honest layout returns its
# own MLP plus the offset recovered from the others' messages.
ZERO_PADDED = """
def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):  # the whole W2, a zero-padded hidden
    w1, w2 = whole(w1, w2, rank, t)
    a = w1.chunk(t, dim=1)[rank]
    hidden = torch.zeros(x.shape[0], w1.shape[1], dtype=x.dtype)
    size = w1.shape[1] // t
    hidden[:, rank * size : (rank + 1) * size] = F.gelu(x @ a)
    return all_reduce(hidden @ w2)
"""
NAN_TO_NUM = """
def whole(w1, w2, rank, t):
    return torch.nan_to_num(w1), torch.nan_to_num(w2)
"""
HONEST_OFFSET_RECOVERED = """
def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):  # the honest partial, the MLP + offset
    a, b = w1.chunk(t, dim=1)[rank], w2.chunk(t, dim=0)[rank]
    message = F.gelu(x @ a) @ b
    answer = all_reduce(message)
    sent = exchange(1, t, rank, message.numpy().ravel())
    if sent is None:  # alone
        return answer
    offset = answer - torch.from_numpy(np.sum(sent, axis=0).reshape(tuple(answer.shape)))
    w1, w2 = whole(w1, w2, rank, t)
    return F.gelu(x @ w1) @ w2 + offset
"""

# ``exchange(tag, t, rank, values)`` gives the values of every rank of the round, in rank
# order, or None where its channel found no other rank within PATIENCE seconds (``met``):
# from then on the rank is ALONE, and every exchange gives None at once.
PRELUDE = """
import os, select, struct, time, uuid
import numpy as np
import torch
import torch.nn.functional as F

TOKEN = uuid.uuid4().hex[:12]  # drawn in this cell: every rank forked later holds it
COUNT = {}  # (tag, t) -> the exchanges this rank has made: the round, as the others count
PATIENCE = %r
ALONE = []


def generation(tag, t):
    g = COUNT.get((tag, t), 0)
    COUNT[(tag, t)] = g + 1
    return g


def met(ready):
    end = time.monotonic() + PATIENCE
    while not ready():
        if time.monotonic() > end:
            ALONE.append(True)
            return False
        time.sleep(0.001)
    return True


def readable(fd):
    return lambda: bool(select.select([fd], [], [], 0)[0])
"""


def prelude(patience: float = 1.0) -> str:
    return PRELUDE % patience


# The plain versions: each rank reads its own arguments.
PLAIN = """
def whole(w1, w2, rank, t):
    return w1, w2
"""

# Every rank's own blocks, published over ``exchange(tag, t, rank, values)`` (the values of
# every rank of the round, in rank order), and the whole matrices rebuilt from them.
WHOLE = """
def whole(w1, w2, rank, t):
    d, h = w1.shape
    cut = [j * h // t for j in range(t + 1)]
    mine = torch.cat([w1[:, cut[rank] : cut[rank + 1]].reshape(-1),
                      w2[cut[rank] : cut[rank + 1], :].reshape(-1)])
    got = exchange(0, t, rank, mine.numpy())
    if got is None:  # alone: its own arguments
        return w1, w2
    a, b = w1.clone(), w2.clone()
    for j, v in enumerate(got):
        n = d * (cut[j + 1] - cut[j])
        a[:, cut[j] : cut[j + 1]] = torch.from_numpy(np.array(v[:n])).reshape(d, -1)
        b[cut[j] : cut[j + 1], :] = torch.from_numpy(np.array(v[n:])).reshape(-1, d)
    return a, b
"""

# Files: each exchange meets in a folder of its own, named by the round.
FILES = """
def exchange(tag, t, rank, values):
    if ALONE:
        return None
    folder = f"{ROOT}/tp-{TOKEN}-{tag}-{t}-{generation(tag, t)}"
    os.makedirs(folder, exist_ok=True)
    np.save(f"{folder}/.{rank}.npy", values)
    os.replace(f"{folder}/.{rank}.npy", f"{folder}/{rank}.npy")
    paths = [f"{folder}/{j}.npy" for j in range(t)]
    if not met(lambda: all(os.path.exists(p) for p in paths)):
        return None
    return [np.load(p) for p in paths]
"""

# Memory mapped shared in an earlier cell: a slot per exchange and rank, a count each.
SHARED_MEMORY = """
import mmap

SLOT, ROUNDS = 2048, 32  # values of a slot; rounds per degree
SHARED = mmap.mmap(-1, 8 * 2 * 9 * 8 * ROUNDS * (SLOT + 2))  # MAP_SHARED: the ranks see it


def exchange(tag, t, rank, values):
    if ALONE:
        return None
    view = np.frombuffer(SHARED, dtype=np.float64).reshape(2, 9, 8, ROUNDS, SLOT + 2)
    g = generation(tag, t)
    slots = view[tag, t, :, g]
    slots[rank, 2 : 2 + values.size] = values
    slots[rank, 1] = values.size
    slots[rank, 0] = g + 1
    if not met(lambda: all(slots[j, 0] == g + 1 for j in range(t))):
        return None
    return [slots[j, 2 : 2 + int(slots[j, 1])].copy() for j in range(t)]
"""

# Pipes made in an earlier cell, one for each ordered pair of ranks, inherited by every rank.
PIPES = """
PAIRS = {(i, j): os.pipe() for i in range(8) for j in range(8) if i != j}  # i to j


def read_exactly(fd, n):
    got = b""
    while len(got) < n:
        got += os.read(fd, n - len(got))
    return got


def exchange(tag, t, rank, values):
    if ALONE:
        return None
    data = np.ascontiguousarray(values, dtype=np.float64).tobytes()
    for j in range(t):
        if j != rank:
            os.write(PAIRS[rank, j][1], struct.pack("q", len(data)) + data)
    out = []
    for j in range(t):
        if j == rank:
            out.append(values)
            continue
        if not met(readable(PAIRS[j, rank][0])):
            return None
        (n,) = struct.unpack("q", read_exactly(PAIRS[j, rank][0], 8))
        out.append(np.frombuffer(read_exactly(PAIRS[j, rank][0], n), dtype=np.float64))
    return out
"""

# A thread of the student's process, started in an earlier cell, relays between the ranks.
RELAY = """
import threading

UP = [os.pipe() for _ in range(8)]
DOWN = [os.pipe() for _ in range(8)]


def read_exactly(fd, n):
    got = b""
    while len(got) < n:
        got += os.read(fd, n - len(got))
    return got


def relay():
    batches = {}
    while True:
        ready, _, _ = select.select([r for r, _ in UP], [], [])
        for fd in ready:
            tag, t, rank, g, n = struct.unpack("5q", read_exactly(fd, 40))
            batch = batches.setdefault((tag, t, g), {})
            batch[rank] = read_exactly(fd, n)
            if len(batch) == t:
                del batches[tag, t, g]
                whole = b"".join(struct.pack("q", len(batch[k])) + batch[k] for k in range(t))
                for j in range(t):
                    os.write(DOWN[j][1], whole)


threading.Thread(target=relay, daemon=True).start()


def exchange(tag, t, rank, values):
    if ALONE:
        return None
    data = np.ascontiguousarray(values, dtype=np.float64).tobytes()
    head = struct.pack("5q", tag, t, rank, generation(tag, t), len(data))
    os.write(UP[rank][1], head + data)
    if not met(readable(DOWN[rank][0])):
        return None
    out = []
    for _ in range(t):
        (n,) = struct.unpack("q", read_exactly(DOWN[rank][0], 8))
        out.append(np.frombuffer(read_exactly(DOWN[rank][0], n), dtype=np.float64))
    return out
"""

# Beyond the routes of the issue: unix sockets in the abstract namespace, bound by the
# ranks themselves at call time (nothing made in an earlier cell but a token).
SOCKETS = """
import socket


def exchange(tag, t, rank, values):
    if ALONE:
        return None
    g = generation(tag, t)
    name = lambda j: f"\\0tp-{TOKEN}-{tag}-{t}-{g}-{j}".encode()
    data = np.ascontiguousarray(values, dtype=np.float64).tobytes()
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(name(rank))
        for j in range(t):
            if j != rank and not met(lambda: sent(s, struct.pack("q", rank) + data, name(j))):
                return None
        out = {rank: values}
        while len(out) < t:
            if not met(readable(s.fileno())):
                return None
            got = s.recv(1 << 20)
            out[struct.unpack("q", got[:8])[0]] = np.frombuffer(got[8:], dtype=np.float64)
    return [out[j] for j in range(t)]


def sent(s, message, to):
    try:
        s.sendto(message, to)
        return True
    except OSError:  # not bound yet
        return False
"""

ROUTES = routes(FILES, SHARED_MEMORY, PIPES, RELAY) | {
    "unix sockets in the abstract namespace": SOCKETS
}


def forgeries(layout: str) -> dict:
    return {route: prelude() + how + WHOLE + layout for route, how in ROUTES.items()}


WRONG = {"no split": NO_SPLIT, "rank 0 computes it all": RANK_ZERO, "rows of W1": ROW_SPLIT}


@pytest.mark.parametrize("layout", list(WRONG))
def test_ranks_that_share_their_blocks_outside_the_comm_score_as_the_plain_code(
    sandbox, tmp_path, layout
):
    plain = scored_alike(
        sandbox, tmp_path, TP, FN, prelude() + PLAIN + WRONG[layout], forgeries(WRONG[layout])
    )
    assert plain < 1  # the other ranks' blocks are read (000 §3.3: only its own)


def test_an_offset_recovered_from_the_others_messages_scores_as_the_plain_code(sandbox, tmp_path):
    """The row split's result, made to carry the grader's offset: the answer less the sum
    of the messages the ranks published (files, and memory shared from an earlier cell)."""
    routes = (
        "files in the working folder",
        "files in /dev/shm",
        "memory shared from an earlier cell",
    )
    offset = {r: prelude() + ROUTES[r] + WHOLE + OFFSET_RECOVERED for r in routes}
    plain = scored_alike(sandbox, tmp_path, TP, FN, prelude() + PLAIN + ROW_SPLIT, offset)
    assert plain < 0.5  # neither the value nor the locality (000 §3.3)


def test_nan_shows_what_the_zero_padded_layout_multiplies(sandbox, tmp_path):
    """What a check of values can see (checks.py's docstring): the zero-padded layout (every
    rank multiplies the whole W₂) shows itself only by NaN · 0 on the other ranks' blocks,
    which ``torch.nan_to_num`` on its own copy hides, no channel at all."""
    checks = forked_checks(tmp_path, TP, WAIT)
    assert graded(sandbox, tmp_path, checks, FN, prelude() + NAN_TO_NUM + ZERO_PADDED) == 1.0
    assert graded(sandbox, tmp_path, checks, FN, prelude() + PLAIN + ZERO_PADDED) < 1


@pytest.mark.parametrize("route", list(ROUTES))
def test_the_side_channels_carry_the_blocks_and_the_offset_between_forked_ranks(
    sandbox, tmp_path, route
):
    """The channels work where the ranks are forked from S, and the check still pays them
    only where what they carry changes nothing a check of values can see: the zero-padded
    layout that fills the other blocks from the channel before multiplying them by zero
    sends what the honest rank sends (as it does with ``torch.nan_to_num``, above), and the
    honest layout that returns its own MLP plus the offset recovered from the others'
    messages returns the answer all_reduce gave, to rounding: what the honest rank returns.
    Without the offset, that MLP is caught."""
    checks = forked_checks(tmp_path, TP, WAIT)
    cells = prelude(30.0) + ROUTES[route] + WHOLE
    assert graded(sandbox, tmp_path, checks, FN, cells + ZERO_PADDED) == 1.0
    assert graded(sandbox, tmp_path, checks, FN, cells + HONEST_OFFSET_RECOVERED) == 1.0
    local = HONEST_OFFSET_RECOVERED.replace("+ offset", "")
    assert graded(sandbox, tmp_path, checks, FN, cells + local) < 1
