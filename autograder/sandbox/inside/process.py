"""How each process of a job is made: its descriptors, rlimits, uid and environment, its
signals, and the private scratch of its own namespaces (the job's init, a fresh rank)."""

from __future__ import annotations

import fcntl
import json
import os
import resource
import signal

from .linux import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUTS,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    PR_SET_NO_NEW_PRIVS,
    check,
    libc,
    mount,
    prctl,
    unshare,
)
from .mounts import loopback_up, scratch_tmpfs

os_exit = os._exit  # a forked process must never return into its parent's code
EXIT_SETUP_FAILED = 125
WORKDIR, HOME = "/tmp/work", "/tmp/home"  # in a private scratch (namespaces mode)


def write_event(fd: int, event: dict) -> None:
    data = (json.dumps(event)[:3000] + "\n").encode()
    try:
        os.write(fd, data)
    except OSError:
        pass


def student_env(home: str, tmp: str) -> dict[str, str]:
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


def fds_onto(mapping: dict[int, int]) -> None:
    """Put each fd of ``mapping`` (target -> source) on its number; close every other."""
    high = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 100) for target, source in mapping.items()}
    for target, source in high.items():
        os.dup2(source, target)
    for fd in set(range(max(mapping))) - set(mapping):
        try:
            os.close(fd)
        except OSError:
            pass
    os.closerange(max(mapping) + 1, 1 << 20)


def drop(req: dict, limits: dict, uid: int | None, address_space: bool = True) -> None:
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


def mkdir_for(path: str, uid: int | None) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    if uid is not None:
        os.chown(path, uid, uid)


def child_signals() -> None:
    """A forked child of the zygote: default signal handling, no wakeup fd."""
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)


def fork_pid1(own_pidns: int) -> int:
    """``os.fork``, the child PID 1 of a PID namespace of its own: it sees no process of
    this one, nor any of another child forked so.  This process stays in ``own_pidns``."""
    unshare(CLONE_NEWPID)
    try:
        pid = os.fork()
    except BaseException:
        check(libc.setns(own_pidns, CLONE_NEWPID), "setns")
        raise
    if pid:
        check(libc.setns(own_pidns, CLONE_NEWPID), "setns")
    return pid


def private_scratch(limits: dict, keep: list[str], network: bool = True) -> int:
    """Namespaces of this process's own (mount, network, IPC, UTS): a fresh /proc, empty
    tmpfs on /tmp, /dev/shm and /var/tmp, loopback up.  Run as root, before any student
    code runs here; the size of each scratch tmpfs, in bytes.  ``network=False``: the
    network namespace is the caller's (a gloo group's ranks share one)."""
    tmp_size = max(16 << 20, 4 * int(limits["file_bytes"]))
    unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWNET if network else 0))
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    scratch_tmpfs("/tmp", f"size={tmp_size},nr_inodes=65536,mode=1777", keep)
    for path in ("/dev/shm", "/var/tmp"):
        if os.path.isdir(path) and not os.path.islink(path):
            scratch_tmpfs(path, f"size={tmp_size},mode=1777", keep)
    libc.sethostname(b"sandbox", 7)
    if network:
        loopback_up()  # its own loopback: local sockets (gloo) work, reach nothing else
    return tmp_size


def read_notebook(fd: int, limit: int) -> bytes:
    """The submitted notebook's bytes, from the grader's descriptor (closed here)."""
    with os.fdopen(fd, "rb") as src:
        data = src.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"the notebook is larger than {limit} bytes")
    return data


def write_notebook(data: bytes, target: str, uid: int | None) -> None:
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as dst:
        dst.write(data)
    if uid is not None:
        os.chown(target, uid, uid)


def place_notebook(data: bytes, name: str, uid: int | None) -> str:
    """The working folder and home of a private scratch, the notebook in it: its path."""
    mkdir_for(WORKDIR, uid)
    mkdir_for(os.path.join(HOME, ".ipython"), uid)
    if uid is not None:
        os.chown(HOME, uid, uid)
    target = os.path.join(WORKDIR, name)
    write_notebook(data, target, uid)
    return target
