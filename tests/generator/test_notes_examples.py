"""Every question that declares its notes example reproduces the notes' numbers.

The stated values live in each question.yaml (``notes_example``), copied from the notes'
solution of the exercise it cites; the key is recomputed here from the notes' parameters.
"""

from __future__ import annotations

import shutil

import pytest
import yaml

from generator import bank
from generator.question import QuestionError, load
from generator.variant import notes_example_problems

WITH_EXAMPLE = [q for q in bank.load().all_questions() if q.spec.notes_example is not None]


def test_the_bank_carries_notes_examples():
    assert len(WITH_EXAMPLE) >= 1


@pytest.mark.parametrize("q", WITH_EXAMPLE, ids=lambda q: q.id)
def test_the_key_reproduces_the_notes(q):
    assert notes_example_problems(q) == []


def edited_copy(tmp_path, edit):
    """A copy of the Exercise 1 question with ``edit`` applied to its spec."""
    src = next(q for q in WITH_EXAMPLE if q.id == "budgets/model-budget").folder
    shutil.copytree(src, tmp_path / "q")
    spec = yaml.safe_load((tmp_path / "q" / "question.yaml").read_text())
    edit(spec)
    (tmp_path / "q" / "question.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True))


def test_a_wrong_stated_number_is_reported_with_the_answer_and_the_notes_value(tmp_path):
    edited_copy(tmp_path, lambda s: s["notes_example"]["answers"].update(states_gb=42))
    (problem,) = notes_example_problems(load(tmp_path / "q"))
    assert "states_gb = 20.97 GB" in problem and "the notes state 42" in problem


def test_a_notes_example_must_give_every_drawn_parameter(tmp_path):
    edited_copy(tmp_path, lambda s: s["notes_example"]["params"].pop("vocab"))
    with pytest.raises(QuestionError, match=r"notes_example\.params\.vocab: is missing"):
        load(tmp_path / "q")
