"""Reseeding one student: new numbers for them alone, recorded in the seed ledger, and a
release again from the secret and the ledger byte for byte the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import contract
from generator import bank
from generator.release import ReleaseError, release
from generator.reseed import reseed
from generator.roster import parse

SECRET = b"s" * 32
ROSTER = parse("student_id,name,email\nana,Ana,a@x\nben,Ben,b@x\ncem,Cem,c@x\n")
Q = "budgets/model-budget"


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def released(tmp_path):
    hw1 = bank.load().assignment("tdlsm/hw1")
    release(hw1, ROSTER, secret=SECRET, out=tmp_path / "hw1", with_solutions=True)
    return hw1, tmp_path / "hw1"


def test_a_reseed_changes_one_students_question_and_nothing_else(released, tmp_path):
    hw1, out = released
    before = _tree(out)
    at = datetime(2026, 12, 10, 9, 0, tzinfo=UTC)
    done = reseed(hw1, out, secret=SECRET, student="ben", question=Q, by="Prof. Ada",
                  why="his variant leaked", at=at)  # fmt: skip
    assert (done.student, done.version, done.changed) == ("ben", 1, [Q])
    after = _tree(out)
    changed = {name for name in after if before.get(name) != after[name]}
    assert changed == {
        "keys/ben.json",
        "keys/ledger.json",
        "keys/reseeded/ben/0.json",
        "release/ben/hw1.ipynb",
        "solutions/ben/hw1.ipynb",
    }
    assert after["keys/reseeded/ben/0.json"] == before["keys/ben.json"]  # his first key
    old = contract.read_key(out / "keys" / "reseeded" / "ben" / "0.json")
    new = contract.read_key(out / "keys" / "ben.json")
    for qo, qn in zip(old.questions, new.questions, strict=True):
        assert (qo.params != qn.params) == (qo.id == Q)  # only that question's numbers
    meta = json.loads(after["release/ben/hw1.ipynb"])["metadata"]["scalegrade"]
    assert meta["variant_version"] == 1
    ledger = contract.read_ledger(out / "keys")
    (entry,) = ledger.reseeds
    assert (entry.student, entry.question, entry.by, entry.why) == (
        "ben",
        Q,
        "Prof. Ada",
        "his variant leaked",
    )
    assert ledger.version_at("ben", datetime(2026, 12, 10, 8, 59, tzinfo=UTC)) == 0
    assert ledger.version_at("ben", at) == 1


def test_a_release_again_from_the_secret_and_the_ledger_is_byte_identical(released, tmp_path):
    hw1, out = released
    reseed(hw1, out, secret=SECRET, student="ben", question=None, by="Ada", why="retake",
           at=datetime(2026, 12, 10, tzinfo=UTC))  # fmt: skip
    reseed(hw1, out, secret=SECRET, student="ben", question=Q, by="Ada", why="leaked again",
           at=datetime(2026, 12, 11, tzinfo=UTC))  # fmt: skip
    again = tmp_path / "again"
    release(hw1, ROSTER, secret=SECRET, out=again, with_solutions=True,
            ledger=contract.read_ledger(out / "keys"))  # fmt: skip
    assert _tree(again) == _tree(out)
    # and `generate --force` over the folder keeps the ledger it finds there
    release(hw1, ROSTER, secret=SECRET, out=out, with_solutions=True, force=True)
    assert _tree(again) == _tree(out)
    assert contract.read_ledger(out / "keys").version("ben") == 2


@pytest.mark.parametrize(
    ("student", "question", "why", "message"),
    [
        ("zoe", None, "x", "no student 'zoe' on the roster released"),
        ("ben", "budgets/nothing", "x", "no question 'budgets/nothing'"),
        ("ben", None, " ", "say who reseeds and why"),
    ],
)
def test_a_reseed_that_cannot_be_refuses_and_writes_nothing(
    released, student, question, why, message
):
    hw1, out = released
    before = _tree(out)
    with pytest.raises(ReleaseError, match=message):
        reseed(hw1, out, secret=SECRET, student=student, question=question, by="Ada", why=why)
    with pytest.raises(ReleaseError, match="the bank no longer makes ben's key as released"):
        reseed(hw1, out, secret=b"t" * 32, student="ben", question=None, by="Ada", why="x")
    assert _tree(out) == before
