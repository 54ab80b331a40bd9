"""The measured call, on the job's init's side: a memory cgroup of its own for what serves the
call, every other process of the job stopped while it runs, and checked after not to have
run.  The probe process P asks for it (``prober.Student.measured``), over the socket it asks
fresh ranks on (:mod:`ranks`).

Measured in the job's cgroup, which holds S, what S started and the ranks together, memory
the job held at the reset and gave back during the call (a process S started freeing its
own or ending, a file of /tmp deleted) made room for what the call took, and another
process of the job could compute for it.  A cgroup charges memory where it is first taken,
and a process moved keeps its earlier charges where they were; so, for each measured call:

- ``hold``: init lists the job's processes, makes a cgroup for the call (v1: inside the job's,
  whose limit covers it; v2: beside it, with the job's limit) and moves S into it; P reads
  its peak, which counts from the cgroup's making: whatever S or a process it forks takes
  from then on counts, and nothing charged before can be given back there;
- P asks S for the process that serves the call: S forks it there, so what it takes from its
  fork on counts (its page tables, the pages it copies from S, an ``os.register_at_fork``
  hook's);
- ``measure``: init stops (SIGSTOP) every process of the job but those born in the call's
  cgroup since ``hold`` (S is stopped), waits until every thread of theirs has stopped, and
  notes how long each has run (/proc/PID/task/TID/schedstat); then P sends the call and reads
  the peak once it is answered;
- ``release``: init checks that no stopped thread ran meanwhile (a process of the call that
  sent SIGCONT to S, say), continues them all, and says which ran: P counts such a call as
  the student's failure, its measure not the call's.

No process of the job can reach the cgroup filesystem (init covers it in the job's mount
namespace: :func:`hide`), nor hold a descriptor of it, so none can move itself out of the
call's cgroup.  Memory charged before ``hold`` and written again is not seen: a mapping shared
with S, a file of /tmp written to, a stopped process's memory written with
``process_vm_writev`` (docs/security.md, "What it leaves open").
"""

from __future__ import annotations

import os
import signal
import time

from .linux import MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_RDONLY, mount
from .memory import CGROUP_LIMIT, CGROUP_PEAK

STOP_SECONDS = 5.0  # for every thread of the job's other processes to stop (a loaded machine)
STOPPED = frozenset("TtZX")  # a thread's state (/proc/PID/task/TID/stat) that runs no code


def hide(mount_point: str | None) -> None:
    """In the job's mount namespace, as root, before S is forked: the cgroup filesystem
    behind an empty read-only tmpfs.  Init and the processes it starts reach their cgroups
    through descriptors opened before."""
    if mount_point and os.path.isdir(mount_point):
        flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
        mount("tmpfs", mount_point, "tmpfs", flags, "size=4k,nr_inodes=1,mode=755")


class MeasuredCalls:
    """Init's side of each measured call of the job (one at a time).

    ``job``: the job's cgroup folder (a descriptor); ``beside``: the folder holding it (v2:
    where the calls' cgroups are made); ``name``: the job cgroup's; ``limit``: its memory
    limit in bytes; ``student``: S's pid; ``uid``: S's (the v1 cgroup.procs of a call is
    written with it: v1 moves a process only for root of the host or its own uid)."""

    def __init__(self, version: int, job: int, beside: int, name: str, limit: int, uid: int):
        self.version = version
        self.job = job
        self.beside = beside
        self.name = name
        self.limit = limit
        self.uid = uid
        self.student = 0  # set once S is forked
        self.calls: list[int] = []  # the folder of each call's cgroup, in order
        self.old: set[int] = set()  # the job's processes at ``hold``
        self.ran: dict[int, dict[int, int]] = {}  # stopped pid -> {tid: ns run}

    def close(self) -> None:
        for fd in (self.job, self.beside, *self.calls):
            os.close(fd)
        self.calls = []

    # P's requests -------------------------------------------------------------------------

    def hold(self) -> int:
        """A cgroup for the next call, S moved into it: its peak file, for P (OSError: why
        not)."""
        if not self.student:
            raise OSError("the notebook's process is not started")
        self.release()  # a call P did not release: its stopped processes go on first
        self.old = self._members()
        k = len(self.calls) + 1
        if self.version == 1:
            where, name = self.job, f"call-{k}"
        else:
            where, name = self.beside, f"{self.name}.call-{k}"
        os.mkdir(name, 0o755, dir_fd=where)
        folder = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=where)
        self.calls.append(folder)
        _write(folder, CGROUP_LIMIT[self.version], str(int(self.limit)))
        self._move(folder, self.student)
        return os.open(CGROUP_PEAK[self.version], os.O_RDWR | os.O_CLOEXEC, dir_fd=folder)

    def measure(self) -> None:
        """Stop every process of the job but those born in the call's cgroup since
        :meth:`hold`, and note how long each thread of theirs has run (OSError: one did not
        stop in time; every one stopped is continued)."""
        end = time.monotonic() + STOP_SECONDS
        call = self.calls[-1]
        while True:
            serving = _procs(call) - self.old
            others = self._members() - serving
            for pid in others - self.ran.keys():
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                self.ran[pid] = {}
            if all(_stopped(pid) for pid in others) and self._members() - serving <= others:
                break
            if time.monotonic() > end:
                self._continue()
                raise OSError("a process of the notebook did not stop for the measured call")
            time.sleep(0.001)
        self.ran = {pid: _run_times(pid) for pid in self.ran}

    def release(self) -> list[int]:
        """Continue every process :meth:`measure` stopped; those that ran while stopped."""
        ran = [pid for pid, before in self.ran.items() if _ran(before, _run_times(pid))]
        self._continue()
        if self.version == 2 and self.calls:  # beside the job: S back under the job's limit
            self._move(self.job, self.student)
        return ran

    # helpers ------------------------------------------------------------------------------

    def _continue(self) -> None:
        for pid in self.ran:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.ran = {}

    def _members(self) -> set[int]:
        """Every process of the job: in its cgroup and in its calls'."""
        pids = _procs(self.job)
        for folder in self.calls:
            pids |= _procs(folder)
        return pids

    def _move(self, folder: int, pid: int) -> None:
        """``pid`` into the cgroup ``folder`` (v1: the file opened under S's uid, owned by
        it only meanwhile; no process of the job can reach it by path: :func:`hide`)."""
        if self.version == 2:
            _write(folder, "cgroup.procs", str(pid))
            return
        os.chown("cgroup.procs", self.uid, -1, dir_fd=folder)
        try:
            os.setresuid(-1, self.uid, -1)
            try:
                fd = os.open("cgroup.procs", os.O_WRONLY | os.O_CLOEXEC, dir_fd=folder)
            finally:
                os.setresuid(-1, 0, -1)
        finally:
            os.chown("cgroup.procs", 0, -1, dir_fd=folder)
        try:
            os.write(fd, str(pid).encode())
        finally:
            os.close(fd)


def _ran(before: dict[int, int], now: dict[int, int]) -> bool:
    """Whether a stopped process ran: a thread of its ran, or it has a thread it had not
    (a thread that ended took its time with it; a process that ended runs nothing)."""
    return any(now.get(tid, ns) != ns for tid, ns in before.items()) or bool(
        before and now.keys() - before.keys()
    )


def _write(folder: int, name: str, text: str) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=folder)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _procs(folder: int) -> set[int]:
    fd = os.open("cgroup.procs", os.O_RDONLY | os.O_CLOEXEC, dir_fd=folder)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return {int(x) for x in b"".join(chunks).split()}


def _threads(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone: it runs nothing


def _stopped(pid: int) -> bool:
    for tid in _threads(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                state = fh.read().rpartition(b")")[2].split()[0].decode()
        except (OSError, IndexError):
            continue  # ended meanwhile
        if state not in STOPPED:
            return False
    return True


def _run_times(pid: int) -> dict[int, int]:
    """Each thread's time on a CPU so far, in ns (its schedstat's first field)."""
    out = {}
    for tid in _threads(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as fh:
                out[int(tid)] = int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out
