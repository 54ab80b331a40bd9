"""The ``scalegrade`` command: a thin edge that parses, calls the library and prints.

This module makes the ``main`` group and registers the commands of each group's module.
Imports only point down: each group imports ``common`` (the options and helpers they
share), ``demo`` the two groups whose steps it runs, and this module them all.

- ``formulas``: the cost model (verify, calc);
- ``authoring``: a bank and its releases (new-bank, new, bank, validate, generate, selftest);
- ``grading``: submissions in the sandbox (grade, sandbox-serve);
- ``semester``: the gradebook after grading (late, rekey, reseed, regrade, stats, marks);
- ``imports``: another tool's notebooks into a bank (import nbgrader, import otter);
- ``export``: Gradescope, Canvas and Moodle (export gradescope, canvas, moodle);
- ``serve``: the course as a platform (serve, work, accounts);
- ``demo``: the whole flow on the sample course (demo).
"""

from __future__ import annotations

import click

from scalegrade.cli import authoring, demo, export, formulas, grading, imports, semester, serve


@click.group()
@click.version_option(package_name="scalegrade")
def main() -> None:
    """ScaleGrade: per-student assignments and exams on training and serving large models."""


for _group in (formulas, authoring, imports, grading, semester, export, serve, demo):
    for _command in _group.COMMANDS:
        main.add_command(_command)
