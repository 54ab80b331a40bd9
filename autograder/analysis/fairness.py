"""Fairness across variants: does a student's score depend on the numbers they drew?

**Per-parameter attribution.**  For each item (a scored part) and each parameter its
question draws, the item's score (as a share of its points) is regressed on the
parameter together with the student's rest-of-assignment score:

    share = a + b * rest + c * parameter (+ one term per level, for a parameter that
    names a choice, such as a GPU)

by least squares, with heteroskedasticity-robust (HC3) standard errors, and ``c`` is
tested for zero (Wald: normal for one term, chi-square for several).  Why this model:

- the parameters were drawn at random (HMAC of the student id), independently of
  ability, so any dependence of the score on a parameter, at equal rest score, is the
  question's, not the students';
- the rest score takes out the students' ability, and with it most of the variance, so
  a real effect is found with fewer students, and an unlucky draw of weak students for
  one value is not blamed on it;
- a linear model of the mean share (not a logistic one) has no trouble with items that
  (nearly) everybody or nobody gets, where a logistic fit diverges, and its coefficient
  reads directly in points; HC3 makes the test valid for bounded, partial-credit scores.

A parameter spanning more than a factor of 10 enters as its logarithm (model sizes,
token counts).  An item is tested only when at least ``MIN_MINORITY`` students are off its
most common score: a handful of mistakes can line up with any parameter.  Every test of
the assignment is corrected together (Holm's step-down at
a family-wise false-alarm rate of 5 %): on a fair assignment, the chance that anything
is flagged at all is at most 5 %.  A flagged effect's size is the change of the item's
expected points from the 10th to the 90th percentile of the drawn values (for a choice,
between the hardest and the easiest level), at equal rest score.

**Variant spread.**  Each item's expected share for each student's own numbers, at the
class's mean rest score, from its flagged parameters (an item with none is the same for
everybody); a student's predicted assignment score is the sum over items.  The gap
between the hardest and the easiest assignment is in expected points.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.analysis.item_analysis import table
from autograder.checktools import chi2_sf

FAMILY_ALPHA = 0.05
# An item is tested only when at least this many students are on each side of its most
# common score: with fewer, robust standard errors are unreliable (a handful of mistakes
# can line up with any parameter), and there is too little to attribute.
MIN_MINORITY = 10


@dataclass(frozen=True)
class Effect:
    item: str
    question: str
    part: str
    parameter: str
    scale: str  # linear | log | levels
    p: float
    flagged: bool  # after Holm's correction over every test of the assignment
    # the change of the item's expected points from ``low`` to ``high``, at equal rest
    # score: for a number, its 10th and 90th percentiles among the draws; for a choice,
    # the easiest and the hardest level
    points: float
    low: Any
    high: Any
    slope: float  # share per unit of the design column (linear or log; for the plot)
    # the effect plot: per drawn value (a decile of them, for many), the item's mean share
    # adjusted to the class's mean rest score
    curve: tuple[tuple[Any, float], ...] = ()


@dataclass(frozen=True)
class Fairness:
    effects: list[Effect]
    predicted: dict[str, float]  # student -> expected points at the mean rest score
    spread: dict[str, tuple[float, float]]  # item -> lowest, highest expected share
    tests: int
    untested: int = 0  # items with too few students off their most common score

    @property
    def gap(self) -> float:
        """Expected points between the hardest and the easiest assignment drawn."""
        return (
            max(self.predicted.values()) - min(self.predicted.values()) if self.predicted else 0.0
        )


def _design(values: list[Any]) -> tuple[np.ndarray, str, list[Any]] | None:
    """The parameter's columns: one (linear or log) for numbers, one per level but the
    first for a choice; None for a parameter that does not vary."""
    if all(isinstance(v, bool) for v in values) or not all(
        isinstance(v, int | float) for v in values
    ):
        levels = sorted({str(v) for v in values})
        if len(levels) < 2:
            return None
        named = [str(v) for v in values]
        cols = np.array([[1.0 if v == lv else 0.0 for lv in levels[1:]] for v in named])
        return cols, "levels", levels
    x = np.asarray(values, dtype=float)
    if np.ptp(x) == 0:
        return None
    if x.min() > 0 and x.max() / x.min() > 10:
        return np.log(x)[:, None], "log", []
    return x[:, None], "linear", []


def _standard(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Columns centred and scaled to unit spread (a parameter of 1e11 bytes next to an
    intercept of 1 would make the least-squares problem singular), and their scales."""
    scale = cols.std(axis=0)
    scale[scale == 0] = 1.0
    return (cols - cols.mean(axis=0)) / scale, scale


def _fit(y: np.ndarray, design: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """OLS coefficients and the robust (HC3) Wald p-value of the last ``k`` of them."""
    xtx_inv = np.linalg.pinv(design.T @ design)
    beta = xtx_inv @ design.T @ y
    resid = y - design @ beta
    leverage = np.einsum("ij,jk,ik->i", design, xtx_inv, design)
    weight = (resid / np.clip(1 - leverage, 1e-9, None)) ** 2
    cov = xtx_inv @ (design.T * weight) @ design @ xtx_inv
    c, v = beta[-k:], cov[-k:, -k:]
    try:
        stat = float(c @ np.linalg.solve(v, c))
    except np.linalg.LinAlgError:
        return beta, 1.0
    if not math.isfinite(stat):
        return beta, 1.0
    return beta, (math.erfc(math.sqrt(stat / 2)) if k == 1 else chi2_sf(stat, k))


def holm(p: list[float], alpha: float = FAMILY_ALPHA) -> list[bool]:
    """Holm's step-down: which hypotheses are rejected at family-wise level ``alpha``."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    rejected = [False] * len(p)
    for rank, i in enumerate(order):
        if p[i] > alpha / (len(p) - rank):
            break
        rejected[i] = True
    return rejected


def attribute(
    results: list[dict[str, Any]], params: dict[str, dict[str, dict[str, Any]]]
) -> Fairness:
    """The attribution and spread of an assignment's standings; ``params``: each student's
    drawn parameters by question (the keys hold them)."""
    ran = [r for r in results if not r.get("error") and r["student_id"] in params]
    items, scores = table(ran)
    students = [r["student_id"] for r in ran]
    total = scores.sum(axis=1)
    found: list[tuple] = []
    untested = 0
    for j, (_label, question, _part, points) in enumerate(items):
        share = scores[:, j] / points
        modal = np.mean(share == Counter(share.tolist()).most_common(1)[0][0]) if len(ran) else 1
        if (1 - modal) * len(ran) < MIN_MINORITY:
            untested += 1
            continue
        rest = total - scores[:, j]
        rest_z = (rest - rest.mean()) / (rest.std() or 1.0)
        drawn = [params[s].get(question, {}) for s in students]
        for name in sorted(drawn[0]) if drawn else []:
            values = [d.get(name) for d in drawn]
            if any(v is None or isinstance(v, dict | list) for v in values):
                continue
            made = _design(values)
            if made is None:
                continue
            cols, scale, levels = made
            z, spread = _standard(cols)
            design = np.column_stack([np.ones(len(ran)), rest_z, z])
            beta, p = _fit(share, design, cols.shape[1])
            beta = np.concatenate([beta[:2], beta[2:] / spread])  # per unit of the column
            curve = _curve(values, share - beta[1] * rest_z, scale)
            found.append((j, name, scale, beta, levels, cols[:, 0] if scale != "levels" else
                          cols, curve, p))  # fmt: skip
    flagged = holm([f[-1] for f in found])
    effects = []
    for (j, name, scale, beta, levels, cols, curve, p), hit in zip(found, flagged, strict=True):
        label, question, part, points = items[j]
        if scale == "levels":
            per_level = [0.0, *beta[2:]]
            easy, hard = int(np.argmax(per_level)), int(np.argmin(per_level))
            size = (per_level[hard] - per_level[easy]) * points
            low, high, slope = levels[easy], levels[hard], 0.0
        else:
            q10, q90 = np.quantile(cols, [0.1, 0.9])
            slope = float(beta[2])
            size = slope * (q90 - q10) * points
            unit = math.exp if scale == "log" else float
            low, high = unit(q10), unit(q90)
        effects.append(
            Effect(label, question, part, name, scale, p, hit, size, low, high, slope, curve)
        )
    predicted, spread = _spread(items, scores, students, params, effects)
    return Fairness(effects, predicted, spread, len(found), untested)


def _curve(values: list[Any], adjusted: np.ndarray, scale: str) -> tuple:
    """Mean adjusted share per drawn value: each level, each value when there are at most
    ten, else each tenth of the draws (at its median value)."""
    if scale == "levels":
        named = np.array([str(v) for v in values])
        return tuple((lv, float(adjusted[named == lv].mean())) for lv in sorted(set(named)))
    x = np.asarray(values, dtype=float)
    distinct = np.unique(x)
    if len(distinct) <= 10:
        return tuple((float(v), float(adjusted[x == v].mean())) for v in distinct)
    order = np.argsort(x, kind="stable")
    return tuple(
        (float(np.median(x[g])), float(adjusted[g].mean())) for g in np.array_split(order, 10)
    )


def _spread(items, scores, students, params, effects):
    """Each student's expected points at the mean rest score, from the flagged effects."""
    n = len(students)
    expected = np.zeros(n)
    spread = {}
    for j, (label, question, part, points) in enumerate(items):
        share = scores[:, j] / points
        mine = [e for e in effects if e.flagged and (e.question, e.part) == (question, part)]
        if not mine:
            expected += points * share.mean()
            continue
        total = scores.sum(axis=1)
        rest = total - scores[:, j]
        rest_z = (rest - rest.mean()) / (rest.std() or 1.0)
        cols = [np.ones(n), rest_z]
        for e in mine:
            made = _design([params[s][question][e.parameter] for s in students])
            cols += list(_standard(made[0])[0].T)
        design = np.column_stack(cols)
        beta = np.linalg.pinv(design.T @ design) @ design.T @ share
        at_mean = design.copy()
        at_mean[:, 1] = 0.0
        fitted = np.clip(at_mean @ beta, 0.0, 1.0)
        spread[label] = (float(fitted.min()), float(fitted.max()))
        expected += points * fitted
    return dict(zip(students, (float(x) for x in expected), strict=True)), spread
