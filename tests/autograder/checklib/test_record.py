"""A call's record (autograder/checklib/record.py): made once in the probe process, read
back in the trusted one whatever its plain data holds."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from autograder.checklib import Record


def _trip(rec: Record) -> Record:
    """Through JSON, as a record crosses from the probe process."""
    return Record.read(json.loads(json.dumps(rec.plain())))


def test_a_tensor_keeps_its_numbers_shape_and_dtype():
    rec = _trip(Record.of(torch.arange(6, dtype=torch.float32).reshape(2, 3), seconds=0.25))
    assert rec.ok and rec.type == "Tensor" and rec.dtype == "float32" and rec.shape == (2, 3)
    assert rec.array().tolist() == [[0, 1, 2], [3, 4, 5]] and rec.seconds == 0.25
    assert rec.array((6,)).shape == (6,) and rec.array((4,)) is None


def test_a_tuple_keeps_its_items_and_an_int_its_exact_value():
    rec = _trip(Record.of((np.ones(2), 7, "x", 10**400)))
    assert rec.item(0).array().tolist() == [1.0, 1.0]
    assert rec.item(1).number() == 7.0 and rec.item(1).integer == 7
    assert rec.item(2).array() is None and rec.item(2).text == "'x'"
    assert rec.item(3).integer == 10**400 and rec.item(3).number() is None
    assert not rec.item(4).ok and "not a tuple of 5" in rec.item(4).error


def test_nan_and_inf_cross_as_numbers():
    rec = _trip(Record.of(np.array([1.0, np.nan, -np.inf])))
    a = rec.array()
    assert a[0] == 1.0 and np.isnan(a[1]) and a[2] == -np.inf


def test_an_exception_is_the_record_of_the_call():
    rec = _trip(Record.of(ZeroDivisionError("x" * 1000), seconds=1.0))
    assert not rec.ok and rec.raised == "ZeroDivisionError" and rec.array() is None
    assert rec.error.startswith("ZeroDivisionError: xxx") and len(rec.error) == 300


def test_numbers_beyond_the_cap_are_counted_not_kept():
    rec = _trip(Record.of(np.zeros(100), keep=10))
    assert rec.size == 100 and rec.shape == (100,) and rec.array() is None


def test_gradients_name_what_is_missing():
    rec = _trip(Record.of(1.5).with_grad((Record.of(np.ones(3)), None), None))
    assert rec.gradient(0).array().tolist() == [1.0, 1.0, 1.0]
    assert rec.gradient(1, "unused").error == "unused"
    assert _trip(Record.of(1.5).with_grad(None, "no grad_fn")).gradient(0).error == "no grad_fn"


@pytest.mark.parametrize(
    "plain",
    [
        None, "x", [], 1.5,
        {"type": 3, "shape": [2], "values": [1.0], "size": 2},  # too few values
        {"type": "ndarray", "shape": [-1], "values": [], "size": 0},
        {"type": "ndarray", "shape": [1], "values": ["abc"], "size": 1},
        {"type": "ndarray", "shape": [1], "values": [10**400], "size": 1},
        {"type": "int", "integer": "zz", "seconds": 10**400, "items": "x", "grad": [5]},
    ],
)  # fmt: skip
def test_malformed_plain_data_reads_as_absent_numbers_never_raises(plain):
    rec = Record.read(plain)
    assert rec.array() is None and rec.number() is None
    assert rec.item(0).array() is None and rec.gradient(0).array() is None
    assert rec.returned()  # a message can always say what it was
