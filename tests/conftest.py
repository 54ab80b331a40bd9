"""Test settings: property tests draw the same examples on every run (CI reproducible)."""

import pytest
from hypothesis import settings

from tests import postgres

settings.register_profile("scalegrade", derandomize=True, deadline=None)
settings.load_profile("scalegrade")


@pytest.fixture(scope="session")
def postgres_url():
    """A URL of a fresh PostgreSQL server of this test process (tests/postgres.py)."""
    yield from postgres.server()
