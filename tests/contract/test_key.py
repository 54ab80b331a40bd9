"""The key schema: typed, versioned, written and read by one module; keys/ carries the
checks with their SHA-256; an old or foreign key is refused with the file and the fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import contract
from contract import Key, KeyFileError, Policy, Release, Tolerance
from generator import bank
from generator.release import release
from generator.roster import parse

OLD = Path(__file__).resolve().parents[1] / "data" / "keys_schema1"  # written by ScaleGrade 0.1


@pytest.fixture(scope="module")
def keys_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hw1") / "out"
    roster = parse("student_id,name,email\nana,Ana Lima,ana@x.edu\n")
    release(bank.load().assignment("dl/hw1"), roster, secret=b"c" * 32, out=out)
    return out / "keys"


def test_a_key_round_trips_through_its_json(keys_dir):
    text = (keys_dir / "ana.json").read_text(encoding="utf-8")
    key = Key.from_json(json.loads(text), "ana.json")
    assert key.to_json() == text  # byte for byte: one writer, one reader
    assert key.student.email == "ana@x.edu" and key.schema_version == contract.SCHEMA_VERSION
    a = key.questions[0].answers[0]
    assert isinstance(a.tolerance, Tolerance) and a.display_value == a.value / contract.unit_factor(
        a.unit, a.si_unit
    )
    info = contract.read_release(keys_dir)
    assert isinstance(info, Release) and isinstance(info.policy, Policy)
    assert info.to_json() == (keys_dir / "assignment.json").read_text(encoding="utf-8")


def test_a_key_of_the_old_schema_is_refused_with_the_fix():
    with pytest.raises(KeyFileError) as err:
        contract.read_key(OLD / "ana.json")
    message = str(err.value)
    assert "keys_schema1/ana.json" in message and "checks were read from templates/" in message
    assert (
        f"this grader reads key schema {contract.SCHEMA_VERSION}" in message
        and "scalegrade generate" in message
    )
    with pytest.raises(KeyFileError, match="assignment.json: ScaleGrade 0.1's keys"):
        contract.read_release(OLD)


def test_an_unknown_version_names_the_file(keys_dir, tmp_path):
    doc = json.loads((keys_dir / "ana.json").read_text(encoding="utf-8"))
    for version in (4, None, "2"):
        path = tmp_path / "ana.json"
        path.write_text(json.dumps({**doc, "schema_version": version}), encoding="utf-8")
        with pytest.raises(KeyFileError, match=rf"{path}: key schema {version!r}; .* reads"):
            contract.read_key(path)


def test_schema_2_keys_are_read_with_the_defaults_of_what_they_lack(keys_dir, tmp_path):
    """Schema 3 added the course's time zone and the late-day pool: a key folder written
    before (schema 2) is still graded, as UTC with no pool, as it was."""
    doc = json.loads((keys_dir / "assignment.json").read_text(encoding="utf-8"))
    del doc["timezone"]
    for name in ("late_charge", "late_days_pool"):
        del doc["policy"][name]
    path = tmp_path / "assignment.json"
    path.write_text(json.dumps({**doc, "schema_version": 2}), encoding="utf-8")
    release = contract.read_release(tmp_path)
    assert release.timezone == "UTC" and release.policy.late_days_pool == 0
    assert release.schema_version == contract.SCHEMA_VERSION


def test_a_release_in_no_time_zone_is_refused(keys_dir):
    doc = json.loads((keys_dir / "assignment.json").read_text(encoding="utf-8"))
    with pytest.raises(KeyFileError, match="timezone: .*'Mars/Olympus' is not a time zone"):
        contract.Release.from_json({**doc, "timezone": "Mars/Olympus"}, "assignment.json")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.pop("student"), r"malformed key: student: Field required"),
        (
            lambda d: d["questions"][0]["answers"][0].update(tolerance={"rel": 0.1, "sig": 2}),
            r"malformed key: questions.0.answers.0.tolerance: Value error, give exactly one",
        ),
        (
            lambda d: d["questions"][0]["answers"][0].update(colour="blue"),
            r"malformed key: questions.0.answers.0.colour: Extra inputs are not permitted",
        ),
    ],
)
def test_a_malformed_key_names_the_file_and_the_field(keys_dir, tmp_path, edit, message):
    doc = json.loads((keys_dir / "ana.json").read_text(encoding="utf-8"))
    edit(doc)
    path = tmp_path / "ana.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(KeyFileError, match=rf"{path}: {message}"):
        contract.read_key(path)


def test_missing_or_unreadable_files_say_what_keys_is(tmp_path):
    with pytest.raises(KeyFileError, match="missing; --keys must be the keys/ folder"):
        contract.read_release(tmp_path)
    (tmp_path / "assignment.json").write_text("{not json")
    with pytest.raises(KeyFileError, match="not valid JSON"):
        contract.read_release(tmp_path)


def test_released_checks_are_verified_against_their_hash(keys_dir, tmp_path):
    keys = tmp_path / "keys"
    shutil.copytree(keys_dir, keys)
    key = contract.read_key(keys / "ana.json")
    ref = next(c.checks for q in key.questions for c in q.code if c.checks)
    assert ref.file == "checks/vision/circular-conv-code/checks.py"
    source = contract.read_checks(keys, ref)
    assert contract.sha256(source) == ref.sha256
    (keys / ref.file).write_text(source + "\n# edited after release\n", encoding="utf-8")
    with pytest.raises(KeyFileError, match=r"checks.py: changed since release .* re-key"):
        contract.read_checks(keys, ref)
    (keys / ref.file).unlink()
    with pytest.raises(KeyFileError, match="keys/ must be copied whole, checks/ included"):
        contract.read_checks(keys, ref)
    outside = ref.model_copy(update={"file": "../ana.json"})
    with pytest.raises(KeyFileError, match="outside"):
        contract.read_checks(keys, outside)
