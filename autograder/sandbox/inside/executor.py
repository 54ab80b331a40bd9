"""The warm executor: a long-lived process that forks one isolated child per submission.

Started by ``autograder.sandbox.Sandbox`` as ``python -s -P -B inside/__main__.py FD``: FD is a
control socket (``SOCK_SEQPACKET``) whose first message is the configuration (JSON).  In a
grading image (``--sandbox docker``) it is ``__main__.py PATH``: the grader listens on the
unix socket PATH, bound into the container, and this process connects to it; the
protocol is the same (file descriptors pass between the host and a container).  It never
runs student code itself and imports nothing of the project but its own package, this
folder (``__main__.py`` loads it; :mod:`autograder.sandbox.inside`).

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
      rank      beside them, started by init when P asks (``ranks``): PID 1 of its own PID
                namespace, its own mount, net, IPC and UTS namespaces and scratch, the
                student's limits, a third uid (the slot's + RANK_UID_OFFSET, which S
                cannot signal); runs the notebook again, then serves P as a rank
      measured  a process S forks for a call P measures (``Student.measured``), in a
                memory cgroup init makes for that call, every other process of the job
                stopped meanwhile (:mod:`measuring`)

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

import json
import os
import select
import signal
import socket
import sys
import time
import traceback

from . import harness, prober
from . import memory as meters
from .jobs import SERVE_GRACE_SECONDS, Job, finish_job, start_job, sweep_uid
from .linux import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUTS,
    PR_SET_PDEATHSIG,
    prctl,
    unshare,
)
from .mounts import scratch_tmpfs, setup_outer_mounts
from .process import os_exit, write_event


def _sources(folder: str) -> dict[str, str]:
    """The authors' library's modules, read now: the mounts hide the project from the
    probe process, which serves them from memory (``prober.serve_library``)."""
    return {
        name[:-3]: open(os.path.join(folder, name), encoding="utf-8").read()
        for name in sorted(os.listdir(folder))
        if name.endswith(".py")
    }


def _serve(ctrl: socket.socket, config: dict) -> None:
    namespaces = config["mode"] == "namespaces"
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY) if namespaces else None
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    jobs: dict[int, Job] = {}  # by pid of the job's first process, until reaped
    probes: dict[int, Job] = {}  # process mode: by pid of the job's probe process

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
                finish_job(job, status, usage, namespaces)
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
                    sweep_uid(job.uid)
            if not namespaces:
                meters.current.close()  # namespaces: the outer process does, once we are gone
            os_exit(0)
        try:
            req = json.loads(msg)
        except ValueError:
            req = {}
        op = req.get("op")
        try:
            if op == "run" and len(fds) == 7:
                try:
                    job = start_job(req["job"], fds, config, own_pidns)
                except BaseException as err:  # noqa: BLE001 - reported, the zygote goes on
                    write_event(fds[4], {"event": "error", "message": f"job start: {err}"})
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
        harness.prepare()
        loaded, failed = _preload(config.get("preload", []))
        ctrl.send(
            json.dumps(
                {
                    "ready": True,
                    "mode": config["mode"],
                    "preloaded": loaded,
                    "failed": failed,
                    "readonly_failed": ro_failed,
                    "memory": meters.current.describe(),
                }
            ).encode()
        )
    except BaseException:
        ctrl.send(json.dumps({"ready": False, "error": traceback.format_exc()[-3000:]}).encode())
        if config["mode"] != "namespaces":
            meters.current.close(0)
        os._exit(1)
    _serve(ctrl, config)


def main(argv: list[str]) -> int:
    if argv[1].isdigit():
        ctrl = socket.socket(fileno=int(argv[1]))
    else:  # in a container: the grader's socket, bound in
        ctrl = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ctrl.connect(argv[1])
    config = json.loads(ctrl.recv(1 << 20))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the grader's to handle
    prober.serve_library(_sources(config["checklib"]))
    meters.current = meters.Memory(config.get("memory_meter", "auto"))
    meters.current.setup(config.get("memory_cgroup"), config.get("memory_cgroup_why"))
    ro_failed: list[str] = []
    if config["mode"] == "namespaces":
        try:
            unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWPID)
            writable = (meters.current.mount,) if meters.current.mount else ()
            ro_failed = setup_outer_mounts(config["hide"], config["keep"], writable)
        except OSError as err:
            ctrl.send(json.dumps({"ready": False, "error": f"namespaces: {err}"}).encode())
            meters.current.close(0)
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
            meters.current.close()  # the zygote is gone, and with it every process of every job
    _zygote(ctrl, config, ro_failed)
    return 0
