"""Checks of the ring all-reduce code part (000 §3.1, Theorem 3.3): the algorithm, not the sum.

``probe`` runs in the sandbox.  It forks the p ranks as separate processes, each calling
the student's ``ring_allreduce(x, rank, world, comm)`` on its own buffer only; a router
that this file owns carries every ``comm.send_recv`` message from rank r to rank r + 1 and
logs it (step, source rank, size, values).  Then a real run: p ranks as processes joined
by ``torch.distributed`` with the gloo backend, the student's function over isend/irecv
against ``dist.all_reduce`` on the same data.

``grade`` runs in the trusted process: it recomputes every rank's buffer from the seed
and scores the outputs and the log, one weighted property at a time.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from datetime import timedelta

import numpy as np

SIM_SECONDS = 20.0  # the simulated ring, all ranks together
GLOO_SECONDS = 20.0  # the gloo run, start-up included
GLOO_OP_SECONDS = 10  # one gloo operation (a rank that waits for a message never sent)
MAX_CALLS_FACTOR = 4  # send_recv calls allowed per rank: 4p (a ring needs 2(p - 1))
RTOL, ATOL = 1e-9, 1e-9

# --- inputs: the same functions in the sandbox (probe) and the trusted process (grade) ---


def sizes(seed: int, run: str) -> tuple[int, int]:
    """(p, n) of a run: "sim" (p in 3..8) or "gloo" (p in 2..4); n = p * k, k in 2..5."""
    rng = np.random.default_rng([seed, 0 if run == "sim" else 1])
    p = int(rng.integers(3, 9)) if run == "sim" else int(rng.integers(2, 5))
    return p, p * int(rng.integers(2, 6))


def rank_input(seed: int, run: str, rank: int, n: int) -> np.ndarray:
    """The buffer of one rank: n standard normal float64 values (drawn in that rank only)."""
    return np.random.default_rng([seed, 2 if run == "sim" else 3, rank]).standard_normal(n)


# --- framing between processes: [len(header), len(payload)] + JSON header + float64 bytes ---

_LENGTHS = struct.Struct("<II")


def _write_frame(fd: int, header: dict, payload: bytes = b"") -> None:
    head = json.dumps(header).encode()
    view = memoryview(_LENGTHS.pack(len(head), len(payload)) + head + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        more = os.read(fd, n - len(data))
        if not more:
            return None
        data += more
    return data


def _read_frame(fd: int) -> tuple[dict, bytes] | None:
    lengths = _read_exact(fd, _LENGTHS.size)
    if lengths is None:
        return None
    nh, npay = _LENGTHS.unpack(lengths)
    body = _read_exact(fd, nh + npay)
    if body is None:
        return None
    return json.loads(body[:nh]), body[nh:]


def _as_vector(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1))


def _plain(a: np.ndarray) -> list:
    """Floats for JSON; non-finite values as "nan", "inf", "-inf"."""
    return [float(v) if np.isfinite(v) else str(float(v)) for v in a.tolist()]


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:300]


def _fork() -> int:
    sys.stdout.flush()
    sys.stderr.flush()
    return os.fork()


def _exit_child() -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def _reap(pids: list[int], grace: float = 2.0) -> None:
    """Wait for the children this probe forked; SIGKILL those still running after ``grace``."""
    end = time.monotonic() + grace
    left = set(pids)
    while left:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        if left and time.monotonic() > end:
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            end = float("inf")
        elif left:
            time.sleep(0.005)


# --- the simulated ring ------------------------------------------------------------------


class _PipeComm:
    """The communicator of one rank: its only link to the other ranks is the router."""

    def __init__(self, to_router: int, from_router: int):
        self._w, self._r = to_router, from_router

    def send_recv(self, chunk) -> np.ndarray:
        """Send ``chunk`` to rank (rank + 1) % world; return what rank (rank - 1) % world sent."""
        _write_frame(self._w, {"kind": "send"}, _as_vector(chunk).tobytes())
        frame = _read_frame(self._r)
        if frame is None:
            raise RuntimeError("comm.send_recv: the ring is gone")
        header, payload = frame
        if header["kind"] == "error":
            raise RuntimeError(header["error"])
        return np.frombuffer(payload, dtype=np.float64).copy()


def _sim_rank(student, seed: int, rank: int, p: int, n: int, to_router: int, from_router: int):
    try:
        x = rank_input(seed, "sim", rank, n)
        out = _as_vector(student(x, rank, p, _PipeComm(to_router, from_router)))
        if out.size > p * n:
            raise ValueError(f"ring_allreduce returned {out.size} elements for n = {n}")
        _write_frame(to_router, {"kind": "result"}, out.tobytes())
    except BaseException as err:  # noqa: BLE001 - anything the student raises, SystemExit too
        try:
            _write_frame(to_router, {"kind": "error", "error": _describe(err)})
        except OSError:
            pass
    _exit_child()


def _simulate(student, seed: int) -> dict:
    """Run the p ranks as processes around a logging router; return outputs, errors, log."""
    p, n = sizes(seed, "sim")
    max_calls = MAX_CALLS_FACTOR * p
    pipes = [(os.pipe(), os.pipe()) for _ in range(p)]  # (rank -> router, router -> rank)
    pids = []
    for r in range(p):
        pid = _fork()
        if pid == 0:
            for i, ((ur, uw), (dr, dw)) in enumerate(pipes):  # keep only this rank's two ends
                for fd in (ur, dw) if i == r else (ur, uw, dr, dw):
                    os.close(fd)
            _sim_rank(student, seed, r, p, n, pipes[r][0][1], pipes[r][1][0])
        pids.append(pid)
    ups = [u[0] for u, _ in pipes]
    downs = [d[1] for _, d in pipes]
    for (_, uw), (dr, _) in pipes:
        os.close(uw)
        os.close(dr)

    sel = selectors.DefaultSelector()
    for r, fd in enumerate(ups):
        sel.register(fd, selectors.EVENT_READ, r)
    buffers = [b""] * p
    sent: list[list[bytes]] = [[] for _ in range(p)]  # sent[r][k]: rank r's k-th message
    delivered = [0] * p
    waiting = [False] * p
    done = [False] * p
    outputs: list = [None] * p
    errors: list = [None] * p
    log: list = []  # [step, source rank, size, values or None]
    timed_out = False

    def reply(r: int, header: dict, payload: bytes = b"") -> None:
        waiting[r] = False
        try:
            _write_frame(downs[r], header, payload)
        except OSError:
            pass

    def finish(r: int, output=None, error=None) -> None:
        done[r], outputs[r], errors[r] = True, output, error
        sel.unregister(ups[r])

    def handle(r: int, header: dict, payload: bytes) -> None:
        kind = header.get("kind")
        if kind == "send":
            k = len(sent[r])
            size = len(payload) // 8
            if k >= max_calls:
                reply(r, {"kind": "error", "error": f"more than {max_calls} calls to send_recv"})
                return
            if size > p * n:
                reply(r, {"kind": "error", "error": f"a message of {size} elements (n = {n})"})
                return
            values = np.frombuffer(payload, dtype=np.float64)
            log.append([k, r, size, _plain(values) if size <= n else None])
            sent[r].append(payload)
            waiting[r] = True
        elif kind == "result":
            finish(r, output=_plain(np.frombuffer(payload, dtype=np.float64)))
        else:
            finish(r, error=str(header.get("error", "unknown error")))

    deadline = time.monotonic() + SIM_SECONDS
    while not all(done):
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(left, 0.5)):
            r = key.data
            data = os.read(ups[r], 1 << 16)
            if not data:
                if not done[r]:
                    finish(r, error="the rank's process ended without returning (os._exit?)")
                continue
            buffers[r] += data
            while len(buffers[r]) >= _LENGTHS.size and not done[r]:
                nh, npay = _LENGTHS.unpack(buffers[r][: _LENGTHS.size])
                end = _LENGTHS.size + nh + npay
                if len(buffers[r]) < end:
                    break
                frame, buffers[r] = buffers[r][:end], buffers[r][end:]
                head = json.loads(frame[_LENGTHS.size : _LENGTHS.size + nh])
                handle(r, head, frame[_LENGTHS.size + nh :])
        moved = False
        for r in range(p):
            src = (r - 1) % p
            if waiting[r] and not done[r] and delivered[r] < len(sent[src]):
                reply(r, {"kind": "data"}, sent[src][delivered[r]])
                delivered[r] += 1
                moved = True
        live = [r for r in range(p) if not done[r]]
        if not moved and live and all(waiting[r] for r in live):
            for r in live:  # nobody can send anything: a deadlock
                src = (r - 1) % p
                reply(
                    r,
                    {
                        "kind": "error",
                        "error": f"deadlock: rank {r} waits for message {delivered[r] + 1} of "
                        f"rank {src}, which made {len(sent[src])} calls to send_recv",
                    },
                )
    sel.close()
    for fd in (*ups, *downs):
        os.close(fd)
    _reap(pids, grace=0.0 if timed_out else 2.0)
    for r in range(p):
        if not done[r]:
            errors[r] = f"timed out after {SIM_SECONDS:g} s"
    return {
        "p": p,
        "n": n,
        "outputs": outputs,
        "errors": errors,
        "log": log,
        "timed_out": timed_out,
    }


# --- the real run: torch.distributed, gloo -----------------------------------------------


class _GlooComm:
    """``send_recv`` over gloo point-to-point: the size first, then the values."""

    def __init__(self, rank: int, world: int):
        self._next, self._prev = (rank + 1) % world, (rank - 1) % world
        self._calls = 0

    def send_recv(self, chunk) -> np.ndarray:
        """Send ``chunk`` to rank (rank + 1) % world; return what rank (rank - 1) % world sent."""
        import torch
        import torch.distributed as dist

        tag = 2 * self._calls
        self._calls += 1
        out = torch.from_numpy(_as_vector(chunk).copy())
        size_out = torch.tensor([out.numel()], dtype=torch.int64)
        size_in = torch.zeros(1, dtype=torch.int64)
        for work in (
            dist.isend(size_out, self._next, tag=tag),
            dist.irecv(size_in, self._prev, tag=tag),
        ):
            work.wait()
        into = torch.empty(int(size_in.item()), dtype=torch.float64)
        works = []
        if out.numel():
            works.append(dist.isend(out, self._next, tag=tag + 1))
        if into.numel():
            works.append(dist.irecv(into, self._prev, tag=tag + 1))
        for work in works:
            work.wait()
        return into.numpy()


def _init_method() -> str:
    """tcp://127.0.0.1 when loopback connects, else a file store in the working directory.

    (A network namespace whose ``lo`` is down binds 127.0.0.1 but cannot connect; then
    gloo cannot run at all, and the file store makes it fail at once instead of timing out.)
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            port = server.getsockname()[1]
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                pass
        return f"tcp://127.0.0.1:{port}"
    except OSError:
        folder = tempfile.mkdtemp(prefix="gloo-", dir=os.getcwd())
        return f"file://{os.path.join(folder, 'store')}"


def _gloo_rank(student, seed: int, rank: int, p: int, n: int, init: str, wfd: int, rfd: int):
    stage = "start"
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group(
            "gloo",
            init_method=init,
            rank=rank,
            world_size=p,
            timeout=timedelta(seconds=GLOO_OP_SECONDS),
        )
        x = rank_input(seed, "gloo", rank, n)
        reference = torch.from_numpy(x.copy())
        dist.all_reduce(reference)
        stage = "student"
        _write_frame(wfd, {"kind": "ready", "reference": _plain(reference.numpy())})
        out = _as_vector(student(x, rank, p, _GlooComm(rank, p)))
        if out.size > p * n:
            raise ValueError(f"ring_allreduce returned {out.size} elements for n = {n}")
        _write_frame(wfd, {"kind": "result", "output": _plain(out)})
    except BaseException as err:  # noqa: BLE001
        try:
            _write_frame(wfd, {"kind": "error", "stage": stage, "error": _describe(err)})
        except OSError:
            pass
    try:
        os.read(rfd, 1)  # stay up (rank 0 holds the store) until every rank has reported
    finally:
        _exit_child()


def _gloo(student, seed: int) -> dict:
    import torch.distributed  # noqa: F401 - once here, not once per forked rank

    p, n = sizes(seed, "gloo")
    init = _init_method()
    pipes = [(os.pipe(), os.pipe()) for _ in range(p)]
    pids = []
    for r in range(p):
        pid = _fork()
        if pid == 0:
            for i, ((ur, uw), (dr, dw)) in enumerate(pipes):
                for fd in (ur, dw) if i == r else (ur, uw, dr, dw):
                    os.close(fd)
            _gloo_rank(student, seed, r, p, n, init, pipes[r][0][1], pipes[r][1][0])
        pids.append(pid)
    for (_, uw), (dr, _) in pipes:
        os.close(uw)
        os.close(dr)
    final: list = [None] * p  # each rank's last report
    ready = [False] * p  # the rank got past init and dist.all_reduce
    references: list = [None] * p  # dist.all_reduce's result on each rank
    sel = selectors.DefaultSelector()
    for r, ((ur, _), _) in enumerate(pipes):
        sel.register(ur, selectors.EVENT_READ, r)
    deadline = time.monotonic() + GLOO_SECONDS
    while any(x is None for x in final) and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=max(0.0, min(0.5, deadline - time.monotonic()))):
            r = key.data
            frame = _read_frame(key.fd)
            if frame is not None and frame[0].get("kind") == "ready":
                ready[r], references[r] = True, frame[0].get("reference")
                continue
            sel.unregister(key.fileobj)
            final[r] = frame[0] if frame else {"error": "the rank's process ended"}
    sel.close()
    for (ur, _), (_, dw) in pipes:
        try:
            os.write(dw, b"x")
        except OSError:
            pass
        os.close(dw)
        os.close(ur)
    _reap(pids)
    if init.startswith("file://"):
        shutil.rmtree(os.path.dirname(init[len("file://") :]), ignore_errors=True)
    ranks = []
    for r, rep in enumerate(final):
        rep = rep or {"error": f"timed out after {GLOO_SECONDS:g} s"}
        ranks.append(
            {
                "output": rep.get("output"),
                "reference": references[r],
                "stage": "student" if ready[r] else "start",
                "error": rep.get("error"),
            }
        )
    return {"p": p, "n": n, "init": init.split(":")[0], "ranks": ranks}


def probe(student, seed: int, params: dict) -> dict:
    """Run the student's ring on the simulated ring, then for real over gloo."""
    return {"sim": _simulate(student, seed), "gloo": _gloo(student, seed)}


# --- grade (trusted) ---------------------------------------------------------------------


def _prop(name: str, weight: float, score: float, message: str) -> dict:
    from autograder.checktools import prop  # grade side only: the trusted process

    return prop(name, weight, score, message)


def _vector(x, n: int | None = None) -> np.ndarray | None:
    from autograder.checktools import vector

    return vector(x, n)


def _close(a: np.ndarray | None, b: np.ndarray) -> bool:
    from autograder.checktools import close

    return close(a, b, RTOL, ATOL)


def _is_slice_of(values: np.ndarray, full: np.ndarray) -> bool:
    """Whether ``values`` equals a contiguous slice of ``full`` shorter than the whole."""
    m = values.size
    if not 0 < m < full.size:
        return False
    return any(_close(values, full[a : a + m]) for a in range(full.size - m + 1))


def _first_errors(errors: list, limit: int = 2) -> str:
    shown = [f"rank {r}: {e}" for r, e in enumerate(errors) if e][:limit]
    return ("; ".join(shown) + ".") if shown else ""


def _grade_sim(sim, seed: int) -> list[dict]:
    p, n = sizes(seed, "sim")
    names = [
        ("every rank ends with the sum", 2.0),
        ("2(p − 1) calls to send_recv per rank", 1.0),
        ("2(p − 1)n/p elements sent per rank", 1.0),
        ("each message is one chunk of n/p elements", 1.0),
        ("reduce-scatter messages are partial sums of one chunk", 1.5),
        ("all-gather messages are completed chunks", 1.0),
    ]
    ok_shape = (
        isinstance(sim, dict)
        and sim.get("p") == p
        and sim.get("n") == n
        and isinstance(sim.get("outputs"), list)
        and len(sim["outputs"]) == p
        and isinstance(sim.get("log"), list)
        and isinstance(sim.get("errors"), list)
        and len(sim["errors"]) == p
    )
    if not ok_shape:
        return [_prop(x, w, 0, "The simulated ring returned no usable result.") for x, w in names]
    xs = [rank_input(seed, "sim", r, n) for r in range(p)]
    total = np.sum(xs, axis=0)
    errors = [e if isinstance(e, str) else None for e in sim["errors"]]
    per_rank: list[list[np.ndarray | None]] = [[] for _ in range(p)]  # messages in call order
    for entry in sim["log"]:
        if not (isinstance(entry, list) and len(entry) == 4):
            continue
        k, src, size, values = entry
        if type(src) is not int or not 0 <= src < p or type(size) is not int:
            continue
        vec = _vector(values, size) if values is not None else None
        per_rank[src].append(vec if vec is not None else np.full(size, np.nan))
    props = []

    # 1. the result
    good = [_close(_vector(o, n), total) for o in sim["outputs"]]
    if all(good):
        msg = f"All {p} ranks return the sum of the {p} buffers."
    else:
        bad = [r for r in range(p) if not good[r]]
        msg = (
            f"{len(bad)} of {p} ranks do not return the sum of the buffers "
            f"(ranks {', '.join(map(str, bad[:6]))}{', …' if len(bad) > 6 else ''}). "
            + _first_errors(errors)
        ).strip()
    props.append(_prop(names[0][0], names[0][1], sum(good) / p, msg))

    # 2. steps
    need = 2 * (p - 1)
    calls = [len(m) for m in per_rank]
    right = [c == need for c in calls]
    msg = (
        f"Every rank made 2(p − 1) = {need} calls to comm.send_recv for p = {p}."
        if all(right)
        else f"Calls to comm.send_recv per rank for p = {p}: {calls}; a ring all-reduce makes "
        f"p − 1 for the reduce-scatter and p − 1 for the all-gather."
    )
    props.append(_prop(names[1][0], names[1][1], sum(right) / p, msg))

    # 3. elements sent
    need_elems = need * n // p
    elems = [int(sum(m.size for m in msgs)) for msgs in per_rank]
    right = [e == need_elems for e in elems]
    msg = (
        f"Every rank sent 2(p − 1)n/p = {need_elems} elements (n = {n}, p = {p})."
        if all(right)
        else f"Elements sent per rank (n = {n}, p = {p}): {elems}; a ring sends 2(p − 1)n/p, "
        "one chunk per step (Theorem 3.3)."
    )
    props.append(_prop(names[2][0], names[2][1], sum(right) / p, msg))

    # 4. chunk size
    sizes_sent = [m.size for msgs in per_rank for m in msgs]
    if sizes_sent:
        right_n = sum(s == n // p for s in sizes_sent)
        other = sorted({s for s in sizes_sent if s != n // p})
        msg = (
            f"Every message is one chunk of n/p = {n // p} elements."
            if right_n == len(sizes_sent)
            else f"{len(sizes_sent) - right_n} of {len(sizes_sent)} messages are not chunks of "
            f"n/p = {n // p} elements (sizes {other[:5]}): split the buffer into p equal chunks."
        )
        props.append(_prop(names[3][0], names[3][1], right_n / len(sizes_sent), msg))
    else:
        props.append(_prop(names[3][0], names[3][1], 0, "No message was sent through comm."))

    # 5. reduce-scatter: rank r's message s is chunk data summed over ranks r, r-1, ..., r-s
    hits, whole, count = 0, 0, p * (p - 1)
    for r in range(p):
        partial = np.zeros(n)
        for s in range(p - 1):
            partial = partial + xs[(r - s) % p]
            if s < len(per_rank[r]):
                m = per_rank[r][s]
                hits += _is_slice_of(m, partial)
                whole += m.size >= n
    if hits == count:
        msg = "Each reduce-scatter message of step s carries one chunk summed over s + 1 ranks."
    elif whole:
        msg = (
            f"{whole} of the {count} reduce-scatter messages (the first p − 1 of each rank) carry "
            "the whole buffer: the reduce-scatter sends one chunk per step, the running sum of "
            "that chunk."
        )
    else:
        msg = (
            f"{count - hits} of the {count} reduce-scatter messages (the first p − 1 of each rank) "
            "are not a chunk summed over the sender and the s ranks before it: at step s rank i "
            "sends the chunk it received at step s − 1 plus its own copy."
        )
    props.append(_prop(names[4][0], names[4][1], hits / count, msg))

    # 6. all-gather: messages p - 1 .. 2p - 3 are complete sums of one chunk
    hits = sum(
        _is_slice_of(per_rank[r][s], total)
        for r in range(p)
        for s in range(p - 1, min(2 * (p - 1), len(per_rank[r])))
    )
    if hits == count:
        msg = "Each all-gather message carries one completed chunk of the sum."
    else:
        msg = (
            f"{count - hits} of the {count} all-gather messages (calls p to 2(p − 1) of each rank) "
            "are missing or are not a completed chunk of the sum: after the reduce-scatter, pass "
            "the completed chunks p − 1 more times around the ring."
        )
    props.append(_prop(names[5][0], names[5][1], hits / count, msg))
    return props


def _grade_gloo(gloo, seed: int) -> dict:
    name, weight = "gloo run matches dist.all_reduce", 1.5
    p, n = sizes(seed, "gloo")
    if not (
        isinstance(gloo, dict)
        and gloo.get("p") == p
        and gloo.get("n") == n
        and isinstance(gloo.get("ranks"), list)
        and len(gloo["ranks"]) == p
        and all(isinstance(x, dict) for x in gloo["ranks"])
    ):
        return _prop(name, weight, 0, "The gloo run returned no usable result.")
    ranks = gloo["ranks"]
    setup = [x.get("error") for x in ranks if x.get("stage") == "start"]
    if setup and not any(x.get("stage") == "student" for x in ranks):
        # the grading machine could not start gloo: no fault of the student, no weight
        return _prop(
            name,
            0.0,
            0,
            f"Not run: gloo could not start on the grading machine ({setup[0]}); this check "
            "does not count.",
        )
    total = np.sum([rank_input(seed, "gloo", r, n) for r in range(p)], axis=0)
    good, broken = [], 0
    for x in ranks:
        ref_ok = _close(_vector(x.get("reference"), n), total)
        broken += not ref_ok
        good.append(ref_ok and _close(_vector(x.get("output"), n), total))
    if broken:
        return _prop(name, weight, 0, "dist.all_reduce disagrees with the inputs: run disturbed.")
    if all(good):
        msg = f"Over gloo with {p} processes, every rank's result equals dist.all_reduce's."
    else:
        bad = [r for r in range(p) if not good[r]]
        errs = [x.get("error") if isinstance(x.get("error"), str) else None for x in ranks]
        msg = (
            f"Over gloo with {p} processes, ranks {', '.join(map(str, bad))} do not return "
            f"what dist.all_reduce returns on the same buffers. " + _first_errors(errs)
        ).strip()
    return _prop(name, weight, sum(good) / p, msg)


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score the probe's result against buffers recomputed from the seed."""
    result = result if isinstance(result, dict) else {}
    return [*_grade_sim(result.get("sim"), seed), _grade_gloo(result.get("gloo"), seed)]
