"""The process tree of one job: init, the student process S and the probe process P beside
it (forks, uids, rlimits, file descriptors), their end, and what they leave swept."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import sys
import time
import traceback

from . import harness, measuring, prober
from . import memory as meters
from .linux import PR_SET_PDEATHSIG, prctl
from .memory import PROBE_FD_MEMORY, JobMemory
from .process import (
    EXIT_SETUP_FAILED,
    HOME,
    WORKDIR,
    child_signals,
    drop,
    fds_onto,
    fork_pid1,
    mkdir_for,
    os_exit,
    place_notebook,
    private_scratch,
    read_notebook,
    student_env,
    write_event,
    write_notebook,
)
from .ranks import PROBE_FD_RANKS, FreshRanks

STUDENT_FD_RESULT = 3
STUDENT_FD_CHANNEL = 4  # the student process's end of the probe channel
PROBE_FD_PROBES, PROBE_FD_RESULT, PROBE_FD_CHANNEL = 3, 4, 5
SERVE_GRACE_SECONDS = 0.5  # after the probe process ended, for the student's to end


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
        os_exit(code)


def _student_body(
    req: dict,
    out_w: int,
    res_w: int,
    channel: int,
    workdir: str,
    home: str,
    tmp: str,
    memory: JobMemory,
) -> None:
    """Set up the student process (cgroup, fds, limits, uid, env, cwd); run the notebook."""
    memory.close_probe_side()
    memory.join()  # still root; a failure ends the run here (EXIT_SETUP_FAILED), unmeasured
    child_signals()
    os.setsid()
    devnull = os.open("/dev/null", os.O_RDONLY)
    fds_onto(
        {0: devnull, 1: out_w, 2: out_w, STUDENT_FD_RESULT: res_w, STUDENT_FD_CHANNEL: channel}
    )
    limits = req["limits"]
    # RLIMIT_AS unless asked to leave memory to the job's cgroup, where it has one
    address_space = limits.get("address_space", True) or memory.path is None
    drop(req, limits, req["uid"], address_space)
    os.environ.clear()
    os.environ.update(student_env(home, tmp))
    os.chdir(workdir)
    harness.run_submission(
        os.path.join(workdir, req["notebook_name"]), req["plan"], STUDENT_FD_RESULT, limits
    )
    harness.serve(STUDENT_FD_CHANNEL)


def _probe(
    req: dict, fds: dict[str, int], channel: int, workdir: str, memory: JobMemory, ranks: int | None
) -> None:
    """The probe process: its own uid and limits, the probes read here, never before;
    then the probes run against the student's functions (``ranks``: its end of the job's
    init, which starts fresh ranks for it; None in the process mode).  Never returns."""
    code = EXIT_SETUP_FAILED
    try:
        child_signals()
        os.setsid()
        devnull = os.open("/dev/null", os.O_RDONLY)
        fds_onto(
            {
                0: devnull,
                1: fds["out"],
                2: fds["out"],
                PROBE_FD_PROBES: fds["probes"],
                PROBE_FD_RESULT: fds["probes_res"],
                PROBE_FD_CHANNEL: channel,
            }
            | memory.probe_fds()
            | ({} if ranks is None else {PROBE_FD_RANKS: ranks})
        )
        read_fd = PROBE_FD_MEMORY + (memory.kind == "vmhwm")
        prober.meter = prober.Meter(memory.kind, PROBE_FD_MEMORY, read_fd, memory.note)
        limits = req["limits"]
        drop(req, limits, req.get("probe_uid"))
        os.environ.clear()
        os.environ.update(student_env(workdir, workdir) | {"USER": "probe", "LOGNAME": "probe"})
        os.chdir(workdir)
        with os.fdopen(PROBE_FD_PROBES, "rb") as fh:
            probes = json.loads(fh.read())
        fresh = None if ranks is None else PROBE_FD_RANKS
        prober.run(probes, PROBE_FD_CHANNEL, PROBE_FD_RESULT, limits, fresh)
        code = 0
    except BaseException:
        try:
            os.write(2, f"scalegrade probe: {traceback.format_exc()}"[-4000:].encode())
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os_exit(code)


def _init(req: dict, fds: dict[str, int], keep: list[str], memory: JobMemory) -> None:
    """PID 1 of the submission's fresh PID namespace (namespaces mode): its own mount,
    network, IPC and UTS namespaces, a fresh /proc, private scratch folders, the notebook
    copied in; then the student process and the probe process, and, while P runs, the
    fresh ranks P asks for (:class:`ranks.FreshRanks`); orphans reaped until S ends.  When
    this process ends, the kernel kills whatever is left in the namespace.  Never returns."""
    try:
        child_signals()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the zygote gone: everything goes
        uid = req["uid"]
        tmp_size = private_scratch(req["limits"], keep)
        measuring.hide(meters.current.mount)  # no process of the job reaches its cgroups
        notebook = read_notebook(fds["notebook"], tmp_size // 2)
        place_notebook(notebook, req["notebook_name"], uid)
        probe_dir = "/tmp/probe"
        mkdir_for(probe_dir, req.get("probe_uid"))
        ranks = FreshRanks(req, notebook, keep, memory)
        student, probe = _fork_pair(req, fds, WORKDIR, HOME, "/tmp", probe_dir, memory, ranks)
        for name in ("out", "res", "status", "probes", "probes_res"):
            os.close(fds[name])  # the notebook's was closed when it was read
        os_exit(_wait_pair(student, probe, ranks))
    except BaseException as err:
        write_event(fds["status"], {"event": "error", "message": f"sandbox set-up: {err}"})
    finally:
        os_exit(EXIT_SETUP_FAILED)


def _fork_pair(
    req, fds, workdir, home, tmp, probe_dir, memory, ranks: FreshRanks | None = None
) -> tuple[int, int]:
    """Fork the student process and, beside it, the probe process, joined by a socket pair;
    the probe process alone gets the meter of the student's memory, and P's end of
    ``ranks`` (the job's init serves it)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    student = os.fork()
    if student == 0:
        os.close(fds["probes"])  # the probes never enter the student's process
        os.close(fds["probes_res"])
        mine.close()
        if ranks is not None:
            ranks.close_all()
        _student(req, fds["out"], fds["res"], theirs.fileno(), workdir, home, tmp, memory)
    memory._close("procs")
    memory.open_proc(student)  # without a cgroup: its /proc files, opened here
    if ranks is not None and ranks.measuring is not None:
        ranks.measuring.student = student
    probe = os.fork()
    if probe == 0:
        theirs.close()
        end = None if ranks is None else ranks.probe_end()
        _probe(req, fds, mine.fileno(), probe_dir, memory, end)
    memory.close()
    mine.close()
    theirs.close()
    if ranks is not None:
        ranks.started()
    return student, probe


def _wait_pair(student: int, probe: int, ranks: FreshRanks | None = None) -> int:
    """Reap both (and orphans, and ranks); the student's exit status, as a PID 1 reports
    it.  While P runs, serve its requests for fresh ranks (``ranks``).

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
        listen = ranks.fd if ranks is not None and probe_running and ranks.open else None
        try:
            done, status = _waitpid_timeout(timeout, student, probe, listen=listen)
        except ChildProcessError:
            break
        if done == -1:
            ranks.serve()
        elif done == probe:
            probe_running = False
            if ranks is not None:
                ranks.end_all()
            if code is None:
                stop_at = time.monotonic() + SERVE_GRACE_SECONDS
        elif done == student:
            code = 0 if stopped else os.waitstatus_to_exitcode(status)
    if code is None:
        return EXIT_SETUP_FAILED
    return 128 - code if code < 0 else min(code, 127)


def _waitpid_timeout(timeout: float | None, *pids: int, listen: int | None = None):
    """os.waitpid(-1, 0), returning (0, 0) after ``timeout`` seconds with nothing reaped,
    and (-1, 0) as soon as ``listen`` is readable; woken by the end of any of ``pids``
    (their pidfds), not by polling, so the job ends as it does."""
    done, status = os.waitpid(-1, os.WNOHANG)
    if done:
        return done, status
    if timeout is None and listen is None:
        return os.waitpid(-1, 0)
    watched = [] if listen is None else [listen]
    opened: list[int] = []
    try:
        for pid in pids:
            opened.append(os.pidfd_open(pid))
    except OSError:  # a kernel before 5.3, or a filter that refuses it: poll
        for fd in opened:
            os.close(fd)
        end = None if timeout is None else time.monotonic() + timeout
        while not done and (end is None or time.monotonic() < end):
            if watched and select.select(watched, [], [], 0.01)[0]:
                return -1, 0
            if not watched:
                time.sleep(0.01)
            done, status = os.waitpid(-1, os.WNOHANG)
        return done, status
    try:
        ready = select.select(opened + watched, [], [], timeout)[0]
    finally:
        for fd in opened:
            os.close(fd)
    if listen is not None and listen in ready:
        return -1, 0
    return os.waitpid(-1, os.WNOHANG)


def sweep_uid(uid: int) -> None:
    """Kill every process of ``uid`` (process mode, as root): kill(-1) from that uid."""
    pid = os.fork()
    if pid == 0:
        try:
            child_signals()
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os_exit(0)
    os.waitpid(pid, 0)


_swept: set[int] = set()  # process mode: uids known to own no process


class Job:
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


def start_job(job_id: int, fds: list[int], config: dict, own_pidns: int | None) -> Job:
    req_fd, nb_fd, out_w, res_w, status_w, probes_fd, probes_w = fds
    os.set_blocking(status_w, False)  # the zygote never blocks on a slow reader
    with os.fdopen(os.dup(req_fd), "rb") as fh:
        req = json.loads(fh.read())
    job = Job(job_id, req, os.dup(status_w))
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
    memory = meters.current.job(job_id, int(req["limits"]["memory_bytes"]))
    job.cgroup = memory.path
    try:
        return _fork_job(job, req, named, config, own_pidns, memory)
    except BaseException:
        meters.current.remove(job.cgroup)
        raise
    finally:
        memory.close()  # the children have theirs


def _fork_job(job: Job, req: dict, named: dict, config: dict, own_pidns, memory) -> Job:
    """The job's first process: its init (namespaces), or the pair (process mode)."""
    if own_pidns is not None:
        job.pid = fork_pid1(own_pidns)
        if job.pid == 0:
            _init(req, named, config["keep"], memory)  # never returns
        return job
    # process mode
    uid = job.uid
    probe_uid = req.get("probe_uid")
    for who in (uid, probe_uid):
        if who is not None and who not in _swept:
            sweep_uid(who)  # left over by a grader that died (after each job: finish_job)
            _swept.add(who)
    job.workdir = os.path.join(config["base_dir"], f"run-{job.id}")
    home = os.path.join(job.workdir, ".home")
    probe_dir = os.path.join(config["base_dir"], f"probe-{job.id}")
    mkdir_for(job.workdir, uid)
    mkdir_for(os.path.join(home, ".ipython"), uid)
    mkdir_for(probe_dir, probe_uid)
    limit = max(16 << 20, 4 * int(req["limits"]["file_bytes"]))
    notebook = os.path.join(job.workdir, req["notebook_name"])
    write_notebook(read_notebook(os.dup(named["notebook"]), limit), notebook, uid)
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


def finish_job(job: Job, status: int, usage, namespaces: bool) -> None:
    if not namespaces:
        job.kill(namespaces)  # what is left of its process groups
        for uid in (job.uid, job.req.get("probe_uid")):
            if uid is not None:
                sweep_uid(uid)  # and every other process of its uids
                _sweep_files(uid)  # and its files in /tmp, /var/tmp and /dev/shm
        for folder in (job.workdir, job.probe_dir):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
    meters.current.remove(job.cgroup)  # namespaces: every process of the job is gone with its init
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
    write_event(job.status_fd, event)
    os.close(job.status_fd)
