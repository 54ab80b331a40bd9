"""Browser tests: Debian's ``chromium`` driven headless by playwright (no browser download).

Without chromium or playwright they are skipped, with the reason; ``.ci/run`` installs
chromium and sets ``SCALEGRADE_REQUIRE_BROWSER=1``, which turns the skip into a failure.
Screenshots and PDFs go to ``$SCALEGRADE_ARTIFACTS`` (default ``out/test-artifacts``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REQUIRE_ENV = "SCALEGRADE_REQUIRE_BROWSER"
ARTIFACTS_ENV = "SCALEGRADE_ARTIFACTS"
REPO = Path(__file__).resolve().parents[2]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{reason} (and {REQUIRE_ENV} is set)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    """One headless chromium per test module."""
    path = chromium_path()
    if path is None:
        _unavailable("Debian's chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=path,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    root = Path(os.environ.get(ARTIFACTS_ENV) or REPO / "out" / "test-artifacts") / "selftest"
    root.mkdir(parents=True, exist_ok=True)
    return root
