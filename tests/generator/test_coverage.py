"""The bank against the notes: every exercise and written-exam question of both notes is
covered by a question, or has its reason written down."""

from __future__ import annotations

import pytest

from course_config import COURSES
from generator.bank import EXAM, EXERCISE, BankError, cited, coverage, notes_items, reasons
from generator.question import discover, load


def test_the_notes_items_are_read_from_the_notes():
    # 000: Exercises 1-15 and a four-question exam; 001: Exercises 1-11 and four questions
    tdlsm, dl = notes_items(COURSES["tdlsm"]), notes_items(COURSES["dl"])
    assert [i.number for i in tdlsm if i.kind == EXERCISE] == list(range(1, 16))
    assert [i.number for i in dl if i.kind == EXERCISE] == list(range(1, 12))
    for items in (tdlsm, dl):
        exam = [i for i in items if i.kind == EXAM]
        assert [i.points for i in exam] == [4, 6, 5, 5]  # the notes' points, 20 in all
    assert tdlsm[12].title == "Laying out a 175B model"
    assert dl[6].title == "Complete budget (the capstone lab)"


def test_refs_name_items_in_the_notes_words():
    assert cited("§3.2, Proposition 3.7; written exam Q1") == {(EXAM, 1)}
    assert cited("Exercise 6(c); Exercise 11") == {(EXERCISE, 6), (EXERCISE, 11)}
    assert cited("§6.2, §6.3") == set()


def test_every_item_is_covered_or_has_a_reason():
    cov = coverage()
    missing = [r.item.key for r in cov.rows if not r.ok]
    assert missing == []
    assert cov.unknown == [] and cov.stale_reasons == []


def test_an_item_nobody_covers_is_reported_and_a_reason_clears_it():
    questions = [q for q in (load(f) for f in discover()) if q.id != "budgets/model-budget"]
    cov = coverage(questions, why={})
    (row,) = [r for r in cov.rows if r.item.key == "000 Exercise 1"]
    assert not row.ok and not cov.ok
    cov = coverage(questions, why={"000 Exercise 1": "taught on the board"})
    (row,) = [r for r in cov.rows if r.item.key == "000 Exercise 1"]
    assert row.ok and row.reason == "taught on the board"


def test_a_reason_for_a_covered_item_is_reported_as_stale():
    cov = coverage(why={"000 Exercise 1": "old reason", "000 Exercise 77": "typo"})
    assert cov.stale_reasons == [
        "coverage.yaml: '000 Exercise 1' is covered",
        "coverage.yaml: '000 Exercise 77' is not an item",
    ]


def test_a_citation_of_an_item_the_notes_lack_is_reported():
    q = load(discover()[0])
    fake = q.spec.source.model_copy(update={"ref": "Exercise 99"})
    q.spec = q.spec.model_copy(update={"source": fake})
    cov = coverage([q], why={})
    notes = q.spec.source.notes
    assert cov.unknown == [
        f"templates/{q.id}: cites {notes} Exercise 99, which the notes do not have"
    ]


def test_reasons_must_be_written(tmp_path):
    (tmp_path / "coverage.yaml").write_text('uncovered: {"001 Exercise 11": ""}\n')
    with pytest.raises(BankError, match="written reason"):
        reasons(tmp_path / "coverage.yaml")


def test_unreadable_notes_name_the_file_and_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("SCALEGRADE_NOTES", str(tmp_path))
    with pytest.raises(BankError, match=r"000_.*\.txt: cannot read .* \$SCALEGRADE_NOTES"):
        notes_items(COURSES["tdlsm"])
