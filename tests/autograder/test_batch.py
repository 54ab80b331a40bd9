"""`scalegrade grade` end to end: release, simulated submissions, sandboxed grading, reports.

Real parts throughout: the generator's release, the namespace sandbox, the comparison,
the SQLite gradebook.  The scenarios are the demo's (scalegrade/demo.py).
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pytest

from autograder.grading.keys import Keys
from autograder.sandbox import Limits, Sandbox
from autograder.semester.batch import grade_batch
from generator import bank
from generator.release import release
from generator.roster import parse
from scalegrade.demo import SCENARIOS, simulate
from tests.autograder.demo_course import release_hw1

N = len(SCENARIOS) + 2  # every scenario, and two honest students


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    release_hw1(root, N)
    played = simulate(root / "hw1" / "release", root / "hw1" / "keys", root / "subs")
    hide = [root / "hw1", root / "grades"]
    with Sandbox(limits=Limits(wall_seconds=60), hide=hide) as sandbox:
        summary = grade_batch(
            Keys(root / "hw1" / "keys"),
            root / "subs",
            root / "grades",
            sandbox=sandbox,
            reveal=False,
        )
    by_scenario = {played[r["student_id"]]: r for r in summary.results}
    honest = [r for r in summary.results if played[r["student_id"]] == "honest"]
    return root, summary, by_scenario, honest


def _auto(result):
    return [g["verdict"] for g in result["parts"] if g["verdict"]["score"] is not None]


def test_honest_submissions_earn_every_autograded_point(graded):
    _, _, _, honest = graded
    for r in honest:
        assert not r["error"]
        lost = [
            (v["variable"], v["status"], v["feedback"])
            for v in _auto(r)
            if v["score"] < v["points"] - 1e-9
        ]
        assert not lost


def test_each_mistake_costs_exactly_its_part_with_the_right_feedback(graded):
    _, _, s, honest = graded
    full = sum(v["points"] for v in _auto(honest[0]))

    def lost(name):
        return [v for v in _auto(s[name]) if v["score"] < v["points"] - 1e-9]

    (gib,) = lost("GiB read as GB")
    assert gib["status"] == "misconception" and "GiB" in gib["feedback"]
    flops = lost("forward-only FLOPs")
    assert {v["status"] for v in flops} <= {"misconception", "carried"}
    assert any("backward" in v["feedback"] for v in flops)
    (steps,) = lost("p instead of p - 1")
    assert steps["status"] in ("misconception", "wrong")
    ring = lost("sum() ring")
    assert len(ring) == 1 and ring[0]["status"] == "code" and 0 < ring[0]["score"]
    assert s["cell raises"]["cell_errors"] and s["cell raises"]["score"] == pytest.approx(
        honest[0]["score"]
    )
    assert s["empty notebook"]["score"] == 0
    assert full > 0


def test_the_cheating_notebook_earns_nothing_and_reads_no_key(graded):
    root, _, s, _ = graded
    cheat = s["cheating notebook"]
    assert cheat["score"] == 0
    n_params = next(v for v in _auto(cheat) if v["variable"] == "q1_n_params")
    assert n_params["status"] == "unreadable"


def test_outputs_are_written_and_a_rerun_skips_what_is_unchanged(graded):
    root, summary, _, _ = graded
    assert summary.graded + summary.errors == N
    for r in summary.results:
        doc = json.loads((root / "grades" / r["student_id"] / "results.json").read_text())
        assert doc["score"] == pytest.approx(r["score"], abs=1e-3)
        assert (root / "grades" / r["student_id"] / "feedback.html").is_file()
    for name in ("summary.csv", "canvas.csv", "moodle.csv", "report.html", "gradebook.sqlite"):
        assert (root / "grades" / name).is_file()
    with Sandbox(limits=Limits(wall_seconds=60), hide=[root / "hw1"]) as sandbox:
        again = grade_batch(
            Keys(root / "hw1" / "keys"),
            root / "subs",
            root / "grades",
            sandbox=sandbox,
            reveal=False,
        )
    assert again.skipped == N and again.graded == 0
    assert [r["score"] for r in again.results] == [r["score"] for r in summary.results]


def test_a_submission_without_a_key_or_notebook_is_a_recorded_error(graded, tmp_path: Path):
    root, _, _, _ = graded
    subs = tmp_path / "subs"
    (subs / "stranger").mkdir(parents=True)
    (subs / "stranger" / "hw1.ipynb").write_text("{}")
    (subs / "s00").mkdir()
    with Sandbox(limits=Limits(wall_seconds=30), hide=[root / "hw1"]) as sandbox:
        summary = grade_batch(
            Keys(root / "hw1" / "keys"), subs, tmp_path / "grades", sandbox=sandbox, reveal=False
        )
    errors = {r["student_id"]: r["error"] for r in summary.results}
    assert "no key for student 'stranger'" in errors["stranger"]
    assert "no hw1.ipynb submitted" in errors["s00"]


class Watched:
    """The real sandbox, telling when its first run starts."""

    def __init__(self, box: Sandbox):
        self.box, self.ran = box, threading.Event()

    def run(self, notebook, plan):
        self.ran.set()
        return self.box.run(notebook, plan)


def test_a_new_gradebook_opens_while_the_first_submissions_run(graded, tmp_path, monkeypatch):
    """Nothing can be unchanged in a gradebook not made yet: the submissions start first
    (here the gradebook waits until one has), and every one is recorded once it opens.
    One that cannot open then records nothing, and the batch says why."""
    from autograder.semester import gradebook

    root, summary, _, _ = graded
    keys = Keys(root / "hw1" / "keys")
    opened = gradebook.Gradebook.__init__
    with Sandbox(limits=Limits(wall_seconds=60), hide=[root / "hw1"]) as box:
        runner = Watched(box)

        def after_a_run(self, *args, **kwargs):
            assert runner.ran.wait(60), "the gradebook opened before any submission ran"
            opened(self, *args, **kwargs)

        monkeypatch.setattr(gradebook.Gradebook, "__init__", after_a_run)
        again = grade_batch(keys, root / "subs", tmp_path / "grades", sandbox=runner, reveal=False)
        assert again.graded + again.errors == N and again.skipped == 0
        assert [r["score"] for r in again.results] == [r["score"] for r in summary.results]

        def full(self, *args, **kwargs):
            raise gradebook.GradebookError("the disk is full")

        monkeypatch.setattr(gradebook.Gradebook, "record_release", full)
        subs = tmp_path / "two"
        for sid in sorted(p.name for p in (root / "subs").iterdir())[:2]:
            shutil.copytree(root / "subs" / sid, subs / sid)
        with pytest.raises(gradebook.GradebookError, match="the disk is full"):
            grade_batch(keys, subs, tmp_path / "none", sandbox=Watched(box), reveal=False)
    assert not list((tmp_path / "none").glob("*/results.json"))


def test_a_sandbox_slot_runs_the_next_submission_while_the_last_is_judged(
    graded, tmp_path, monkeypatch
):
    """One job: the first result's judgement waits until the second submission has started
    in the sandbox, which it can only do if the slot did not wait for that judgement.
    Every result is then what the batch above recorded."""
    from autograder.semester import batch

    root, summary, _, _ = graded
    started, judged = [], batch.judge

    class Counted(Watched):
        def run(self, notebook, plan):
            started.append(notebook)
            return super().run(notebook, plan)

    def slow_judge(*args, **kwargs):
        if len(started) == 1:
            deadline = time.monotonic() + 30
            while len(started) < 2:
                assert time.monotonic() < deadline, "the next run waited for the judgement"
                time.sleep(0.01)
        return judged(*args, **kwargs)

    monkeypatch.setattr(batch, "judge", slow_judge)
    with Sandbox(limits=Limits(wall_seconds=60), hide=[root / "hw1"]) as box:
        again = grade_batch(
            Keys(root / "hw1" / "keys"),
            root / "subs",
            tmp_path / "grades",
            sandbox=Counted(box),
            jobs=1,
            reveal=False,
        )
    assert len(started) == N and again.graded + again.errors == N
    assert [r["score"] for r in again.results] == [r["score"] for r in summary.results]


@pytest.fixture(scope="module")
def solution_sandbox():
    with Sandbox(limits=Limits(wall_seconds=90, cpu_seconds=90)) as sandbox:
        yield sandbox


@pytest.mark.parametrize("aid", bank.load().assignment_ids())
def test_every_assignments_solutions_earn_every_autograded_point(aid, tmp_path, solution_sandbox):
    """The bank end to end: each question's key, worked answers, reference code and checks
    agree, through the real release, sandbox and grader (one student per assignment)."""
    roster = parse("student_id,name,email\nsol,Sol Ution,sol@x\n")
    release(
        bank.load().assignment(aid),
        roster,
        secret=b"e" * 32,
        out=tmp_path / "a",
        with_solutions=True,
    )
    summary = grade_batch(
        Keys(tmp_path / "a" / "keys"),
        tmp_path / "a" / "solutions",
        tmp_path / "grades",
        sandbox=solution_sandbox,
        reveal=False,
    )
    (result,) = summary.results
    assert not result["error"] and not result["cell_errors"], result["error"]
    lost = [
        (v["variable"], v["status"], v["feedback"][:300])
        for v in _auto(result)
        if v["score"] < v["points"] - 1e-9
    ]
    assert not lost
