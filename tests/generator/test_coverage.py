"""The bank against the notes: every exercise and written-exam question of both notes is
covered by a question, or has its reason written down; the bank's index of the notes
agrees with the notes themselves where they are at hand ($SCALEGRADE_NOTES)."""

from __future__ import annotations

import pytest

from generator import bank
from generator.bank import BankError
from generator.coverage import (
    EXAM,
    EXERCISE,
    NotesItem,
    cited,
    coverage,
    index_items,
    index_problems,
    notes_items,
    reasons,
)
from tests.banks import copy_bank

BANK = bank.load()


def test_the_index_lists_every_item_of_both_notes():
    # 000: Exercises 1-15 and a four-question exam; 001: Exercises 1-11 and four questions
    tdlsm, dl = index_items(BANK, BANK.courses["tdlsm"]), index_items(BANK, BANK.courses["dl"])
    assert [i.number for i in tdlsm if i.kind == EXERCISE] == list(range(1, 16))
    assert [i.number for i in dl if i.kind == EXERCISE] == list(range(1, 12))
    for items in (tdlsm, dl):
        exam = [i for i in items if i.kind == EXAM]
        assert [i.points for i in exam] == [4, 6, 5, 5]  # the notes' points, 20 in all
        assert all(i.title and i.section for i in items)
    assert tdlsm[12].key == "000 Exercise 13" and "175B" in tdlsm[12].title


def test_refs_name_items_in_the_notes_words():
    assert cited("§3.2, Proposition 3.7; written exam Q1") == {(EXAM, 1)}
    assert cited("Exercise 6(c); Exercise 11") == {(EXERCISE, 6), (EXERCISE, 11)}
    assert cited("§6.2, §6.3") == set()


def test_every_item_is_covered_or_has_a_reason():
    cov = coverage(BANK)
    missing = [r.item.key for r in cov.rows if not r.ok]
    assert missing == []
    assert cov.unknown == [] and cov.stale_reasons == [] and cov.index_problems == []


def test_an_item_nobody_covers_is_reported_and_a_reason_clears_it():
    questions = [q for q in BANK.all_questions() if q.id != "budgets/model-budget"]
    cov = coverage(BANK, questions, why={})
    (row,) = [r for r in cov.rows if r.item.key == "000 Exercise 1"]
    assert not row.ok and not cov.ok
    cov = coverage(BANK, questions, why={"000 Exercise 1": "taught on the board"})
    (row,) = [r for r in cov.rows if r.item.key == "000 Exercise 1"]
    assert row.ok and row.reason == "taught on the board"


def test_a_reason_for_a_covered_item_is_reported_as_stale():
    cov = coverage(BANK, why={"000 Exercise 1": "old reason", "000 Exercise 77": "typo"})
    assert cov.stale_reasons == [
        "coverage.yaml: '000 Exercise 1' is covered",
        "coverage.yaml: '000 Exercise 77' is not an item",
    ]


def test_a_citation_of_an_item_the_notes_lack_is_reported():
    q = BANK.all_questions()[0]
    fake = q.spec.source.model_copy(update={"ref": "Exercise 99"})
    spec = q.spec.model_copy(update={"source": fake})
    copy = type(q)(q.id, q.folder, spec, q.files, q.code)
    cov = coverage(BANK, [copy], why={})
    assert cov.unknown == [
        f"templates/{q.id}: cites {fake.notes} Exercise 99, which the notes do not have"
    ]


def test_reasons_must_be_written(tmp_path):
    (tmp_path / "coverage.yaml").write_text('uncovered: {"001 Exercise 11": ""}\n')
    with pytest.raises(BankError, match="written reason"):
        reasons(tmp_path / "coverage.yaml")


# --- the index against the notes themselves -------------------------------------------

NOTES = """Some chapter

Exercises

1. ★ A first one. Compute something.
   1. a numbered step of its solution, not an exercise
2. ★★ A second one.

Projects and assessment

1. [Solo] A project, not an exercise.

Written exam (proposal)

1. Question (4 points). Explain.
2. Question (6 points). Compute.

Grading rubric (proposal)
"""


def test_the_notes_text_gives_its_items(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text(NOTES, encoding="utf-8")
    items = notes_items(path, "000")
    assert [i.key for i in items] == [
        "000 Exercise 1",
        "000 Exercise 2",
        "000 written exam Q1",
        "000 written exam Q2",
    ]
    assert [i.points for i in items if i.kind == EXAM] == [4, 6]


def test_an_index_that_disagrees_with_the_notes_is_named():
    notes = [NotesItem("000", EXERCISE, 1), NotesItem("000", EXAM, 1, points=4)]
    index = [NotesItem("000", EXERCISE, 1), NotesItem("000", EXERCISE, 2)]
    index.append(NotesItem("000", EXAM, 1, points=5))
    assert index_problems(index, notes, "notes/000.yaml") == [
        "notes/000.yaml: 000 Exercise 2 is in the index but not in the notes",
        "notes/000.yaml: 000 written exam Q1 is worth 4 points in the notes, 5 here",
    ]


def test_coverage_checks_the_index_against_notes_it_is_given(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    for course in BANK.courses.values():  # notes with exactly the index's items ...
        lines = ["Exercises", ""]
        lines += [f"{i.number}. ★ x" for i in index_items(BANK, course) if i.kind == EXERCISE]
        lines += ["", "Written exam (proposal)", ""]
        lines += [
            f"{i.number}. Question ({i.points} points). x"
            for i in index_items(BANK, course)
            if i.kind == EXAM
        ]
        (notes / course.notes_file).write_text("\n".join(lines) + "\n", encoding="utf-8")
    cov = coverage(BANK, notes_dir=notes)
    assert cov.ok and len(cov.checked_against) == 2
    tdlsm = notes / BANK.courses["tdlsm"].notes_file  # ... then one more exercise
    tdlsm.write_text(tdlsm.read_text().replace("Exercises\n\n", "Exercises\n\n16. ★ new\n"))
    cov = coverage(BANK, notes_dir=notes)
    assert not cov.ok
    assert cov.index_problems == [
        f"{BANK.notes / '000.yaml'}: 000 Exercise 16 is in the notes but not in the index"
    ]


def test_unreadable_notes_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(
        BankError, match=r"000_.*\.txt: cannot read the notes .* \$SCALEGRADE_NOTES"
    ):
        coverage(BANK, notes_dir=tmp_path)


def test_a_broken_index_names_the_file(tmp_path):
    mine = copy_bank(tmp_path / "bank", link_templates=True)
    (mine.notes / "001.yaml").write_text("exercises: [{number: 1, title: x}]\n")
    with pytest.raises(BankError, match=r"notes/001.yaml: exercises.0.section: Field required"):
        index_items(mine, mine.courses["dl"])
