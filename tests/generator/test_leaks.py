"""What a student's notebook shows of their key, and what needs no work: validate's counts."""

from __future__ import annotations

import pytest
import yaml

from generator import bank
from generator.leaks import numbers_in
from generator.validate import validate
from tests.banks import copy_bank


def test_numbers_are_read_in_every_format_the_notebooks_write():
    text = "1,536 tokens, 0.0800, 3.12e+14 FLOP/s, 1.31 × 10⁹, 1.31 \\times 10^{9}, 42 GB"
    assert numbers_in(text) == pytest.approx([1536, 0.08, 3.12e14, 1.31e9, 1.31e9])  # not 42
    assert numbers_in("Proposition 3.7 and §2.1, Exercise 13; q3_states_gb") == []


def _report(assignment, question):
    return next(r for r in validate(assignment, 60) if r.question == question)


def test_the_accumulation_question_prints_no_answer():
    # 000 Ex. 6: the Given cell printed a derived global batch equal to answer (a)
    r = _report(bank.load().assignment("tdlsm/hw1"), "parallel/accumulation-sharding")
    assert all(not s.leaked for s in r.answers.values())


def test_a_derived_parameter_equal_to_an_answer_is_reported(tmp_path):
    mine = copy_bank(tmp_path / "bank")
    path = mine.templates / "budgets" / "model-budget" / "question.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["params"]["helper"] = {"expr": "16 * (12 * n_layers * d_model ** 2 + vocab * d_model)"}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    r = _report(mine.assignment("tdlsm/hw1"), "budgets/model-budget")
    leaked = r.answers["states_gb"].leaked
    assert len(leaked) == r.variants and "the derived parameter helper" in leaked[0]


def test_keys_of_zero_or_one_or_a_given_number_are_counted():
    # 000 Ex. 4: under 1F1B the first stage holds p micro-batches, p being given
    r = _report(bank.load().assignment("tdlsm/hw1"), "parallel/pipeline-sizing")
    guessed = r.answers["mem_1f1b"].guessed
    assert len(guessed) == r.variants and "the given n_stages" in guessed[0]
    # a yes/no or a stage is a choice: guessable by its format, not counted
    zero = _report(bank.load().assignment("tdlsm/hw1"), "memory/zero-stages")
    assert zero.answers["min_stage"].choice and not zero.answers["min_stage"].guessed
