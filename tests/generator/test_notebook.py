"""A code part's cells (generator/notebook.py, split_cells): one cell, or one per `# %%`
line as jupytext's percent format writes them; the rest of the notebook is tested
through releases (test_release.py)."""

from __future__ import annotations

from generator.notebook import split_cells


def test_a_source_without_markers_is_one_cell_unchanged():
    source = "def f(x):\n    return x\n"
    assert split_cells(source) == [("code", source)]


def test_percent_markers_split_code_and_markdown_cells_in_order():
    source = (
        "import math\n\n"
        "# %%\ndef f(x):\n    return math.sqrt(x)\n\n"
        "# %% [markdown]\n# Check that it works:\n#\n# - on 4\n\n"
        "# %%\nf(4)\n"
    )
    assert split_cells(source) == [
        ("code", "import math"),
        ("code", "def f(x):\n    return math.sqrt(x)"),
        ("markdown", "Check that it works:\n\n- on 4"),
        ("code", "f(4)"),
    ]
