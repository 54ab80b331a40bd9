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
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import sandbox as sandbox_module
from autograder.checks import fraction, grade_result, load_checks
from autograder.sandbox import UID_BASE, Limits, Plan, Probe, Sandbox, docker_command
from generator import bank
from tests.autograder import cheats
from tests.autograder.test_sandbox import notebook as notebook_of

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
    owner = f"uid={UID_BASE},gid={UID_BASE},mode=0700"
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
        "--user", f"{UID_BASE}:{UID_BASE}",
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
    argv = docker_command(image="img", limits=LIMITS, name="sg-2", docker="/usr/bin/docker")
    assert argv[:2] == ["/usr/bin/docker", "run"] and "--gpus" not in argv
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


def test_the_docker_backend_speaks_the_containers_protocol(tmp_path, monkeypatch):
    """Sandbox(backend="docker") end to end, with a stand-in for the engine: a `docker` on
    PATH that checks the isolation flags, then runs the image's own command line
    (`python3 -I /opt/scalegrade/harness.py --stdin`) with the mounted harness here."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "docker"
    stand_in.write_text(
        f"#!{sys.executable}\n"
        "import os, sys, tempfile\n"
        "argv = sys.argv[1:]\n"
        "assert argv[:2] == ['run', '--rm'] or argv[0] == 'kill', argv\n"
        "if argv[0] == 'kill': sys.exit(0)\n"
        "for flag in (['--network', 'none'], ['--read-only'], ['--cap-drop', 'ALL']):\n"
        "    i = argv.index(flag[0]); assert argv[i:i + len(flag)] == flag, flag\n"
        "vol = argv[argv.index('--volume') + 1]\n"
        "harness = vol.removesuffix(':/opt/scalegrade/harness.py:ro')\n"
        "os.chdir(tempfile.mkdtemp())\n"
        "os.execv(sys.executable, [sys.executable, '-I', harness, '--stdin'])\n"
    )
    stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    notebook = cheats.honest_notebook(tmp_path / "hw.ipynb")
    with Sandbox(backend="docker", image="scalegrade/grader:cpu", limits=LIMITS) as sandbox:
        outcome = sandbox.run(notebook, Plan(variables=("q1_a", "q1_b")))
        # a check written for the probe process runs in the container's one process
        calculator = bank.load().templates / "agents" / "calculator-tool-code"
        code = bank.load().question("agents/calculator-tool-code").code["calculator"]
        source = load_checks(calculator, "checks.py").source
        probe = Probe("q2-calc", "calculator", source, 7, {}, isolated=True)
        coded = sandbox.run(notebook_of(tmp_path / "calc.ipynb", code.solution), Plan((), (probe,)))
    assert outcome.error is None, outcome.log
    assert outcome.isolation == "docker"
    assert outcome.harvest["answers"] == {
        "q1_a": cheats.HONEST_ANSWERS["q1_a"],
        "q1_b": cheats.HONEST_ANSWERS["q1_b"],
    }
    assert coded.error is None, coded.log
    result = coded.harvest["probes"]["q2-calc"]
    assert result["ok"], result
    checks = load_checks(calculator, "checks.py")
    assert fraction(grade_result(checks.grade, result["result"], 7, {})) == 1


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
        ("Dockerfile", "cpu", "python:"),
        ("Dockerfile.cuda", "cuda", "nvidia/cuda:"),
    ],
)
def test_both_images_install_through_the_one_script(name, build, base):
    steps = _instructions(ROOT / "docker" / name)
    known = {"FROM", "ARG", "ENV", "RUN", "WORKDIR", "CMD", "COPY", "LABEL", "USER"}
    assert {word for word, _ in steps} <= known
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for w, a in steps if w == "ARG" and "=" in a}
    assert args["TORCH"] == "torch==2.13.0"
    assert any(base in a or base in args.get("CUDA_IMAGE", "") for w, a in steps if w == "FROM")
    (install,) = [a for w, a in steps if w == "RUN" and "install.sh" in a]
    assert "bash /src/docker/install.sh --venv /opt/venv" in install
    assert '--torch "$TORCH" --torch-index "$TORCH_INDEX_URL"' in install
    assert f"--require {build}" in install
    # the harness that docker_command mounts, run by the image's python
    assert steps[-1] == ("CMD", '["python3", "-I", "/opt/scalegrade/harness.py", "--stdin"]')
    if build == "cpu":
        assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"


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
