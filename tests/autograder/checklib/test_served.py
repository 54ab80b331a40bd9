"""What the probe process serves the student's code, safe by default
(autograder/checklib/served.py), and ``student.calls``' order: a check judges what the code
did, and state kept across calls cannot line up with what it expects."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.checklib import Draws, Logged
from autograder.grading.checks import local_student


def test_draws_serve_and_log_what_was_drawn_and_nothing_of_their_state():
    draws = Draws([1, 41, 0], 10, "10 draws per call")
    public = {name for name in dir(draws) if not name.startswith("_")}
    assert public == {"random", "uniform", "binomial", "choice"}  # methods only: no state
    first, second = draws.random(3), draws.uniform(size=(2, 2))
    assert np.array_equal(draws._drawn(), np.concatenate([first, second.ravel()]))
    with pytest.raises(ValueError, match="at most 10 draws per call in all"):
        draws.random(4)


def test_a_logged_callback_keeps_copies_of_what_it_was_given():
    average = Logged(lambda xs: np.mean(xs, axis=0))
    models = [np.ones(3), np.zeros(3)]
    assert average(models).tolist() == [0.5, 0.5, 0.5]
    models[0][:] = 7  # the caller changes its buffers afterwards: the log does not
    [(args, answer)] = average.calls
    assert args[0][0].tolist() == [1.0, 1.0, 1.0] and answer.tolist() == [0.5, 0.5, 0.5]


def test_calls_come_back_in_the_order_asked_whatever_order_they_were_made_in():
    made = []

    def square(x):
        made.append(x)
        return x * x

    student = local_student(square)
    try:
        orders = set()
        for _ in range(6):
            made.clear()
            recs = student.calls([(x,) for x in range(12)])
            assert [r.number() for r in recs] == [x * x for x in range(12)]
            orders.add(tuple(made))
        assert len(orders) > 1  # 12! orders: six runs in one order would be a fixed one
        made.clear()
        student.calls([(x,) for x in range(12)], shuffle=False)
        assert made == list(range(12))
    finally:
        student._channel.close()


def test_state_kept_across_calls_cannot_follow_the_order_asked():
    """A forgery that answers by call count (the k-th call gets the k-th expected answer)
    scores as the wrong code it is once the calls are shuffled."""
    expected = [x * x for x in range(12)]
    count = [0]

    def by_count(x):
        count[0] += 1
        return expected[count[0] - 1]

    student = local_student(by_count)
    try:
        recs = student.calls([(x,) for x in range(12)])
        right = sum(r.number() == e for r, e in zip(recs, expected, strict=True))
        assert right < 12
    finally:
        student._channel.close()
