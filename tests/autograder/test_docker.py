"""`--sandbox docker`: the exact `docker run` argv of the warm grading container, the
docker CLI's own parse of it, and the grading images' one install script.

CI has no Docker engine: the argv is checked exactly, the docker CLI (where installed)
validates every flag up to the point where it would contact a daemon (pointed at a socket
that does not exist), and the install script the images run is the one `make venv` runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.sandbox import Container, Engine, Limits, Sandbox, SandboxError, find_engine
from autograder.sandbox import container as sandbox_module
from autograder.sandbox.container import (
    CONTAINER_HOST_UID,
    CONTAINER_UIDS,
    CONTAINER_ZYGOTE_BYTES,
    container_command,
)
from autograder.sandbox.inside import RANK_UID_OFFSET, UID_BASE, UID_SLOTS

ROOT = Path(__file__).resolve().parents[2]
DOCKER = Engine("docker")  # its daemon's default: the container's root is the host's
INSTALL = ROOT / "docker" / "install.sh"
LIMITS = Limits(
    wall_seconds=30,
    cpu_seconds=20,
    memory_bytes=2 << 30,
    processes=64,
    file_bytes=8 << 20,
    open_files=128,
)


def test_the_container_command_is_exactly_the_isolated_warm_executor():
    control = Path("/tmp/scalegrade-sandbox-x/0123abcd")
    here = Path("/srv/scalegrade/autograder")
    folders = (here / "sandbox" / "inside", here / "checklib")
    box = Container("scalegrade/grader:cuda", DOCKER, LIMITS, gpus="all", jobs=2)
    argv = container_command(box, name="sg-1", control=control, code=folders)
    memory = 2 * (2 << 30) + CONTAINER_ZYGOTE_BYTES  # two submissions' limits + the zygote
    scratch = 2 * (32 << 20) + (64 << 20)  # 4 x file_bytes each
    code = [f"{folder}:/opt/scalegrade/{folder.name}:ro" for folder in folders]
    # fmt: off
    assert argv[:argv.index("--env")] == [
        "docker", "run", "--rm",
        "--pull", "never",  # the image is built beforehand; a pull would time the batch out
        "--name", "sg-1",
        "--network", "none",
        "--memory", str(memory), "--memory-swap", str(memory),  # no swap beyond the cap
        "--cpus", "2",
        "--pids-limit", str(2 * (64 + 8) + 64),
        "--read-only",
        "--tmpfs", f"/tmp:rw,nosuid,nodev,size={scratch},mode=1777",
        "--user", "0:0",  # the executor: a child's uid is set there, per submission
        "--cap-drop", "ALL",
        "--cap-add", "CHOWN,DAC_OVERRIDE,FOWNER,KILL,SETGID,SETUID",  # no SYS_ADMIN: root's
        "--security-opt", "no-new-privileges",
        "--ulimit", "nofile=1024:1024",
        "--ulimit", "core=0:0",
        "--volume", f"{control}:/run/scalegrade:ro",  # the grader's socket
        "--volume", code[0], "--volume", code[1],
    ]
    env = [argv[i + 1] for i, a in enumerate(argv) if a == "--env"]
    assert "OPENBLAS_NUM_THREADS=1" in env and not [e for e in env if e.startswith("PATH=")]
    assert argv[-9:] == [
        "--gpus", "all",
        "scalegrade/grader:cuda", "python3", "-s", "-P", "-B",
        "/opt/scalegrade/inside/__main__.py", "/run/scalegrade/sock",
    ]
    # fmt: on


def test_the_containers_memory_cgroup_is_bound_in_writable():
    argv = container_command(Container("img", DOCKER, LIMITS), name="sg-5", control=Path("/c"),
                             cgroup="/sys/fs/cgroup/memory/g/scalegrade-c1-sg-5")  # fmt: skip
    assert "/sys/fs/cgroup/memory/g/scalegrade-c1-sg-5:/cgroup:rw" in argv
    plain = container_command(Container("img", DOCKER, LIMITS), name="sg-5", control=Path("/c"))
    assert not [a for a in plain if a.endswith(":/cgroup:rw")]


def test_without_gpus_there_is_no_gpu_flag_and_one_submission_at_a_time():
    argv = container_command(Container("img", Engine("/bin/docker"), LIMITS), name="sg-2",
                             control=Path("/c"))  # fmt: skip
    assert argv[:2] == ["/bin/docker", "run"] and "--gpus" not in argv
    assert argv[argv.index("--cpus") + 1] == "1"
    assert argv[argv.index("--memory") + 1] == str((2 << 30) + CONTAINER_ZYGOTE_BYTES)


@pytest.mark.skipif(shutil.which("docker") is None, reason="the docker CLI is not installed")
@pytest.mark.parametrize("gpus", [None, "all", "device=0"])
def test_the_docker_cli_accepts_every_flag(gpus):
    """The real CLI parses and validates the flags (ulimits, memory, cpus, gpus, ...) before
    it contacts the daemon; here the daemon's socket does not exist, so nothing runs."""
    box = Container("scalegrade/grader:cpu", DOCKER, LIMITS, gpus=gpus)
    argv = container_command(box, name="sg-3", control=Path("/tmp"))
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent/scalegrade-test.sock")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, input="")
    assert done.returncode == 125
    assert "Cannot connect to the Docker daemon" in done.stderr, done.stderr
    bad = [a.replace("nofile=1024:1024", "nofile=lots") for a in argv]
    refused = subprocess.run(bad, capture_output=True, text=True, env=env, timeout=60, input="")
    assert "invalid argument" in refused.stderr  # so the check above means something


def test_podman_maps_the_containers_root_to_nobody_and_gives_it_the_namespaces(monkeypatch):
    """As root, podman maps the container's uids onto host uids nobody has; its root may
    then make each child's namespaces (SYS_ADMIN, NET_ADMIN for the child's loopback), as
    the namespaces backend does on the host.  The process rlimit is set, since podman's
    default can be above what a host grants.  The real engine runs this argv in
    tests/autograder/test_container.py."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    engine = Engine("podman", ("--runtime", "runc", "--cgroup-manager", "cgroupfs"), True)
    argv = container_command(Container("img", engine, LIMITS), name="sg-4", control=Path("/c"))
    assert argv[:6] == ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs", "run"]
    mapping = f"0:{CONTAINER_HOST_UID}:{CONTAINER_UIDS}"
    assert argv[argv.index("--uidmap") + 1] == mapping == argv[argv.index("--gidmap") + 1]
    # every slot's uid, its probe's and its fresh ranks'
    assert CONTAINER_UIDS > UID_BASE + UID_SLOTS - 1 + RANK_UID_OFFSET
    caps = argv[argv.index("--cap-add") + 1].split(",")
    assert "SYS_ADMIN" in caps and "NET_ADMIN" in caps and "nproc=4096:4096" in argv
    docker = container_command(Container("img", DOCKER, LIMITS), name="sg-4", control=Path("/c"))
    assert "--uidmap" not in docker and [a for a in docker if a.startswith("nproc")] == []
    # rootless podman: the engine has mapped the uids already
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    rootless = container_command(Container("img", engine, LIMITS), name="sg-4",
                                 control=Path("/c"))  # fmt: skip
    assert "--uidmap" not in rootless and "SYS_ADMIN" in rootless[rootless.index("--cap-add") + 1]


@pytest.mark.parametrize(
    ("options", "maps"),
    [
        ('["name=seccomp,profile=builtin"]', False),  # the container's root is the host's
        ('["name=seccomp,profile=builtin","name=userns"]', True),
        ('["name=rootless"]', True),
    ],
)
def test_docker_maps_uids_only_where_its_daemon_does(monkeypatch, options, maps):
    calls = []

    def info(argv, **kwargs):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, stdout=options, stderr="")

    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(sandbox_module.subprocess, "run", info)
    assert find_engine("docker") == Engine("docker", maps_uids=maps)
    assert calls == [["docker", "info", "--format", "{{json .SecurityOptions}}"]]


def test_no_engine_is_one_sentence(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither docker nor podman
    with pytest.raises(SandboxError, match="no container engine: .*apt-get install podman"):
        find_engine("auto")
    with pytest.raises(SandboxError, match="podman is not installed"):
        Sandbox(backend="docker", image="img", engine="podman")
    with pytest.raises(SandboxError, match="unknown container engine 'lxc'"):
        find_engine("lxc")


# --------------------------------------------------------------------------- the images


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines = [ln for ln in dockerfile.read_text().splitlines() if not ln.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), " ".join(rest.split())))
    return out


@pytest.mark.parametrize(
    ("name", "build", "base"),
    [
        ("Dockerfile", "cpu", "python:3.12-slim-bookworm"),
        ("Dockerfile.cuda", "cuda", "python:3.12-slim-bookworm"),  # no CUDA base needed
    ],
)
def test_both_images_install_through_the_one_script(name, build, base):
    steps = _instructions(ROOT / "docker" / name)
    known = {"FROM", "ARG", "ENV", "RUN", "WORKDIR", "CMD", "COPY", "LABEL", "USER"}
    assert {word for word, _ in steps} <= known
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for w, a in steps if w == "ARG" and "=" in a}
    assert args["TORCH"] == "torch==2.13.0"
    # the base is an argument (a locally made Debian base where none can be pulled)
    assert args["BASE"] == base and ("FROM", "${BASE}") in steps
    (install,) = [a for w, a in steps if w == "RUN" and "install.sh" in a]
    assert "bash /src/docker/install.sh --venv /opt/venv" in install
    assert '--torch "$TORCH" --torch-index "$TORCH_INDEX_URL"' in install
    assert f"--require {build}" in install
    # what an image run without arguments says; the grader runs the executor it mounts
    assert steps[-1] == ("CMD", '["scalegrade", "--help"]')
    if build == "cpu":
        assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    else:  # PyPI's own wheel: the CUDA build, with the CUDA runtime and NCCL as wheels
        assert args["TORCH_INDEX_URL"] == '""'


def test_make_venv_and_ci_use_the_same_script():
    makefile = (ROOT / "Makefile").read_text()
    assert "TORCH   := torch==2.13.0" in makefile
    recipe = makefile.split("$(STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "docker/install.sh" in recipe.splitlines()[0]  # a prerequisite: edits rebuild
    assert "bash docker/install.sh --venv $(VENV)" in recipe and "--torch '$(TORCH)'" in recipe
    assert "pip install" not in recipe  # no second install path
    assert "make test" in (ROOT / ".ci" / "run").read_text()  # and `make test` needs venv
    assert re.search(r"^test: venv", makefile, re.M) and re.search(r"^demo: venv", makefile, re.M)


def test_the_install_script_is_valid_bash_and_refuses_bad_options(tmp_path):
    assert subprocess.run(["bash", "-n", str(INSTALL)], capture_output=True).returncode == 0
    assert os.access(INSTALL, os.X_OK)
    usage = subprocess.run(["bash", str(INSTALL), "--help"], capture_output=True, text=True)
    assert usage.returncode == 0 and "--torch-index URL" in usage.stdout
    for bad in (["--require", "tpu"], ["--frobnicate"], [str(tmp_path)]):
        done = subprocess.run(["bash", str(INSTALL), *bad], capture_output=True, text=True)
        assert done.returncode == 2 and done.stderr.startswith("install.sh: "), (bad, done)
    assert sandbox_module.EXECUTOR.is_file()  # what the grader runs in an image, mounted


def test_make_image_without_an_engine_says_what_to_install(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "make", "sh"):  # and neither docker nor podman
        (bin_dir / tool).symlink_to(shutil.which(tool))
    done = subprocess.run(
        [str(bin_dir / "make"), "-s", "image"], cwd=ROOT, capture_output=True, text=True,
        env={"PATH": str(bin_dir)},
    )  # fmt: skip
    assert done.returncode != 0
    assert "build.sh: no container engine: install podman (apt-get install podman) or docker" in (
        done.stderr
    )
    for bad in (["tpu"], ["cpu", "--engine", "lxc"]):
        done = subprocess.run(["bash", str(ROOT / "docker" / "build.sh"), *bad],
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 2 and done.stderr.startswith("build.sh: "), done.stderr
