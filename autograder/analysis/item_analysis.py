"""Item analysis of a graded assignment: is each question good?

The definitions are the classical test theory ones that Moodle's quiz statistics report
uses (Moodle docs, "Quiz statistics calculations"), so that an instructor can compare:

- **facility**: the mean score on the item as a share of its maximum, with a 95 %
  interval (Wilson's for items scored all-or-nothing, a seeded percentile bootstrap for
  partial credit);
- **discrimination index** (corrected): Pearson's r between the item score and the rest
  of the assignment, the item left out: Moodle's "discrimination index";
- **item-total correlation** (uncorrected): r between the item score and the total, the
  item included, as PrairieLearn reports it ("discrimination"); it is biased upwards by
  the item's own share of the total;
- **discriminative efficiency**: the covariance of item and rest over the largest
  covariance the two could have with the same marginals, reached when both are sorted
  the same way (Moodle's definition);
- **quintile curve**: the item's facility in each fifth of the class, ranked by rest score;
- **Cronbach's alpha** of the assignment: k/(k-1) (1 - sum of item variances / variance
  of the total);
- **misconception rates**: how often each declared misconception fired on the item, and
  how often the answer was in a wrong unit or unreadable.

Flags, each with the rule that raised it: discriminative efficiency under 15 % (Moodle's
"probably a problem" threshold), a negative discrimination index, and an item nobody or
everybody gets (facility 0 or 1).  Items are the autograded and marked parts; a part still
pending for a person is left out.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

EFFICIENCY_FLOOR = 0.15  # Moodle: a discriminative efficiency below this needs a look
BOOTSTRAP = 2000
Z95 = 1.959963984540054


@dataclass(frozen=True)
class ItemStats:
    item: str  # "Q3 q3_states_gb"
    question: str
    part: str
    points: float
    n: int
    facility: float
    facility_low: float
    facility_high: float
    discrimination: float | None  # corrected: item against the rest
    item_total: float | None  # uncorrected: item against the total
    efficiency: float | None
    quintiles: tuple[float | None, ...]  # facility per fifth by rest score, lowest first
    misconceptions: dict[str, float]  # name -> share of students
    wrong_unit: float
    unreadable: float
    flags: tuple[str, ...]


@dataclass(frozen=True)
class AssignmentStats:
    n_students: int
    alpha: float | None
    items: list[ItemStats] = field(default_factory=list)


def _corr(x: np.ndarray, y: np.ndarray) -> float | None:
    sx, sy = x.std(), y.std()
    if sx == 0 or sy == 0:
        return None
    return float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy))


def efficiency(x: np.ndarray, rest: np.ndarray) -> float | None:
    """Cov(x, rest) / Cov_max: the largest covariance is that of both sorted ascending."""
    top = float(np.mean((np.sort(x) - x.mean()) * (np.sort(rest) - rest.mean())))
    if top <= 0:
        return None
    return float(np.mean((x - x.mean()) * (rest - rest.mean()))) / top


def wilson(successes: float, n: int) -> tuple[float, float]:
    """Wilson's 95 % score interval of a proportion."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def bootstrap(share: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """A percentile bootstrap 95 % interval of the mean, seeded: the same table, the same
    interval."""
    rng = np.random.default_rng(seed)
    means = share[rng.integers(0, len(share), size=(BOOTSTRAP, len(share)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def quintiles(share: np.ndarray, rest: np.ndarray) -> tuple[float | None, ...]:
    """The item's facility in each fifth of the students, ranked by rest score (ties kept
    in the order of the table, so the fifths are of equal size)."""
    order = np.argsort(rest, kind="stable")
    return tuple(
        float(share[group].mean()) if len(group) else None for group in np.array_split(order, 5)
    )


def alpha(scores: np.ndarray) -> float | None:
    """Cronbach's alpha of a students x items table of scores."""
    k = scores.shape[1]
    total = scores.sum(axis=1).var(ddof=1) if len(scores) > 1 else 0.0
    if k < 2 or total == 0:
        return None
    return float(k / (k - 1) * (1 - scores.var(axis=0, ddof=1).sum() / total))


def flags(facility: float, discrimination: float | None, eff: float | None) -> tuple[str, ...]:
    out = []
    if facility <= 0:
        out.append("nobody gets it (facility 0)")
    elif facility >= 1:
        out.append("everybody gets it (facility 1)")
    if discrimination is not None and discrimination < 0:
        out.append("negative discrimination: stronger students do worse on it")
    if eff is not None and eff < EFFICIENCY_FLOOR and facility not in (0, 1):
        out.append(
            f"discriminative efficiency {100 * eff:.0f} % < {100 * EFFICIENCY_FLOOR:.0f} % "
            "(Moodle's rule)"
        )
    return tuple(out)


def table(results: list[dict[str, Any]]) -> tuple[list[tuple[str, str, str, float]], np.ndarray]:
    """The items of the standings (parts with a score: autograded or marked) and a
    students x items table of scores; an item pending for anyone is left out."""
    items: dict[tuple[str, str], tuple[str, float]] = {}
    pending: set[tuple[str, str]] = set()
    for r in results:
        for g in r["parts"]:
            v = g["verdict"]
            where = (g["question"], v["part"])
            if v["score"] is None:
                pending.add(where)
            elif v["points"] > 0:
                items.setdefault(
                    where, (f"Q{g['index']} {v['variable'] or v['part']}", v["points"])
                )
    kept = [w for w in items if w not in pending]
    scores = np.zeros((len(results), len(kept)))
    column = {w: j for j, w in enumerate(kept)}
    for i, r in enumerate(results):
        for g in r["parts"]:
            j = column.get((g["question"], g["verdict"]["part"]))
            if j is not None:
                scores[i, j] = g["verdict"]["score"] or 0.0
    return [(items[w][0], w[0], w[1], items[w][1]) for w in kept], scores


def analyse(results: list[dict[str, Any]]) -> AssignmentStats:
    """The item statistics of every scored part, from the students' standings (students
    whose notebook could not be run are left out: their zeros say nothing of the items)."""
    ran = [r for r in results if not r.get("error")]
    items, scores = table(ran)
    n = len(ran)
    total = scores.sum(axis=1)
    out = []
    verdicts = [
        {(g["question"], g["verdict"]["part"]): g["verdict"] for g in r["parts"]} for r in ran
    ]
    for j, (label, question, part, points) in enumerate(items):
        x = scores[:, j]
        share = x / points
        rest = total - x
        fac = float(share.mean()) if n else 0.0
        binary = bool(np.all((share == 0) | (share == 1)))
        low, high = wilson(float(share.sum()), n) if binary else bootstrap(share, seed=j)
        disc = _corr(x, rest)
        eff = efficiency(x, rest) if disc is not None else None
        fired = Counter(
            v[(question, part)]["misconception"]
            for v in verdicts
            if v.get((question, part), {}).get("misconception")
        )
        statuses = Counter(v[(question, part)]["status"] for v in verdicts if (question, part) in v)
        out.append(
            ItemStats(
                item=label,
                question=question,
                part=part,
                points=points,
                n=n,
                facility=fac,
                facility_low=low,
                facility_high=high,
                discrimination=disc,
                item_total=_corr(x, total),
                efficiency=eff,
                quintiles=quintiles(share, rest),
                misconceptions={k: c / n for k, c in fired.most_common()},
                wrong_unit=statuses["wrong_unit"] / n if n else 0.0,
                unreadable=statuses["unreadable"] / n if n else 0.0,
                flags=flags(fac, disc, eff),
            )
        )
    return AssignmentStats(n, alpha(scores) if n else None, out)
