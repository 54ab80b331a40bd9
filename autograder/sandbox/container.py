"""A warm executor in a grading image: the container engine (Docker where its daemon
answers, else Podman), and the ``run`` command of the one container a batch grades in
(no network, a read-only root, the batch's memory, pids and CPUs, the sandbox's code and
control socket bound in)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from . import inside
from .inside import UID_BASE, UID_SLOTS, UIDS_PER_SLOT
from .plan import Limits, SandboxError

INSIDE = Path(inside.FOLDER)  # the jail's package: the executor, the harness, the prober
EXECUTOR = INSIDE / "__main__.py"
CHECKLIB = Path(__file__).resolve().parents[1] / "checklib"  # served to the probe process
CODE = (INSIDE, CHECKLIB)  # the folders a grading container gets, read-only

CONTAINER_START_SECONDS = 240.0  # podman's first start with a uid map copies the image
# A warm grading container (container_command): where it finds the sandbox's code and the
# grader's control socket; the capabilities its executor keeps, to set up each child and
# drop it to a slot's uid (and SYS_ADMIN for the child's namespaces, where the container's
# root is nobody on the host); the memory of its executor beside the jobs' limits; and, as
# root with podman, the host uids its own uids 0 .. CONTAINER_UIDS map onto.
CONTAINER_CODE = "/opt/scalegrade"
CONTAINER_CONTROL = "/run/scalegrade"
CONTAINER_CGROUP = "/cgroup"  # the memory cgroup the grader gives the container, bound in
CONTAINER_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")
CONTAINER_ZYGOTE_BYTES = 2 << 30
CONTAINER_HOST_UID = 2_000_000_000
CONTAINER_UIDS = UID_BASE + UIDS_PER_SLOT * UID_SLOTS  # the slots' uids, their probes', ranks'
PODMAN_ARGS_ENV = "SCALEGRADE_PODMAN_ARGS"
PODMAN_NPROC = 4096  # per uid on the host: --pids-limit bounds each container
ENGINES = ("auto", "docker", "podman")


@dataclass(frozen=True)
class Engine:
    """A container engine's command: its binary and the global flags before ``run``;
    ``maps_uids``: whether a container's root is an unprivileged uid on the host (podman;
    docker only with a userns-remap or rootless daemon)."""

    name: str  # docker | podman
    args: tuple[str, ...] = ()
    maps_uids: bool = False

    @property
    def command(self) -> list[str]:
        return [self.name, *self.args]


def find_engine(choice: str = "auto") -> Engine:
    """The container engine to run submissions with: ``docker`` when its daemon answers,
    else ``podman`` (daemonless), or the one asked for; a sentence when there is none."""
    import shlex

    if choice not in ENGINES:
        raise SandboxError(f"unknown container engine {choice!r} (one of {', '.join(ENGINES)})")
    podman = Engine("podman", tuple(shlex.split(os.environ.get(PODMAN_ARGS_ENV, ""))), True)
    docker = None if choice == "podman" else _docker_info()
    if choice == "podman" or (choice == "auto" and docker is None):
        if shutil.which("podman") is None:
            raise SandboxError(
                "no container engine: docker's daemon does not answer and podman is not "
                "installed (apt-get install podman, or start docker)"
                if choice == "auto"
                else "podman is not installed (apt-get install podman)"
            )
        return podman
    if docker is None:
        raise SandboxError(
            "docker is not installed, or its daemon does not answer (start it, or choose "
            "--engine podman)"
        )
    return Engine("docker", maps_uids=any(f"name={o}" in docker for o in ("userns", "rootless")))


def _docker_info() -> str | None:
    """The security options of docker's daemon (userns, rootless, ...), or None where no
    daemon answers."""
    if shutil.which("docker") is None:
        return None
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{json .SecurityOptions}}"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def executor_env() -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        # The executor's heap on transparent huge pages: a fork copies one entry per 2 MiB
        # instead of 512 (torch loaded: a fork 18 -> 6 ms; the ring's checks fork a dozen
        # rank processes per submission).  Harmless where THP is off.
        "PYTHONMALLOC": "malloc",
        "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
    }


@dataclass(frozen=True)
class Container:
    """Where a warm executor runs in a grading image (``--sandbox docker``)."""

    image: str
    engine: Engine
    limits: Limits
    gpus: str | None = None
    jobs: int = 1  # submissions at once: the container's memory, processes and CPUs


def container_command(
    container: Container,
    *,
    name: str,
    control: Path,
    cgroup: str | None = None,
    code: tuple[Path, ...] = CODE,
) -> list[str]:
    """The ``docker run`` argv of a warm grading container: the executor (``executor.py``)
    in the image, serving ``jobs`` submissions at a time, each in a fresh child of its own
    with the probe process beside it, exactly as on the host.  It connects back to the
    grader's unix socket in the folder ``control``, bound in read-only.

    The container: no network, a read-only root with a tmpfs /tmp, ``jobs`` submissions'
    memory, processes and CPUs (each student process has its own rlimits inside), no
    capabilities but those the executor needs to make a child's namespaces and drop it to
    a slot's uid, the sandbox's own code mounted read-only (the host's and the container's
    protocols are one), the GPUs only when asked, and never a pull (a pull mid-batch would
    time every submission out).  ``cgroup``: a memory cgroup the grader made for the
    container (``executor.delegate_memory_cgroup``), bound in writable, where the executor
    makes each job's, so that the probe process reads a peak only it holds, as on the host.

    Where the engine maps the container's uids onto unused host uids (podman: ``--uidmap``;
    docker with a userns-remap or rootless daemon), the executor runs in its "namespaces"
    mode as the container's root, who is nobody on the host; otherwise (docker's default,
    where the container's root is the host's) in its "process" mode, without
    ``SYS_ADMIN``: each child still has its own uid, rlimits and folder, and the container
    keeps the network out."""
    engine, limits, jobs = container.engine, container.limits, max(1, int(container.jobs))
    scratch = jobs * max(16 << 20, 4 * limits.file_bytes) + (64 << 20)
    memory = jobs * limits.memory_bytes + CONTAINER_ZYGOTE_BYTES
    caps = CONTAINER_CAPS + (("NET_ADMIN", "SYS_ADMIN") if engine.maps_uids else ())
    argv = [
        *engine.command,
        "run",
        "--rm",
        "--pull",
        "never",
        "--name",
        name,
        "--network",
        "none",
        "--memory",
        str(memory),
        "--memory-swap",
        str(memory),
        "--cpus",
        str(jobs),
        "--pids-limit",
        str(jobs * (limits.processes + 8) + 64),
        "--read-only",
        "--tmpfs",
        f"/tmp:rw,nosuid,nodev,size={scratch},mode=1777",
        "--user",
        "0:0",
        *uid_map(engine),
        "--cap-drop",
        "ALL",
        "--cap-add",
        ",".join(sorted(caps)),
        "--security-opt",
        "no-new-privileges",
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "core=0:0",
        *(("--ulimit", f"nproc={PODMAN_NPROC}:{PODMAN_NPROC}") if engine.name == "podman" else ()),
        "--volume",
        f"{control}:{CONTAINER_CONTROL}:ro",
        *(("--volume", f"{cgroup}:{CONTAINER_CGROUP}:rw") if cgroup else ()),
    ]
    for folder in code:
        argv += ["--volume", f"{folder}:{CONTAINER_CODE}/{folder.name}:ro"]
    for key, value in executor_env().items():
        if key != "PATH":  # the image's: its python3 is the one with the grader's packages
            argv += ["--env", f"{key}={value}"]
    if container.gpus:
        argv += ["--gpus", container.gpus]
    executor = f"{CONTAINER_CODE}/{INSIDE.name}/{EXECUTOR.name}"
    return [
        *argv,
        container.image,
        "python3",
        "-s",
        "-P",
        "-B",
        executor,
        f"{CONTAINER_CONTROL}/sock",
    ]


def uid_map(engine: Engine) -> list[str]:
    """podman as root: the container's uids 0..CONTAINER_UIDS onto host uids no one uses."""
    if engine.name != "podman" or os.geteuid() != 0:
        return []  # rootless podman maps them already; docker: the daemon's own setting
    inside, host, count = 0, CONTAINER_HOST_UID, CONTAINER_UIDS
    return ["--uidmap", f"{inside}:{host}:{count}", "--gidmap", f"{inside}:{host}:{count}"]
