"""Submission times from their sources, in order: the manifest, nbgrader's timestamp.txt,
Gradescope's created_at, and last the file's time, with a warning."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

import pytest

from autograder.semester.submitted_at import ManifestError, read_manifest, submitted_at

ZONE = "Europe/Zurich"


@pytest.fixture
def notebook(tmp_path):
    path = tmp_path / "ana" / "hw1.ipynb"
    path.parent.mkdir()
    path.write_text("{}", encoding="utf-8")
    stamp = datetime(2026, 12, 1, 8, 0, tzinfo=UTC).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def test_the_file_time_is_the_last_resort_and_says_so(notebook):
    when = submitted_at("ana", notebook, manifest=None, zone=ZONE)
    assert when.at == datetime(2026, 12, 1, 8, 0, tzinfo=UTC) and when.source == "file time"
    assert "modification time" in when.warning and "submissions.csv" in when.warning


def test_gradescope_created_at_comes_before_the_file_time(notebook):
    meta = {"created_at": "2026-12-18T14:22:32.365935-08:00", "users": []}
    (notebook.parent / "submission_metadata.json").write_text(json.dumps(meta))
    when = submitted_at("ana", notebook, manifest=None, zone=ZONE)
    assert when.at == datetime(2026, 12, 18, 22, 22, 32, 365935, tzinfo=UTC)
    assert (when.source, when.warning) == ("Gradescope", None)


def test_nbgrader_timestamp_comes_before_gradescope(notebook):
    (notebook.parent / "submission_metadata.json").write_text('{"created_at": "2027-01-01"}')
    # nbgrader submit's format, in the exchange's configured zone
    (notebook.parent / "timestamp.txt").write_text("2026-12-18 23:30:00.000000 Europe/Zurich")
    when = submitted_at("ana", notebook, manifest=None, zone="UTC")
    assert when.at == datetime(2026, 12, 18, 22, 30, tzinfo=UTC) and when.source == "nbgrader"


def test_the_manifest_overrides_everything(notebook, tmp_path):
    (notebook.parent / "timestamp.txt").write_text("2026-12-18 23:30:00.000000 UTC")
    path = tmp_path / "submissions.csv"
    path.write_text("student_id,submitted_at\nana,2026-12-19T10:00\n", encoding="utf-8")
    manifest = read_manifest(path, ZONE)
    when = submitted_at("ana", notebook, manifest=manifest, zone=ZONE)
    assert when.at == datetime(2026, 12, 19, 9, 0, tzinfo=UTC)  # no zone: the course's
    assert when.source == "submissions.csv:2"
    # a student on the manifest who submitted no notebook still has the time given
    assert submitted_at("ana", None, manifest=manifest, zone=ZONE) == when
    assert submitted_at("ben", None, manifest=manifest, zone=ZONE) is None


def test_an_unreadable_source_is_skipped_with_a_warning_naming_it(notebook):
    (notebook.parent / "timestamp.txt").write_text("yesterday evening")
    (notebook.parent / "submission_metadata.json").write_text("{not json")
    when = submitted_at("ana", notebook, manifest=None, zone=ZONE)
    assert when.source == "file time"
    assert "timestamp.txt: 'yesterday evening' is not a time" in when.warning
    assert "submission_metadata.json: no readable created_at" in when.warning


def test_a_bad_manifest_names_every_line(tmp_path):
    path = tmp_path / "submissions.csv"
    path.write_text(
        "student_id,submitted_at\nana,2026-12-19T10:00\n,2026-12-19\nben,soon\nana,2026-12-20\n",
        encoding="utf-8",
    )
    with pytest.raises(ManifestError) as err:
        read_manifest(path, ZONE)
    assert str(err.value).splitlines() == [
        f"{path}:3: no student_id",
        f"{path}:4: student ben: 'soon' is not a time: write ISO 8601, such as "
        "2026-12-18T23:59 or 2026-12-18T23:59:00+01:00",
        f"{path}:5: student ana is also on submissions.csv:2",
    ]
    path.write_text("id,time\nana,2026-12-19\n", encoding="utf-8")
    with pytest.raises(ManifestError, match="the header must be student_id,submitted_at"):
        read_manifest(path, ZONE)
