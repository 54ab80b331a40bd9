"""Test settings: property tests draw the same examples on every run (CI reproducible);
the servers and images some tests need."""

import os
import subprocess

import pytest
from hypothesis import settings

from tests import postgres

settings.register_profile("scalegrade", derandomize=True, deadline=None)
settings.load_profile("scalegrade")


@pytest.fixture(scope="session")
def postgres_url():
    """A URL of a fresh PostgreSQL server of this test process (tests/postgres.py)."""
    yield from postgres.server()


@pytest.fixture(scope="session")
def grading_image():
    """The grading image ``$SCALEGRADE_IMAGE`` names (`make image`), with an engine that has
    it; without them the test is skipped, and fails under ``$SCALEGRADE_REQUIRE_CONTAINER``
    (CI, which builds the image)."""
    from autograder.sandbox import SandboxError, find_engine

    name = os.environ.get("SCALEGRADE_IMAGE")

    def unavailable(why):
        if os.environ.get("SCALEGRADE_REQUIRE_CONTAINER"):
            pytest.fail(f"{why} (and SCALEGRADE_REQUIRE_CONTAINER is set)")
        pytest.skip(why)

    if not name:
        unavailable("no grading image: `make image`, then $SCALEGRADE_IMAGE=scalegrade/grader:cpu")
    try:
        engine = find_engine("auto")
    except SandboxError as err:
        unavailable(str(err))
    found = subprocess.run([*engine.command, "image", "inspect", name], capture_output=True)
    if found.returncode:
        unavailable(f"{engine.name} has no image {name}: `make image`")
    return name
