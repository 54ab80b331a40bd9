"""Printable exam sheets and TA keys (HTML; PDF through headless Chromium when installed)."""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

from generator.html import markdown
from generator.variant import Variant, show_answer, unit_suffix

STYLE = """
body { font-family: "DejaVu Serif", Georgia, serif; max-width: 46rem; margin: 2rem auto;
       line-height: 1.45; color: #111; }
header { border-bottom: 2px solid #111; margin-bottom: 1.5rem; }
h1 { font-size: 1.5rem; margin: 0 0 .3rem 0; }
h2 { font-size: 1.15rem; margin-top: 2rem; }
.meta { color: #444; font-size: .95rem; }
.part { margin: .8rem 0; }
.box { border: 1px solid #888; min-height: 2.2rem; margin: .3rem 0 1rem 0; }
.box.tall { min-height: 9rem; }
.key { background: #f4f4f4; padding: .6rem .9rem; border-left: 3px solid #555; }
table { border-collapse: collapse; } td, th { border: 1px solid #999; padding: .2rem .5rem; }
@media print { body { margin: 0; max-width: none; } h2 { break-after: avoid; }
               section { break-inside: avoid-page; } }
"""


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def _header(title: str, course: str, student, duration: int | None, points: float) -> str:
    minutes = f" · {duration} minutes" if duration else ""
    return (
        f'<header><h1>{html.escape(title)}</h1><p class="meta">{html.escape(course)}{minutes}'
        f" · {points:g} points</p><p>Name: <b>{html.escape(student.name)}</b> · "
        f"ID: <b>{html.escape(student.id)}</b></p></header>"
    )


def exam_sheet(
    variants: list[Variant],
    points: list[float],
    *,
    title: str,
    course: str,
    student,
    duration: int | None,
) -> str:
    """The paper exam of one student: their numbers, boxes to write in, no answers."""
    parts = [_header(title, course, student, duration, sum(points))]
    for v, pts in zip(variants, points, strict=True):
        body = [
            f"<section><h2>Question {v.index} ({pts:g} points). {html.escape(v.title)}</h2>",
            markdown(v.prompt),
        ]
        for k in (k for k in v.answers if k.ask):
            unit = html.escape(unit_suffix(k.prompt, k.unit))
            body.append(
                f'<div class="part">{markdown(k.prompt + unit)}<div class="box"></div></div>'
            )
        for r in (*v.free_response, *v.code):
            body.append(
                f'<div class="part">{markdown(r["prompt"])}<div class="box tall"></div></div>'
            )
        parts.append("".join(body) + "</section>")
    return _page(f"{title} — {student.id}", "".join(parts))


def ta_key(
    variants: list[Variant], points: list[float], *, title: str, course: str, student
) -> str:
    """The TA's key for one student's paper: each answer with tolerance, and worked solutions."""
    parts = [_header(f"TA key — {title}", course, student, None, sum(points))]
    for v, pts in zip(variants, points, strict=True):
        rows = "".join(
            f"<tr><td>{html.escape(k.prompt)}</td><td><b>{html.escape(show_answer(k))}</b></td>"
            f"<td>{html.escape(str(k.tolerance))}</td><td>{k.points:g}</td></tr>"
            for k in v.answers
            if k.ask
        )
        rubric = "".join(
            f"<p><b>{html.escape(r['prompt'])}</b> ({r['points']:g} points): "
            f"{html.escape(r['rubric'])}</p>"
            for r in v.free_response
        )
        parts.append(
            f"<section><h2>Question {v.index} ({pts:g} points). {html.escape(v.title)}</h2>"
            f"<table><tr><th>part</th><th>answer</th><th>tolerance</th><th>points</th></tr>"
            f'{rows}</table>{rubric}<div class="key">{markdown(v.solution)}</div></section>'
        )
    return _page(f"TA key {title} — {student.id}", "".join(parts))


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def to_pdf(html_file: Path, pdf_file: Path, browser: str) -> None:
    """Print ``html_file`` to PDF with headless Chromium (no network, fresh profile)."""
    profile = pdf_file.parent / ".chromium-profile"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            "--no-pdf-header-footer",
            f"--print-to-pdf={pdf_file}",
            html_file.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    shutil.rmtree(profile, ignore_errors=True)
