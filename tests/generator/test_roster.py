"""Rosters: the header, ids that are safe folder names, clear errors."""

from __future__ import annotations

import pytest

from generator.roster import RosterError, parse, read


def test_a_good_roster():
    students = parse("student_id,name,email\nana,Ana Lima,ana@x.edu\nben,Ben O,b@x.edu\n")
    assert [s.id for s in students] == ["ana", "ben"]
    assert students[0].name == "Ana Lima"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,name,email\nana,A,a@x\n", r"line 1: header id,name,email lacks student_id"),
        ("student_id,name\nana,A\n", r"lacks email"),
        ("", r"header \(empty\) lacks"),
        ("student_id,name,email\n", r"no students"),
        (
            "student_id,name,email\nana,A,a@x\nana,B,b@x\n",
            r"line 3: student_id 'ana' repeats line 2",
        ),
        ("student_id,name,email\n,A,a@x\n", r"line 2: empty student_id"),
        ("student_id,name,email\n../etc,A,a@x\n", r"line 2: student_id '../etc' is not a safe"),
        ("student_id,name,email\na/b,A,a@x\n", r"not a safe folder name"),
        ("student_id,name,email\n.hidden,A,a@x\n", r"not a safe folder name"),
    ],
)
def test_bad_rosters_are_refused_with_the_line(text, message):
    with pytest.raises(RosterError, match=message):
        parse(text)


def test_non_utf8_roster_names_the_file(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_bytes("student_id,name,email\nzoe,Zoé,z@x\n".encode("latin-1"))
    with pytest.raises(RosterError, match=r"roster.csv: not UTF-8"):
        read(path)
