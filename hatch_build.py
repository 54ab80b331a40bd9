"""Build hook: a wheel carries the repository's question bank as ``scalegrade/bank/``.

A regular install finds it there (``generator.bank.default_root``); an editable install
reads the bank from the checkout itself, so nothing is copied for it.
"""

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BANK = ("courses.yaml", "notes", "templates", "assignments")  # generator/bank.py's layout


class BankHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name == "wheel" and version == "standard":
            build_data["force_include"].update({name: f"scalegrade/bank/{name}" for name in BANK})
