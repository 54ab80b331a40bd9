"""The jail's file system: the hidden paths covered by empty tmpfs, the interpreter kept
reachable, every mount read-only, a private scratch tmpfs per job, loopback up."""

from __future__ import annotations

import fcntl
import os
import socket
import struct

from .linux import (
    IFF_UP,
    MS_BIND,
    MS_NOATIME,
    MS_NODEV,
    MS_NODIRATIME,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_RELATIME,
    MS_REMOUNT,
    MS_STRICTATIME,
    SIOCGIFFLAGS,
    SIOCSIFFLAGS,
    mount,
)


def is_within(path: str, parent: str) -> bool:
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
        if any(is_within(top, other) and top != other for other in groups):
            continue  # a covered ancestor handles it
        paths = _outermost(paths)
        fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in paths}
        mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
        for path, fd in fds.items():
            os.makedirs(path, mode=0o755, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
            os.close(fd)


def _outermost(paths: list[str]) -> list[str]:
    return [p for p in paths if not any(is_within(p, q) and p != q for q in paths)]


def scratch_tmpfs(target: str, options: str, keep: list[str]) -> None:
    """A fresh writable tmpfs on ``target``; the ``keep`` paths below it (a virtual
    environment in a clone under /tmp, say) are bound back, read-only."""
    inside = _outermost([k for k in keep if is_within(k, target) and k != target])
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
    inside = [k for k in keep if is_within(k, path)]
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


def unescape(field: str) -> str:
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
        target = unescape(fields[4])
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


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        flags = struct.unpack("16sH", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req)[:18])[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))
