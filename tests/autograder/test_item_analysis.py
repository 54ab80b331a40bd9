"""Item statistics against a hand computation: 6 students, 3 one-point items.

student  i1 i2 i3  total          item 1: x = 1 1 1 0 1 0, rest = 2 1 1 1 0 0
s1        1  1  1    3
s2        1  1  0    2            facility 4/6
s3        1  0  1    2            cov(x, rest) = 4/6 - (2/3)(5/6) = 1/9
s4        0  1  0    1            var x = 2/9, var rest = 7/6 - 25/36 = 17/36
s5        1  0  0    1            discrimination = (1/9) / sqrt(2/9 * 17/36) = 2/sqrt(34)
s6        0  0  0    0            item-total: cov = 8/6 - 1 = 1/3, var total = 11/12,
                                    r = (1/3) / sqrt(2/9 * 11/12) = sqrt(6/11)
efficiency: sorted x = 0 0 1 1 1 1, sorted rest = 0 0 1 1 1 2: cov_max = 5/6 - 10/18 =
5/18, efficiency = (1/9) / (5/18) = 2/5
alpha: item variances (n - 1) 4/15, 3/10, 4/15; total variance 5.5/5 = 1.1;
alpha = 3/2 (1 - (5/6) / 1.1) = 4/11
quintiles of item 1 by rest (fifths of 2, 1, 1, 1, 1 students): s5 s6 | s2 | s3 | s4 | s1
-> 1/2, 1, 1, 0, 1
"""

from __future__ import annotations

import math

import pytest

from autograder.analysis.item_analysis import EFFICIENCY_FLOOR, analyse, wilson

TABLE = {
    "s1": (1, 1, 1),
    "s2": (1, 1, 0),
    "s3": (1, 0, 1),
    "s4": (0, 1, 0),
    "s5": (1, 0, 0),
    "s6": (0, 0, 0),
}


def _doc(sid, row, misconception=None):
    parts = []
    for j, s in enumerate(row, start=1):
        status = "correct" if s else ("misconception" if misconception and j == 2 else "wrong")
        verdict = {"part": f"p{j}", "variable": f"q{j}_x", "points": 1.0, "score": float(s),
                   "status": status, "misconception": "GiB as GB" if status == "misconception"
                   else None}  # fmt: skip
        parts.append({"question": f"topic/q{j}", "index": j, "verdict": verdict})
    pending = {"part": "why", "variable": "", "points": 2.0, "score": None, "status": "pending",
               "misconception": None}  # fmt: skip
    parts.append({"question": "topic/q1", "index": 1, "verdict": pending})
    return {"student_id": sid, "parts": parts, "error": None}


def test_the_definitions_match_the_hand_computation():
    stats = analyse([_doc(s, row, misconception=s == "s3") for s, row in TABLE.items()])
    assert stats.n_students == 6 and [i.item for i in stats.items] == ["Q1 q1_x", "Q2 q2_x",
                                                                        "Q3 q3_x"]  # fmt: skip
    first = stats.items[0]
    assert first.facility == pytest.approx(4 / 6)
    assert first.discrimination == pytest.approx(2 / math.sqrt(34))
    assert first.item_total == pytest.approx(math.sqrt(6 / 11))
    assert first.efficiency == pytest.approx(2 / 5)
    assert first.quintiles == pytest.approx((0.5, 1, 1, 0, 1))
    assert (first.facility_low, first.facility_high) == pytest.approx(wilson(4, 6))
    assert stats.alpha == pytest.approx(4 / 11)
    assert stats.items[1].misconceptions == {"GiB as GB": pytest.approx(1 / 6)}
    assert all(i.part != "why" for i in stats.items)  # pending for a person: left out


def test_wilson_interval_by_hand():
    # p = 4/6, z = 1.96: centre (p + z²/12) / (1 + z²/6), half-width
    # z sqrt(p(1-p)/6 + z²/144) / (1 + z²/6)
    z = 1.959963984540054
    p = 4 / 6
    centre = (p + z * z / 12) / (1 + z * z / 6)
    half = z * math.sqrt(p * (1 - p) / 6 + z * z / 144) / (1 + z * z / 6)
    assert wilson(4, 6) == pytest.approx((centre - half, centre + half))


def test_flags_name_their_rule():
    # item 1: everybody; items 2 and 3: those who get one miss the other, so each goes
    # against the rest of the assignment
    rows = {"s1": (1, 1, 0), "s2": (1, 1, 0), "s3": (1, 1, 0), "s4": (1, 0, 1), "s5": (1, 0, 1),
            "s6": (1, 0, 0)}  # fmt: skip
    everybody, second, _ = analyse([_doc(s, r) for s, r in rows.items()]).items
    assert everybody.flags == ("everybody gets it (facility 1)",)
    assert everybody.discrimination is None  # no variance: no correlation
    assert second.discrimination < 0 and second.efficiency < EFFICIENCY_FLOOR
    assert second.flags == (
        "negative discrimination: stronger students do worse on it",
        f"discriminative efficiency {100 * second.efficiency:.0f} % < 15 % (Moodle's rule)",
    )


def test_a_notebook_that_did_not_run_says_nothing_of_the_items():
    docs = [_doc(s, row) for s, row in TABLE.items()]
    broken = {**_doc("s7", (0, 0, 0)), "error": "timed out after 60 s"}
    assert analyse([*docs, broken]).items[0].facility == pytest.approx(4 / 6)


def test_scalegrade_stats_reads_a_gradebook(tmp_path):
    """`scalegrade stats` on a gradebook: the item table, alpha and the attribution of a
    simulated cohort (scalegrade/cohort.py) released to 120 students."""
    from click.testing import CliRunner

    from autograder.grading.keys import Keys
    from autograder.semester.gradebook import Gradebook
    from generator import bank
    from generator.release import release
    from generator.roster import parse
    from scalegrade import cohort
    from scalegrade.cli import main

    hw = bank.load().assignment("dl/hw1")
    roster = parse("student_id,name,email\n" + "".join(f"s{i},S {i},s{i}@x\n" for i in range(120)))
    release(hw, roster, secret=b"q" * 32, out=tmp_path / "hw")
    keys = Keys(tmp_path / "hw" / "keys")
    graded, _ = cohort.answered(hw, roster, secret=b"q" * 32)
    book = Gradebook(f"sqlite:///{tmp_path / 'gradebook.sqlite'}")
    book.record_release(keys.release, keys.folder, tmp_path, reveal=False)
    for result in graded:
        book.record("dl/hw1", result)
    book.close()
    done = CliRunner().invoke(main, ["stats", "dl/hw1", "--grades", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "dl/hw1: 120 students, Cronbach's alpha" in done.output
    assert "Q1 q1_n_params" in done.output and "fairness:" in done.output
