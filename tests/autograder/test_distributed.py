"""`scalegrade grade --executor dask`: a real Dask LocalCluster (two worker processes, one
thread each) grades the same tdlsm/hw1 batch as the local executor, with identical results.

Four submissions from the demo's scenarios (scalegrade/demo.py): a misconception (GiB read
as GB), a code mistake (a sum() ring), the cheating notebook and an honest one.
"""

from __future__ import annotations

import os

import nbformat
import pytest
from click.testing import CliRunner
from distributed import Client, LocalCluster

from autograder.sandbox import Limits, Plan
from autograder.sandbox.distributed import DaskRunner, SandboxSpec, run_submission
from scalegrade.cli import main
from tests.autograder.demo_course import HONEST, PICKED, grade_cli, picked_course


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return picked_course(tmp_path_factory.mktemp("course"))


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as local:
        yield local


def test_a_dask_cluster_grades_exactly_like_the_local_executor(course, cluster):
    local = grade_cli(course, "grades-local")
    dask = grade_cli(
        course, "grades-dask", "--executor", "dask", "--scheduler", cluster.scheduler_address
    )

    assert [r["student_id"] for r in dask] == sorted([*PICKED, HONEST])
    for mine, theirs in zip(local, dask, strict=True):
        assert not mine["error"] and theirs["isolation"] == mine["isolation"]
        assert theirs["score"] == mine["score"]
        statuses = [(g["verdict"]["part"], g["verdict"]["status"]) for g in mine["parts"]]
        assert [(g["verdict"]["part"], g["verdict"]["status"]) for g in theirs["parts"]] == statuses
        # everything else too, but the time each run took
        assert {**theirs, "seconds": 0} == {**mine, "seconds": 0}
        student = mine["student_id"]
        for name in ("results.json", "feedback.html"):
            a = (course / "grades-local" / student / name).read_bytes()
            assert (course / "grades-dask" / student / name).read_bytes() == a, (student, name)

    by = {r["student_id"]: r for r in dask}
    assert by["s06"]["score"] == 0  # the cheat reads no key on a worker either
    assert by[HONEST]["score"] > max(by[s]["score"] for s in ("s00", "s03"))
    assert any(g["verdict"]["status"] == "misconception" for g in by["s00"]["parts"])


def test_a_worker_runs_the_task_in_its_own_sandbox(course, cluster, tmp_path):
    """The per-submission task, by hand: the plugin builds one sandbox per worker process,
    the task is the importable ``run_submission``, and a failure is that submission's."""
    with Client(cluster, set_as_default=False) as client:
        spec = SandboxSpec(limits=Limits(wall_seconds=30), hide=(str(course / "hw1"),))
        with DaskRunner(client, spec) as runner:
            assert runner.threads == 2
            plugin = runner.plugin
            built = client.run(
                lambda dask_worker: (os.getpid(), dask_worker.plugins[plugin].sandbox is not None)
            )
            assert len({pid for pid, _ in built.values()}) == 2
            assert all(ok for _, ok in built.values())
            notebook = tmp_path / "tiny.ipynb"
            nbformat.write(
                nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a = 6 * 7")]), notebook
            )
            outcome = runner.run(notebook, Plan(variables=("a",)))
            assert outcome.error is None, outcome.log
            assert outcome.harvest["answers"]["a"] == {"kind": "number", "value": 42.0}
            missing = runner.run(course / "nowhere.ipynb", Plan(variables=()))
            assert missing.harvest is None and "cannot read the notebook" in missing.error
        future = client.submit(run_submission, runner.plugin, "x.ipynb", b"{}", Plan(()))
        with pytest.raises(KeyError):  # the batch is over: its sandboxes are gone
            future.result()
    assert run_submission.__module__ == "autograder.sandbox.distributed"


def test_the_dask_executor_needs_a_scheduler(course):
    done = CliRunner().invoke(
        main,
        ["grade", "tdlsm/hw1", str(course / "subs"), "--keys", str(course / "hw1" / "keys")]
        + ["--out", str(course / "x"), "--executor", "dask"],
    )
    assert done.exit_code == 2 and "--scheduler" in done.output
