"""Variants: seeded per student by HMAC, reproducible, different, keys from the core."""

from __future__ import annotations

import hashlib
import hmac

import pytest

import costmodel
from contract import Tolerance
from generator import bank
from generator.variant import build, seed_for, show_answer, unit_suffix

Q = "budgets/model-budget"
SECRET = b"a-test-secret-of-32-bytes-length"


def variant(student: str, secret: bytes = SECRET, assignment: str = "hw1"):
    return build(
        bank.load().question(Q),
        secret=secret,
        course="tdlsm",
        assignment=assignment,
        student=student,
        index=1,
        default_tolerance=Tolerance(rel=0.01),
    )


def test_seed_is_hmac_sha256_of_course_assignment_question_student():
    expected = hmac.new(SECRET, b"tdlsm/hw1/budgets/model-budget/ana", hashlib.sha256).digest()
    assert seed_for(SECRET, "tdlsm", "hw1", Q, "ana") == expected
    assert variant("ana").seed == expected.hex()


def test_same_inputs_same_variant_and_other_inputs_other_numbers():
    assert variant("ana") == variant("ana")
    params = {str(variant(f"s{i}").params) for i in range(50)}
    assert len(params) >= 45  # 50 students, (almost) all different numbers
    assert (
        variant("ana").params != variant("ana", secret=b"another-secret-of-32-bytes-long!").params
    )
    assert variant("ana").params != variant("ana", assignment="hw2").params


def test_the_key_is_the_cost_model_applied_to_the_students_numbers():
    v = variant("ana")
    p = v.params
    keys = {k.id: k for k in v.answers}
    n = costmodel.evaluate(
        "transformer.param_count", n_layers=p["n_layers"], d_model=p["d_model"], vocab=p["vocab"]
    )
    assert keys["n_params"].value == n
    assert keys["states_gb"].value == 16 * n  # 000 Prop 1.2
    assert keys["states_gb"].display_value == pytest.approx(16 * n / 1e9)
    assert keys["total_gb"].value == keys["states_gb"].value + keys["activations_gb"].value
    assert keys["total_gb"].depends_on == ("activations_gb", "states_gb")
    assert keys["states_gb"].depends_on == ("n_params",)


def test_constraints_hold_in_every_variant():
    for i in range(100):
        p = variant(f"s{i}").params
        assert p["d_model"] % p["n_heads"] == 0
        assert p["d_model"] // p["n_heads"] in (64, 96, 128)


def test_misconceptions_are_precomputed_wrong_answers():
    v = variant("ana")
    states = next(k for k in v.answers if k.id == "states_gb")
    wrong = {m.name: m.value for m in states.misconceptions}
    n = next(k for k in v.answers if k.id == "n_params").value
    assert wrong["twelve bytes per parameter"] == 12 * n
    assert wrong["bf16 weights only"] == 2 * n
    assert wrong["gib_as_gb"] == pytest.approx(16 * n * 1e9 / 2**30)


def test_prompt_shows_the_numbers_but_never_the_answers():
    v = variant("ana")
    assert f"L = {v.params['n_layers']}" in v.prompt
    for k in v.answers:
        assert show_answer(k) not in v.prompt
        assert show_answer(k) in v.solution  # the worked solution gives every answer
    assert "Prop 1.2" in v.solution


def test_a_parts_unit_is_shown_once():
    # "in GB" in the prompt already tells the unit; "[GB]" is added only where it does not
    assert unit_suffix("(b) Model states, in GB", "GB") == ""
    assert unit_suffix("(b) Model states per GPU", "GB") == " [GB]"
    assert unit_suffix("(c) The link, in GB/s", "GB") == " [GB]"  # another unit
    assert unit_suffix("(d) The bubble, in %", "%") == ""
    assert unit_suffix("(e) The count", "") == ""
