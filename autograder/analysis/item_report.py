"""The report's item analysis and fairness section, and the analysis of a gradebook's
assignment that `scalegrade stats` prints (:mod:`autograder.analysis.item_analysis`,
:mod:`autograder.analysis.fairness`)."""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from typing import Any

from autograder.analysis import plots
from autograder.analysis.fairness import FAMILY_ALPHA, MIN_MINORITY, Fairness, attribute
from autograder.analysis.item_analysis import EFFICIENCY_FLOOR, AssignmentStats, analyse
from contract import Key


@dataclass(frozen=True)
class Analysis:
    stats: AssignmentStats
    fairness: Fairness


def analysis(results: list[dict[str, Any]], keys: dict[str, Key]) -> Analysis:
    """Both analyses of the standings, with each student's drawn parameters from the keys."""
    params = {sid: {q.id: q.params for q in k.questions} for sid, k in keys.items()}
    return Analysis(analyse(results), attribute(results, params))


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "—" if x is None else format(x, fmt)


def section(a: Analysis) -> str:
    """The HTML of the report's "Item analysis" and "Fairness across variants" parts."""
    s, f = a.stats, a.fairness
    if not s.items:
        return "<h2>Item analysis</h2><p>No scored part to analyse yet.</p>"
    rows = "".join(
        "<tr>"
        f"<td>{html.escape(i.item)}</td><td>{100 * i.facility:.0f} % "
        f"({100 * i.facility_low:.0f}–{100 * i.facility_high:.0f})</td>"
        f"<td>{_num(i.discrimination)}</td><td>{_num(i.item_total)}</td>"
        f"<td>{'—' if i.efficiency is None else f'{100 * i.efficiency:.0f} %'}</td>"
        f"<td>{html.escape(', '.join(f'{k} {100 * v:.0f} %' for k, v in i.misconceptions.items()))}"
        f"</td><td>{100 * i.wrong_unit:.0f} % / {100 * i.unreadable:.0f} %</td>"
        f"<td>{html.escape('; '.join(i.flags))}</td></tr>"
        for i in s.items
    )
    flagged_items = [i for i in s.items if i.flags]
    points = [
        (i.item, i.facility, i.discrimination, bool(i.flags))
        for i in s.items
        if i.discrimination is not None
    ]
    scatter = plots.scatter(
        "Facility against discrimination, one point per part (flagged in red)",
        points,
        x=("facility (mean share of the points)", 0.0, 1.0),
        y=("discrimination index (item against the rest)", -0.5, 1.0),
    )
    curves = (
        plots.lines(
            "Quintile curves of the flagged parts: facility per fifth of the class by rest score",
            [
                (i.item, [(k + 1, q) for k, q in enumerate(i.quintiles) if q is not None])
                for i in flagged_items
            ],
            x=("fifth of the class by rest score (1 = weakest)", 1, 5),
            y=("facility", 0.0, 1.0),
        )
        if flagged_items
        else "<p>No part is flagged.</p>"
    )
    alpha = "—" if s.alpha is None else f"{s.alpha:.2f}"
    effects = [e for e in f.effects if e.flagged]
    effect_rows = "".join(
        f"<tr><td>{html.escape(e.item)}</td><td>{html.escape(e.parameter)}</td>"
        f"<td>{html.escape(str(_shown(e.low)))} → {html.escape(str(_shown(e.high)))}</td>"
        f"<td>{e.points:+.2f}</td><td>{e.p:.1e}</td></tr>"
        for e in effects
    )
    effect_plots = "".join(
        plots.lines(
            f"{e.item}: mean score share against {e.parameter}, adjusted to the mean rest score",
            [(e.parameter, [(float(x), y) for x, y in e.curve])],
            x=(e.parameter, min(float(x) for x, _ in e.curve), max(float(x) for x, _ in e.curve)),
            y=("adjusted share of the points", 0.0, 1.0),
        )
        if e.scale != "levels"
        else plots.bars(
            f"{e.item}: mean score share per {e.parameter}, adjusted to the mean rest score",
            [(str(x), round(y, 3)) for x, y in e.curve],
            maximum=1.0,
            x_label="adjusted share of the points",
        )
        for e in effects
    )
    predicted = sorted(f.predicted.values())
    difficulty = ""
    if predicted:
        bands = Counter(round(x, 1) for x in predicted)
        difficulty = plots.bars(
            "Students per expected score of the assignment they drew (an average student)",
            [(f"{x:g} points", float(n)) for x, n in sorted(bands.items())],
            maximum=max(bands.values()),
            x_label="students",
        )
    return (
        "<h2>Item analysis</h2>"
        f"<p>{s.n_students} students whose notebook ran; Cronbach's alpha {alpha}. Facility "
        "with its 95 % interval; discrimination: the part against the rest of the "
        "assignment (Moodle's index), and against the total (PrairieLearn's); efficiency: "
        "Moodle's discriminative efficiency, flagged under "
        f"{100 * EFFICIENCY_FLOOR:.0f} %.</p>"
        "<table><tr><th>part</th><th>facility</th><th>discrimination</th><th>item-total</th>"
        "<th>efficiency</th><th>misconceptions</th><th>wrong unit / unreadable</th>"
        f"<th>flags</th></tr>{rows}</table>{scatter}{curves}"
        "<h2>Fairness across variants</h2>"
        f"<p>{f.tests} tests of a part's score against a parameter its question draws, at "
        f"equal rest score (least squares, robust errors), corrected together (Holm, "
        f"{100 * FAMILY_ALPHA:.0f} % family-wise): {len(effects)} flagged; {f.untested} parts "
        f"not tested (fewer than {MIN_MINORITY} students off their most common score). The "
        "hardest "
        f"assignment drawn is {f.gap:.2f} points harder than the easiest, for an average "
        "student.</p>"
        + (
            "<table><tr><th>part</th><th>parameter</th><th>from → to</th>"
            f"<th>points</th><th>p</th></tr>{effect_rows}</table>{effect_plots}"
            if effects
            else "<p>No part's score depends on the numbers drawn.</p>"
        )
        + difficulty
    )


def _shown(x: Any) -> Any:
    return f"{x:.4g}" if isinstance(x, float) else x
