"""The trusted comparison: units, tolerance, misconceptions, error carried forward, copies.

Keys come from real releases of tdlsm/hw1 and dl/hw1 (the generator's output is the contract);
harvests are written by hand as the sandbox would return them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import contract
from autograder.grading.compare import compare, shows_work
from autograder.grading.grade import copy_signals, grade_harvest
from contract import Misconception, Policy, Tolerance, within
from generator import bank
from generator.release import release
from generator.roster import parse

SECRET = b"a-test-secret-of-32-bytes-length"
RULES = dict(policy=Policy(ecf=True, ecf_credit=0.8), checks={}, reveal=False)


@pytest.fixture(scope="module")
def keys_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hw1") / "out"
    roster = parse("student_id,name,email\nana,Ana,a@x\nben,Ben,b@x\n")
    release(bank.load().assignment("tdlsm/hw1"), roster, secret=SECRET, out=out)
    return out / "keys"


@pytest.fixture(scope="module")
def ana(keys_dir):
    return contract.read_key(keys_dir / "ana.json")


def q(key, qid):
    return next(x for x in key.questions if x.id == qid)


def ans(question, aid):
    return next(a for a in question.answers if a.id == aid)


def number(x):
    return {"kind": "number", "value": x}


def text(s):
    return {"kind": "string", "value": s}


def verdict(question, aid, harvested, earlier=None, reveal=False):
    a = ans(question, aid)
    return compare(
        a,
        harvested,
        params=question.params,
        earlier=earlier or {},
        keys_by_id={x.id: x for x in question.answers},
        ecf=True,
        ecf_credit=0.8,
        reveal=reveal,
    )[0]


def test_a_bare_number_is_read_in_the_asked_unit_and_strings_are_converted(ana):
    budget = q(ana, "budgets/model-budget")
    states = ans(budget, "states_gb")  # 16N bytes, asked in GB (000 Prop 1.2)
    gb = states.value / 1e9
    assert verdict(budget, "states_gb", number(gb)).status == "correct"
    assert verdict(budget, "states_gb", text(f"{gb:.4f} GB")).status == "correct"
    assert verdict(budget, "states_gb", text(f"{states.value / 2**30:.4f} GiB")).status == "correct"
    assert verdict(budget, "states_gb", text(f"{gb * 1e3:.1f} MB")).status == "correct"


def test_gib_read_as_gb_is_the_named_misconception(ana):
    budget = q(ana, "budgets/model-budget")
    states = ans(budget, "states_gb")
    v = verdict(budget, "states_gb", number(states.value / 2**30))
    assert v.status == "misconception" and v.score == 0 and "GiB" in v.feedback
    v = verdict(budget, "states_gb", number(12 * ans(budget, "n_params").value / 1e9))
    assert v.misconception == "twelve bytes per parameter" and "16N" in v.feedback


def test_wrong_dimension_missing_and_unreadable_answers(ana):
    budget = q(ana, "budgets/model-budget")
    v = verdict(budget, "states_gb", text("3 s"))
    assert v.status == "wrong_unit" and "'3 s' is not bytes" in v.feedback and v.score == 0
    v = verdict(budget, "states_gb", text("21 GP"))
    assert v.status == "wrong_unit" and "unknown unit 'GP'" in v.feedback
    assert verdict(budget, "states_gb", {"kind": "missing"}).status == "missing"
    v = verdict(budget, "states_gb", {"kind": "unsupported", "type": "AlwaysEqual"})
    assert v.status == "unreadable" and "AlwaysEqual" in v.feedback
    assert verdict(budget, "states_gb", number("nan")).status == "unreadable"


def test_error_carried_forward_along_the_answer_graph(ana):
    budget = q(ana, "budgets/model-budget")
    n = ans(budget, "n_params").value
    act = ans(budget, "activations_gb").value
    wrong_states = 12 * n  # a misconception in (b) ...
    earlier = {
        "n_params": (n, True),
        "states_gb": (wrong_states, False),
        "activations_gb": (act, True),
    }
    # ... then (d) = their (b) + (c): carried credit, 0.8 of the points
    v = verdict(budget, "total_gb", number((wrong_states + act) / 1e9), earlier)
    assert v.status == "carried" and v.score == pytest.approx(0.8 * v.points)
    assert "q1_states_gb" in v.feedback
    # an implausible (b) carries nothing: 0 bytes of model states
    earlier["states_gb"] = (0.0, False)
    v = verdict(budget, "total_gb", number(act / 1e9), earlier)
    assert v.status == "wrong" and v.score == 0
    # orders of magnitude off carries nothing either
    earlier["states_gb"] = (wrong_states * 1e4, False)
    v = verdict(budget, "total_gb", number((wrong_states * 1e4 + act) / 1e9), earlier)
    assert v.status == "wrong"


def test_carried_credit_through_a_costmodel_formula(ana):
    budget = q(ana, "budgets/model-budget")
    blocks_only = 12 * budget.params["n_layers"] * budget.params["d_model"] ** 2
    earlier = {"n_params": (blocks_only, False)}
    v = verdict(budget, "states_gb", number(16 * blocks_only / 1e9), earlier)
    assert v.status == "carried"  # memory.model_state_bytes of their own N


def test_tolerances_relative_absolute_and_significant_figures(ana):
    a = ans(q(ana, "budgets/model-budget"), "states_gb")
    assert within(a.value * 1.009, a.value, a) and not within(a.value * 1.02, a.value, a)
    sig3 = a.model_copy(update={"tolerance": Tolerance(sig=3)})
    assert within(21.04e9, 21.0e9, sig3) and not within(21.06e9, 21.0e9, sig3)
    abs_half = a.model_copy(update={"tolerance": Tolerance(abs=0.5)})
    assert within(21.4e9, 21.0e9, abs_half) and not within(21.6e9, 21.0e9, abs_half)


def test_reveal_shows_the_key_only_when_the_policy_says(ana):
    budget = q(ana, "budgets/model-budget")
    assert verdict(budget, "states_gb", number(1.0)).expected == ""
    assert "GB" in verdict(budget, "states_gb", number(1.0), reveal=True).expected


def _honest_answers(key):
    return {a.variable: number(a.display_value) for x in key.questions for a in x.answers if a.ask}


def test_honest_answers_score_every_autograded_point_and_blank_scores_zero(ana):
    result = grade_harvest(ana, {"answers": _honest_answers(ana)}, **RULES)
    auto = [
        g.verdict
        for g in result.parts
        if g.verdict.status != "pending" and g.verdict.status != "code"
    ]
    assert auto and all(v.status == "correct" for v in auto)
    pending = [g.verdict for g in result.parts if g.verdict.score is None]
    assert pending and all(v.status == "pending" for v in pending)
    blank = grade_harvest(ana, {"answers": {}}, **RULES)
    assert blank.score == 0
    failed = grade_harvest(ana, None, error="timed out after 60 s", **RULES)
    assert failed.score == 0 and failed.error == "timed out after 60 s"


def test_another_students_answer_is_a_copy_signal_never_a_penalty(ana, keys_dir):
    ben = contract.read_key(keys_dir / "ben.json")
    answers = _honest_answers(ana)
    bens_states = ans(q(ben, "budgets/model-budget"), "states_gb")
    answers["q1_states_gb"] = number(bens_states.display_value)
    result = grade_harvest(ana, {"answers": answers}, **RULES)
    signals = copy_signals(result, ana, {"ana": ana, "ben": ben})
    assert len(signals) == 1 and "ben's answer" in signals[0]


def test_a_declared_misconception_is_matched_before_carried_credit(ana):
    # 000 Ex. 2 (budgets/accelerators-needed, tdlsm/hw1): forward-only C = 2ND in (b), then
    # accelerator-days from that C in (d).  (d) = their C / the key's flops_per_day is
    # carried work, and also (d)'s own declared misconception "forward pass only" (key / 3):
    # the misconception's verdict, feedback and credit (0 in the bank) win (issue 36 item 7).
    question = q(ana, "budgets/accelerators-needed")
    flops, days = ans(question, "train_flops"), ans(question, "accel_days")
    assert "train_flops" in days.depends_on
    b = verdict(question, "train_flops", number(flops.display_value / 3))
    assert b.status == "misconception" and "backward" in b.feedback
    earlier = {x.id: (x.value, True) for x in question.answers}
    earlier["train_flops"] = (flops.value / 3, False)
    forward_only = next(m for m in days.misconceptions if m.name == "forward pass only")
    d = verdict(question, "accel_days", number(days.display_value / 3), earlier)
    assert d.status == "misconception" and d.misconception == "forward pass only"
    assert d.feedback == forward_only.feedback
    assert d.score == pytest.approx(forward_only.credit * d.points)
    # the same value is carried work once the part declares no such misconception
    bare = days.model_copy(update={"misconceptions": ()})
    keys_by_id = {x.id: x for x in question.answers}
    got = compare(bare, number(days.display_value / 3), params=question.params,
                  earlier=earlier, keys_by_id=keys_by_id, ecf=True, ecf_credit=0.8,
                  reveal=False)[0]  # fmt: skip
    assert got.status == "carried" and got.score == pytest.approx(0.8 * got.points)
    assert "error carried forward" in got.feedback


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    out = tmp_path_factory.mktemp("dl-hw1") / "out"
    release(bank.load().assignment("dl/hw1"), parse("student_id,name,email\nana,Ana,a@x\n"),
            secret=SECRET, out=out)  # fmt: skip
    return q(contract.read_key(out / "keys" / "ana.json"), "counting/gpt2-budget")


@pytest.mark.parametrize("credit", [0.0, 0.25])
def test_the_reported_ratio_of_one_is_the_misconception_not_carried_credit(gpt2, credit):
    # The case reported in issue 36 item 7, on counting/gpt2-budget (dl/hw1, 001 Ex. 1):
    # N right in (a), the naive 2N for the forward FLOPs per token in (c) (plausible: within
    # 10x of the key 24Ld² + 4Lnd + 2Vd), then (d) = (c) / 2N = 1.0, which is (d)'s formula
    # over their own (c).  The bank's (d) declares no misconception; the report's version
    # of the question declares 1.0 as one, added here as it would be written in the key.
    n = ans(gpt2, "n_params").value
    ratio = ans(gpt2, "exact_over_2n")
    assert ratio.depends_on == ("forward_per_token", "n_params")
    assert not within(1.0, ratio.value, ratio)  # 1.0 is wrong for this variant (about 1.39)
    one = Misconception(
        name="forward FLOPs = 2N",
        value=1.0,
        feedback="2N counts two FLOPs per parameter: the attention scores and the head add more.",
        credit=credit,
    )
    declared = ratio.model_copy(update={"misconceptions": (one,)})
    keys = {x.id: x for x in gpt2.answers} | {"exact_over_2n": declared}
    earlier = {"n_params": (n, True), "block_flops": (ans(gpt2, "block_flops").value, True),
               "forward_per_token": (2 * n, False)}  # fmt: skip

    def grade(a):
        return compare(a, number(1.0), params=gpt2.params, earlier=earlier, keys_by_id=keys,
                       ecf=True, ecf_credit=0.8, reveal=False)[0]  # fmt: skip

    assert grade(ratio).status == "carried"  # undeclared: carried work, 0.8 of the point
    v = grade(declared)
    assert v.status == "misconception" and v.misconception == "forward FLOPs = 2N"
    assert v.feedback == one.feedback and "carried" not in v.feedback
    assert v.score == pytest.approx(credit * v.points)  # was 0.8 of the point before


# --- carried credit is for work (issue: points only for work) ---------------------------


def test_an_earlier_answer_handed_back_unchanged_carries_nothing(ana):
    # 000 Ex. 4: GPipe holds m micro-batches, so mem_gpipe = m_min: writing a wrong m_min
    # twice is not carried work
    question = q(ana, "parallel/pipeline-sizing")
    m_min = ans(question, "m_min")
    wrong = m_min.value + 3
    earlier = {x.id: (x.value, True) for x in question.answers}
    earlier["m_min"] = (wrong, False)
    v = verdict(question, "mem_gpipe", number(wrong), earlier)
    assert v.status == "wrong" and v.score == 0


def test_an_earlier_answer_more_than_ten_times_off_carries_nothing(ana):
    budget = q(ana, "budgets/model-budget")
    n = ans(budget, "n_params").value
    for factor, carried in ((9.0, True), (11.0, False)):  # contract.PLAUSIBLE_FACTOR = 10
        v = verdict(
            budget, "states_gb", number(16 * n * factor / 1e9), {"n_params": (n * factor, False)}
        )
        assert (v.status == "carried") is carried, factor


def test_carried_credit_needs_the_questions_answers_to_be_work():
    assert shows_work([1.0, 2.0, None]) and shows_work([3.0, None])
    assert not shows_work([1.0, None, None])  # fewer than half answered
    assert not shows_work([1.0, 1.0, 1.0])  # one number everywhere
    assert shows_work([None]) is False and shows_work([5.0]) is True


@pytest.mark.parametrize("aid", bank.load().assignment_ids())
def test_one_number_in_every_cell_earns_no_carried_credit(aid, tmp_path):
    roster = parse("student_id,name,email\nana,Ana,a@x\n")
    release(bank.load().assignment(aid), roster, secret=SECRET, out=tmp_path / "a")
    key = contract.read_key(tmp_path / "a" / "keys" / "ana.json")
    for constant in (1, 0, 2, 10):
        answers = {a.variable: number(constant) for x in key.questions for a in x.answers}
        result = grade_harvest(key, {"answers": answers}, **RULES)
        carried = [g.verdict for g in result.parts if g.verdict.status == "carried"]
        assert not carried, (aid, constant, [(v.variable, v.feedback) for v in carried])


# --- reading: never misread silently ------------------------------------------------


def test_a_decimal_comma_is_read_as_one(ana):
    budget = q(ana, "budgets/model-budget")
    states = ans(budget, "states_gb")
    french = f"{states.value / 1e9:.1f}".replace(".", ",")  # "26,8": how French students write
    v = verdict(budget, "states_gb", text(f"{french} GB"))
    assert v.status == "correct", v.feedback
    assert verdict(budget, "states_gb", text(french)).status == "correct"


def test_thousands_separators_are_read_and_an_ambiguous_comma_by_its_plausible_reading(ana):
    budget = q(ana, "budgets/model-budget")
    n = ans(budget, "n_params")  # about 1e8-1e10 parameters: 1,234,567,890
    assert verdict(budget, "n_params", text(f"{round(n.value):,}")).status == "correct"
    states = ans(budget, "states_gb")
    # "1,500" is 1500 or 1.500: the reading plausible for the key (within 10x) is taken
    a = states.model_copy(update={"value": 1.5e12})  # key 1,500 GB
    got = compare(a, text("1,500"), params={}, earlier={}, keys_by_id={}, ecf=False,
                  ecf_credit=0.8, reveal=False)[0]  # fmt: skip
    assert got.status == "correct"
    a = states.model_copy(update={"value": 1.5e9, "misconceptions": ()})  # key 1.5 GB
    assert compare(a, text("1,500"), params={}, earlier={}, keys_by_id={}, ecf=False,
                   ecf_credit=0.8, reveal=False)[0].status == "correct"  # fmt: skip
    a = states.model_copy(update={"value": 40e9, "misconceptions": ()})  # neither reading fits
    v = compare(a, text("1,500 GB"), params={}, earlier={}, keys_by_id={}, ecf=False,
                ecf_credit=0.8, reveal=False)[0]  # fmt: skip
    assert v.status == "unreadable" and "1500 without the comma, or 1.500" in v.feedback
    v = verdict(budget, "states_gb", text("1,2,3 GB"))
    assert v.status == "unreadable" and "commas only between groups of three" in v.feedback


def test_lower_case_units_that_mean_one_thing_are_read(ana):
    budget = q(ana, "budgets/model-budget")
    x = ans(budget, "states_gb").value
    assert verdict(budget, "states_gb", text(f"{x / 1e9:.4f} gb")).status == "correct"
    assert verdict(budget, "states_gb", text(f"{x / 2**30:.4f} gib")).status == "correct"
    assert verdict(budget, "states_gb", text(f"{x / 1e6:.1f} mb")).status == "correct"
