"""`scalegrade validate`: every variant checked; failures are reported, not hidden."""

from __future__ import annotations

import yaml

from generator import bank
from generator.validate import FITS_OTHERS, validate
from tests.banks import copy_bank

BANK = bank.load()


def test_every_assignment_validates_for_many_students():
    for aid in BANK.assignment_ids():
        a = BANK.assignment(aid)
        for q, r in zip(a.questions, validate(a, 300), strict=True):
            assert r.ok, (aid, r.question, r.failures[:3])
            assert r.variants == 300
            # neighbours rarely share numbers; a code question's numbers are its warm-up (real
            # shapes, few of them) and its code is graded on per-student seeds
            share = 0.3 if q.spec.code else 0.5
            assert r.distinct >= share * r.variants, (aid, r.question, r.distinct)


def test_no_undeclared_answer_of_the_bank_barely_varies():
    """An answer whose key is within tolerance of the median draw's for most draws gives
    every student the same number: the bank's are the notes' constants (1/3 of a step for
    checkpointing, ln 2 for DPO at the start), each declared `guessable:` with its reason."""
    for aid in BANK.assignment_ids():
        for r in validate(BANK.assignment(aid), 100):
            for stats in r.answers.values():
                if stats.keys and not stats.choice and not stats.declared:
                    assert stats.fits_others <= FITS_OTHERS, (aid, r.question, stats.id)


def test_barely_varies_and_small_integers_are_counted():
    dpo = BANK.assignment("tdlsm/hw2")
    reports = {r.question: r for r in validate(dpo, 40)}
    weight = reports["posttraining/dpo-loss-code"].answers["start_weight"]
    assert weight.fits_others == 1.0 and weight.declared  # σ(0) = 1/2 for everyone
    norm = {r.question: r for r in validate(BANK.assignment("tdlsm/hw1"), 100)}
    # ln_flops / 4 FLOP/byte with ln_flops in {5, 6, 8, 10, 12}: whole for 8 and 12
    assert 0 < norm["systems/roofline-placement"].answers["i_norm"].small_integer < 100


def test_table_statistics_and_symbolic_recomputation():
    hw1 = BANK.assignment("tdlsm/hw1")
    report = validate(hw1, 50)[0]
    stats = report.answers["states_gb"]
    lo, mid, hi = stats.summary()
    assert 0 < lo <= mid <= hi
    assert stats.symbolic == 50  # 16N recomputed through the closed form for every student


def test_an_implausible_answer_fails_validation(tmp_path):
    # a question whose plausible range excludes most variants must fail, with the reason
    mine = copy_bank(tmp_path)
    folder = mine.templates / "budgets" / "model-budget"
    spec = yaml.safe_load((folder / "question.yaml").read_text())
    spec["answers"][1]["plausible"] = [0.1, 20]  # GB: most models have more states than that
    (folder / "question.yaml").write_text(yaml.safe_dump(spec))
    report = validate(mine.assignment("tdlsm/hw1"), 30)[0]
    assert not report.ok
    assert any("states_gb" in f and "outside the plausible [0.1, 20]" in f for f in report.failures)
