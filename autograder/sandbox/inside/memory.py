"""Memory, from outside: the memory cgroup of each job (its limit, and the peak that only
the probe process resets and reads), with the fallback where none can be made."""

from __future__ import annotations

import errno
import os
import time

from .mounts import is_within, unescape

#
# The student's process S and every process it starts live in a memory cgroup of their own,
# one per job, that this executor makes (as root) under the grader's own memory cgroup (read
# from /proc/self/cgroup): <grader's cgroup>/scalegrade-<executor pid>/job-<n>.  The probe
# process P is not in it, nor is the job's init.  The job's memory limit is set there too
# (Limits.memory_bytes; RLIMIT_AS stays).  The zygote opens the cgroup's peak file as root,
# cgroup v1's memory.max_usage_in_bytes (a write resets it to the usage now) or v2's
# memory.peak (a write resets it for that open file, Linux 6.12+), and hands the open file
# to P alone: S never holds it, and every file of the cgroup is root's (0644), so S, another
# uid without capabilities, can neither reset the peak nor move itself out.  S joins the
# cgroup first thing after the fork, still root, through cgroup.procs opened here.  Where
# the job has an init, a measured call gets a cgroup of its own (:mod:`measuring`), made by
# init through the folders opened here (``JobMemory.folder``, ``beside``), and P measures
# that one instead.
#
# Without a cgroup (not root, no memory controller, a read-only cgroupfs, a v2 memory.peak
# that cannot be reset), P gets S's /proc/PID/clear_refs and /proc/PID/status instead,
# opened by S's parent: VmHWM, reset by writing "5".  Weaker, and P says so: S's children
# are not counted, and S can reset its own VmHWM (after prctl(PR_SET_DUMPABLE) when it
# changed uid).  With neither, P has no meter, and says why.

MEMORY_METERS = ("auto", "proc", "off")  # auto: a cgroup, else VmHWM; proc: VmHWM; off: none
CGROUP_PEAK = {1: "memory.max_usage_in_bytes", 2: "memory.peak"}
CGROUP_LIMIT = {1: "memory.limit_in_bytes", 2: "memory.max"}
CGROUP_PREFIX = "scalegrade-"
CGROUP_REMOVE_SECONDS = 1.0  # for a job's last processes to exit before its cgroup goes
PROBE_FD_MEMORY = 6  # P's meter: the peak file, or clear_refs (and status on the next fd)


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def _grader_memory_cgroup() -> tuple[int, str, str]:
    """(cgroup version, this process's memory cgroup folder, the mount point holding it);
    OSError naming what is missing."""
    own = {}
    for line in _read_text("/proc/self/cgroup").splitlines():
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and controllers == "":
            own[2] = path
        elif "memory" in controllers.split(","):
            own[1] = path
    for line in _read_text("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, fs = left.split(" "), right.split(" ")
        if len(fields) < 5 or len(fs) < 3:
            continue
        root, target = unescape(fields[3]), unescape(fields[4])
        if fs[0] == "cgroup" and "memory" in fs[2].split(","):
            version = 1
        elif fs[0] == "cgroup2" and 1 not in own:  # a v1 memory controller is not on v2
            version = 2
        else:
            continue
        path = own.get(version)
        if path is None or not is_within(path, root):
            continue
        folder = os.path.join(target, os.path.relpath(path, root))
        if os.path.isdir(folder):
            return version, os.path.normpath(folder), target
    raise OSError(errno.ENOENT, "no memory cgroup of this process is mounted")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _listdir(path: str | None) -> list[str]:
    try:
        return os.listdir(path) if path else []
    except OSError:
        return []


def remove_cgroup(path: str) -> bool:
    """rmdir ``path`` and the cgroups below it; whether it is gone (not while processes live)."""
    try:
        entries = os.listdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for name in entries:
        below = os.path.join(path, name)
        if os.path.isdir(below) and not os.path.islink(below):
            remove_cgroup(below)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


class JobMemory:
    """One job's meter: its cgroup's open files, or S's /proc files; what P is told."""

    def __init__(self, note: str, path: str | None = None):
        self.path = path  # the job's cgroup folder, removed when the job ends
        self.procs = -1  # cgroup.procs, written by S to join (root, before it drops)
        self.peak = -1  # the peak file: P's alone
        self.clear_refs = -1  # without a cgroup: S's /proc/PID/clear_refs and status
        self.status = -1
        self.kind: str | None = None  # what P measures with: "cgroup", "vmhwm" or None
        self.note = note  # how P measures, or why it does not
        self.proc_fallback = False  # open S's /proc files after its fork
        # the job's init's, for the measured calls' cgroups (:mod:`measuring`): the job's
        # cgroup folder and the one holding it, the cgroup version and the job's limit
        self.folder = -1
        self.beside = -1
        self.version = 0
        self.limit = 0

    def join(self) -> None:
        """In S, still root: into the job's cgroup, with every process it will start."""
        if self.procs >= 0:
            os.write(self.procs, b"0")  # 0: the writer
            os.close(self.procs)
            self.procs = -1

    def open_proc(self, pid: int) -> None:
        """In S's parent, right after its fork, when no cgroup measures: S's VmHWM files."""
        if not self.proc_fallback:
            return
        try:
            self.clear_refs = os.open(f"/proc/{pid}/clear_refs", os.O_WRONLY | os.O_CLOEXEC)
            self.status = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            self.close()
            self.kind, self.note = None, f"no memory meter: /proc/{pid}: {err.strerror}"
            return
        self.kind = "vmhwm"
        self.note = (
            "the VmHWM of the notebook's process (/proc/PID/status), reset before the call: "
            "its children are not counted, and it can reset it itself"
        ) + (f" ({self.note})" if self.note else "")

    def probe_fds(self) -> dict[int, int]:
        """P's meter fds, by the number P finds them on."""
        if self.kind == "cgroup":
            return {PROBE_FD_MEMORY: self.peak}
        if self.kind == "vmhwm":
            return {PROBE_FD_MEMORY: self.clear_refs, PROBE_FD_MEMORY + 1: self.status}
        return {}

    def close_probe_side(self) -> None:
        """In S: nothing of P's meter stays open."""
        for name in ("peak", "clear_refs", "status"):
            self._close(name)

    def close(self) -> None:
        for name in ("procs", "peak", "clear_refs", "status", "folder", "beside"):
            self._close(name)

    def _close(self, name: str) -> None:
        fd = getattr(self, name)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
            setattr(self, name, -1)


class Memory:
    """The executor's memory cgroups (``base`` holds one per job), or why there are none."""

    def __init__(self, wanted: str = "auto"):
        self.wanted = wanted if wanted in MEMORY_METERS else "auto"
        self.version = 0
        self.base: str | None = None
        self.mount: str | None = None  # the cgroupfs mount, kept writable (namespaces)
        self.why = "no memory cgroup was asked for" if self.wanted != "auto" else ""
        self.pending: list[str] = []  # job cgroups whose last processes were still exiting

    def setup(self, delegated: str | None = None, why_not: str | None = None) -> None:
        """Make ``base`` under the grader's memory cgroup (root only), removing what graders
        that died left; on any failure, ``why`` says what is missing.  In a grading
        container: ``delegated``, the cgroup v1 folder the grader made for it and bound in
        (:func:`delegate_memory_cgroup`), used instead of this process's own, or
        ``why_not``, why the grader could not make one."""
        if self.wanted != "auto":
            return
        if why_not:
            self.why = why_not
            return
        if os.geteuid() != 0:
            self.why = "the grader is not root"
            return
        try:
            if delegated:
                version, own, mount = 1, delegated, delegated
            else:
                version, own, mount = _grader_memory_cgroup()
            parent = own
            if version == 2:
                parent = self._v2_parent(own, mount)
            for name in os.listdir(parent):
                pid = name[len(CGROUP_PREFIX) :]
                if name.startswith(CGROUP_PREFIX) and pid.isdigit() and not _pid_alive(int(pid)):
                    remove_cgroup(os.path.join(parent, name))  # a grader that died
            base = os.path.join(parent, f"{CGROUP_PREFIX}{os.getpid()}")
            os.mkdir(base, 0o755)
            if version == 2:
                try:
                    with open(os.path.join(base, "cgroup.subtree_control"), "w") as fh:
                        fh.write("+memory")
                except OSError:
                    os.rmdir(base)
                    raise
        except OSError as err:
            self.why = f"no memory cgroup: {err.strerror or err}" + (
                f" ({err.filename})" if err.filename else ""
            )
            return
        self.version, self.base, self.mount = version, base, mount
        self.why = ""

    @staticmethod
    def _v2_parent(own: str, mount: str) -> str:
        """Where v2 job cgroups go: under the grader's cgroup when it hands the memory
        controller down (the root may; another cgroup holding processes may not), else
        beside it, under its parent."""
        control = os.path.join(own, "cgroup.subtree_control")
        if "memory" in _read_text(control).split():
            return own
        try:
            with open(control, "w") as fh:
                fh.write("+memory")
            return own
        except OSError:
            pass
        if own != mount and "memory" in _read_text(os.path.join(own, "cgroup.controllers")).split():
            return os.path.dirname(own)
        raise OSError(errno.ENOTSUP, "cgroup v2 without the memory controller here")

    def describe(self) -> dict:
        return {"cgroup": self.base, "version": self.version or None, "why": self.why or None}

    def job(self, job_id: int, memory_bytes: int) -> JobMemory:
        """The job's cgroup and its open files; else the VmHWM fallback (or none)."""
        self.retry()
        if self.wanted == "off":
            return JobMemory("no memory meter: the sandbox was asked for none")
        fallback = JobMemory(self.why)
        fallback.proc_fallback = True
        if self.base is None:
            return fallback
        path = os.path.join(self.base, f"job-{job_id}")
        mem = JobMemory("", path)
        try:
            os.mkdir(path, 0o755)
            with open(os.path.join(path, CGROUP_LIMIT[self.version]), "w") as fh:
                fh.write(str(int(memory_bytes)))
            mem.procs = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
            peak_name = CGROUP_PEAK[self.version]
            try:
                mem.peak = os.open(os.path.join(path, peak_name), os.O_RDWR | os.O_CLOEXEC)
                os.write(mem.peak, b"0")  # v2 before 6.12: memory.peak cannot be reset
            except OSError as err:
                mem._close("peak")
                mem.proc_fallback = True  # the cgroup still holds and limits S
                mem.note = f"{peak_name} cannot be reset: {err.strerror}"
            else:
                mem.kind = "cgroup"
                mem.version, mem.limit = self.version, int(memory_bytes)
                directory = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
                mem.folder = os.open(path, directory)
                mem.beside = os.open(self.base, directory)
                mem.note = (
                    f"the memory cgroup of the notebook's process and its children "
                    f"(cgroup v{self.version} {peak_name}), reset before the call"
                )
        except OSError as err:
            mem.close()
            self.remove(path)
            fallback.note = f"no memory cgroup for the job: {err.strerror or err}"
            return fallback
        return mem

    def remove(self, path: str | None) -> None:
        """The job's cgroup, with its measured calls' (v2: beside it, ``job-N.call-K``)."""
        if not path:
            return
        calls = f"{os.path.basename(path)}.call-"
        beside = [
            os.path.join(self.base or "", n) for n in _listdir(self.base) if n.startswith(calls)
        ]
        for cgroup in [path, *beside]:
            if not remove_cgroup(cgroup):
                self.pending.append(cgroup)  # its last processes are still exiting: later

    def retry(self) -> None:
        self.pending = [p for p in self.pending if not remove_cgroup(p)]

    def close(self, seconds: float = CGROUP_REMOVE_SECONDS) -> None:
        """Remove every cgroup this executor made (waiting ``seconds`` for the processes
        killed last to exit)."""
        if self.base is None:
            return
        end = time.monotonic() + seconds
        while not remove_cgroup(self.base) and time.monotonic() < end:
            time.sleep(0.01)


def delegate_memory_cgroup(name: str, uid: int) -> str:
    """A memory cgroup for a grading container (the grader's side, as root): a folder under
    the grader's own, given to ``uid``, the container's root on the host, which may then
    make a cgroup per job there and move each student process into its own, and reach
    nothing above it.  cgroup v1 only: under v2, moving a process needs write access to
    the common ancestor of its cgroups, which the container's root does not have.  Folders
    of graders that died are removed first.  OSError says why there is none."""
    if os.geteuid() != 0:
        raise OSError(errno.EPERM, "the grader is not root")
    version, own, _ = _grader_memory_cgroup()
    if version != 1:
        raise OSError(errno.ENOTSUP, "cgroup v2: a container cannot join a cgroup handed to it")
    mine = f"{CGROUP_PREFIX}c{os.getpid()}-"
    for entry in os.listdir(own):
        pid = entry[len(CGROUP_PREFIX) + 1 :].partition("-")[0]
        if entry.startswith(CGROUP_PREFIX + "c") and pid.isdigit() and not _pid_alive(int(pid)):
            remove_cgroup(os.path.join(own, entry))
    folder = os.path.join(own, mine + name)
    os.mkdir(folder, 0o755)
    try:
        os.chown(folder, uid, uid)
    except OSError:
        os.rmdir(folder)
        raise
    return folder


current = Memory("off")  # the executor's, set up in executor.main()
