"""What a student's notebook shows of their key, and what needs no work: drawn again when a
draw gives a part away, and a failure of validate when no draw can be kept."""

from __future__ import annotations

import random

import pytest
import yaml

from generator import bank
from generator.leaks import numbers_in
from generator.validate import validate
from generator.variant import Variant, _context, _key_answer, build, giveaways, sample
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


def test_a_derived_parameter_equal_to_an_answer_fails_validation(tmp_path):
    mine = copy_bank(tmp_path / "bank")
    path = mine.templates / "budgets" / "model-budget" / "question.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["params"]["helper"] = {"expr": "16 * (12 * n_layers * d_model ** 2 + vocab * d_model)"}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    r = _report(mine.assignment("tdlsm/hw1"), "budgets/model-budget")
    # every draw prints the key in the Given cell: no variant can be built, and it says why
    assert r.variants == 0 and r.failures
    assert "the derived parameter helper" in r.failures[0] and "(printed" in r.failures[0]
    assert "constraint" in r.failures[0]


def test_a_draw_that_gives_a_part_away_is_drawn_again():
    # ring-vs-server: the storage ratio equals the given number of workers in about one
    # draw in eight (sampled alone); the variants students get never do
    q = bank.load().question("collectives/ring-vs-server")
    tol = bank.load().assignment("tdlsm/hw1").course.default_tolerance
    raw = 0
    for s in range(200):
        params, scope = sample(q, random.Random(s))
        ctx = _context(q, params)
        keys = [_key_answer(q, 1, a, scope, ctx, tol) for a in q.spec.answers]
        provisional = Variant(q.id, 1, "", "", "s", "", params, ctx["fmt"], tuple(keys), "", "")
        raw += any(kind == "no work" for _, kind, _ in giveaways(q, provisional))
    assert raw >= 10
    built = [
        build(
            q,
            secret=b"k",
            course="c",
            assignment="a",
            student=f"s{i}",
            index=1,
            default_tolerance=tol,
        )
        for i in range(200)
    ]
    assert not any(giveaways(q, v) for v in built)


def test_a_part_whose_point_is_a_given_number_says_so(tmp_path):
    # 000 Ex. 4: under 1F1B the first stage holds p micro-batches, p being given: the part
    # says why (guessable), and its draws are kept
    r = _report(bank.load().assignment("tdlsm/hw1"), "parallel/pipeline-sizing")
    assert r.ok and r.variants and not r.answers["mem_1f1b"].guessed
    # without the reason, no draw can be kept, and validation says what to do
    mine = copy_bank(tmp_path / "bank")
    path = mine.templates / "parallel" / "pipeline-sizing" / "question.yaml"
    spec = yaml.safe_load(path.read_text())
    for a in spec["answers"]:
        a.pop("guessable", None)
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    r = _report(mine.assignment("tdlsm/hw1"), "parallel/pipeline-sizing")
    assert r.variants == 0 and "the given n_stages (no work" in r.failures[0]
    assert "guessable" in r.failures[0]
    # a yes/no or a stage is a choice: its part says so too
    zero = _report(bank.load().assignment("tdlsm/hw1"), "memory/zero-stages")
    assert zero.ok and zero.answers["min_stage"].choice
