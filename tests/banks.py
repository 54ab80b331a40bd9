"""A copy of the repository's bank in a temporary folder, for tests that change a bank."""

from __future__ import annotations

import shutil
from pathlib import Path

from generator import bank

LAYOUT = ("courses.yaml", "notes", "templates", "assignments")


def copy_bank(target: Path, *, link_templates: bool = False) -> bank.Bank:
    """The repository's bank copied to ``target`` (``templates/`` linked when asked, for
    tests that only add assignments); a fresh :class:`~generator.bank.Bank` of it."""
    source = bank.load().root
    target.mkdir(parents=True, exist_ok=True)
    for name in LAYOUT:
        if name == "templates" and link_templates:
            (target / name).symlink_to(source / name, target_is_directory=True)
        elif (source / name).is_dir():
            shutil.copytree(
                source / name, target / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy(source / name, target / name)
    return bank.Bank(target)
