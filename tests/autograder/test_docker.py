"""`--sandbox docker`: the exact `docker run` argv, the docker CLI's own parse of it, the
backend's stdin/stdout protocol, and the grading images' one install script.

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

from autograder import sandbox as sandbox_module
from autograder.sandbox import (
    CONTAINER_UID,
    Engine,
    Limits,
    Sandbox,
    SandboxError,
    docker_command,
    find_engine,
)

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "docker" / "install.sh"
LIMITS = Limits(
    wall_seconds=30,
    cpu_seconds=20,
    memory_bytes=2 << 30,
    processes=64,
    file_bytes=8 << 20,
    open_files=128,
)


def test_docker_command_is_exactly_the_isolated_run():
    harness = Path("/srv/scalegrade/autograder/harness.py")
    argv = docker_command(
        image="scalegrade/grader:cuda",
        limits=LIMITS,
        name="sg-1",
        harness=harness,
        gpus="all",
        cpus=2,
    )
    work = 32 << 20  # 4 x file_bytes
    owner = f"uid={CONTAINER_UID},gid={CONTAINER_UID},mode=0700"
    # fmt: off
    assert argv == [
        "docker", "run", "--rm", "-i",
        "--pull", "never",  # the image is built beforehand; a pull would time the batch out
        "--name", "sg-1",
        "--network", "none",
        "--memory", str(2 << 30), "--memory-swap", str(2 << 30),  # no swap beyond the cap
        "--cpus", "2",
        "--pids-limit", "64",
        "--read-only",
        "--tmpfs", f"/tmp:rw,nosuid,nodev,size={work},mode=1777",
        "--tmpfs", f"/work:rw,nosuid,nodev,exec,size={work},{owner}",
        "--workdir", "/work",
        "--user", f"{CONTAINER_UID}:{CONTAINER_UID}",
        "--cap-drop", "ALL",
        "--security-opt", "no-new-privileges",
        "--init",
        "--ulimit", "cpu=20:21",
        "--ulimit", f"fsize={8 << 20}:{8 << 20}",
        "--ulimit", "nofile=128:128",
        "--ulimit", "core=0:0",
        "--env", "HOME=/tmp",
        "--env", "IPYTHONDIR=/tmp/.ipython",
        "--env", "MPLBACKEND=Agg",
        "--env", "OMP_NUM_THREADS=1",
        "--volume", f"{harness}:/opt/scalegrade/harness.py:ro",
        "--volume", f"{harness.parent / 'wire.py'}:/opt/scalegrade/wire.py:ro",
        "--volume", f"{harness.parent / 'prober.py'}:/opt/scalegrade/prober.py:ro",
        "--gpus", "all",
        "scalegrade/grader:cuda", "python3", "-I", "/opt/scalegrade/harness.py", "--stdin",
    ]
    # fmt: on


def test_without_gpus_there_is_no_gpu_flag_and_one_cpu():
    argv = docker_command(image="img", limits=LIMITS, name="sg-2", engine=Engine("/bin/docker"))
    assert argv[:2] == ["/bin/docker", "run"] and "--gpus" not in argv
    assert argv[argv.index("--cpus") + 1] == "1"
    assert argv[-5:] == ["img", "python3", "-I", "/opt/scalegrade/harness.py", "--stdin"]


@pytest.mark.skipif(shutil.which("docker") is None, reason="the docker CLI is not installed")
@pytest.mark.parametrize("gpus", [None, "all", "device=0"])
def test_the_docker_cli_accepts_every_flag(gpus):
    """The real CLI parses and validates the flags (ulimits, memory, cpus, gpus, ...) before
    it contacts the daemon; here the daemon's socket does not exist, so nothing runs."""
    argv = docker_command(image="scalegrade/grader:cpu", limits=LIMITS, name="sg-3", gpus=gpus)
    env = dict(os.environ, DOCKER_HOST="unix:///nonexistent/scalegrade-test.sock")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, input="")
    assert done.returncode == 125
    assert "Cannot connect to the Docker daemon" in done.stderr, done.stderr
    bad = [a.replace("nofile=128:128", "nofile=lots") for a in argv]
    refused = subprocess.run(bad, capture_output=True, text=True, env=env, timeout=60, input="")
    assert "invalid argument" in refused.stderr  # so the check above means something


def test_podman_gets_the_same_limits_in_its_own_spelling():
    """Podman ignores a tmpfs ``uid=`` (``U`` gives /work to the container's user), and its
    default process rlimit can be above what a host grants; the global flags a host needs
    come first.  The real engine runs this argv in tests/autograder/test_container.py."""
    engine = Engine("podman", ("--runtime", "runc", "--cgroup-manager", "cgroupfs"))
    argv = docker_command(image="img", limits=LIMITS, name="sg-4", engine=engine)
    assert argv[:6] == ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs", "run"]
    (work,) = [a for a in argv if a.startswith("/work:")]
    assert work.startswith("/work:rw,nosuid,nodev,exec,") and work.endswith(",mode=0700,U")
    assert "uid=" not in work and "nproc=4096:4096" in argv
    docker = docker_command(image="img", limits=LIMITS, name="sg-4")
    assert [a for a in docker if a.startswith("nproc")] == []  # docker's default stands
    # every other flag and value is the same
    podman_rest = [a for a in argv[6:] if a not in (work, "nproc=4096:4096")]
    docker_rest = [a for a in docker[2:] if not a.startswith("/work:")]
    assert podman_rest == [*docker_rest[: docker_rest.index("core=0:0") + 1], "--ulimit",
                           *docker_rest[docker_rest.index("core=0:0") + 1 :]]  # fmt: skip


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
    # the harness that docker_command mounts, run by the image's python
    assert steps[-1] == ("CMD", '["python3", "-I", "/opt/scalegrade/harness.py", "--stdin"]')
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
    assert sandbox_module.HARNESS.is_file()  # what the images' CMD runs, mounted


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
