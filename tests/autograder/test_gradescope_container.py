"""The Gradescope package for real, in a Debian container: its setup.sh (Python, torch,
ScaleGrade's wheel, the check), then run_autograder on a solved notebook, as Gradescope
runs them.

The container comes from the same Debian base as the grading image (``make image
BASE=local``; ``$SCALEGRADE_BASE_IMAGE``), with the network, as Gradescope's build has.
torch comes from a local index holding the machine's own CPU wheel
(``$SCALEGRADE_TORCH_WHEEL``: setup.sh's ``--torch-index``), the rest from PyPI.  Skipped
without them, a failure under ``SCALEGRADE_REQUIRE_CONTAINER``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from autograder.sandbox import SandboxError, find_engine
from scalegrade.cli import main
from tests.autograder.test_gradescope import _honest, course  # noqa: F401 - the fixture

BASE_ENV, WHEEL_ENV = "SCALEGRADE_BASE_IMAGE", "SCALEGRADE_TORCH_WHEEL"


@pytest.fixture(scope="module")
def container():
    base, wheel = os.environ.get(BASE_ENV), os.environ.get(WHEEL_ENV)

    def unavailable(why):
        if os.environ.get("SCALEGRADE_REQUIRE_CONTAINER"):
            pytest.fail(f"{why} (and SCALEGRADE_REQUIRE_CONTAINER is set)")
        pytest.skip(why)

    if not base or not wheel or not Path(wheel).is_file():
        unavailable(f"${BASE_ENV} (a Debian base image) and ${WHEEL_ENV} (torch's CPU wheel)")
    try:
        engine = find_engine("auto")
    except SandboxError as err:
        unavailable(str(err))
    return engine, base, Path(wheel)


def test_setup_sh_and_run_autograder_in_a_debian_container(container, course, tmp_path):  # noqa: F811
    engine, base, wheel = container
    index = tmp_path / "index" / "torch"
    index.mkdir(parents=True)
    shutil.copy(wheel, index / wheel.name)
    package = tmp_path / "autograder.zip"
    done = CliRunner().invoke(main, [
        "export", "gradescope", "dl/hw1", "--keys", str(course / "hw1" / "keys"),
        "--out", str(package), "--torch-index", "file:///wheels-index",
    ])  # fmt: skip
    assert done.exit_code == 0, done.output
    tree = tmp_path / "autograder"
    with zipfile.ZipFile(package) as zf:
        zf.extractall(tree / "source")
    (tree / "submission").mkdir()
    nbformat.write(_honest(course, "ana"), tree / "submission" / "hw1.ipynb")
    users = [{"email": "ana@x.edu", "id": 9001, "name": "Ana Lima"}]
    (tree / "submission_metadata.json").write_text(
        json.dumps({"created_at": "2026-12-01T14:22:32.365935-07:00", "users": users})
    )
    (tree / "results").mkdir()
    mounts = ["--volume", f"{tree}:/autograder", "--volume", f"{index.parent}:/wheels-index:ro"]
    env = ["--env", "PIP_EXTRA_INDEX_URL=https://pypi.org/simple"]
    cert = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    if cert and Path(cert).is_file():  # a network that inspects TLS, as this one does
        mounts += ["--volume", f"{cert}:/etc/ssl/certs/host-ca.crt:ro"]
        env += ["--env", "PIP_CERT=/etc/ssl/certs/host-ca.crt"]
    script = (
        "set -e; bash /autograder/source/setup.sh > /autograder/setup.log 2>&1; "
        "cp /autograder/source/run_autograder /autograder/run_autograder; "
        "cd /autograder && bash /autograder/run_autograder"
    )
    limits = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
    argv = [*engine.command, "run", "--rm", "--network", "host", *limits, *mounts, *env,
            base, "bash", "-c", script]  # fmt: skip
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
    log = (tree / "setup.log").read_text() if (tree / "setup.log").exists() else ""
    assert ran.returncode == 0, (ran.stdout[-2000:], ran.stderr[-2000:], log[-3000:])
    assert "keys and their" in log and "code checks are readable" in log  # setup.sh's check
    doc = json.loads((tree / "results" / "results.json").read_text(encoding="utf-8"))
    graded = [t for t in doc["tests"] if "score" in t]
    assert doc["extra_data"]["student_id"] == "ana"
    assert graded and all(t["status"] == "passed" for t in graded), [
        (t["name"], t["output"]) for t in graded if t["status"] != "passed"
    ]
    assert doc["score"] == pytest.approx(sum(t["max_score"] for t in graded))
