"""The report's plots: inline SVG, no script, no network.

Every plot is an ``<svg role="img">`` with a ``<title>`` and a ``<desc>`` that the
``aria-labelledby`` of the element names (its text alternative, WCAG 1.1.1), and axis
labels drawn as text.  Numbers are shown as ``:g``; student text is always escaped.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Sequence

WIDTH, LEFT, PLOT = 640, 210, 340
_ids = itertools.count()


def _frame(title: str, desc: str, height: int, body: str) -> str:
    n = next(_ids)
    return (
        f'<figure><svg role="img" aria-labelledby="plot{n}t plot{n}d" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}"><title id="plot{n}t">'
        f'{html.escape(title)}</title><desc id="plot{n}d">{html.escape(desc)}</desc>{body}'
        f"</svg><figcaption>{html.escape(title)}</figcaption></figure>"
    )


def bars(
    title: str, values: Sequence[tuple[str, float]], *, maximum: float, unit: str = "",
    x_label: str,
) -> str:  # fmt: skip
    """Horizontal bars, one per label, with the value written beside each."""
    height = 22 * len(values) + 40
    out = []
    for i, (label, v) in enumerate(values):
        width = 0 if maximum <= 0 else PLOT * v / maximum
        y = 5 + 22 * i
        out.append(
            f'<text x="0" y="{y + 14}" font-size="12">{html.escape(label)}</text>'
            f'<rect x="{LEFT}" y="{y}" width="{width:.1f}" height="16" fill="#3b6ea5"></rect>'
            f'<text x="{LEFT + 5 + width:.1f}" y="{y + 13}" font-size="11">{v:g}{unit}</text>'
        )
    out.append(_x_label(x_label, height))
    listed = "; ".join(f"{label}: {v:g}{unit}" for label, v in values) or "nothing to show"
    return _frame(title, listed, height, "".join(out))


def _x_label(text: str, height: int) -> str:
    return (
        f'<text x="{LEFT + PLOT / 2:.0f}" y="{height - 6}" font-size="12" '
        f'text-anchor="middle">{html.escape(text)}</text>'
    )


def _axes(x_label: str, y_label: str, height: int, top: float, bottom: float) -> str:
    left, right = 60, 60 + 520
    return (
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#555"></line>'
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#555"></line>'
        f'<text x="{(left + right) / 2:.0f}" y="{height - 6}" font-size="12" '
        f'text-anchor="middle">{html.escape(x_label)}</text>'
        f'<text x="14" y="{(top + bottom) / 2:.0f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 14 {(top + bottom) / 2:.0f})">{html.escape(y_label)}</text>'
    )


HEIGHT, TOP, BOTTOM = 320, 15, 280  # of a plot with axes

Axis = tuple[str, float, float]  # label, low, high


def _canvas(x: Axis, y: Axis) -> list[str]:
    (xl, x0, x1), (yl, y0, y1) = x, y
    return [_axes(xl, yl, HEIGHT, TOP, BOTTOM), _ticks(x0, x1, y0, y1, TOP, BOTTOM)]


def _at(px: float, py: float, x: Axis, y: Axis) -> tuple[float, float]:
    """A point's position on the canvas, clipped to the axes' ranges."""
    (_, x0, x1), (_, y0, y1) = x, y
    cx = 60 + 520 * (min(max(px, x0), x1) - x0) / ((x1 - x0) or 1)
    return cx, BOTTOM - (BOTTOM - TOP) * (min(max(py, y0), y1) - y0) / ((y1 - y0) or 1)


def scatter(
    title: str, points: Sequence[tuple[str, float, float, bool]], *, x: Axis, y: Axis
) -> str:
    """Labelled points (label, x, y, flagged); ``x``, ``y``: (axis label, low, high)."""
    body = _canvas(x, y)
    for label, px, py, hot in points:
        cx, cy = _at(px, py, x, y)
        colour = "#a1131b" if hot else "#3b6ea5"
        body.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{colour}">'
            f"<title>{html.escape(label)}: {px:.2f}, {py:.2f}</title></circle>"
        )
    listed = "; ".join(f"{label} ({px:.2f}, {py:.2f})" for label, px, py, _ in points)
    return _frame(title, listed or "nothing to show", HEIGHT, "".join(body))


def lines(
    title: str, series: Sequence[tuple[str, Sequence[tuple[float, float]]]], *, x: Axis, y: Axis
) -> str:
    """One polyline per named series of (x, y) points."""
    body = _canvas(x, y)
    palette = ("#3b6ea5", "#a1131b", "#146c2e", "#8a5a00", "#555555", "#6b3fa0")
    for i, (name, pts) in enumerate(series):
        xy = [_at(px, py, x, y) for px, py in pts]
        colour = palette[i % len(palette)]
        path = " ".join(f"{a:.1f},{b:.1f}" for a, b in xy)
        body.append(
            f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2">'
            f"<title>{html.escape(name)}</title></polyline>"
        )
        if xy:
            body.append(
                f'<text x="{xy[-1][0] + 4:.1f}" y="{xy[-1][1]:.1f}" font-size="10" '
                f'fill="{colour}">{html.escape(name)}</text>'
            )
    listed = "; ".join(
        f"{name}: " + ", ".join(f"({a:g}, {b:.2f})" for a, b in pts) for name, pts in series
    )
    return _frame(title, listed or "nothing to show", HEIGHT, "".join(body))


def _ticks(x0: float, x1: float, y0: float, y1: float, top: float, bottom: float) -> str:
    return (
        f'<text x="60" y="{bottom + 14}" font-size="10" text-anchor="middle">{x0:g}</text>'
        f'<text x="580" y="{bottom + 14}" font-size="10" text-anchor="middle">{x1:g}</text>'
        f'<text x="56" y="{bottom}" font-size="10" text-anchor="end">{y0:g}</text>'
        f'<text x="56" y="{top + 8}" font-size="10" text-anchor="end">{y1:g}</text>'
    )
