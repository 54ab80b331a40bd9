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


def _keyed(key: float, *misconceptions: float):
    known = tuple(SimpleNamespace(value=m) for m in misconceptions)
    return SimpleNamespace(
        value=key, misconceptions=known, tolerance=Tolerance(rel=0.01), unit="", si_unit=""
    )


def test_plausible_earlier_answers_are_slips_or_declared_misconceptions():
    assert PLAUSIBLE_FACTOR == 10  # the order of magnitude (a slip), justified in answers.py
    seven = _keyed(7.0)  # 000 Ex. 7: the best segment length, sqrt(48) = 6.9
    assert plausible(9.0, seven) and plausible(0.71, seven) and plausible(-2.0, _keyed(-1.0))
    assert not plausible(71.0, seven) and not plausible(0.69, seven)
    assert not plausible(0.0, seven) and not plausible(1.0, _keyed(0.0))
    assert not plausible(-7.0, seven)
    # a declared misconception carries at any distance: per-GPU for total on 256 GPUs
    per_gpu = _keyed(1.0e9, 256e9)
    assert plausible(256e9, per_gpu) and not plausible(300e9, per_gpu)
