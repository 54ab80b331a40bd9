"""Regrade after a code part's checks changed: those probes run again in the sandbox, on
the notebook graded (its path and SHA-256 are in the attempt), and nothing else does."""

from __future__ import annotations

import shutil

from autograder.grading.keys import Keys
from autograder.sandbox import Limits, Sandbox
from autograder.semester.batch import grade_batch
from autograder.semester.gradebook import Gradebook
from autograder.semester.regrade import diff, regrade
from generator import bank
from generator.rekey import rekey
from generator.release import release
from generator.roster import parse
from tests.banks import copy_bank

CHECKS = "templates/posttraining/dpo-loss-code/checks.py"
SECRET = b"r" * 32


def test_changed_checks_run_their_probes_again_and_only_them(tmp_path):
    b = copy_bank(tmp_path / "bank")
    (b.root / "assignments" / "tdlsm" / "dpo.yaml").write_text(
        "title: dpo\nkind: homework\nnotebook: dpo\nquestions:\n"
        "  - question: posttraining/dpo-loss-code\n  - question: budgets/model-budget\n",
        encoding="utf-8",
    )
    roster = parse("student_id,name,email\nana,Ana,a@x\nben,Ben,b@x\n")
    out = tmp_path / "dpo"
    release(b.assignment("tdlsm/dpo"), roster, secret=SECRET, out=out, with_solutions=True)
    subs = tmp_path / "subs"
    for sid in ("ana", "ben"):
        (subs / sid).mkdir(parents=True)
        shutil.copy(out / "solutions" / sid / "dpo.ipynb", subs / sid)
    url = f"sqlite:///{tmp_path / 'gradebook.sqlite'}"

    def sandbox(keys):
        return Sandbox(limits=Limits(wall_seconds=60), hide=[out], preload=keys.preload)

    keys = Keys(out / "keys")
    with sandbox(keys) as box:
        grade_batch(keys, subs, tmp_path / "grades", sandbox=box, db_url=url, reveal=False)
    book = Gradebook(url)
    before = {r["student_id"]: r for r in book.results("tdlsm/dpo")}

    # the checks gain a comment: their SHA-256 changes, the probe must run again
    checks = b.root / CHECKS
    checks.write_text(checks.read_text(encoding="utf-8") + "\n# reviewed\n", encoding="utf-8")
    changed = rekey(
        bank.load(b.root, fresh=True).assignment("tdlsm/dpo"),
        out,
        secret=SECRET,
        submitted={"ana", "ben"},
    )
    assert changed.changes == {
        "posttraining/dpo-loss-code": ["code dpo_loss: the checks (2 of 2 students)"]
    }
    (subs / "ben" / "dpo.ipynb").unlink()  # ben's notebook is gone: he cannot be rerun
    opened = []

    def open_runner(k):
        opened.append(k.folder)
        return sandbox(k)

    done = regrade(book, "tdlsm/dpo", open_runner=open_runner)
    assert (done.rerun, done.from_harvest, done.unchanged) == (1, 0, 0)
    assert len(opened) == 1  # one sandbox, opened because a probe had to run
    (error,) = done.errors
    assert error.startswith("ben: its checks changed, and the notebook graded")
    after = {r["student_id"]: r for r in book.results("tdlsm/dpo")}
    assert after["ana"]["score"] == before["ana"]["score"] and done.diff == []
    assert after["ben"] == before["ben"]  # left as it was
    (older, newer) = book.attempts("tdlsm/dpo", "ana")
    assert older.key_sha256 != newer.key_sha256 and newer.checks_json != older.checks_json
    book.close()


def test_the_diff_names_each_part_that_moved():
    def doc(score, status):
        verdict = {"part": "a", "score": score, "status": status}
        return {"parts": [{"question": "q", "verdict": verdict}]}

    assert diff("ana", doc(0.0, "wrong"), doc(1.0, "correct"))[0].new_status == "correct"
    assert diff("ana", doc(1.0, "correct"), doc(1.0, "correct")) == []
