"""Nothing a submission returns can break the batch (issue 36, item 6).

The sandbox's JSON is read with ``json.loads``, which makes a lone surrogate of a
``"\\ud800"`` escape; a notebook file is JSON the student wrote.  Such a string, or a NUL,
written into a feedback page (UTF-8) or a gradebook column raises: every string is cleaned
where it crosses into the grader (``sandbox.clean_text``), and one student's file that
still cannot be written is a warning, never the batch's end.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from autograder.grading.keys import Keys
from autograder.grading.submission import released_to, written_answers
from autograder.sandbox import HarvestError, Limits, Plan, Probe, Sandbox, check_harvest, clean_text
from autograder.sandbox.box import _Capture
from autograder.sandbox.harvest import MAX_ERROR_CHARS, MAX_STRING_CHARS, MAX_TYPE_CHARS
from autograder.semester.batch import grade_batch, publish
from autograder.semester.gradebook import Gradebook
from tests.autograder.demo_course import release_hw1

BAD = "\ud800 \udfff \x00 "  # a lone surrogate of each half, and a NUL
MEGA = 1_000_000
PLAN = Plan(
    variables=("a", "s", "u"),
    probes=(
        Probe("q1-p", "f", "", 1, {}),
        Probe("q1-q", "g", "", 1, {}),
        Probe("q1-iso", "h", "", 1, {}, isolated=True),
    ),
)


def strings(value):
    """Every string in plain data, dict keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def assert_clean(value) -> None:
    for s in strings(value):
        s.encode("utf-8")  # raises on a lone surrogate
        assert "\x00" not in s


def wire(doc) -> bytes:
    """``doc`` as the sandbox sends it: JSON with ``\\ud800`` escapes, never raw surrogates."""
    text = json.dumps(doc)
    assert "\\ud800" in text or "\\u0000" in text  # what json.loads turns back into them
    return text.encode()


def hostile_harvest(**changes) -> dict:
    doc = {
        "cells": [
            {"index": 0, "ok": False, "error": BAD + "cell"},
            {"index": 1, "ok": True, "error": None},
        ],
        "answers": {
            "a": {"kind": "number", "value": 1.5},
            "s": {"kind": "string", "value": BAD + "21 GB"},
            "u": {"kind": "unsupported", "type": "My\ud800Type\x00"},
        },
        "probes": {
            "q1-p": {
                "ok": True,
                "result": dict(
                    [
                        ("k\ud800", ["\udfff", {"\x00": "v\ud800"}]),
                        ("long", "\ud800" + "x" * MEGA),
                        ("a\ud800", 1),
                        ("a\udfff", 2),  # cleans to the same key as the one before: it wins
                    ]
                ),
            },
            "q1-q": {"ok": False, "error": BAD + "probe"},
            "q1-iso": {"ok": False, "error": "iso" + BAD},
        },
    }
    doc.update(changes)
    return doc


class _Reader:
    """The sandbox's reading of what a job sent back (``Sandbox._interpret``), without
    starting a sandbox."""

    limits = Limits()
    _interpret = Sandbox._interpret
    _envelope = Sandbox._envelope


def interpret(result: bytes, probed: bytes = b"", error_event: dict | None = None):
    exit_event = {"event": "exit", "code": 0}
    return _Reader()._interpret(exit_event, error_event, result, False, PLAN, False, probed)


# --------------------------------------------------------------------------- the boundary


def test_clean_text_replaces_surrogates_and_nul_one_for_one():
    assert clean_text("\ud800a\udfff\x00b") == "\ufffda\ufffd\ufffdb"
    assert clean_text("a\x00") == "a\ufffd"  # the ASCII fast path
    for fine in ("", "plain", "é 😀 ∑ \ufffd", "tab\tand\nnewline"):
        assert clean_text(fine) == fine
    assert len(clean_text(BAD * 1000)) == len(BAD) * 1000


def test_every_string_of_a_harvest_comes_back_valid_utf8_without_nul():
    got = check_harvest(json.loads(wire(hostile_harvest())), PLAN)
    assert_clean(got)
    assert got["cells"][0]["error"] == "\ufffd \ufffd \ufffd cell"
    assert got["answers"]["s"] == {"kind": "string", "value": "\ufffd \ufffd \ufffd 21 GB"}
    assert got["answers"]["u"] == {"kind": "unsupported", "type": "My\ufffdType\ufffd"}
    assert got["probes"]["q1-q"] == {"ok": False, "error": "\ufffd \ufffd \ufffd probe"}
    result = got["probes"]["q1-p"]["result"]
    assert result["k\ufffd"] == ["\ufffd", {"\ufffd": "v\ufffd"}]
    assert result["a\ufffd"] == 2 and "a\ud800" not in result
    assert len(result["long"]) == MEGA + 1  # a probe result's string is not capped


def test_the_envelope_and_the_probe_process_are_cleaned_too():
    student = hostile_harvest()
    probed = {"probes": {"q1-iso": {"ok": True, "result": {"x\ud800": ["\x00" * 3]}}}}
    error, got = interpret(wire({"harvest": student}), wire(probed))
    assert error is None
    assert_clean(got)
    assert got["probes"]["q1-iso"] == {"ok": True, "result": {"x\ufffd": ["\ufffd" * 3]}}


@pytest.mark.parametrize(
    "where, limit",
    [("cell", MAX_ERROR_CHARS), ("string", MAX_STRING_CHARS), ("type", MAX_TYPE_CHARS)],
)
def test_a_megabyte_string_where_the_schema_caps_is_still_a_clean_error(where, limit):
    """The schema's rule stays (the student's process broke it: HarvestError), and the
    error that says so is short, valid text: that submission's error, not the batch's."""
    long = BAD + "x" * MEGA
    doc = hostile_harvest()
    if where == "cell":
        doc["cells"][0]["error"] = long
    elif where == "string":
        doc["answers"]["s"]["value"] = long
    else:
        doc["answers"]["u"]["type"] = long
    with pytest.raises(HarvestError, match=f"longer than {limit} characters"):
        check_harvest(json.loads(wire(doc)), PLAN)
    error, got = interpret(wire({"harvest": doc}))
    assert got is None and error.startswith("harvest is malformed")
    assert_clean(error) and len(error) <= MAX_ERROR_CHARS


def test_a_long_probe_error_from_the_students_process_fails_only_that_submission():
    doc = hostile_harvest()
    doc["probes"]["q1-q"]["error"] = BAD + "x" * MEGA
    error, got = interpret(wire({"harvest": doc}))
    assert got is None and "q1-q.error: longer than" in error
    assert_clean(error) and len(error) <= MAX_ERROR_CHARS


def test_a_long_probe_error_from_the_probe_process_is_cut_not_fatal():
    """The probe process is the grader's: its overlong message is cut to the cap, and the
    rest of the harvest is graded."""
    probed = {"probes": {"q1-iso": {"ok": False, "error": BAD + "y" * MEGA}}}
    error, got = interpret(wire({"harvest": hostile_harvest()}), wire(probed))
    assert error is None
    message = got["probes"]["q1-iso"]["error"]
    assert len(message) == MAX_ERROR_CHARS and message.startswith("\ufffd \ufffd \ufffd y")
    assert got["answers"]["a"] == {"kind": "number", "value": 1.5}
    assert_clean(got)


def test_a_hostile_key_in_an_error_path_is_cleaned_and_cut():
    deep: list = []
    for _ in range(60):
        deep = [deep]
    doc = hostile_harvest()
    doc["probes"]["q1-p"]["result"] = {BAD + "k" * MEGA: {BAD: deep}}
    with pytest.raises(HarvestError, match="deeper"):
        check_harvest(json.loads(wire(doc)), PLAN)
    error, got = interpret(wire({"harvest": doc}))
    assert got is None and "deeper" in error
    assert_clean(error) and len(error) <= MAX_ERROR_CHARS


def test_fatal_messages_sandbox_errors_and_the_log_are_cleaned():
    error, got = interpret(wire({"fatal": BAD + "z" * MEGA}))
    assert got is None and error.startswith("\ufffd \ufffd \ufffd z")
    assert_clean(error) and len(error) == MAX_ERROR_CHARS
    event = json.loads(wire({"event": "error", "message": BAD + "boom"}))
    error, _ = _Reader()._interpret(None, event, b"", False, PLAN, False)
    assert error == "the sandbox failed: \ufffd \ufffd \ufffd boom"
    capture = _Capture(1 << 10)
    capture.add(b"a\x00b \xed\xa0\x80 c\n")  # a NUL, and a surrogate encoded (not UTF-8)
    assert_clean(capture.text()) and capture.text().startswith("a\ufffdb ")


# --------------------------------------------------------------------------- the notebook file


def test_strings_read_from_the_notebook_file_are_cleaned(tmp_path):
    def free(question, answer, source):
        meta = {"scalegrade": {"kind": "free_response", "question": question, "answer": answer}}
        return {"cell_type": "markdown", "metadata": meta, "source": source}

    nb = {
        "cells": [
            free("q\ud800", "a\x00", "first"),
            free("q\udfff", "b", ["It fits \ud800", " and \x00 ", "\udfff"]),
            free("q\ud800", "a\ud800", "later"),  # the same names once cleaned: kept
            {"cell_type": "code", "metadata": [], "source": "x = 1"},  # metadata not an object
        ],
        "metadata": {"scalegrade": {"student_id": "s\ud800\x00", "variant_version": "2\udfff"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "hw1.ipynb"
    path.write_bytes(wire(nb))
    written = written_answers(path)
    assert written == {"q\ufffd": {"a\ufffd": "later", "b": "It fits \ufffd and \ufffd \ufffd"}}
    assert_clean(written)
    assert released_to(path) == "s\ufffd\ufffd"


# --------------------------------------------------------------------------- end to end

HOSTILE, HONEST, BLOCKED = "s00", "s01", "s02"
RING = (  # the code part of collectives/ring-allreduce-code: the probe process calls it
    "import numpy as np\n\n\n"
    "def ring_allreduce(x, rank, world, comm):\n"
    '    raise ValueError("\\ud800 bad \\x00 " + "x" * 1_000_000)\n'
)
RAISES = (  # a cell that prints a NUL and bytes that are not UTF-8, then raises
    "import sys\n"
    'print("printed \\x00 nul")\n'
    'sys.stdout.buffer.write(b"\\xed\\xa0\\x80 not utf-8\\n")\n'
    "sys.stdout.flush()\n"
    'raise RuntimeError("\\udfff cell \\x00 " + "y" * 1_000_000)\n'
)


def _code_cell(source: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": []} | {
        "source": source
    }


def _make_hostile(path: Path) -> None:
    """The solutions notebook, with the ring raising a surrogate, a NUL and a megabyte, a
    cell that raises and prints them, a string answer holding one, and raw ``\\ud800``
    escapes in the file (a written answer, a code cell's comment, the metadata)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["metadata"]["scalegrade"]["student_id"] = HOSTILE + "\ud800"
    nb["metadata"]["scalegrade"]["variant_version"] = "\udfff\x00"
    for cell in nb["cells"]:
        part = cell["metadata"].get("scalegrade", {})
        if part.get("function") == "ring_allreduce":
            cell["source"] = RING
        elif part.get("variable") == "q1_states_gb":
            cell["source"] = 'q1_states_gb = "12 GB \\ud800"'
        elif part.get("kind") == "free_response" and part.get("answer") == "fits":
            cell["source"] = "It fits \ud800 \x00"
    nb["cells"][5:5] = [_code_cell(RAISES), _code_cell("# a raw \ud800 in the file\nz = 1\n")]
    path.write_bytes(wire(nb))


@pytest.fixture(scope="module")
def hostile_batch(tmp_path_factory):
    """One batch of three: the hostile notebook, an honest one, and an honest one whose
    output folder is a file (its files cannot be written)."""
    root = tmp_path_factory.mktemp("hostile")
    release_hw1(root, 3)
    for sid in (HOSTILE, HONEST, BLOCKED):
        (root / "subs" / sid).mkdir(parents=True)
        shutil.copy(root / "hw1" / "solutions" / sid / "hw1.ipynb", root / "subs" / sid)
    _make_hostile(root / "subs" / HOSTILE / "hw1.ipynb")
    odd = os.path.join(os.fsencode(root / "subs"), b"\xff\xfe")  # a name that is not UTF-8
    os.mkdir(odd)
    shutil.copy(root / "hw1" / "solutions" / HONEST / "hw1.ipynb", os.fsdecode(odd))
    grades = root / "grades"
    grades.mkdir()
    (grades / BLOCKED).write_text("a file where the student's folder would go\n")
    keys = Keys(root / "hw1" / "keys")
    with Sandbox(limits=Limits(wall_seconds=60), hide=[root / "hw1", grades]) as sandbox:
        summary = grade_batch(keys, root / "subs", grades, sandbox=sandbox, reveal=False)
    return root, keys, summary, {r["student_id"]: r for r in summary.results}


def _utf8(path: Path) -> str:
    text = path.read_bytes().decode("utf-8")  # strict: raises on an encoded surrogate
    assert "\x00" not in text
    return text


def _auto(result: dict) -> list[dict]:
    return [g["verdict"] for g in result["parts"] if g["verdict"]["score"] is not None]


def test_a_hostile_submission_cannot_break_the_batch(hostile_batch):
    root, _, summary, by_id = hostile_batch
    grades = root / "grades"
    assert set(by_id) == {HOSTILE, HONEST, BLOCKED}
    for name in ("summary.csv", "canvas.csv", "moodle.csv", "report.html"):
        _utf8(grades / name)
    for sid in (HOSTILE, HONEST):
        assert_clean(json.loads(_utf8(grades / sid / "results.json")))
        _utf8(grades / sid / "feedback.html")
    assert_clean(summary.results)  # as the gradebook stored them
    hostile = by_id[HOSTILE]
    assert hostile["error"] is None, hostile["error"]  # the notebook ran; its parts graded
    assert any("\ufffd cell \ufffd" in e for e in hostile["cell_errors"])
    assert all(len(e) < MAX_ERROR_CHARS + 20 for e in hostile["cell_errors"])  # "cell 5: "
    (ring,) = [v for v in _auto(hostile) if v["part"] == "ring"]
    assert ring["score"] == 0 and "\ufffd bad \ufffd" in ring["feedback"]
    assert "\ufffd bad \ufffd" in _utf8(grades / HOSTILE / "feedback.html")
    assert hostile["released_to"] == HOSTILE + "\ufffd"
    assert hostile["claimed_version"] == "\ufffd\ufffd"
    assert "variant version \ufffd\ufffd" in _utf8(grades / "report.html")
    (fits,) = [g for g in hostile["parts"] if g["verdict"]["part"] == "fits"]
    assert fits["verdict"]["score"] is None  # graded by a person, from the cleaned text


def test_the_honest_students_scores_are_unaffected(hostile_batch):
    _, _, _, by_id = hostile_batch
    for sid in (HONEST, BLOCKED):
        result = by_id[sid]
        assert result["error"] is None and not result["cell_errors"]
        lost = [(v["part"], v["feedback"]) for v in _auto(result) if v["score"] < v["points"]]
        assert not lost
        assert result["score"] == pytest.approx(sum(v["points"] for v in _auto(result)))


def test_a_student_whose_files_cannot_be_written_is_a_warning(hostile_batch, caplog):
    root, keys, summary, by_id = hostile_batch
    grades = root / "grades"
    assert (grades / BLOCKED).is_file()  # still the file: nothing of theirs was written
    for name in ("results.json", "feedback.html"):
        assert any(
            w.startswith(f"student {BLOCKED}: {name} was not written") for w in summary.warnings
        ), summary.warnings
    odd = [w for w in summary.warnings if BLOCKED not in w]
    assert len(odd) == 1 and odd[0].endswith("\ufffd\ufffd: not a student id (not UTF-8); skipped")
    assert by_id[BLOCKED]["score"] > 0  # graded and recorded all the same
    for sid in (HOSTILE, HONEST):
        assert (grades / sid / "results.json").is_file()
    # publish, which the deadline, extension and marks commands run, takes the same route
    (grades / "summary.csv").unlink()
    book = Gradebook(f"sqlite:///{grades / 'gradebook.sqlite'}")
    try:
        warnings: list[str] = []
        publish(book, keys.release.assignment, {BLOCKED, HONEST}, keys, warnings)
        assert sorted(w.split(":")[0] for w in warnings) == [f"student {BLOCKED}"] * 2
        with caplog.at_level(logging.WARNING, logger="autograder.semester.batch"):
            publish(book, keys.release.assignment, {BLOCKED}, keys)  # no list: logged
        assert f"student {BLOCKED}: feedback.html was not written" in caplog.text
    finally:
        book.close()
    assert (grades / "summary.csv").is_file() and (grades / "report.html").is_file()
