"""What an import writes, whatever its reader (generator/imports/__init__.py): names a
bank accepts, prompts Jinja leaves alone, tests as literals an author can edit."""

from __future__ import annotations

import ast

import pytest

from generator.imports import _literal, identifier, jinja_safe, slug
from generator.question import template


@pytest.mark.parametrize(
    ("text", "expected"),
    [("correct-squares", "correct_squares"), ("class", "p_class"), ("3x", "p_3x"), ("", "part")],
)
def test_a_grade_id_becomes_a_part_id_python_accepts(text, expected):
    assert identifier(text) == expected
    assert expected.isidentifier()


def test_a_name_becomes_a_folder():
    assert slug("Part_A (2 points)") == "part-a-2-points"


@pytest.mark.parametrize("markdown", ["$x_{i}$", "a {{ b }} c {% if %} {# d #}", "{% endraw %}"])
def test_a_prompt_renders_as_the_source_wrote_it(markdown):
    """Jinja would read `{{`, `{%` and `{#`: a prompt holding them is wrapped in raw."""
    rendered = template(jinja_safe(markdown)).render()
    assert rendered == markdown.replace("{% endraw %}", "")


@pytest.mark.parametrize("source", ["assert f(1) == 2", "s = '''x'''\nassert s", "x = '\\\\'"])
def test_a_test_is_written_as_a_literal_that_reads_back(source):
    assert ast.literal_eval(_literal(source)) == source
