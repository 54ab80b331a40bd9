"""The rules of an answer that generator, grader and self-test share: its value from the
answer graph, the tolerance, the unit factor, the plausibility bound."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import contract
from contract import PLAUSIBLE_FACTOR, Tolerance, evaluate, plausible, unit_factor, within


def node(**kw):
    return SimpleNamespace(**({"formula": None, "args": {}, "output": None, "expr": None} | kw))


def test_an_expression_node_over_params_and_answers():
    value, args = evaluate(node(expr="states + activations"), {"states": 2.0, "activations": 3.0})
    assert value == 5.0 and args == {}


def test_a_formula_node_resolves_its_arguments_and_takes_overrides():
    # 000 Prop 1.2: 16 bytes per parameter under mixed-precision Adam
    n = node(formula="memory.model_state_bytes", args={"n_params": "n"})
    value, args = evaluate(n, {"n": 7e9})
    assert value == pytest.approx(112e9) and args == {"n_params": 7e9}
    wrong, args = evaluate(n, {"n": 7e9}, overrides={"bytes_per_param": 12})
    assert wrong == pytest.approx(84e9) and args["bytes_per_param"] == 12
    assert contract.value(n, {"n": 1e9}) == pytest.approx(16e9)


def test_a_choice_argument_is_a_literal_not_an_expression():
    n = node(formula="memory.zero_bytes_per_gpu", args={"n_params": "n", "n_gpus": 64, "stage": 3})
    assert evaluate(n, {"n": 6.4e10})[0] == pytest.approx(16 * 6.4e10 / 64)  # ZeRO-3: 16N/N_d


def test_the_unit_factor_is_pints():
    assert unit_factor("GB", "byte") == 1e9 and unit_factor("GiB", "byte") == 2**30
    assert unit_factor("days", "s") == 86400 and unit_factor("", "byte") == 1.0


def _answer(tol: Tolerance, unit="GB"):
    return SimpleNamespace(tolerance=tol, unit=unit, si_unit="byte")


def test_tolerances_relative_absolute_and_significant_figures():
    rel = _answer(Tolerance(rel=0.01))
    assert within(21.2e9, 21.0e9, rel) and not within(21.3e9, 21.0e9, rel)
    absolute = _answer(Tolerance(abs=0.5))  # in the asked unit, GB
    assert within(21.4e9, 21.0e9, absolute) and not within(21.6e9, 21.0e9, absolute)
    sig3 = _answer(Tolerance(sig=3))
    assert within(21.04e9, 21.0e9, sig3) and not within(21.06e9, 21.0e9, sig3)
    assert within(0.0, 0.0, sig3) and not within(1.0, 0.0, sig3)


def test_a_tolerance_is_exactly_one_rule_and_reads_as_a_ta_writes_it():
    with pytest.raises(ValueError, match="exactly one of rel, abs, sig"):
        Tolerance(rel=0.01, abs=1)
    with pytest.raises(ValueError):
        Tolerance(rel=1.5)
    assert Tolerance(rel=0.01).model_dump() == {"rel": 0.01}
    assert [str(Tolerance(rel=0.01)), str(Tolerance(abs=0.5)), str(Tolerance(sig=3))] == [
        "±1 %",
        "±0.5",
        "3 significant figures",
    ]


def test_plausible_earlier_answers_are_within_the_factor_of_their_key():
    assert PLAUSIBLE_FACTOR == 100
    assert plausible(99.0, 1.0) and plausible(0.011, 1.0) and plausible(-2.0, -1.0)
    assert not plausible(101.0, 1.0) and not plausible(0.009, 1.0)
    assert not plausible(0.0, 1.0) and not plausible(1.0, 0.0) and not plausible(-1.0, 1.0)
