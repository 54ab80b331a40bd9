"""The platform's tests: a released course (tdlsm/hw1 for eight students, with the demo's
scenario notebooks), served by the real application; accounts for each role.

``platform_dir`` releases the course once per session (a few seconds); each test gets its
own copy (``course``), so what one test records is never another's.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from scalegrade.server.config import ServeConfig, load
from scalegrade.server.security import add_account
from tests.autograder.demo_course import release_hw1
from tests.server.site import PASSWORD, Site

STUDENTS = 8


@pytest.fixture(scope="session")
def released(tmp_path_factory) -> Path:
    """COURSE/hw1 (keys, release, solutions) and COURSE/../subs/<student>/hw1.ipynb, the
    demo's scenarios (s00: GiB read as GB, s03: a sum() ring, s06: the cheat, s07 on:
    honest); made once."""
    from scalegrade.demo import simulate

    root = tmp_path_factory.mktemp("released")
    release_hw1(root / "course", STUDENTS)
    simulate(root / "course" / "hw1" / "release", root / "course" / "hw1" / "keys",
             root / "subs")  # fmt: skip
    return root


@pytest.fixture
def course(released, tmp_path) -> Path:
    """This test's own copy of the released course (no platform data yet)."""
    shutil.copytree(released / "course", tmp_path / "course")
    return tmp_path / "course"


@pytest.fixture
def submissions(released) -> Path:
    """SUBS/<student>/hw1.ipynb: the demo's scenario notebooks (read only)."""
    return released / "subs"


@pytest.fixture
def config(course) -> ServeConfig:
    return load(course, workers=0, uploads_per_minute=100)


@pytest.fixture
def site(config):
    """The application (no workers: a test grades with :class:`Worker` when it needs to),
    with the accounts ``s00`` ... ``s07`` (students), ``ta`` and ``prof`` (instructor), each
    with the password PASSWORD."""
    from scalegrade.server.app import create_app

    app = create_app(config)
    engine = app.state.platform.book.engine
    for i in range(STUDENTS):
        add_account(engine, f"s{i:02d}", "student", name=f"S {i}", password=PASSWORD)
    add_account(engine, "ta", "ta", name="Tess TA", password=PASSWORD)
    add_account(engine, "prof", "instructor", name="Prof", password=PASSWORD)
    yield Site(app)
    app.state.platform.book.close()
