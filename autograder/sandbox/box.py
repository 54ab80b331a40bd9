"""Run untrusted student notebooks; get back plain, schema-checked data.

The rule (docs/security.md, "The rule"): student code runs only
here, and only plain data comes back.  This module is the trusted side: it starts the
warm executor (:mod:`.inside`), hands it one submission at a time, enforces the wall
timeout, caps what comes back and checks the harvest's schema.  It never imports,
unpickles or calls anything the student wrote; it only parses JSON.

Backends:

- ``namespaces`` (default where ``unshare`` works, as root): a warm zygote in its own
  mount/network/PID namespaces, with the ``hide`` paths, the project's folders and the
  grader's home covered by empty tmpfs and every mount read-only; per submission a child
  in fresh PID/mount/network/IPC/UTS namespaces, under its own uid (61000 + slot),
  rlimits, no new privileges, a private tmpfs working directory holding only the notebook,
  and a memory cgroup of its own whose peak only the probe process can reset and read.
  The end of the run, or the timeout, kills everything the notebook started.
- ``process``: the fallback without namespaces (rlimits, setsid, the uid when root, the
  timeout kills the process group, a private directory, a scrubbed environment); it logs
  what is NOT isolated.
- ``docker``: the same warm executor in a grading image, one container for the whole
  batch (``container_command``: no network, a read-only root, the batch's memory, pids and
  CPUs), reached through a unix socket bound into it; each submission is still a fresh
  child with the probe process beside it.  The engine is Docker where its daemon answers,
  else Podman (``find_engine``; ``$SCALEGRADE_PODMAN_ARGS`` holds the global flags a host
  needs, such as ``--runtime runc --cgroup-manager cgroupfs``).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import itertools
import json
import logging
import os
import queue
import select
import selectors
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import tokenize
import uuid
import weakref
from collections.abc import Sequence
from pathlib import Path

from .container import (
    CHECKLIB,
    CONTAINER_CGROUP,
    CONTAINER_CODE,
    CONTAINER_HOST_UID,
    CONTAINER_START_SECONDS,
    EXECUTOR,
    Container,
    container_command,
    executor_env,
    find_engine,
    uid_map,
)
from .harvest import MAX_ERROR_CHARS, check_harvest, clean_text, probe_results
from .inside import PROBE_UID_OFFSET, RANK_UID_OFFSET, UID_BASE, UID_SLOTS
from .inside.memory import MEMORY_METERS
from .plan import HarvestError, Limits, Outcome, Plan, Probe, SandboxError

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
EXIT_SETUP_FAILED = 125
SETUP_TIMEOUT = 120.0

# The child may import these from the warm executor instead of from disk.
PRELOAD = ("numpy", "numpy.random", "IPython")
# Preloaded the first time a notebook's code mentions the marker, for what the plan's
# checks do not preload already (Probe.preload, from the checks): torch (2 s to import),
# torch._dynamo, which the first torch.utils.checkpoint call imports (1 s more), and otter -
# once per batch in the zygote instead of once per submission.  Only code cells count:
# a free-response answer on checkpointing preloads nothing.
ON_DEMAND: dict[bytes, tuple[str, ...]] = {
    b"torch": ("torch",),
    b"utils.checkpoint": ("torch", "torch._dynamo"),
    b"utils import checkpoint": ("torch", "torch._dynamo"),
    b"otter.Notebook": ("otter",),  # public checks (generate --otter): 3 s per notebook
}
GRACE_SECONDS = 10.0  # past the wall limit, before the grader stops waiting for a job
DRAIN_SECONDS = 1.0  # after the job's end, for output still in the pipes
# --------------------------------------------------------------------------- helpers


class _Capture:
    """The first quarter and the last three quarters of ``limit`` bytes of a stream;
    what lies between is counted and dropped as it arrives."""

    def __init__(self, limit: int):
        self.head_limit = max(0, limit // 4)
        self.tail_limit = max(0, limit - self.head_limit)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        dropped = self.total - len(self.head) - len(tail)
        middle = f"\n[... {dropped} bytes of output dropped ...]\n".encode() if dropped else b""
        return clean_text((bytes(self.head) + middle + tail).decode("utf-8", errors="replace"))


class _UidSlots:
    """Machine-wide uids for concurrent runs, so that two graders on one machine never
    share a uid (nor its RLIMIT_NPROC count).  A slot is held by binding an abstract unix
    socket name: no file to clean up, and it is released when its holder dies."""

    def acquire(self) -> tuple[int, socket.socket]:
        for slot in range(UID_SLOTS):
            uid = UID_BASE + slot
            holder = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                holder.bind(f"\0scalegrade-sandbox-uid-{uid}")
                return uid, holder
            except OSError:
                holder.close()
        raise SandboxError(f"all {UID_SLOTS} sandbox uids are in use")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _keep_paths() -> list[str]:
    """What the sandboxed interpreter reads: its prefixes and site-packages."""
    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    try:
        paths.update(site.getsitepackages())
    except AttributeError:
        pass
    return sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})


def _traversable(path: str) -> bool:
    """Whether any uid may reach ``path`` (every folder on the way has o+x)."""
    current = "/"
    for part in Path(path).parts[1:]:
        current = os.path.join(current, part)
        try:
            if not os.stat(current).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _default_hide() -> list[str]:
    """Hidden in every sandbox: the project (keys, templates, solutions, outputs; not the
    virtual environment), the question bank a wheel installs beside the packages and the
    one ``$SCALEGRADE_BANK`` names (reference solutions and checks), the grader's home,
    temporary files and /run's sockets."""
    paths = [str(PROJECT_ROOT), os.path.expanduser("~"), tempfile.gettempdir(), "/run"]
    banks = [PROJECT_ROOT / "scalegrade" / "bank", Path(os.environ.get("SCALEGRADE_BANK") or "")]
    paths += [str(b) for b in banks if str(b) != "." and b.is_dir()]
    return [p for p in paths if os.path.abspath(p) not in _SYSTEM_DIRS]


_SYSTEM_DIRS = frozenset(
    ["/", "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/dev", "/proc", "/sys"]
)


def namespaces_available() -> bool:
    """Whether this process may create mount/network/PID namespaces (needs root)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    probe = (
        "import ctypes,sys; libc = ctypes.CDLL(None, use_errno=True); "
        "sys.exit(0 if libc.unshare(0x20000|0x40000000|0x20000000|0x08000000|0x04000000) == 0"
        " else 1)"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", probe], timeout=30, capture_output=True
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _probe_request(p: Probe) -> dict:
    return {
        "id": p.id,
        "function": p.function,
        "source": p.source,
        "seed": int(p.seed),
        "params_json": json.dumps(p.params, allow_nan=False),
        "isolated": bool(p.isolated),
        **(_compiled(p.source, p.id) if p.isolated else {}),
    }


@functools.lru_cache(maxsize=64)
def _compiled(source: str, probe_id: str) -> dict:
    """A probe's checks compiled for the probe process, once per batch (prober.compiled)."""
    from .inside import prober

    return prober.compiled(source, probe_id)


def _plan_request(plan: Plan) -> dict:
    """What the student's process gets: the answer variables, and the probes of checks
    written before the probe process, which still run there."""
    return {
        "variables": [str(v) for v in plan.variables],
        "probes": [_probe_request(p) for p in plan.probes if not p.isolated],
    }


def _open_notebook(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(21, "not a regular file")
    return fd


def _code_text(raw: bytes) -> bytes:
    """The code of a notebook's code cells without their strings and comments (what
    ON_DEMAND looks at: an answer or a comment that names torch imports nothing); the
    whole file if it is not a notebook's JSON (the run then says what is wrong with it)."""
    try:
        cells = json.loads(raw)["cells"]
        sources = [
            "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in cells
            if isinstance(c, dict) and c.get("cell_type") == "code"
        ]
        return "\n".join(_without_strings(str(src)) for src in sources).encode()
    except (ValueError, KeyError, TypeError):
        return raw


def _without_strings(source: str) -> str:
    """``source`` with its strings and comments blanked; as it is where it does not
    tokenize (a magic, a syntax error)."""
    skip = {tokenize.STRING, tokenize.COMMENT}
    skip |= {getattr(tokenize, n) for n in ("FSTRING_MIDDLE",) if hasattr(tokenize, n)}
    lines = source.splitlines(keepends=True)
    starts = list(itertools.accumulate((len(line) for line in lines), initial=0))
    text = list(source)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in skip:
                a = starts[tok.start[0] - 1] + tok.start[1]
                b = starts[tok.end[0] - 1] + tok.end[1]
                text[a:b] = " " * (b - a)
    except (tokenize.TokenError, SyntaxError):
        return source
    return "".join(text)


# --------------------------------------------------------------------------- the executor


class _Executor:
    """The warm zygote process and its control socket; in a grading container when
    ``container`` says which (the same executor, reached through a socket bound in)."""

    def __init__(
        self,
        mode: str,
        hide: list[str],
        keep: list[str],
        base_dir: Path,
        stdlib: bool = False,
        memory_meter: str = "auto",
        container: Container | None = None,
    ):
        self.mode = mode
        self.lock = threading.Lock()
        self.preloaded: set[str] = set()
        self._pending = False  # a preload's answer not read yet
        self.memory: dict = {}  # the executor's memory cgroups: {"cgroup", "version", "why"}
        self.container = container
        self.name = f"scalegrade-{uuid.uuid4().hex[:16]}"  # the container's
        config = {
            "mode": mode,
            "hide": hide,
            "keep": keep,
            "base_dir": str(base_dir),
            "checklib": str(CHECKLIB),
            "preload": list(PRELOAD),
            "preload_stdlib": stdlib,
            "memory_meter": memory_meter,
        }
        self.cgroup: str | None = None  # the memory cgroup made for the container
        if container is not None:  # the image's own interpreter; its /tmp; nothing of ours
            config |= {"checklib": f"{CONTAINER_CODE}/{CHECKLIB.name}"}
            config |= {"base_dir": "/tmp", "keep": [], "hide": [CONTAINER_CODE, "/run"]}
            if memory_meter == "auto":
                config |= self._delegate_cgroup(container)
        self.log_path = base_dir / f"executor-{mode}.log"
        with open(self.log_path, "ab") as errlog:
            if container is None:
                self.proc, parent = self._spawn(errlog)
            else:
                try:
                    self.proc, parent = self._spawn_container(container, base_dir, errlog)
                except BaseException:
                    self._remove_cgroup()
                    raise
        self.ctrl = parent
        where = f"{mode} executor" + (f" in {container.image}" if container else "")
        try:
            parent.settimeout(SETUP_TIMEOUT)
            parent.send(json.dumps(config).encode())  # not in argv: /proc/PID/cmdline
            reply = json.loads(parent.recv(1 << 16) or b"{}")
        except (OSError, ValueError) as err:
            reply = {"ready": False, "error": f"no answer from the executor ({err})"}
        finally:
            parent.settimeout(None)
        if not reply.get("ready"):
            self.close()
            detail = reply.get("error") or self._log_tail() or "it exited"
            raise SandboxError(f"the {where} did not start: {detail}")
        self.preloaded.update(reply.get("preloaded", []))
        memory = reply.get("memory")
        self.memory = memory if type(memory) is dict else {}
        if memory_meter == "auto" and not self.memory.get("cgroup"):
            log.warning(
                "sandbox (%s): %s; the probe process measures the memory of the notebook's "
                "process by its VmHWM instead, which the notebook can reset and which misses "
                "its children",
                where,
                self.memory.get("why") or "no memory cgroup",
            )
        if reply.get("failed"):
            log.warning("sandbox: could not preload %s", reply["failed"])
        if reply.get("readonly_failed"):
            log.debug("sandbox: mounts left writable: %s", reply["readonly_failed"])

    def _delegate_cgroup(self, container: Container) -> dict:
        """The container's memory cgroup, for the executor's config; or why there is none."""
        from .inside import memory  # its cgroup helpers; nothing of it runs here

        owner = CONTAINER_HOST_UID if uid_map(container.engine) else 0
        try:
            self.cgroup = memory.delegate_memory_cgroup(self.name, owner)
        except OSError as err:
            return {"memory_cgroup_why": f"no memory cgroup for the container: {err.strerror}"}
        return {"memory_cgroup": CONTAINER_CGROUP}

    def _remove_cgroup(self) -> None:
        from .inside import memory

        end = time.monotonic() + 5.0
        while self.cgroup and not memory.remove_cgroup(self.cgroup):
            if time.monotonic() > end:  # left for the next grader (it removes those of the dead)
                log.debug("sandbox: the container's cgroup %s is still busy", self.cgroup)
                break
            time.sleep(0.05)

    @staticmethod
    def _spawn(errlog) -> tuple[subprocess.Popen, socket.socket]:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        proc = subprocess.Popen(
            # -s -P -B: -I without -E, so that PYTHONMALLOC applies; the environment
            # is ours (executor_env), nothing of the grader's
            [sys.executable, "-s", "-P", "-B", str(EXECUTOR), str(child.fileno())],
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errlog,
            env=executor_env(),
            cwd="/",
            start_new_session=True,
        )
        child.close()
        return proc, parent

    def _spawn_container(
        self, container: Container, base_dir: Path, errlog
    ) -> tuple[subprocess.Popen, socket.socket]:
        """Start the container and take its executor's connection.  The socket's folder has
        a random name in the sandbox's folder, which others may enter but not list; it is
        removed as soon as the executor has connected."""
        control = base_dir / uuid.uuid4().hex
        control.mkdir(mode=0o711)
        path = control / "sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            listener.bind(str(path))
            os.chmod(path, 0o666)  # the container's root is another uid on the host
            listener.listen(1)
            argv = container_command(container, name=self.name, control=control, cgroup=self.cgroup)
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=errlog,
                    start_new_session=True,
                )
            except OSError as err:
                raise SandboxError(f"{container.engine.name} did not start: {err}") from err
            self.proc = proc
            deadline = time.monotonic() + CONTAINER_START_SECONDS
            while not select.select([listener], [], [], 0.2)[0]:
                if proc.poll() is not None or time.monotonic() > deadline:
                    self._stop_container()
                    errlog.flush()
                    raise SandboxError(
                        f"the grading container ({container.engine.name} run "
                        f"{container.image}) did not start"
                        + (" in time" if proc.returncode is None else "")
                        + f": {self._log_tail() or 'see ' + str(self.log_path)} (the image "
                        "is never pulled mid-batch: build it with `make image`, or pull it)"
                    )
            conn, _ = listener.accept()
            return proc, conn
        finally:
            listener.close()
            shutil.rmtree(control, ignore_errors=True)

    def _stop_container(self) -> None:
        engine = self.container.engine
        try:
            subprocess.run(
                [*engine.command, "rm", "--force", "--time", "0", self.name],
                capture_output=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.proc.kill()
        self.proc.wait()

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:].strip()
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, message: dict, fds: Sequence[int] = ()) -> None:
        with self.lock:
            socket.send_fds(self.ctrl, [json.dumps(message).encode()], list(fds))

    def kill(self, job: int) -> None:
        try:
            self.send({"op": "kill", "job": job})
        except OSError:
            pass

    def preload(self, modules: Sequence[str], wait: bool = True) -> None:
        """Import ``modules`` in the zygote, so that every job after forks with them.
        ``wait`` False: return at once (the imports overlap the grader's own start); the
        jobs sent meanwhile start after the imports, and the answer is read later."""
        with self.lock:
            self._answer_preload()
            wanted = [m for m in dict.fromkeys(modules) if m not in self.preloaded]
            if not wanted:
                return
            socket.send_fds(
                self.ctrl, [json.dumps({"op": "preload", "modules": wanted}).encode()], []
            )
            self.preloaded.update(wanted)  # a failed import is not retried per submission
            self._pending = True
            if wait:
                self._answer_preload()

    def _answer_preload(self) -> None:
        """Read the answer of the preload in flight, if any (under the lock)."""
        if not self._pending:
            return
        self.ctrl.settimeout(SETUP_TIMEOUT)
        try:
            reply = json.loads(self.ctrl.recv(1 << 16) or b"{}")
        finally:
            self.ctrl.settimeout(None)
        self._pending = False
        if reply.get("failed"):
            log.warning("sandbox: could not preload %s", reply["failed"])

    def close(self) -> None:
        try:
            self.ctrl.close()  # the zygote sees EOF, kills its jobs and exits
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5 if self.container is None else 20)
        except subprocess.TimeoutExpired:
            if self.container is not None:
                self._stop_container()
            else:
                self.proc.kill()
                self.proc.wait()
        self._remove_cgroup()


class _State:
    """What a Sandbox must release, kept apart so that a finalizer can release it."""

    def __init__(self, base_dir: Path):
        self.base_dir = base_dir
        # one, or a grading container per concurrent run where containers cannot map uids
        self.executors: list[_Executor | None] = [None]
        self.retired: list[socket.socket] = []  # uid slots of runs whose end is unconfirmed

    def close(self) -> None:
        for executor in self.executors:
            if executor is not None:
                executor.close()
        self.executors = [None] * len(self.executors)
        for holder in self.retired:
            holder.close()
        self.retired.clear()
        shutil.rmtree(self.base_dir, ignore_errors=True)


# --------------------------------------------------------------------------- the sandbox


class Sandbox:
    """Runs notebooks in isolation; a warm executor lives as long as the Sandbox.

    ``hide``: paths the notebook must not see (keys, gradebook, submissions, the output
    folder, a secret file); the project's folders, the grader's home and temporary files
    are always hidden.  ``memory_meter``: how the probe process measures the memory of the
    student's process (MEMORY_METERS; :attr:`memory` says what it got).  ``preload``: the
    modules the checks need (``Keys.preload``), imported by the warm executor as it starts,
    while the grader goes on with its own start.  ``backend`` docker: the warm executor
    runs in a container of ``image`` (``engine``: docker or podman), sized for ``jobs``
    submissions at once.  ``run`` is thread-safe.
    """

    def __init__(
        self,
        *,
        backend: str = "auto",
        limits: Limits = Limits(),  # noqa: B008 - frozen
        hide: Sequence[Path] = (),
        image: str | None = None,
        gpus: str | None = None,
        memory_meter: str = "auto",
        preload: Sequence[str] = (),
        engine: str = "auto",
        jobs: int = 2,
    ):
        if backend not in ("auto", "namespaces", "process", "docker"):
            raise ValueError(f"unknown sandbox backend {backend!r}")
        if memory_meter not in MEMORY_METERS:
            raise ValueError(f"unknown memory meter {memory_meter!r} (one of {MEMORY_METERS})")
        self.memory_meter = memory_meter
        self.preload = tuple(preload)
        if backend == "docker" and not image:
            raise ValueError("the docker backend needs an image (--image)")
        self.limits = limits
        self.image = image
        self.gpus = gpus
        self.jobs = max(1, jobs)
        self.hide = [os.path.abspath(p) for p in hide]
        for path in self.hide:
            if path in _SYSTEM_DIRS:
                raise ValueError(f"cannot hide {path}: the sandbox runs on it")
        self._jobs = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = False
        # a container's root sets its children's uids (mapped: nobody's on the host)
        root = os.geteuid() == 0 or backend == "docker"
        self._uids = _UidSlots() if root else None
        base_dir = Path(tempfile.mkdtemp(prefix="scalegrade-sandbox-"))
        os.chmod(base_dir, 0o711)  # process mode: run dirs inside are the slot uid's
        self._state = _State(base_dir)
        self._finalizer = weakref.finalize(self, self._state.close)
        self.isolation = backend
        self.container: Container | None = None
        self._idle: queue.SimpleQueue | None = None  # the containers free, in a pool
        try:
            if backend == "docker":
                found = find_engine(engine)
                self.container = Container(image, found, limits, gpus, jobs)
                if not found.maps_uids:  # a container per concurrent run (_start)
                    self._state.executors = [None] * max(1, jobs)
                    self._idle = queue.SimpleQueue()
                for slot in range(len(self._state.executors)):
                    self._start("docker", slot=slot)
                    if self._idle is not None:
                        self._idle.put(slot)
            elif backend == "auto":
                try:
                    self._start("namespaces")
                except SandboxError as err:
                    self._start("process", reason=str(err))
            else:
                self._start(backend)
        except BaseException:
            self._finalizer()
            raise

    # ----------------------------------------------------------------- lifecycle

    def _start(self, mode: str, reason: str | None = None, slot: int = 0) -> None:
        if mode == "docker":  # the executor in the image, in the mode its engine allows
            container = self.container
            inside = "namespaces" if container.engine.maps_uids else "process"
            if inside == "process":  # one run at a time per container: runs share nothing
                container = dataclasses.replace(container, jobs=1)
            executor = _Executor(
                inside, [], [], self._state.base_dir, False, self.memory_meter, container
            )
            self._state.executors[slot] = executor
            executor.preload(self.preload, wait=False)
            return
        hide = self.hidden()
        keep = _keep_paths()
        root = os.geteuid() == 0
        # Without a mount namespace, an interpreter under a folder others may not enter
        # (pyenv in /root) is unreadable to the student's uid: preload the stdlib then.
        closed = [p for p in keep if not _traversable(p)] if mode == "process" and root else []
        executor = _Executor(
            mode, hide, keep, self._state.base_dir, bool(closed), self.memory_meter
        )
        self._state.executors[slot] = executor
        executor.preload(self.preload, wait=False)
        self.isolation = mode
        if mode == "process":
            why = reason or "backend 'process' was asked for"
            if root:
                who = (
                    f"student code runs as uid {UID_BASE}+slot (so it cannot signal the "
                    "grader), every process of that uid is killed after the run, and its files in "
                    "/tmp, /var/tmp and /dev/shm are removed"
                )
            else:
                who = (
                    "student code runs as the grader's own user: it CAN signal the grader, "
                    "and processes it detaches (setsid) outlive the run"
                )
            log.warning(
                "sandbox: Linux namespaces are not used (%s). Falling back to process "
                "isolation: rlimits, its own session, a private working directory and a "
                "scrubbed environment; %s. NOT isolated: the network is reachable, and every "
                "file the student's uid can read is readable (keys, other submissions, the "
                "gradebook, the paths to hide %s) unless file permissions forbid it.",
                why,
                who,
                hide,
            )
            if closed:
                log.warning(
                    "sandbox: the interpreter's files under %s are not readable by the "
                    "student's uid; the standard library is preloaded instead.",
                    closed,
                )

    def hidden(self) -> list[str]:
        """The folders the notebooks do not see: ``hide`` and the ones always hidden; in a
        container, the whole host but what the image holds."""
        return ["/"] if self.container is not None else _default_hide() + self.hide

    def warm(self, modules: Sequence[str]) -> None:
        """Have the warm executor import ``modules`` too (what the checks need, once the keys
        are read), while the caller goes on; an executor started later imports them first."""
        self.preload = tuple(dict.fromkeys((*self.preload, *modules)))
        for executor in self._state.executors:
            if executor is not None:
                executor.preload(self.preload, wait=False)

    @property
    def memory(self) -> dict:
        """How the probe process measures the memory of the student's process here:
        ``{"cgroup": the folder of this executor's job cgroups, or None, "version": 1 or 2,
        "why": why there is no cgroup}``."""
        executor = self._state.executors[0]
        return dict(executor.memory) if executor is not None else {}

    def _executor(self, slot: int = 0) -> _Executor:
        with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            executor = self._state.executors[slot]
            if executor is None or not executor.alive():
                log.warning("sandbox: the %s executor stopped; starting a new one", self.isolation)
                if executor is not None:
                    executor.close()
                self._state.executors[slot] = None
                self._start(self.isolation, slot=slot)
            return self._state.executors[slot]

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ----------------------------------------------------------------- running

    def run(self, notebook: Path, plan: Plan) -> Outcome:
        """Run ``notebook``'s code cells in order, then read ``plan``'s variables and run
        its probes; the harvest is schema-checked plain data, or ``error`` says why not."""
        start = time.monotonic()

        def failed(message: str, log_text: str = "") -> Outcome:
            message = clean_text(message)
            return Outcome(None, message, time.monotonic() - start, self.isolation, log_text)

        try:
            plan_request = _plan_request(plan)
            probes_request = [_probe_request(p) for p in plan.probes if p.isolated]
        except (TypeError, ValueError) as err:
            return failed(f"the plan is not JSON data: {err}")
        try:
            nb_fd = _open_notebook(Path(notebook))
        except OSError as err:
            return failed(f"{notebook}: cannot read the notebook ({err.strerror or err})")
        slot = self._idle.get() if self._idle is not None else 0  # a pooled container: ours
        try:
            executor = self._executor(slot)
            name = Path(notebook).name
            return self._run(executor, nb_fd, name, plan, plan_request, probes_request, start)
        except (SandboxError, OSError) as err:  # the sandbox's trouble, recorded per submission
            return failed(f"the sandbox is unavailable: {err}")
        finally:
            os.close(nb_fd)
            if self._idle is not None:
                self._idle.put(slot)

    @staticmethod
    def _on_demand(preloaded: set[str], plan: Plan, nb_fd: int) -> list[str]:
        """What the plan's probes preload, and the ON_DEMAND modules this notebook's code
        cells mention, not yet preloaded."""
        wanted = [m for p in plan.probes for m in p.preload]
        todo = {m for mods in ON_DEMAND.values() for m in mods} - preloaded - set(wanted)
        markers = [marker for marker, mods in ON_DEMAND.items() if todo & set(mods)]
        raw = os.pread(nb_fd, min(os.fstat(nb_fd).st_size, 64 << 20), 0) if markers else b""
        if any(marker in raw for marker in markers):  # then only in code: 20 ms, not 0.1
            code = _code_text(raw)
            wanted += [m for marker in markers if marker in code for m in ON_DEMAND[marker]]
        return [m for m in dict.fromkeys(wanted) if m not in preloaded]

    def _run(
        self,
        executor: _Executor,
        nb_fd: int,
        name: str,
        plan: Plan,
        plan_request: dict,
        probes_request: list[dict],
        start: float,
    ) -> Outcome:
        modules = self._on_demand(executor.preloaded, plan, nb_fd)
        if modules:
            try:
                executor.preload(modules)
            except (OSError, ValueError) as err:  # slower (imported per submission), not wrong
                log.warning("sandbox: preloading %s failed: %s", modules, err)
        uid, uid_lock = self._uids.acquire() if self._uids else (None, None)
        job = next(self._jobs)
        request = {
            "job": job,
            "uid": uid,
            "probe_uid": None if uid is None else uid + PROBE_UID_OFFSET,
            "rank_uid": None if uid is None else uid + RANK_UID_OFFSET,
            "limits": dataclasses.asdict(self.limits),
            "plan": plan_request,
            "notebook_name": os.path.basename(name) or "notebook.ipynb",
        }
        out_r, out_w = os.pipe()
        res_r, res_w = os.pipe()
        st_r, st_w = os.pipe()
        pr_r, pr_w = os.pipe()
        memfd = os.memfd_create("scalegrade-request", os.MFD_CLOEXEC)
        # the probes: read by the probe process alone (never by the zygote or the student)
        probes_fd = os.memfd_create("scalegrade-probes", os.MFD_CLOEXEC)
        retired = False
        try:
            os.write(memfd, json.dumps(request).encode())
            os.lseek(memfd, 0, os.SEEK_SET)
            os.write(probes_fd, json.dumps(probes_request).encode())
            os.lseek(probes_fd, 0, os.SEEK_SET)
            fds = [memfd, nb_fd, out_w, res_w, st_w, probes_fd, pr_w]
            try:
                executor.send({"op": "run", "job": job}, fds)
            except OSError as err:
                return Outcome(
                    None,
                    clean_text(f"the sandbox executor is not answering ({err})"),
                    time.monotonic() - start,
                    self.isolation,
                    "",
                )
            finally:
                for fd in (memfd, out_w, res_w, st_w, probes_fd, pr_w):
                    os.close(fd)
                memfd = probes_fd = -1
            outcome, retired = self._collect(executor, job, out_r, res_r, st_r, pr_r, plan, start)
            return outcome
        finally:
            for fd in (out_r, res_r, st_r, pr_r, memfd, probes_fd):
                if fd >= 0:
                    os.close(fd)
            if uid_lock is not None:
                if retired:  # its processes may still live: the uid stays locked until close()
                    self._state.retired.append(uid_lock)
                else:
                    uid_lock.close()

    def _collect(self, executor, job, out_r, res_r, st_r, pr_r, plan, start):
        limits = self.limits
        capture = _Capture(limits.output_bytes)
        result = bytearray()
        probed = bytearray()
        oversize = False
        status = bytearray()
        events: list[dict] = []
        sel = selectors.DefaultSelector()
        for fd in (out_r, res_r, st_r, pr_r):
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        deadline = time.monotonic() + limits.wall_seconds + GRACE_SECONDS  # from the hand-over
        kill_sent = False
        ended_at = None
        try:
            while sel.get_map():
                now = time.monotonic()
                until = deadline if ended_at is None else ended_at + DRAIN_SECONDS
                if now >= until:
                    if ended_at is not None or kill_sent:
                        break
                    executor.kill(job)  # the job's own supervisor did not end it: the zygote
                    kill_sent = True
                    deadline = now + 5.0
                    continue
                for key, _ in sel.select(until - now):
                    try:
                        chunk = os.read(key.fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        sel.unregister(key.fd)
                    elif key.fd == out_r:
                        capture.add(chunk)
                    elif key.fd in (res_r, pr_r):
                        into = result if key.fd == res_r else probed
                        if len(into) + len(chunk) <= limits.harvest_bytes:
                            into += chunk
                        else:
                            oversize = True
                    else:
                        status += chunk
                        *lines, rest = bytes(status).split(b"\n")
                        status = bytearray(rest)
                        for line in lines:
                            try:
                                event = json.loads(line)
                            except ValueError:
                                continue
                            if type(event) is dict:
                                events.append(event)
                                if event.get("event") in ("exit", "error") and ended_at is None:
                                    ended_at = time.monotonic()
        finally:
            sel.close()
        exit_event = next((e for e in events if e.get("event") == "exit"), None)
        error_event = next((e for e in events if e.get("event") == "error"), None)
        retired = exit_event is None and error_event is None
        outcome_error, harvest = self._interpret(
            exit_event, error_event, bytes(result), oversize, plan, kill_sent, bytes(probed)
        )
        return (
            Outcome(
                harvest, outcome_error, time.monotonic() - start, self.isolation, capture.text()
            ),
            retired,
        )

    def _interpret(self, exit_event, error_event, result, oversize, plan, kill_sent, probed=b""):
        """(error, harvest) from how the job ended and what its two processes sent."""
        limits = self.limits
        failure = None if error_event is None else clean_text(str(error_event.get("message"))[:500])
        if exit_event is None:
            if error_event is not None:
                return f"the sandbox failed: {failure}", None
            if kill_sent:
                return (
                    f"the sandbox did not stop within {limits.wall_seconds:g} s "
                    f"(+{GRACE_SECONDS:g} s) and was killed",
                    None,
                )
            return "the sandbox executor stopped during the run", None
        if exit_event.get("timed_out"):
            return f"timed out after {limits.wall_seconds:g} s", None
        number = exit_event.get("signal")
        if type(number) is int:
            if number == signal.SIGKILL:
                return "killed by signal 9 (memory?)", None
            if number == signal.SIGXCPU:
                return f"CPU time limit exceeded ({limits.cpu_seconds} s)", None
            return f"killed by signal {number} ({_signal_name(number)})", None
        code = exit_event.get("code")
        if error_event is not None:
            return f"the sandbox failed: {failure}", None
        if code == EXIT_SETUP_FAILED:
            return "the sandbox could not run the notebook (see the log)", None
        if oversize:
            return f"the harvest is larger than {limits.harvest_bytes} bytes", None
        if not result:
            return f"the notebook ended the process (exit code {code}) before the harvest", None
        return self._envelope(result, plan, code, probed)

    def _envelope(
        self, result: bytes, plan: Plan, code, probed: bytes = b""
    ) -> tuple[str | None, dict | None]:
        try:
            envelope = json.loads(result.decode("utf-8"))
        except (ValueError, RecursionError):
            return "harvest is not valid JSON", None
        if type(envelope) is dict and set(envelope) == {"fatal"}:
            if type(envelope["fatal"]) is str:
                return clean_text(envelope["fatal"][:MAX_ERROR_CHARS]), None
        if type(envelope) is not dict or set(envelope) != {"harvest"}:
            return "harvest is malformed: expected {'harvest': ...}", None
        # the harvest is whole: an exit after it (while serving the probe process) costs
        # the probes their answers, which the probe process reports, not the harvest
        harvest = envelope["harvest"]
        isolated = [p.id for p in plan.probes if p.isolated]
        if isolated and type(harvest) is dict and type(harvest.get("probes")) is dict:
            harvest = dict(harvest, probes={**harvest["probes"], **probe_results(probed, isolated)})
        try:
            return None, check_harvest(harvest, plan)
        except HarvestError as err:  # its path may hold the student's keys
            return clean_text(f"harvest is malformed: {err}"[:MAX_ERROR_CHARS]), None
        except RecursionError:
            return "harvest is malformed: nested too deeply", None
