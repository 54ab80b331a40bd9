"""`--sandbox docker` with a real container engine and the real CPU image.

The image is the one `make image` builds (docker/build.sh; `.ci/run` builds it with
podman from a Debian base made by debootstrap) and ``$SCALEGRADE_IMAGE`` names it; without
it these tests are skipped, a failure under ``SCALEGRADE_REQUIRE_CONTAINER``.  A batch of
tdlsm/hw1 (honest work and the classic mistakes) must grade exactly as in the namespaces
sandbox, and hostile notebooks must meet the container's limits without stopping it.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from autograder.batch import grade_batch
from autograder.keys import Keys
from autograder.sandbox import Limits, Sandbox, SandboxError, find_engine
from generator import bank
from generator.release import release
from generator.roster import parse
from scalegrade.demo import SCENARIOS, simulate
from tests.autograder import cheats
from tests.autograder.test_sandbox import HONEST, PLAN, expected_probe

IMAGE_ENV, REQUIRE_ENV = "SCALEGRADE_IMAGE", "SCALEGRADE_REQUIRE_CONTAINER"
HOSTILE = ("memory_bomb", "fork_bomb", "network", "kill_parent", "infinite_loop", "read_keys")


@pytest.fixture(scope="module")
def image():
    name = os.environ.get(IMAGE_ENV)

    def unavailable(why):
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{why} (and {REQUIRE_ENV} is set)")
        pytest.skip(why)

    if not name:
        unavailable(f"no grading image: `make image`, then ${IMAGE_ENV}=scalegrade/grader:cpu")
    try:
        engine = find_engine("auto")
    except SandboxError as err:
        unavailable(str(err))
    found = subprocess.run([*engine.command, "image", "inspect", name], capture_output=True)
    if found.returncode:
        unavailable(f"{engine.name} has no image {name}: `make image`")
    return name


def _parts(doc):
    return json.dumps({k: doc[k] for k in ("score", "parts", "error", "cell_errors")})


def test_a_batch_grades_in_the_image_exactly_as_in_the_namespaces_sandbox(image, tmp_path):
    n = len(SCENARIOS) - 1  # the honest students and the classic mistakes, no cheat
    roster = parse("student_id,name,email\n" + "".join(f"s{i},S {i},s{i}@x\n" for i in range(n)))
    release(bank.load().assignment("tdlsm/hw1"), roster, secret=b"c" * 32,
            out=tmp_path / "hw1", with_solutions=True)  # fmt: skip
    played = simulate(tmp_path / "hw1" / "release", tmp_path / "hw1" / "keys", tmp_path / "subs")
    assert "cheating notebook" not in played.values()
    keys = Keys(tmp_path / "hw1" / "keys")
    graded = {}
    for backend in ("docker", "auto"):
        box = Sandbox(backend=backend, image=image, limits=Limits(wall_seconds=120),
                      hide=[tmp_path / "hw1"], preload=keys.preload)  # fmt: skip
        with box:
            summary = grade_batch(keys, tmp_path / "subs", tmp_path / f"grades-{backend}",
                                  sandbox=box, reveal=False)  # fmt: skip
        assert summary.errors == 0 and summary.graded == n
        graded[backend] = {r["student_id"]: r for r in summary.results}
        isolation = {r["isolation"] for r in summary.results}
        assert isolation == ({"docker"} if backend == "docker" else {"namespaces"})
    for sid in graded["auto"]:  # the same verdicts, byte for byte
        assert _parts(graded["docker"][sid]) == _parts(graded["auto"][sid]), played[sid]


def test_hostile_notebooks_meet_the_containers_limits(image, tmp_path):
    limits = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=512 << 20, processes=48)
    ctx = cheats.Context(port=9, keys_dir=str(tmp_path / "keys"))
    honest = cheats.honest_notebook(tmp_path / "honest.ipynb")
    with Sandbox(backend="docker", image=image, limits=limits) as box:
        by = {
            name: box.run(
                cheats.cheating_notebook(honest, name, tmp_path / f"{name}.ipynb", ctx), PLAN
            )  # fmt: skip
            for name in HOSTILE
        }
        after = box.run(honest, PLAN)  # and the engine still grades the next one
    assert after.error is None and after.harvest["answers"] == HONEST, after.log[-2000:]
    assert after.harvest["probes"] == {"q2-double": expected_probe()}

    def report(name):
        assert by[name].error is None, (name, by[name].error, by[name].log[-1500:])
        return by[name].harvest["answers"]["q1_c"]["value"]

    assert report("memory_bomb") == "survived"  # a MemoryError at the container's limit
    assert by["memory_bomb"].harvest["cells"][-2]["error"].startswith("MemoryError")
    assert report("fork_bomb") == "survived"  # --pids-limit
    assert by["fork_bomb"].harvest["cells"][-2]["error"].startswith("BlockingIOError")
    assert "connected" not in report("network")  # --network none: nothing to connect to
    assert report("kill_parent") == "ran"  # the grader is outside the container
    # --ulimit cpu: SIGXCPU at the soft limit, SIGKILL a second later at the hard one
    assert by["infinite_loop"].harvest is None
    assert by["infinite_loop"].error in (
        "CPU time limit exceeded (20 s)",
        "killed by signal 9 (memory?)",
    )
    assert "FileNotFoundError" in report("read_keys")  # no keys in the image


def test_the_root_is_read_only_and_the_work_folder_private(image, tmp_path):
    nb = cheats._write(
        [
            "import os\nout = []\n"
            "for path in ('/etc/scalegrade', '/opt/scalegrade/x', '/usr/local/x'):\n"
            "    try:\n        open(path, 'w').write('x'); out.append('wrote')\n"
            "    except OSError as err:\n        out.append(type(err).__name__)\n"
            "open('/work/mine', 'w').write('ok')\n"
            "st = os.stat('/work')\n"
            "q1_c = ' '.join(out) + f' {st.st_uid == os.getuid()} {oct(st.st_mode & 0o022)}'"
        ],
        tmp_path / "write.ipynb",
    )
    with Sandbox(backend="docker", image=image, limits=Limits(wall_seconds=60)) as box:
        outcome = box.run(nb, PLAN)
    assert outcome.error is None, outcome.log[-2000:]
    # --read-only: nothing written outside /work, a tmpfs of the container's user that no
    # other can write to
    assert outcome.harvest["answers"]["q1_c"]["value"] == "OSError OSError OSError True 0o0"
