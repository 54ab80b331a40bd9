"""The bank's checks files are written with the authors' library (autograder/checklib):
a checks.py holds the question's inputs, its mathematics and its properties, and the
plumbing lives once, in the library.

Before the library the bank's 18 checks files held 6,707 lines (median 362).  The port
kept every property, weight and message (6,056 lines), and a second pass, in which every
grade the tests make was compared with the one before, took them to 4,625 (median 236).
Issue 33 aimed at a median of 150; what is left is each question's inputs, its oracles
and anti-forgery logic, and the messages that name a student's mistake, which the second
pass kept word for word.  MEDIAN_LINES holds what was reached, so that the bank cannot
grow back."""

from __future__ import annotations

import ast
import re
import statistics

from tests.templates.codecheck import TEMPLATES

FILES = sorted(TEMPLATES.glob("*/*/*checks.py"))
MEDIAN_LINES = 240  # lines (236 reached); issue 33's goal was 150
# what the library does once: plain-data conversion, properties as dicts, its readers
PLUMBING = {"_plain", "_prop", "_vector", "_close", "_number", "_record_error"}


def test_the_bank_has_its_code_checks():
    assert len(FILES) >= 17


def test_the_median_checks_file_is_short():
    lines = {f.relative_to(TEMPLATES).as_posix(): len(f.read_text().splitlines()) for f in FILES}
    assert statistics.median(lines.values()) <= MEDIAN_LINES, lines


def test_no_checks_file_writes_the_librarys_plumbing_again():
    for f in FILES:
        tree = ast.parse(f.read_text(encoding="utf-8"))
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not defined & PLUMBING, f"{f}: defines {sorted(defined & PLUMBING)}"


def test_checks_import_only_the_library_of_scalegrade():
    """The probe process serves autograder.checklib and nothing else of the project."""
    for f in FILES:
        imports = re.findall(r"^\s*(?:from|import)\s+(autograder[\w.]*)", f.read_text(), re.M)
        assert set(imports) <= {"autograder.checklib", "autograder.checklib.stats"}, (f, imports)
