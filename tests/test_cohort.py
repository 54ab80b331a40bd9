"""A simulated cohort graded by the real comparison finds a question that is unfair by its
own making, and passes the fixed one (scalegrade/cohort.py, `validate --cohort`).

The unfair version is local-sgd-rounds as it was before `validate --cohort` found it:
(g) asked for the time saved, sync − sync/H, which for H >= 100 is within the 1 %
tolerance of the synchronous time itself, so the "never communicates" misconception
earned full marks on those draws and nothing on the others.
"""

from __future__ import annotations

from click.testing import CliRunner

from generator import bank
from scalegrade.cli import main
from scalegrade.cohort import simulate
from tests.banks import copy_bank

QUESTION = "templates/optimization/local-sgd-rounds/question.yaml"
FIXED = """  - id: comm_share
    prompt: "(g) The share of the synchronous communication time that local SGD still spends, in %"
    expr: "local_comm / sync_comm"
    si_unit: ""
    unit: "%"
    misconceptions:
      - name: local SGD never communicates
        value: "0"
"""
UNFAIR = """  - id: saved_comm
    prompt: "(g) The communication time local SGD saves over the run, in h"
    expr: "sync_comm - local_comm"
    si_unit: s
    unit: h
    misconceptions:
      - name: local SGD never communicates
        value: "sync_comm"
"""


def _bank(tmp_path, unfair: bool):
    b = copy_bank(tmp_path / "bank")
    path = b.root / QUESTION
    text = path.read_text(encoding="utf-8")
    assert FIXED in text
    if unfair:
        path.write_text(text.replace(FIXED, UNFAIR), encoding="utf-8")
        solution = path.parent / "solution.md"
        solution.write_text(
            solution.read_text(encoding="utf-8").replace("comm_share", "saved_comm"),
            encoding="utf-8",
        )
    (b.root / "assignments" / "tdlsm" / "one.yaml").write_text(
        "title: one\nkind: homework\nnotebook: one\nquestions:\n"
        "  - question: optimization/local-sgd-rounds\n",
        encoding="utf-8",
    )
    return bank.load(b.root, fresh=True)


def test_the_unfair_question_is_flagged_and_the_fixed_one_is_not(tmp_path):
    unfair = simulate(_bank(tmp_path / "u", unfair=True).assignment("tdlsm/one"), 300)
    flagged = {(e.part, e.parameter) for e in unfair.fairness.effects if e.flagged}
    assert ("saved_comm", "inner_steps") in flagged
    (effect,) = [e for e in unfair.fairness.effects if e.flagged and e.part == "saved_comm"]
    assert effect.points > 0  # the misconceived get it free for large H
    fixed = simulate(_bank(tmp_path / "f", unfair=False).assignment("tdlsm/one"), 300)
    assert not [e for e in fixed.fairness.effects if e.flagged]


def test_validate_prints_the_cohort(tmp_path):
    b = _bank(tmp_path, unfair=True)
    done = CliRunner().invoke(
        main,
        ["validate", "tdlsm/one", "--bank", str(b.root), "--students", "20", "--cohort", "300"],
    )
    assert "simulated cohort of 300, graded by the real comparison" in done.output
    assert "unfair optimization/local-sgd-rounds Q1 q1_saved_comm: its score depends on" in (
        done.output.replace("\n", "")
    )
