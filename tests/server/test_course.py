"""A served course (scalegrade/server/course.py): the released assignments of a folder,
their notebooks, and keys read again after a reseed."""

from __future__ import annotations

import shutil

import pytest

from generator import bank
from generator.reseed import reseed
from scalegrade.server.course import Course, CourseError, slug


def test_the_course_is_its_released_assignments(course):
    served = Course(course)
    assert list(served.assignments) == ["tdlsm/hw1"]
    hw1 = served.by_slug("tdlsm-hw1")
    assert hw1.notebook("s00") == course / "hw1" / "release" / "s00" / "hw1.ipynb"
    assert hw1.notebook("nobody") is None
    assert served.students() == {f"s{i:02d}" for i in range(8)}
    assert slug("tdlsm/hw1") == "tdlsm-hw1" and slug("../keys") == "..-keys"


def test_a_reseed_is_read_again_and_nothing_else_is(course):
    served = Course(course)
    before = served.assignments["tdlsm/hw1"].keys.key("s01")
    assert served.refresh() == []  # nothing changed
    reseed(
        bank.load().assignment("tdlsm/hw1"),
        course / "hw1",
        secret=b"k" * 32,  # tests/autograder/demo_course.py released it with this secret
        student="s01",
        question=None,
        by="prof",
        why="a test",
    )
    assert served.refresh() == ["tdlsm/hw1"]
    after = served.assignments["tdlsm/hw1"].keys.key("s01")
    assert after.to_json() != before.to_json()
    assert served.assignments["tdlsm/hw1"].keys.ledger.version("s01") == 1


def test_a_folder_without_releases_or_with_a_broken_one_is_named(tmp_path, course):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CourseError, match="no released assignment"):
        Course(tmp_path / "empty")
    with pytest.raises(CourseError, match="no such folder"):
        Course(tmp_path / "missing")
    shutil.copytree(course / "hw1", course / "hw1-again")
    with pytest.raises(CourseError, match="a second release of tdlsm/hw1"):
        Course(course)
    shutil.rmtree(course / "hw1-again")
    (course / "hw1" / "keys" / "assignment.json").write_text("{")
    with pytest.raises(CourseError, match="hw1"):
        Course(course)
