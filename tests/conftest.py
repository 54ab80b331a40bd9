"""Test settings: property tests draw the same examples on every run (CI reproducible)."""

from hypothesis import settings

settings.register_profile("scalegrade", derandomize=True, deadline=None)
settings.load_profile("scalegrade")
