"""The trusted half of the library (autograder/checklib/grading.py): properties, results
read without guards, comparisons that write the student's message."""

from __future__ import annotations

import numpy as np

from autograder.checklib import Property, Record, Result, check, expect_close, notes, share
from autograder.grading.checks import properties


def _rec(value) -> Record:
    return Record.read(Record.of(value).plain())


def test_a_property_clips_its_score_and_is_what_grade_returns():
    assert Property("x", 2, 1.5, "m").score == 1.0 and Property("x", 1, -1, "m").score == 0.0
    assert properties([Property("x", 2, 0.5, "m")]) == [
        {"name": "x", "weight": 2.0, "score": 0.5, "message": "m"}
    ]


def test_a_check_function_gives_a_named_weighted_property():
    @check("loss value", 2.0)
    def value(ok: bool):
        return ok, "fine" if ok else "not fine"

    assert value(True) == Property("loss value", 2.0, 1.0, "fine")
    assert value(False).score == 0.0 and (value.name, value.weight) == ("loss value", 2.0)


def test_expect_close_says_what_is_wrong_never_the_expected_value():
    ref = np.array([1.0, 2.0])
    assert expect_close(_rec([1.0, 2.0 + 1e-12]), ref, what="the loss")
    assert expect_close(_rec([[1.0, 2.0]]), ref, what="the loss")  # any layout of as many
    cases = {
        "the loss: ValueError: bad": Record.of(ValueError("bad")),
        "the loss is a str ('ab'), not numbers": Record.of("ab"),
        "the loss is None, not numbers": Record.of(None),
        "the loss has shape (3,); expected (2,)": Record.of([1.0, 2.0, 3.0]),
        "the loss is not finite (nan)": Record.of([1.0, np.nan]),
        "the loss is off by a relative error of 0.5": Record.of([1.0, 3.0]),
    }
    for why, rec in cases.items():
        v = expect_close(Record.read(rec.plain()), ref, what="the loss")
        assert not v and v.why == why
        assert "2.0" not in v.why  # the expected value stays the grader's
    exact = expect_close(_rec([[1.0, 2.0]]), ref, what="x", exact_shape=True)
    assert exact.why == "x has shape (1, 2); expected (2,)"


def test_a_result_of_any_shape_reads_as_absent_records():
    for junk in (None, [], "x", {"value": "x"}, {"value": [None, 3]}):
        r = Result(junk)
        assert [rec.ok for rec in r.records("value", 2)] == [False, False]
        assert not r.record("stable").ok and r.part("a").record("b").missing
        assert len(r.parts("runs", 3)) == 3


def test_share_and_notes_summarise_verdicts():
    vs = [expect_close(_rec([1.0]), [1.0], "a"), expect_close(_rec([2.0]), [1.0], "b")]
    assert share(vs) == 0.5 and notes(vs) == "b is off by a relative error of 1"


def test_a_property_of_one_verdict_per_case_is_declared_in_one_statement():
    from autograder.checklib import Verdict, per_case

    symmetric = per_case("W is symmetric", 2.0, "W is symmetric.", " Make W = Wᵀ.")
    assert symmetric([Verdict(True), Verdict(True)]) == Property(
        "W is symmetric", 2.0, 1.0, "W is symmetric."
    )
    half = symmetric([Verdict(True), Verdict(False, "ring: W[0, 1] ≠ W[1, 0].")])
    assert (half.score, half.message) == (0.5, "ring: W[0, 1] ≠ W[1, 0]. Make W = Wᵀ.")
