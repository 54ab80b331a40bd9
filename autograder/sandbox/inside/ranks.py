"""Fresh ranks: the processes of a multi-rank check, started by the job's init for the probe
process P, never forked from the student's process S.

A rank forked from S inherits whatever the notebook made there: its files, shared memory,
pipes, a thread or a process that relays.  A fresh rank inherits none of it.  The job's init
(trusted: the student's code never ran in it) forks it from its own state, each rank

- PID 1 of a PID namespace of its own: it sees no other process, neither S nor another rank;
- in mount, network, IPC and UTS namespaces of its own: an empty /tmp (its working folder),
  /dev/shm and /var/tmp, its own loopback, no System V object of anyone else; the ranks of
  a gloo set share one network namespace, made for the set, where they meet: gloo needs a
  network, and that loopback is all they share;
- holding no descriptor but its end of P's socket (and /dev/null; rank 0 of a gloo set,
  the listening socket of the set's store);
- in the job's memory cgroup, with the student's limits, under a uid of the slot's ranks
  (``rank_uid``), not S's: S sees them in its /proc (their PID namespaces are children of
  the job's) but can neither signal, trace, limit nor write to them, so a thread of S cannot
  relay between them (it could read what one writes into its own name; no rank can hear S);

then it runs the notebook's cells again, there, and serves P's calls as one rank
(:func:`harness.serve_fresh_rank`).  Whatever the ranks exchange goes through P.

The cells are read and compiled once per job, for every rank, by a process of their own
(:meth:`FreshRanks.compiled`): a child of init under the ranks' uid and limits, in the
job's memory cgroup, that runs none of them.  Init holds the bytes it wrote and never reads
them; each rank forked after inherits them (about 7 ms a rank for hw1's 90 cells).

The protocol on P's socket (``SOCK_SEQPACKET``, one JSON message each):
``{"op": "ranks", "id": N, "world": W, "gloo": G}`` is answered ``{"op": "ranks", "id": N}``
with the W sockets attached (or ``{"op": "raised", "id": N, "message": ...}``);
``{"op": "end", "id": N}`` kills that set and is answered ``{"op": "ended", "id": N}`` once
every process of it has ended (its memory freed).  The same socket carries the steps of a
measured call (``hold``, ``measure``, ``release``: :mod:`measuring`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import time
import traceback

from . import harness
from .linux import CLONE_NEWNET, PR_SET_PDEATHSIG, check, libc, prctl, unshare
from .measuring import MeasuredCalls
from .memory import JobMemory
from .mounts import loopback_up
from .process import (
    HOME,
    WORKDIR,
    child_signals,
    drop,
    fds_onto,
    fork_pid1,
    os_exit,
    place_notebook,
    private_scratch,
    student_env,
)

PROBE_FD_RANKS = 8  # P's end of the socket to the job's init (namespaces mode only)
COMPILE_SECONDS = 10.0  # the compiling process's time: past it, each rank compiles its own
RANK_FD_CHANNEL = 3  # a fresh rank's end of its socket to P
RANK_FD_STORE = 4  # rank 0 of a gloo set: the listening socket of the group's store


class FreshRanks:
    """The job's init's side: starts and ends the sets of fresh ranks P asks for, and
    serves the steps of its measured calls (``measuring``)."""

    def __init__(self, req: dict, notebook: bytes, keep: list[str], memory: JobMemory):
        self.req = req
        self.notebook = notebook  # as submitted: S may have rewritten its copy since
        self.keep = keep
        self.procs = os.dup(memory.procs) if memory.procs >= 0 else -1  # the job's cgroup
        self.own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY)
        self.own_netns = os.open("/proc/self/ns/net", os.O_RDONLY)
        self.init_end, self.p_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.fd = self.init_end.fileno()
        self.open = True
        self.sets: dict[int, list[int]] = {}  # set id -> the pids of its ranks
        self.cells: bytes | None = None  # the cells compiled (:meth:`compiled`)
        self.measuring = None  # the measured calls' cgroups, where the job has a cgroup
        if memory.kind == "cgroup" and memory.folder >= 0 and req.get("uid") is not None:
            self.measuring = MeasuredCalls(
                memory.version,
                os.dup(memory.folder),
                os.dup(memory.beside),
                os.path.basename(memory.path or ""),
                memory.limit,
                req["uid"],
            )

    def close_all(self) -> None:
        """In a child of init that is neither P nor a rank: none of this stays open."""
        self._close_own()
        self.init_end.close()
        self.p_end.close()

    def probe_end(self) -> int:
        """In P's process, right after its fork: P's end, and nothing else of init's."""
        self._close_own()
        self.init_end.close()
        return self.p_end.fileno()

    def _close_own(self) -> None:
        for fd in (self.procs, self.own_pidns, self.own_netns):
            if fd >= 0:
                os.close(fd)
        if self.measuring is not None:
            self.measuring.close()

    def started(self) -> None:
        """In init, once P is forked: P's end is P's alone."""
        self.p_end.close()

    def serve(self) -> None:
        """One request of P (its socket is readable)."""
        try:
            msg = self.init_end.recv(65536)
        except OSError:
            msg = b""
        if not msg:  # P is gone
            self.open = False
            self.end_all()
            return
        try:
            req = json.loads(msg)
            rid = req["id"]
        except (ValueError, KeyError, TypeError):
            return
        op = req.get("op")
        if op == "ranks":
            self._start(rid, req.get("world"), req.get("gloo") is True)
        elif op == "end":
            self._end(self.sets.pop(rid, []))
            self._send({"op": "ended", "id": rid})
        elif op in ("hold", "measure", "release"):
            self._measured_call(op, rid)

    def _measured_call(self, op: str, rid) -> None:
        """A step of a measured call (:mod:`measuring`), answered ``{"op": op}`` (``hold``:
        with the call cgroup's peak file; ``release``: with how many stopped processes
        ran), or ``raised`` and why."""
        calls = self.measuring
        try:
            if calls is None:
                raise OSError("the job has no memory cgroup")
            if op == "hold":
                peak = calls.hold()
                self._send({"op": op, "id": rid}, [peak])
                os.close(peak)
            elif op == "measure":
                calls.measure()
                self._send({"op": op, "id": rid})
            else:
                self._send({"op": op, "id": rid, "ran": len(calls.release())})
        except OSError as err:
            self._send({"op": "raised", "id": rid, "message": f"{op}: {err}"})

    def end_all(self) -> None:
        for pids in self.sets.values():
            self._end(pids)
        self.sets.clear()
        if self.measuring is not None:
            self.measuring.release()  # nothing of the job stays stopped once P is done

    def _send(self, msg: dict, fds: list[int] = ()) -> None:
        try:
            socket.send_fds(self.init_end, [json.dumps(msg).encode()], list(fds))
        except OSError:
            self.open = False

    def compiled(self) -> bytes:
        """The notebook's cells, read and compiled by a process of their own, once
        (:func:`harness.compiled_cells`); b"" where it failed: each rank reads its own."""
        if self.cells is None:
            self.cells = b""
            limit = 8 * len(self.notebook) + (1 << 20)
            read, write = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                pid = None
            if pid == 0:
                os.close(read)
                _compile(self, write)  # never returns
            os.close(write)
            if pid is not None:
                cells = _read_all(read, limit, COMPILE_SECONDS)
                os.kill(pid, signal.SIGKILL)  # past its time (or ended: no matter)
                if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0:
                    self.cells = cells
            os.close(read)
        return self.cells

    def _start(self, rid, world, gloo: bool) -> None:
        room = harness.MAX_RANKS - sum(len(pids) for pids in self.sets.values())
        if type(world) is not int or not 1 <= world <= room or rid in self.sets:
            why = f"between 1 and {room} fresh ranks"
            self._send({"op": "raised", "id": rid, "message": why})
            return
        self.compiled()
        pids, ends, store = [], [], None
        try:
            if gloo:  # the set's network namespace, init in it while it forks the ranks
                unshare(CLONE_NEWNET)
                loopback_up()
                store = socket.create_server(("127.0.0.1", 0), backlog=harness.MAX_RANKS + 1)
            for rank in range(world):
                mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                ends.append(mine)
                pids.append(self._fork(theirs, rank, world, store))
                theirs.close()
        except OSError as err:
            self._end(pids)
            for end in ends:
                end.close()
            self._send({"op": "raised", "id": rid, "message": f"could not start: {err}"})
            return
        finally:
            if gloo:
                check(libc.setns(self.own_netns, CLONE_NEWNET), "setns")
            if store is not None:
                store.close()
        self.sets[rid] = pids
        self._send({"op": "ranks", "id": rid}, [end.fileno() for end in ends])
        for end in ends:
            end.close()

    def _fork(self, channel: socket.socket, rank: int, world: int, store) -> int:
        """The rank's process, PID 1 of a PID namespace of its own (``store``: a gloo
        set's listening socket, which rank 0 serves)."""
        pid = fork_pid1(self.own_pidns)
        if pid == 0:
            _rank(self, channel.fileno(), rank, world, store)  # never returns
        return pid

    @staticmethod
    def _end(pids: list[int]) -> None:
        """Kill each rank (PID 1 of its namespace: with it, all it started) and reap it."""
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass  # reaped already by the job's wait (it had ended by itself)


def _rank(ranks: FreshRanks, channel: int, rank: int, world: int, store) -> None:
    """The fresh rank's process: its namespaces and scratch, the cgroup, the descriptors,
    the limits and uid; then the notebook again, its gloo group if ``store``, and P's
    calls.  Never returns."""
    code = 0
    try:
        child_signals()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        req = ranks.req
        private_scratch(req["limits"], ranks.keep, network=store is None)
        path = place_notebook(ranks.notebook, req["notebook_name"], req["rank_uid"])
        if ranks.procs >= 0:
            os.write(ranks.procs, b"0")  # into the job's memory cgroup (0: the writer)
        os.setsid()
        null_r, null_w = os.open("/dev/null", os.O_RDONLY), os.open("/dev/null", os.O_WRONLY)
        fds = {0: null_r, 1: null_w, 2: null_w, RANK_FD_CHANNEL: channel}
        gloo = None
        if store is not None:
            listening = RANK_FD_STORE if rank == 0 else None
            gloo = (*store.getsockname(), listening)
            if rank == 0:
                fds[RANK_FD_STORE] = store.fileno()
        fds_onto(fds)
        limits = req["limits"]
        drop(req, limits, req["rank_uid"], limits.get("address_space", True) or ranks.procs < 0)
        os.environ.clear()
        os.environ.update(student_env(HOME, "/tmp"))
        os.chdir(WORKDIR)
        harness.serve_fresh_rank(path, RANK_FD_CHANNEL, rank, world, gloo, ranks.cells)
    except BaseException:  # noqa: BLE001 - P hears the channel close
        code = 1
        try:
            os.write(2, f"scalegrade rank: {traceback.format_exc()}"[-4000:].encode())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os_exit(code)


def _compile(ranks: FreshRanks, out: int) -> None:
    """The compiling process: the ranks' uid, the limits, the job's memory cgroup, nothing
    open but ``out``, where it writes the compiled cells.  Never returns."""
    code = 1
    try:
        child_signals()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if ranks.procs >= 0:
            os.write(ranks.procs, b"0")
        null = os.open("/dev/null", os.O_RDWR)
        fds_onto({0: null, 1: null, 2: null, 3: out})
        req, limits = ranks.req, ranks.req["limits"]
        drop(req, limits, req["rank_uid"], limits.get("address_space", True) or ranks.procs < 0)
        data = memoryview(harness.compiled_cells(ranks.notebook))
        while data:
            data = data[os.write(3, data) :]
        code = 0
    finally:
        os_exit(code)


def _read_all(fd: int, limit: int, seconds: float) -> bytes:
    """What ``fd`` gives until its end, within ``seconds`` and ``limit`` bytes; b"" if not."""
    end, chunks, size = time.monotonic() + seconds, [], 0
    while True:
        left = end - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return b""
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return b""
        chunks.append(chunk)
