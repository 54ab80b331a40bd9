"""Markdown with LaTeX to self-contained HTML: math becomes MathML at generation time.

No CDN, no script: a sheet renders the same offline, in print, and in any browser.
"""

from __future__ import annotations

import html
from functools import cache, lru_cache

from latex2mathml.converter import convert
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin


@lru_cache(maxsize=8192)  # a formula's LaTeX recurs in every student's worked solution
def _math(latex: str, display: bool) -> str:
    try:
        return convert(latex, display="block" if display else "inline")
    except Exception:  # an expression latex2mathml cannot read stays readable as source
        return f"<code>{html.escape(latex)}</code>"


@cache
def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.use(dollarmath_plugin, allow_space=True, double_inline=True)
    md.add_render_rule(
        "math_inline", lambda self, tokens, idx, options, env: _math(tokens[idx].content, False)
    )
    md.add_render_rule(
        "math_block", lambda self, tokens, idx, options, env: _math(tokens[idx].content, True)
    )
    md.add_render_rule(
        "math_inline_double",
        lambda self, tokens, idx, options, env: _math(tokens[idx].content, True),
    )
    return md


def markdown(text: str) -> str:
    """Render Markdown (with ``$...$`` and ``$$...$$`` math) to an HTML fragment."""
    return _markdown().render(text)
