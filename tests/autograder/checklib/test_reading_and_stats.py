"""The library's readers of plain data (checklib/reading.py) and its statistical tests
(checklib/stats.py); ``autograder.checktools``, what released checks import, is the same."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autograder import checklib, checktools
from autograder.checklib import (
    chi2_sf,
    chi2_test,
    close,
    count,
    is_slice_of,
    matrix,
    number,
    shape_note,
    shown,
    vector,
)


def test_chi_square_tail_matches_the_tables():
    """Critical values of χ² (NIST/SEMATECH e-Handbook, table 1.3.6.7.4)."""
    assert chi2_sf(3.841, 1) == pytest.approx(0.05, rel=1e-3)
    assert chi2_sf(11.070, 5) == pytest.approx(0.05, rel=1e-3)
    assert chi2_sf(20.515, 5) == pytest.approx(0.001, rel=1e-3)
    assert chi2_sf(2.0, 2) == pytest.approx(math.exp(-1.0), rel=1e-12)  # χ²₂ is exponential
    # the 95th percentiles with 1, 2, 3 and 10 degrees of freedom, to six digits (the
    # fairness tests' Wald statistics use these), and the tails' ends
    for x, dof in ((3.841459, 1), (5.991465, 2), (7.814728, 3), (18.307038, 10)):
        assert chi2_sf(x, dof) == pytest.approx(0.05, abs=1e-6)
    assert chi2_sf(0.0, 2) == 1.0 and chi2_sf(100.0, 2) == pytest.approx(math.exp(-50))


def test_chi_square_pools_cells_expecting_fewer_than_five():
    probs = np.array([0.5, 0.49, 0.005, 0.005])
    stat, dof, _ = chi2_test(np.array([50, 49, 1, 0]), probs)
    # the two tiny cells pooled, and their pool (1 expected) folded into the 49: 2 cells
    assert dof == 1
    assert stat == pytest.approx(0.0, abs=1e-12)


def test_numbers_read_only_from_plain_lists():
    assert vector([1, 2.5, "nan"]).tolist()[:2] == [1.0, 2.5]
    assert vector([1, [2]]) is None and vector("12") is None and vector([1, 2], n=3) is None
    assert matrix([[1, 2], [3, 4]]).shape == (2, 2)
    assert matrix([[1, 2], [3]]) is None and matrix([]) is None
    assert close(np.array([1.0, 2.0]), [1.0, 2.0 + 1e-12])
    assert not close(None, [1.0]) and not close(np.array([np.nan]), [np.nan])


def test_is_slice_of_is_the_loop_of_allclose_over_every_window():
    """The vectorised test against its definition: np.allclose at each offset (checklib.close)."""
    rng = np.random.default_rng(7)
    full = rng.standard_normal(24)
    full[[9, 17]] = full[2]  # three offsets start with the same number

    def loop(values):
        m = values.size
        return 0 < m < full.size and any(
            close(values, full[a : a + m]) for a in range(full.size - m + 1)
        )

    cases = [full[5:11], full[5:11] * (1 + 5e-7), full[5:11] * (1 + 5e-6), full[:23], full]
    cases += [full[3:9] + rng.standard_normal(6) * 1e-3, np.array([]), full[2:4][::-1]]
    cases += [full[2:8], full[17:23], np.r_[full[2], full[10:14]], np.r_[full[2], full[4:8]]]
    cases += [np.array([full[4], np.nan]), np.array([full[4], np.inf]), full[0:1]]
    for values in cases:
        assert is_slice_of(values, full) == loop(values), values
    assert not is_slice_of(full[5:11].reshape(2, 3), full)  # a vector or nothing


def test_a_students_value_of_any_shape_reads_as_absent_never_raises():
    """What a grade() meets (issue 36, item 7): ints beyond float64, bools, strings, None."""
    assert vector([1, 10**400]) is None and matrix([[1.0], [10**400]]) is None
    assert vector([10**30]).tolist() == [1e30]  # beyond int64 but a float64
    assert number(3) == 3.0 and number("inf") == math.inf and math.isnan(number("nan"))
    for bad in (None, True, "x", [1.0], {}, 10**400):
        assert number(bad) is None, bad
    assert count(0, 5) == 0 and count(5, 5) == 5
    for bad in (-1, 6, True, 2.0, "3", None, 10**30):
        assert count(bad, 5) is None, bad
    assert shown(0.123456) == "0.1235" and shown("nan") == "nan" and shown(2, ".1f") == "2.0"
    assert shown(None) == "None" and shown("x" * 100).endswith("…") and len(shown("x" * 100)) == 60
    assert shown(10**400).endswith("…")  # as it came, cut
    assert shape_note([4, 4], (16,)) == "returned an array of shape (4, 4); expected (16,)"


def test_checks_released_before_the_library_import_the_same_functions():
    """A semester's keys/checks/*/checks.py import autograder.checktools: one home."""
    for name in ("vector", "number", "close", "chi2_test", "slice_at", "shown"):
        assert getattr(checktools, name) is getattr(checklib, name)
    assert checktools.prop("x", 2, 1.5, "m") == {
        "name": "x",
        "weight": 2.0,
        "score": 1.0,
        "message": "m",
    }
