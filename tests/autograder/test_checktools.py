"""The grade-side helpers every question's checks.py shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autograder.checktools import chi2_sf, chi2_test, close, matrix, prop, vector


def test_chi_square_tail_matches_the_tables():
    """Critical values of χ² (NIST/SEMATECH e-Handbook, table 1.3.6.7.4)."""
    assert chi2_sf(3.841, 1) == pytest.approx(0.05, rel=1e-3)
    assert chi2_sf(11.070, 5) == pytest.approx(0.05, rel=1e-3)
    assert chi2_sf(20.515, 5) == pytest.approx(0.001, rel=1e-3)
    assert chi2_sf(2.0, 2) == pytest.approx(math.exp(-1.0), rel=1e-12)  # χ²₂ is exponential


def test_chi_square_pools_cells_expecting_fewer_than_five():
    probs = np.array([0.5, 0.49, 0.005, 0.005])
    stat, dof, _ = chi2_test(np.array([50, 49, 1, 0]), probs)
    # the two tiny cells pooled, and their pool (1 expected) folded into the 49: 2 cells
    assert dof == 1
    assert stat == pytest.approx(0.0, abs=1e-12)


def test_prop_clips_the_score_and_numbers_read_only_from_plain_lists():
    assert prop("x", 2, 1.5, "m") == {"name": "x", "weight": 2.0, "score": 1.0, "message": "m"}
    assert prop("x", 1, -1, "m")["score"] == 0.0
    assert vector([1, 2.5, "nan"]).tolist()[:2] == [1.0, 2.5]
    assert vector([1, [2]]) is None and vector("12") is None and vector([1, 2], n=3) is None
    assert matrix([[1, 2], [3, 4]]).shape == (2, 2)
    assert matrix([[1, 2], [3]]) is None and matrix([]) is None
    assert close(np.array([1.0, 2.0]), [1.0, 2.0 + 1e-12])
    assert not close(None, [1.0]) and not close(np.array([np.nan]), [np.nan])
