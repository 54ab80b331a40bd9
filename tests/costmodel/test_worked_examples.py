"""Every `ok`/`rounding` number of the notes that is a formula of the core is reproduced.

The numbers come from ``tests/data/worked_examples.json`` (the notes' worked
examples, exercise solutions and exam answers, each recomputed independently).  Each
area module of ``tests/costmodel/worked/`` maps entry ids to core calls; the entries
that are not a formula of the core (simulations, admin arithmetic, ...) are listed in
the area modules' ``SKIP`` with the reason.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from tests.costmodel import worked
from tests.costmodel.worked import agrees, load_entries

ENTRIES = load_entries()
AREAS = [
    importlib.import_module(f"{worked.__name__}.{m.name}")
    for m in pkgutil.iter_modules(worked.__path__)
]
CASES = {k: v for area in AREAS for k, v in area.CASES.items()}
SKIP = {k: v for area in AREAS for k, v in area.SKIP.items()}
REPRODUCIBLE = sorted(i for i, e in ENTRIES.items() if e["verdict"] in ("ok", "rounding"))


def test_every_reproducible_entry_is_covered_or_skipped_with_a_reason():
    missing = [i for i in REPRODUCIBLE if i not in CASES and i not in SKIP]
    assert not missing, f"entries neither reproduced nor skipped: {missing}"
    assert all(reason.strip() for reason in SKIP.values())
    assert not set(CASES) & set(SKIP), "an entry is both reproduced and skipped"
    assert set(CASES) | set(SKIP) <= set(ENTRIES), "an id that is not in the file"


def test_most_entries_are_reproduced_by_the_core():
    assert len([i for i in REPRODUCIBLE if i in CASES]) >= 180


@pytest.mark.parametrize("entry_id", sorted(CASES))
def test_core_reproduces_the_notes(entry_id):
    entry = ENTRIES[entry_id]
    ours = CASES[entry_id](entry["inputs"])
    ok, detail = agrees(ours, entry)
    assert ok, f"{entry_id} ({entry['quantity']}, {entry['where']}): {detail}"
