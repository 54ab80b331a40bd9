"""The warm executor: a long-lived process that forks one isolated child per submission.

Started by ``autograder.sandbox.Sandbox`` as ``python -s -P -B executor.py FD``: FD is a
control socket (``SOCK_SEQPACKET``) whose first message is the configuration (JSON).  In a
grading image (``--sandbox docker``) it is ``executor.py PATH``: the grader listens on the
unix socket PATH, bound into the container, and this process connects to it; the
protocol is the same (file descriptors pass between the host and a container).  It never
runs student code itself and imports nothing of the project but ``harness.py`` (by path).

Process tree in the "namespaces" mode (all of it dies when the outer process dies)::

    outer       unshare(mount, net, ipc, uts, pid); mounts: / private, the interpreter
      |         reachable, the hidden paths covered by empty tmpfs, everything read-only
      zygote    PID 1 of its own PID namespace; imports numpy + IPython (+ torch on demand);
      |         serves requests and supervises the jobs (wall timeout, exit reports)
      init      per submission, PID 1 of a fresh PID namespace (the zygote unshares
      |         CLONE_NEWPID, forks, and setns() back); its own mount, net, IPC and UTS
      |         namespaces: fresh /proc, private tmpfs /tmp, /dev/shm, /var/tmp, loopback
      |         up, the notebook copied in; reaps orphans
      student   joins the job's memory cgroup (with all it will start), setsid, rlimits,
      |         the slot's uid, no new privileges, scrubbed env, cwd /tmp/work: runs
      |         harness.run_submission(), then serves the student's functions to the probe
      |         process over a socket pair
      probe     beside the student process, not under it: another uid (the slot's
                + PROBE_UID_OFFSET), rlimits, no new privileges, cwd /tmp/probe: the only
                reader of the probes (a memfd the zygote never reads) and of the student's
                memory peak (the cgroup's peak file, opened by the zygote); runs
                prober.run(), calling the student's functions over the socket pair

When ``init`` exits (the student process is done) or is killed (timeout), the kernel kills
every process left in that PID namespace: detached, double-forked grandchildren included.
Two forks per submission (a fork with torch loaded: ~6 ms, its heap on huge pages).

The "process" mode (no namespaces) forks the student process directly: rlimits, setsid,
the uid when run as root, a private directory; the timeout kills the process group and,
as root, every process of the slot's uid, and what that uid left in /tmp, /var/tmp and
/dev/shm is removed.  The memory cgroups are the same in both modes
(see "memory, from outside" below, with the fallback where none can be made).

When the probe process ends, the student process has nothing left to do: it is given a
moment to end, then killed (its harvest was sent before it served).

Requests (one message each, file descriptors attached with SCM_RIGHTS):
``{"op": "run", "job": N}`` + [request memfd, notebook, out_w, res_w, status_w, probes
memfd, probes_w];
``{"op": "kill", "job": N}``; ``{"op": "preload", "modules": [...]}`` (answered).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import importlib.util
import json
import os
import resource
import select
import shutil
import signal
import socket
import struct
import sys
import time
import traceback

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38

SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1

STUDENT_FD_RESULT = 3
STUDENT_FD_CHANNEL = 4  # the student process's end of the probe channel
PROBE_FD_PROBES, PROBE_FD_RESULT, PROBE_FD_CHANNEL = 3, 4, 5
PROBE_UID_OFFSET = 1000  # the probe process's uid: the slot's + this (sandbox.UID_SLOTS)
SERVE_GRACE_SECONDS = 0.5  # after the probe process ended, for the student's to end
_os_exit = os._exit  # a forked process must never return into its parent's code
EXIT_SETUP_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_char_p,
]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None):
    _check(
        _libc.mount(
            source.encode() if source is not None else None,
            target.encode(),
            fstype.encode() if fstype is not None else None,
            flags,
            data.encode() if data is not None else None,
        ),
        f"mount {target}",
    )


def prctl(option: int, arg: int) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), "prctl")


# --------------------------------------------------------------------------- mounts


def _is_within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _expose(keep: list[str]) -> None:
    """Make each path in ``keep`` reachable by any uid.

    A directory on the way that others may not traverse (``/root`` holding a pyenv
    interpreter, say) is covered with a tmpfs holding only the kept paths, bound back."""
    groups: dict[str, list[str]] = {}
    for path in keep:
        parts = path.strip("/").split("/")
        for depth in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:depth])
            try:
                mode = os.stat(ancestor).st_mode
            except OSError:
                break
            if not mode & 0o001:
                groups.setdefault(ancestor, []).append(path)
                break
    for top, paths in sorted(groups.items()):
        if any(_is_within(top, other) and top != other for other in groups):
            continue  # a covered ancestor handles it
        paths = _outermost(paths)
        fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in paths}
        mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
        for path, fd in fds.items():
            os.makedirs(path, mode=0o755, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
            os.close(fd)


def _outermost(paths: list[str]) -> list[str]:
    return [p for p in paths if not any(_is_within(p, q) and p != q for q in paths)]


def scratch_tmpfs(target: str, options: str, keep: list[str]) -> None:
    """A fresh writable tmpfs on ``target``; the ``keep`` paths below it (a virtual
    environment in a clone under /tmp, say) are bound back, read-only."""
    inside = _outermost([k for k in keep if _is_within(k, target) and k != target])
    fds = {k: os.open(k, os.O_PATH | os.O_DIRECTORY) for k in inside if os.path.isdir(k)}
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, options)
    for path, fd in fds.items():
        os.makedirs(path, mode=0o755, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
        mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
        os.close(fd)


# Never covered whole (their children may be): the system the sandbox itself runs on.
SYSTEM_DIRS = frozenset(
    ["/", "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/dev", "/proc", "/sys"]
)


def _cover(path: str, keep: list[str]) -> None:
    """Hide ``path`` behind an empty read-only tmpfs (a file: behind /dev/null), except the
    paths in ``keep`` below it, whose siblings are covered instead.  A path that does not
    exist yet (an output folder made later) is hidden by covering its nearest ancestor."""
    path = os.path.normpath(path)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    if path in SYSTEM_DIRS or os.path.islink(path):
        return
    inside = [k for k in keep if _is_within(k, path)]
    if inside:
        if any(k == path for k in inside) or not os.path.isdir(path):
            return
        for entry in sorted(os.listdir(path)):
            _cover(os.path.join(path, entry), inside)
        return
    ro = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    if os.path.isdir(path):
        mount("tmpfs", path, "tmpfs", ro, "size=4k,nr_inodes=1,mode=755")
    else:
        mount("/dev/null", path, None, MS_BIND, None)
        mount(None, path, None, MS_REMOUNT | MS_BIND | ro, None)


def _unescape(field: str) -> str:
    """Mount points in /proc/self/mountinfo escape space, tab, newline and backslash."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _remount_all_readonly(writable: tuple[str, ...] = ()) -> list[str]:
    """Every mount read-only (keeping nosuid/nodev/noexec/atime flags), except the mount
    points in ``writable``; returns failures."""
    keep_flags = {
        "nosuid": MS_NOSUID,
        "nodev": MS_NODEV,
        "noexec": MS_NOEXEC,
        "noatime": MS_NOATIME,
        "nodiratime": MS_NODIRATIME,
        "relatime": MS_RELATIME,
        "strictatime": MS_STRICTATIME,
    }
    failed = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 6:
            continue
        target = _unescape(fields[4])
        if target in writable:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for opt in fields[5].split(","):
            flags |= keep_flags.get(opt, 0)
        try:
            mount(None, target, None, flags, None)
        except OSError:
            failed.append(target)
    return failed


def setup_outer_mounts(
    hide: list[str], keep: list[str], writable: tuple[str, ...] = ()
) -> list[str]:
    """``writable``: the memory cgroup's mount, where the zygote makes a cgroup per job.  It
    stays writable, and that is safe: only root may write there (every folder and file of
    a cgroupfs is root's, 0755/0644), and in the sandbox only the zygote and each job's
    init are root; students run as other uids, without capabilities."""
    mount(None, "/", None, MS_REC | MS_PRIVATE, None)  # nothing propagates to the host
    _expose(keep)
    for path in hide:
        _cover(path, keep)
    return _remount_all_readonly(writable)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        flags = struct.unpack("16sH", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req)[:18])[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))


# --------------------------------------------------------------------------- memory, from outside
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
# cgroup first thing after the fork, still root, through cgroup.procs opened here.
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
        root, target = _unescape(fields[3]), _unescape(fields[4])
        if fs[0] == "cgroup" and "memory" in fs[2].split(","):
            version = 1
        elif fs[0] == "cgroup2" and 1 not in own:  # a v1 memory controller is not on v2
            version = 2
        else:
            continue
        path = own.get(version)
        if path is None or not _is_within(path, root):
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


def _remove_cgroup(path: str) -> bool:
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
            _remove_cgroup(below)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


class _JobMemory:
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
        for name in ("procs", "peak", "clear_refs", "status"):
            self._close(name)

    def _close(self, name: str) -> None:
        fd = getattr(self, name)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
            setattr(self, name, -1)


class _Memory:
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
                    _remove_cgroup(os.path.join(parent, name))  # a grader that died
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

    def job(self, job_id: int, memory_bytes: int) -> _JobMemory:
        """The job's cgroup and its open files; else the VmHWM fallback (or none)."""
        self.retry()
        if self.wanted == "off":
            return _JobMemory("no memory meter: the sandbox was asked for none")
        fallback = _JobMemory(self.why)
        fallback.proc_fallback = True
        if self.base is None:
            return fallback
        path = os.path.join(self.base, f"job-{job_id}")
        mem = _JobMemory("", path)
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
        if path and not _remove_cgroup(path):
            self.pending.append(path)  # its last processes are still exiting: later

    def retry(self) -> None:
        self.pending = [p for p in self.pending if not _remove_cgroup(p)]

    def close(self, seconds: float = CGROUP_REMOVE_SECONDS) -> None:
        """Remove every cgroup this executor made (waiting ``seconds`` for the processes
        killed last to exit)."""
        if self.base is None:
            return
        end = time.monotonic() + seconds
        while not _remove_cgroup(self.base) and time.monotonic() < end:
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
            _remove_cgroup(os.path.join(own, entry))
    folder = os.path.join(own, mine + name)
    os.mkdir(folder, 0o755)
    try:
        os.chown(folder, uid, uid)
    except OSError:
        os.rmdir(folder)
        raise
    return folder


_memory = _Memory("off")  # set up in main()


# --------------------------------------------------------------------------- the job

_harness = None  # autograder/harness.py, loaded by path before the mounts hide it
_prober = None  # autograder/prober.py, the same


def _load(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _sources(folder: str) -> dict[str, str]:
    """The authors' library's modules, read now: the mounts hide the project from the
    probe process, which serves them from memory (``prober.install_library``)."""
    return {
        name[:-3]: open(os.path.join(folder, name), encoding="utf-8").read()
        for name in sorted(os.listdir(folder))
        if name.endswith(".py")
    }


def _write_event(fd: int, event: dict) -> None:
    data = (json.dumps(event)[:3000] + "\n").encode()
    try:
        os.write(fd, data)
    except OSError:
        pass


def _student_env(home: str, tmp: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "USER": "student",
        "LOGNAME": "student",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "TMPDIR": tmp,
        "IPYTHONDIR": os.path.join(home, ".ipython"),
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _student(*args) -> None:
    """The student process: drop everything, then run the notebook (:func:`_student_body`,
    the same arguments).  Never returns."""
    code = EXIT_SETUP_FAILED
    try:
        _student_body(*args)
        code = 0
    except BaseException:
        try:
            os.write(2, f"scalegrade sandbox: {traceback.format_exc()}"[-4000:].encode())
        except BaseException:  # noqa: BLE001 - the notebook may have broken anything
            pass
    finally:
        _os_exit(code)


def _fds_onto(mapping: dict[int, int]) -> None:
    """Put each fd of ``mapping`` (target -> source) on its number; close every other."""
    high = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 100) for target, source in mapping.items()}
    for target, source in high.items():
        os.dup2(source, target)
    os.closerange(max(mapping) + 1, 1 << 20)


def _drop(req: dict, limits: dict, uid: int | None, address_space: bool = True) -> None:
    """rlimits, then ``uid`` (when root), then no new privileges and a private umask.
    ``address_space`` False: no RLIMIT_AS (the job's memory cgroup bounds its memory)."""
    cpu = int(limits["cpu_seconds"])
    memory = limits["memory_bytes"] if address_space else resource.RLIM_INFINITY
    for name, soft, hard in (
        ("RLIMIT_AS", memory, memory),
        ("RLIMIT_FSIZE", limits["file_bytes"], limits["file_bytes"]),
        ("RLIMIT_NOFILE", limits["open_files"], limits["open_files"]),
        ("RLIMIT_NPROC", limits["processes"], limits["processes"]),
        ("RLIMIT_CORE", 0, 0),
        ("RLIMIT_CPU", cpu, cpu + 1),
    ):
        which = getattr(resource, name)
        _, current = resource.getrlimit(which)
        if current != resource.RLIM_INFINITY:  # never above what we may (as non-root)
            if soft == resource.RLIM_INFINITY:
                soft = hard = current
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(which, (int(soft), int(hard)))
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    os.umask(0o077)


def _student_body(
    req: dict,
    out_w: int,
    res_w: int,
    channel: int,
    workdir: str,
    home: str,
    tmp: str,
    memory: _JobMemory,
) -> None:
    """Set up the student process (cgroup, fds, limits, uid, env, cwd); run the notebook."""
    memory.close_probe_side()
    memory.join()  # still root; a failure ends the run here (EXIT_SETUP_FAILED), unmeasured
    _child_signals()
    os.setsid()
    devnull = os.open("/dev/null", os.O_RDONLY)
    _fds_onto(
        {0: devnull, 1: out_w, 2: out_w, STUDENT_FD_RESULT: res_w, STUDENT_FD_CHANNEL: channel}
    )
    limits = req["limits"]
    # RLIMIT_AS unless asked to leave memory to the job's cgroup, where it has one
    address_space = limits.get("address_space", True) or memory.path is None
    _drop(req, limits, req["uid"], address_space)
    os.environ.clear()
    os.environ.update(_student_env(home, tmp))
    os.chdir(workdir)
    _harness.run_submission(
        os.path.join(workdir, req["notebook_name"]), req["plan"], STUDENT_FD_RESULT, limits
    )
    _harness.serve(STUDENT_FD_CHANNEL)


def _probe(req: dict, fds: dict[str, int], channel: int, workdir: str, memory: _JobMemory) -> None:
    """The probe process: its own uid and limits, the probes read here, never before;
    then the probes run against the student's functions.  Never returns."""
    code = EXIT_SETUP_FAILED
    try:
        _child_signals()
        os.setsid()
        devnull = os.open("/dev/null", os.O_RDONLY)
        _fds_onto(
            {
                0: devnull,
                1: fds["out"],
                2: fds["out"],
                PROBE_FD_PROBES: fds["probes"],
                PROBE_FD_RESULT: fds["probes_res"],
                PROBE_FD_CHANNEL: channel,
            }
            | memory.probe_fds()
        )
        read_fd = PROBE_FD_MEMORY + (memory.kind == "vmhwm")
        _prober.meter = _prober.Meter(memory.kind, PROBE_FD_MEMORY, read_fd, memory.note)
        limits = req["limits"]
        _drop(req, limits, req.get("probe_uid"))
        os.environ.clear()
        os.environ.update(_student_env(workdir, workdir) | {"USER": "probe", "LOGNAME": "probe"})
        os.chdir(workdir)
        with os.fdopen(PROBE_FD_PROBES, "rb") as fh:
            probes = json.loads(fh.read())
        _prober.run(probes, PROBE_FD_CHANNEL, PROBE_FD_RESULT, limits)
        code = 0
    except BaseException:
        try:
            os.write(2, f"scalegrade probe: {traceback.format_exc()}"[-4000:].encode())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        _os_exit(code)


def _copy_notebook(nb_fd: int, target: str, uid: int | None, limit: int) -> None:
    with os.fdopen(nb_fd, "rb") as src:
        data = src.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"the notebook is larger than {limit} bytes")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as dst:
        dst.write(data)
    if uid is not None:
        os.chown(target, uid, uid)


def _mkdir_for(path: str, uid: int | None) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    if uid is not None:
        os.chown(path, uid, uid)


def _init(req: dict, fds: dict[str, int], keep: list[str], memory: _JobMemory) -> None:
    """PID 1 of the submission's fresh PID namespace (namespaces mode): its own mount,
    network, IPC and UTS namespaces, a fresh /proc, private scratch folders, the notebook
    copied in; then the student process, and orphans reaped until it ends.  When this
    process ends, the kernel kills whatever is left in the namespace.  Never returns."""
    try:
        _child_signals()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the zygote gone: everything goes
        uid = req["uid"]
        limits = req["limits"]
        tmp_size = max(16 << 20, 4 * int(limits["file_bytes"]))
        unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        scratch_tmpfs("/tmp", f"size={tmp_size},nr_inodes=65536,mode=1777", keep)
        for path in ("/dev/shm", "/var/tmp"):
            if os.path.isdir(path) and not os.path.islink(path):
                scratch_tmpfs(path, f"size={tmp_size},mode=1777", keep)
        _libc.sethostname(b"sandbox", 7)
        _loopback_up()  # its own loopback: local sockets (gloo) work, reach nothing else
        workdir, home = "/tmp/work", "/tmp/home"
        _mkdir_for(workdir, uid)
        _mkdir_for(os.path.join(home, ".ipython"), uid)
        if uid is not None:
            os.chown(home, uid, uid)
        _copy_notebook(
            fds["notebook"], os.path.join(workdir, req["notebook_name"]), uid, tmp_size // 2
        )
        probe_dir = "/tmp/probe"
        _mkdir_for(probe_dir, req.get("probe_uid"))
        student, probe = _fork_pair(req, fds, workdir, home, "/tmp", probe_dir, memory)
        for name in ("out", "res", "status", "probes", "probes_res"):
            os.close(fds[name])  # the notebook's was closed by the copy
        _os_exit(_wait_pair(student, probe))
    except BaseException as err:
        _write_event(fds["status"], {"event": "error", "message": f"sandbox set-up: {err}"})
    finally:
        _os_exit(EXIT_SETUP_FAILED)


def _fork_pair(req, fds, workdir, home, tmp, probe_dir, memory) -> tuple[int, int]:
    """Fork the student process and, beside it, the probe process, joined by a socket pair;
    the probe process alone gets the meter of the student's memory."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    student = os.fork()
    if student == 0:
        os.close(fds["probes"])  # the probes never enter the student's process
        os.close(fds["probes_res"])
        mine.close()
        _student(req, fds["out"], fds["res"], theirs.fileno(), workdir, home, tmp, memory)
    memory._close("procs")
    memory.open_proc(student)  # without a cgroup: its /proc files, opened here
    probe = os.fork()
    if probe == 0:
        theirs.close()
        _probe(req, fds, mine.fileno(), probe_dir, memory)
    memory.close()
    mine.close()
    theirs.close()
    return student, probe


def _wait_pair(student: int, probe: int) -> int:
    """Reap both (and orphans); the student's exit status, as a PID 1 reports it.

    When the probe process is done, the student's has nothing left to serve: it ends by
    itself, or is killed after SERVE_GRACE_SECONDS; that is not the notebook's failure.
    """
    code, stopped, probe_running = None, False, True
    stop_at = None
    while code is None or probe_running:
        timeout = None if stop_at is None or stopped else max(0.0, stop_at - time.monotonic())
        if timeout == 0:
            os.kill(student, signal.SIGKILL)
            stopped, timeout = True, None
        try:
            done, status = _waitpid_timeout(timeout, student)
        except ChildProcessError:
            break
        if done == probe:
            probe_running = False
            if code is None:
                stop_at = time.monotonic() + SERVE_GRACE_SECONDS
        elif done == student:
            code = 0 if stopped else os.waitstatus_to_exitcode(status)
    if code is None:
        return EXIT_SETUP_FAILED
    return 128 - code if code < 0 else min(code, 127)


def _waitpid_timeout(timeout: float | None, pid: int) -> tuple[int, int]:
    """os.waitpid(-1, 0), returning (0, 0) after ``timeout`` seconds with nothing reaped;
    woken by ``pid``'s end (its pidfd), not by polling, so the job ends as it does."""
    if timeout is None:
        return os.waitpid(-1, 0)
    done, status = os.waitpid(-1, os.WNOHANG)
    if done:
        return done, status
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # a kernel before 5.3, or a filter that refuses it: poll
        end = time.monotonic() + timeout
        while not done and time.monotonic() < end:
            time.sleep(0.01)
            done, status = os.waitpid(-1, os.WNOHANG)
        return done, status
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return os.waitpid(-1, os.WNOHANG)


def _child_signals() -> None:
    """A forked child of the zygote: default signal handling, no wakeup fd."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)


def _sweep_uid(uid: int) -> None:
    """Kill every process of ``uid`` (process mode, as root): kill(-1) from that uid."""
    pid = os.fork()
    if pid == 0:
        try:
            _child_signals()
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            _os_exit(0)
    os.waitpid(pid, 0)


_swept: set[int] = set()  # process mode: uids known to own no process


class _Job:
    """One submission, supervised by the zygote (trusted; root; out of the student's reach)."""

    def __init__(self, job_id: int, req: dict, status_fd: int):
        self.id = job_id
        self.req = req
        self.status_fd = status_fd
        self.uid = req["uid"]
        self.start = time.monotonic()
        self.deadline = self.start + float(req["limits"]["wall_seconds"])
        self.timed_out = False
        self.pid = 0
        self.probe_pid = 0  # process mode: the probe process, beside the student's
        self.probe_dir: str | None = None
        self.stop_at: float | None = None  # process mode: the probe is done; the student next
        self.stopped = False
        self.workdir: str | None = None
        self.cgroup: str | None = None  # the job's memory cgroup, removed at its end

    def kill(self, namespaces: bool) -> None:
        pids = [self.pid] if namespaces else [self.pid, self.probe_pid]
        for pid in pids:
            if not pid:
                continue
            try:
                if namespaces:
                    os.kill(pid, signal.SIGKILL)  # PID 1 of its namespace: takes them all
                else:
                    os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def _start_job(job_id: int, fds: list[int], config: dict, own_pidns: int | None) -> _Job:
    req_fd, nb_fd, out_w, res_w, status_w, probes_fd, probes_w = fds
    os.set_blocking(status_w, False)  # the zygote never blocks on a slow reader
    with os.fdopen(os.dup(req_fd), "rb") as fh:
        req = json.loads(fh.read())
    job = _Job(job_id, req, os.dup(status_w))
    named = {
        "notebook": nb_fd,
        "out": out_w,
        "res": res_w,
        "status": status_w,
        "probes": probes_fd,
        "probes_res": probes_w,
    }
    sys.stdout.flush()
    sys.stderr.flush()
    memory = _memory.job(job_id, int(req["limits"]["memory_bytes"]))
    job.cgroup = memory.path
    try:
        return _fork_job(job, req, named, config, own_pidns, memory)
    except BaseException:
        _memory.remove(job.cgroup)
        raise
    finally:
        memory.close()  # the children have theirs


def _fork_job(job: _Job, req: dict, named: dict, config: dict, own_pidns, memory) -> _Job:
    """The job's first process: its init (namespaces), or the pair (process mode)."""
    if own_pidns is not None:
        # The next child is PID 1 of a fresh PID namespace; then back to our own.
        unshare(CLONE_NEWPID)
        try:
            job.pid = os.fork()
        except BaseException:
            _check(_libc.setns(own_pidns, CLONE_NEWPID), "setns")
            raise
        if job.pid == 0:
            _init(req, named, config["keep"], memory)  # never returns
        _check(_libc.setns(own_pidns, CLONE_NEWPID), "setns")
        return job
    # process mode
    uid = job.uid
    probe_uid = req.get("probe_uid")
    for who in (uid, probe_uid):
        if who is not None and who not in _swept:
            _sweep_uid(who)  # left over by a grader that died (after each job: _finish_job)
            _swept.add(who)
    job.workdir = os.path.join(config["base_dir"], f"run-{job.id}")
    home = os.path.join(job.workdir, ".home")
    probe_dir = os.path.join(config["base_dir"], f"probe-{job.id}")
    _mkdir_for(job.workdir, uid)
    _mkdir_for(os.path.join(home, ".ipython"), uid)
    _mkdir_for(probe_dir, probe_uid)
    limit = max(16 << 20, 4 * int(req["limits"]["file_bytes"]))
    notebook = os.path.join(job.workdir, req["notebook_name"])
    _copy_notebook(os.dup(named["notebook"]), notebook, uid, limit)
    job.pid, job.probe_pid = _fork_pair(
        req, named, job.workdir, home, job.workdir, probe_dir, memory
    )
    job.probe_dir = probe_dir
    return job


SHARED_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")  # process mode: every job's


def _sweep_files(uid: int) -> None:
    """Remove what ``uid`` left in the shared scratch folders (process mode), so that no
    later submission finds it there."""
    for folder in SHARED_SCRATCH:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                pass


def _finish_job(job: _Job, status: int, usage, namespaces: bool) -> None:
    if not namespaces:
        job.kill(namespaces)  # what is left of its process groups
        for uid in (job.uid, job.req.get("probe_uid")):
            if uid is not None:
                _sweep_uid(uid)  # and every other process of its uids
                _sweep_files(uid)  # and its files in /tmp, /var/tmp and /dev/shm
        for folder in (job.workdir, job.probe_dir):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
    _memory.remove(job.cgroup)  # namespaces: every process of the job is gone with its init
    code = 0 if job.stopped else os.waitstatus_to_exitcode(status)
    event = {
        "event": "exit",
        "timed_out": job.timed_out,
        "seconds": time.monotonic() - job.start,
        "cpu": usage.ru_utime + usage.ru_stime,
    }
    if code < 0:
        event["signal"] = -code
    elif namespaces and code > 128:
        event["signal"] = code - 128
    else:
        event["code"] = code
    _write_event(job.status_fd, event)
    os.close(job.status_fd)


def _serve(ctrl: socket.socket, config: dict) -> None:
    namespaces = config["mode"] == "namespaces"
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY) if namespaces else None
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    jobs: dict[int, _Job] = {}  # by pid of the job's first process, until reaped
    probes: dict[int, _Job] = {}  # process mode: by pid of the job's probe process

    def reap() -> None:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            job = jobs.pop(info.si_pid, None)
            _, status, usage = os.wait4(info.si_pid, 0)
            if job is not None:
                _finish_job(job, status, usage, namespaces)
            done = probes.pop(info.si_pid, None)
            if done is not None and done.pid in jobs:  # the student's has little left to do
                done.stop_at = time.monotonic() + SERVE_GRACE_SECONDS

    while True:
        now = time.monotonic()
        for job in jobs.values():
            if not job.timed_out and now >= job.deadline:
                job.timed_out = True
                job.kill(namespaces)
            elif job.stop_at is not None and now >= job.stop_at and not job.stopped:
                job.stopped = True
                job.kill(namespaces)
        waiting = [j.deadline for j in jobs.values() if not j.timed_out]
        waiting += [j.stop_at for j in jobs.values() if j.stop_at and not j.stopped]
        timeout = max(0.0, min(waiting) - now) if waiting else None
        ready, _, _ = select.select([ctrl, wake_r], [], [], timeout)
        if wake_r in ready:
            os.read(wake_r, 4096)
        reap()
        if ctrl not in ready:
            continue
        try:
            msg, fds, _, _ = socket.recv_fds(ctrl, 65536, 8)
        except OSError:
            msg, fds = b"", []
        if not msg:  # the grader is gone: end every job, then ourselves
            for job in jobs.values():
                job.kill(namespaces)
                if not namespaces and job.uid is not None:
                    _sweep_uid(job.uid)
            if not namespaces:
                _memory.close()  # namespaces: the outer process does, once we are gone
            _os_exit(0)
        try:
            req = json.loads(msg)
        except ValueError:
            req = {}
        op = req.get("op")
        try:
            if op == "run" and len(fds) == 7:
                try:
                    job = _start_job(req["job"], fds, config, own_pidns)
                except BaseException as err:  # noqa: BLE001 - reported, the zygote goes on
                    _write_event(fds[4], {"event": "error", "message": f"job start: {err}"})
                else:
                    jobs[job.pid] = job
                    if job.probe_pid:
                        probes[job.probe_pid] = job
            elif op == "kill":
                for job in jobs.values():
                    if job.id == req.get("job"):
                        job.kill(namespaces)
            elif op == "preload":
                loaded, failed = _preload(req.get("modules", []))
                ctrl.send(json.dumps({"preloaded": loaded, "failed": failed}).encode())
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass


def _warm_torch(torch) -> None:
    """Run what torch initializes on first use (its CPU kernels' dispatch, BLAS, autograd,
    the generator), once here: every job forked after inherits it instead of paying it."""
    x = torch.randn(16, 16, dtype=torch.float64, requires_grad=True)
    layer = torch.nn.Linear(16, 16).double()
    y = torch.softmax(layer(x) @ x.T / 4.0, dim=1)
    (y.logsumexp(1).sum() + torch.nn.functional.logsigmoid(y).mean()).backward()
    x.detach().float().matmul(x.detach().float().T).sum().item()


def _preload(modules: list[str]) -> tuple[list[str], dict[str, str]]:
    import gc
    import importlib

    loaded, failed = [], {}
    gc.disable()  # no collection amid the imports: torch and torch._dynamo 1.72 -> 1.42 s
    try:
        for name in modules:
            try:
                module = importlib.import_module(name)
                if name == "torch":
                    module.set_num_threads(1)
                    _warm_torch(module)
                loaded.append(name)
            except Exception as err:  # noqa: BLE001 - reported to the grader
                failed[name] = f"{type(err).__name__}: {err}"
    finally:
        # Children share these pages instead of touching them in their first collection.
        # The few cycles the imports left (some 9,000 objects with torch) are frozen with
        # the rest: a collection to find them would take 0.1-0.15 s of the start.
        gc.freeze()
        gc.enable()
    return loaded, failed


STDLIB_SKIP = {
    "__main__",
    "antigravity",
    "this",
    "idlelib",
    "tkinter",
    "turtle",
    "turtledemo",
    "pydoc_data",
    "lib2to3",
    "ensurepip",
    "venv",
    "test",
    "curses",
    "_curses",
    "_curses_panel",
    "readline",
}


def _preload_stdlib() -> None:
    """Import the whole standard library (process mode, when the student's uid cannot
    read the interpreter's files: what is not imported here cannot be imported later)."""
    import contextlib
    import importlib
    import io
    import pkgutil

    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        for name in sorted(sys.stdlib_module_names - STDLIB_SKIP):
            try:
                module = importlib.import_module(name)
            except BaseException:  # noqa: BLE001 - other platforms' modules
                continue
            for info in pkgutil.walk_packages(getattr(module, "__path__", []), name + "."):
                if ".test" in info.name or "__main__" in info.name:
                    continue
                try:
                    importlib.import_module(info.name)
                except BaseException:  # noqa: BLE001
                    continue


def _zygote(ctrl: socket.socket, config: dict, ro_failed: list[str]) -> None:
    if config["mode"] == "namespaces":
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        scratch_tmpfs("/tmp", "size=16m,mode=1777", config["keep"])
        ipython_dir = "/tmp/.ipython"
    else:
        ipython_dir = os.path.join(config["base_dir"], ".ipython")
    os.makedirs(ipython_dir, exist_ok=True)
    os.environ["IPYTHONDIR"] = ipython_dir
    os.environ["HOME"] = os.path.dirname(ipython_dir)
    try:
        import gc

        gc.disable()  # until the preloads are frozen (_preload)
        if config.get("preload_stdlib"):
            _preload_stdlib()
        _harness.prepare()
        loaded, failed = _preload(config.get("preload", []))
        ctrl.send(
            json.dumps(
                {
                    "ready": True,
                    "mode": config["mode"],
                    "preloaded": loaded,
                    "failed": failed,
                    "readonly_failed": ro_failed,
                    "memory": _memory.describe(),
                }
            ).encode()
        )
    except BaseException:
        ctrl.send(json.dumps({"ready": False, "error": traceback.format_exc()[-3000:]}).encode())
        if config["mode"] != "namespaces":
            _memory.close(0)
        os._exit(1)
    _serve(ctrl, config)


def main(argv: list[str]) -> int:
    global _harness, _prober, _memory
    if argv[1].isdigit():
        ctrl = socket.socket(fileno=int(argv[1]))
    else:  # in a container: the grader's socket, bound in
        ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ctrl.connect(argv[1])
    config = json.loads(ctrl.recv(1 << 20))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the grader's to handle
    _harness = _load("scalegrade_harness", config["harness"])
    _prober = _load("scalegrade_prober", config["prober"])
    _harness.wire = _prober.wire = _load("scalegrade_wire", config["wire"])
    _prober.library = _sources(config["checklib"])
    _memory = _Memory(config.get("memory_meter", "auto"))
    _memory.setup(config.get("memory_cgroup"), config.get("memory_cgroup_why"))
    ro_failed: list[str] = []
    if config["mode"] == "namespaces":
        try:
            unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID)
            writable = (_memory.mount,) if _memory.mount else ()
            ro_failed = setup_outer_mounts(config["hide"], config["keep"], writable)
        except OSError as err:
            ctrl.send(json.dumps({"ready": False, "error": f"namespaces: {err}"}).encode())
            _memory.close(0)
            return 3
        pid = os.fork()
        if pid == 0:
            _zygote(ctrl, config, ro_failed)
            os._exit(0)
        ctrl.close()

        def forward(signum, frame):
            os.kill(pid, signal.SIGKILL)

        signal.signal(signal.SIGTERM, forward)
        try:
            while True:
                try:
                    _, status = os.waitpid(pid, 0)
                    return max(0, os.waitstatus_to_exitcode(status))
                except ChildProcessError:
                    return 0
                except InterruptedError:
                    continue
        finally:
            _memory.close()  # the zygote is gone, and with it every process of every job
    _zygote(ctrl, config, ro_failed)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except OSError as err:
        if err.errno != errno.EPIPE:
            raise
        sys.exit(1)
