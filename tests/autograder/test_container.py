"""`--sandbox docker` with a real container engine and the real CPU image.

The image is the one `make image` builds (docker/build.sh; `.ci/run` builds it with
podman from a Debian base made by debootstrap) and ``$SCALEGRADE_IMAGE`` names it
(tests/conftest.py's ``grading_image``).  A batch of
tdlsm/hw1 (honest work and the classic mistakes) must grade exactly as in the namespaces
sandbox; one warm container serves a batch, each submission in a child of its own beside
its probe process, and hostile notebooks meet their limits without stopping it or
reaching each other.
"""

from __future__ import annotations

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from click.testing import CliRunner

from autograder.grading.keys import Keys
from autograder.sandbox import Limits, Sandbox, SandboxError
from autograder.sandbox import box as sandbox_module
from autograder.sandbox.container import CONTAINER_HOST_UID
from autograder.semester.batch import grade_batch
from generator import bank
from generator.release import release
from generator.roster import parse
from scalegrade.cli import main
from scalegrade.demo import SCENARIOS, simulate
from tests.autograder import cheats
from tests.autograder.test_sandbox import HONEST, PLAN, _run_batch, expected_probe


@pytest.fixture(scope="module")
def image(grading_image):
    return grading_image


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
    # and as an instructor runs it: the CLI, two submissions at a time in one container
    done = CliRunner().invoke(main, [
        "grade", "tdlsm/hw1", str(tmp_path / "subs"), "--keys", str(tmp_path / "hw1" / "keys"),
        "--out", str(tmp_path / "grades-cli"), "--sandbox", "docker", "--image", image,
        "--jobs", "2", "--timeout", "120",
    ], catch_exceptions=False)  # fmt: skip
    assert done.exit_code == 0, done.output
    for sid in graded["auto"]:  # the students' results.json, byte for byte
        cli, namespaces = (tmp_path / f"grades-{d}" / sid / "results.json" for d in ("cli", "auto"))
        assert cli.read_bytes() == namespaces.read_bytes(), played[sid]


def _containers(engine, name):
    done = subprocess.run([*engine.command, "ps", "--all", "--quiet", "--filter", f"name={name}"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return done.stdout.split()


def test_one_warm_container_grades_every_cheat_and_stays_up(image, tmp_path):
    """The whole cheats corpus, two at a time, in one container: each meets the limits of
    its own child (rlimits, its namespaces, the container's lack of network), none takes
    the container down, and the honest notebooks among them keep their answers."""
    limits = Limits(wall_seconds=20, cpu_seconds=6, memory_bytes=1 << 30, processes=48)
    ctx = cheats.Context(port=9, keys_dir=str(tmp_path / "keys"), token=f"sg-{os.getpid()}")
    honest = cheats.honest_notebook(tmp_path / "honest.ipynb")
    jobs = cheats.corpus(honest, tmp_path, ctx, honest_every=4)
    with Sandbox(backend="docker", image=image, limits=limits, jobs=2) as box:
        engine, name = box.container.engine, box._state.executors[0].name
        assert len(_containers(engine, name)) == 1
        results, leftovers = _run_batch(box, jobs, ctx)
        assert len(_containers(engine, name)) == 1  # the same one served them all
        after = box.run(honest, PLAN)
    assert _containers(engine, name) == []  # and it is gone with the sandbox
    assert after.error is None and after.harvest["answers"] == HONEST, after.log[-2000:]
    assert after.harvest["probes"] == {"q2-double": expected_probe()}
    by = dict(results)
    for job, outcome in results:
        assert outcome.isolation == "docker"
        if job.startswith("honest"):
            assert outcome.harvest["answers"] == HONEST, (job, outcome.error)

    def report(name):
        assert by[name].error is None, (name, by[name].error, by[name].log[-1500:])
        return by[name].harvest["answers"]["q1_c"]["value"]

    assert report("memory_bomb") == "survived"  # RLIMIT_AS of its own process
    assert by["memory_bomb"].harvest["cells"][-2]["error"].startswith("MemoryError")
    assert report("fork_bomb") == "survived"  # RLIMIT_NPROC of its slot's uid
    assert by["fork_bomb"].harvest["cells"][-2]["error"].startswith("BlockingIOError")
    assert "connected" not in report("network")  # --network none, and a netns of its own
    assert report("kill_parent") == "ran"  # PID 1 of its namespace is root's
    assert by["infinite_loop"].harvest is None  # SIGXCPU at the soft limit, then SIGKILL
    assert by["infinite_loop"].error in ("CPU time limit exceeded (6 s)",
                                         "killed by signal 9 (memory?)")  # fmt: skip
    assert "FileNotFoundError" in report("read_keys")  # no keys in the image
    assert report("detached") == "detached" and leftovers["detached"] == []
    assert report("env_secret") == "no secret"
    assert "exit code 0" in by["libc_exit"].error
    assert by["forged_harvest"].error.startswith("harvest is malformed")
    assert by["garbage_harvest"].error == "harvest is not valid JSON"
    assert "bytes of output dropped" in by["huge_output"].log


@pytest.fixture(params=["mapped", "unmapped"])
def uids(request, monkeypatch):
    """The two kinds of container: its root mapped to nobody on the host (podman), or the
    host's root (docker's default, played here by podman without a uid map), where the
    executor runs in its process mode and each container serves one run at a time."""
    if request.param == "unmapped":
        found = sandbox_module.find_engine

        def unmapped(choice="auto"):
            return replace(found(choice), maps_uids=False)

        monkeypatch.setattr(sandbox_module, "find_engine", unmapped)
    return request.param


LEAVE = (
    "import os, socket, time\n"
    "for path in ('/tmp/sg-left', '/dev/shm/sg-left'):\n"
    "    open(path, 'w').write('answers'); os.chmod(path, 0o644)\n"
    "tcp = socket.socket(); tcp.bind(('127.0.0.1', 47011)); tcp.listen()\n"
    "unix = socket.socket(socket.AF_UNIX); unix.bind('\\0sg-left'); unix.listen()\n"
    "time.sleep(WAIT)\n"
    "q1_c = 'left'"
)
LOOK = (
    "import os, socket, time\n"
    "time.sleep(WAIT)\n"
    "seen = [p for p in ('/tmp/sg-left', '/dev/shm/sg-left') if os.path.exists(p)]\n"
    "for family, where in ((socket.AF_INET, ('127.0.0.1', 47011)),\n"
    "                      (socket.AF_UNIX, '\\0sg-left')):\n"
    "    try:\n"
    "        socket.socket(family).connect(where); seen.append(str(where))\n"
    "    except OSError:\n"
    "        pass\n"
    "others = [p for p in os.listdir('/proc') if p.isdigit() and int(p) > 3]\n"
    "q1_c = repr((seen, len(others)))"
)


def _leave_and_look(tmp_path, leave_wait, look_wait):
    leave = LEAVE.replace("WAIT", str(leave_wait))
    look = LOOK.replace("WAIT", str(look_wait))
    return (cheats._write([leave], tmp_path / "leave.ipynb"),
            cheats._write([look], tmp_path / "look.ipynb"))  # fmt: skip


def test_two_submissions_at_once_cannot_reach_each_other(image, uids, tmp_path):
    """What one leaves in /tmp or /dev/shm, or serves on the loopback or an abstract
    socket, the other, running at the same time, cannot find."""
    leave, look = _leave_and_look(tmp_path, 6, 2)
    with Sandbox(backend="docker", image=image, limits=Limits(wall_seconds=60), jobs=2) as box:
        with ThreadPoolExecutor(max_workers=2) as pool:
            left, looked = pool.map(lambda nb: box.run(nb, PLAN), (leave, look))
        assert len(box._state.executors) == (1 if uids == "mapped" else 2)
    assert left.error is None and left.harvest["answers"]["q1_c"]["value"] == "left", left.log
    assert looked.error is None, looked.log[-2000:]
    seen, others = eval(looked.harvest["answers"]["q1_c"]["value"])  # noqa: S307 - a repr
    assert seen == []  # its own /tmp, /dev/shm, loopback and abstract sockets
    if uids == "mapped":  # a PID namespace of its own: its process and the probe process
        assert others <= 2


def test_what_a_submission_leaves_is_gone_before_the_next(image, uids, tmp_path):
    leave, look = _leave_and_look(tmp_path, 0, 0)
    with Sandbox(backend="docker", image=image, limits=Limits(wall_seconds=60), jobs=1) as box:
        left, looked = box.run(leave, PLAN), box.run(look, PLAN)  # in the same container
    assert left.error is None and left.harvest["answers"]["q1_c"]["value"] == "left", left.log
    assert looked.error is None, looked.log[-2000:]
    assert eval(looked.harvest["answers"]["q1_c"]["value"])[0] == []  # noqa: S307 - a repr


def test_the_grader_restarts_a_container_that_died(image, tmp_path):
    honest = cheats.honest_notebook(tmp_path / "honest.ipynb")
    with Sandbox(backend="docker", image=image, limits=Limits(wall_seconds=60)) as box:
        executor = box._state.executors[0]
        subprocess.run([*box.container.engine.command, "kill", executor.name],
                       capture_output=True, check=True)  # fmt: skip
        executor.proc.wait(timeout=60)
        outcome = box.run(honest, PLAN)
        assert box._state.executors[0] is not executor
    assert outcome.error is None and outcome.harvest["answers"] == HONEST, outcome.log[-2000:]


def test_the_root_is_read_only_and_the_work_folder_private(image, tmp_path):
    nb = cheats._write(
        [
            "import os\nout = []\n"
            "for path in ('/etc/scalegrade', '/opt/scalegrade/x', '/usr/local/x', '/run/x'):\n"
            "    try:\n        open(path, 'w').write('x'); out.append('wrote')\n"
            "    except OSError as err:\n        out.append(type(err).__name__)\n"
            "open('mine', 'w').write('ok')\n"
            "st = os.stat('.')\n"
            "code = sorted(os.listdir('/opt/scalegrade')), os.listdir('/run')\n"
            "q1_c = ' '.join(out) + f' {st.st_uid == os.getuid()} {oct(st.st_mode & 0o077)} {code}'"
        ],
        tmp_path / "write.ipynb",
    )
    with Sandbox(backend="docker", image=image, limits=Limits(wall_seconds=60)) as box:
        outcome = box.run(nb, PLAN)
    assert outcome.error is None, outcome.log[-2000:]
    # --read-only, and the grader's code and socket hidden; the working folder is the
    # student's own, in a tmpfs of its own, that no other uid may enter
    assert outcome.harvest["answers"]["q1_c"]["value"] == (
        "OSError OSError OSError OSError True 0o0 ([], [])"
    )


def test_the_container_measures_memory_in_a_cgroup_the_grader_gave_it(image):
    """As on the host, the probe process reads a peak that only it holds: the grader makes
    a memory cgroup for the container (cgroup v1, as root), gives it to the container's
    root, and removes it with the container; without one, the sandbox says why."""
    from autograder.sandbox.inside import memory

    version = memory._grader_memory_cgroup()[0] if os.geteuid() == 0 else None
    with Sandbox(backend="docker", image=image, limits=Limits(wall_seconds=60)) as box:
        folder = box._state.executors[0].cgroup
        memory = box.memory
        if version == 1:
            assert memory["cgroup"].startswith("/cgroup/scalegrade-") and memory["version"] == 1
            assert os.stat(folder).st_uid == (CONTAINER_HOST_UID if os.geteuid() == 0 else 0)
        else:
            assert (
                memory["cgroup"] is None and "no memory cgroup for the container" in memory["why"]
            )
    assert folder is None or not os.path.exists(folder)


def test_an_image_the_engine_does_not_have_is_one_sentence(image):
    with pytest.raises(SandboxError, match=r"scalegrade/none:0\) did not start: .*make image"):
        Sandbox(backend="docker", image="scalegrade/none:0")
