"""One submission, from notebook to result: the pipeline every entry point runs.

The local batch, Gradescope's ``run_autograder``, nbgrader's ``grade --nbgrader`` and a
Dask cluster all run :func:`grade_one`: the sandbox's run (:func:`run_notebook`), then the
grader's judgement of it (:func:`judge`), which the batch runs in a thread of their own.
Each entry point says who submitted (a folder name, a Gradescope account on the roster,
nbgrader's student); the notebook's own metadata says whom it was released to.  When the
two differ, the notebook is graded as the student who submitted it, with that student's
numbers, and the mismatch is recorded (``released_to``) and shown in their feedback and
the instructor's report.  The id in a notebook's metadata is never trusted to choose a key.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from autograder.grading.grade import Provenance, StudentResult, grade_harvest
from autograder.grading.keys import Keys
from autograder.sandbox import Outcome, Plan, clean_text
from contract import Key

MAX_NOTEBOOK_BYTES = 32 * 2**20  # what is read of a notebook's metadata, in the grader
MAX_META_CHARS = 200  # of a student id or a variant version the metadata claims, as kept


class Runner(Protocol):
    """Runs one submission in the sandbox: a local ``Sandbox``, or a
    ``distributed.DaskRunner`` that runs the same sandbox on a Dask cluster's workers."""

    def run(self, notebook: Path, plan: Plan) -> Outcome: ...


@functools.cache
def _warm_the_comparison() -> None:
    """Build pint's registry (0.4 s) in a thread while the first submission runs in the
    sandbox, so that its verdict does not wait for it; once per process."""
    from costmodel.units import registry

    threading.Thread(target=registry, name="scalegrade-warm-units", daemon=True).start()


def content_hash(notebook: Path) -> str:
    return hashlib.sha256(notebook.read_bytes()).hexdigest()


MAX_WRITTEN_CHARS = 20_000  # of one written answer, as kept for the person who marks it
PLACEHOLDER = "YOUR ANSWER HERE"  # what a released free-response cell holds


def _read(notebook: Path) -> dict | None:
    """The notebook's JSON (plain data; nothing in it is run here), if readable."""
    try:
        if notebook.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None
        doc = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _metadata(notebook: Path) -> dict:
    """The notebook's ScaleGrade metadata (``{}`` if unreadable): read, never trusted."""
    try:
        meta = (_read(notebook) or {})["metadata"]["scalegrade"]
    except (KeyError, TypeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def released_to(notebook: Path) -> str | None:
    """The student id a notebook was released to (its ScaleGrade metadata), if readable;
    cleaned (:func:`~autograder.sandbox.clean_text`): the student wrote the file."""
    return _owner(_metadata(notebook))


def _owner(meta: dict) -> str | None:
    sid = meta.get("student_id")
    return clean_text(sid[:MAX_META_CHARS]) if isinstance(sid, str) else None


def _claimed_version(meta: dict) -> int | float | str | None:
    """The variant version the metadata claims (0 when it says none): a number as it is,
    anything else as cleaned text (a list or an object as its repr)."""
    claimed = meta.get("variant_version", 0)
    if claimed is None or isinstance(claimed, int | float):
        return claimed
    text = claimed if isinstance(claimed, str) else repr(claimed)
    return clean_text(text[:MAX_META_CHARS])


def written_answers(notebook: Path) -> dict[str, dict[str, str]]:
    """Question -> part -> the text of each free-response cell, as the student left it
    ("" when untouched), for the person who marks it.  Read from the notebook's JSON, by
    the cells' ScaleGrade metadata; nothing in it is run.  Texts and names are cleaned
    (:func:`~autograder.sandbox.clean_text`); of two names that clean alike, the later
    cell's text is kept."""
    cells = (_read(notebook) or {}).get("cells")
    out: dict[str, dict[str, str]] = {}
    for cell in cells if isinstance(cells, list) else []:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        part = meta.get("scalegrade") if isinstance(meta, dict) else None
        if not isinstance(part, dict) or part.get("kind") != "free_response":
            continue
        source = cell.get("source", "")
        text = "".join(map(str, source)) if isinstance(source, list) else str(source)
        text = "" if text.strip() == PLACEHOLDER else text.strip()[:MAX_WRITTEN_CHARS]
        question = clean_text(str(part.get("question"))[:MAX_META_CHARS])
        answer = clean_text(str(part.get("answer"))[:MAX_META_CHARS])
        out.setdefault(question, {})[answer] = clean_text(text)
    return out


@dataclass(frozen=True)
class Ran:
    """One notebook's run in the sandbox, not yet judged (:func:`judge`)."""

    outcome: Outcome | None  # None: nothing ran, for ``error``
    digest: str | None = None  # the notebook's content hash
    error: str | None = None


def run_notebook(key: Key, notebook: Path | None, *, keys: Keys, runner: Runner) -> Ran:
    """Run ``notebook`` in the sandbox with the plan of ``key``'s variant."""
    if notebook is None:
        return Ran(None, error=f"no {keys.release.notebook} submitted")
    try:
        digest = content_hash(notebook)
    except OSError as err:
        return Ran(None, error=f"{notebook}: cannot read ({err.strerror})")
    _warm_the_comparison()
    return Ran(runner.run(notebook, keys.plan(key)), digest)


def judge(
    key: Key,
    notebook: Path | None,
    ran: Ran,
    *,
    keys: Keys,
    reveal: bool,
    others: dict[str, Key] | None = None,
    version: int = 0,
) -> StudentResult:
    """The result of a run (:func:`run_notebook`): the grader's side of :func:`grade_one`,
    none of it in the sandbox."""
    rules = dict(policy=keys.release.policy, checks=keys.checks, reveal=reveal)
    outcome = ran.outcome
    if outcome is None or notebook is None:
        return grade_harvest(key, None, error=ran.error, **rules)
    harvest = outcome.harvest
    if harvest is not None:
        harvest = {**harvest, "written": written_answers(notebook)}
    meta = _metadata(notebook)
    owner = _owner(meta)
    claimed = _claimed_version(meta)
    provenance = Provenance(
        content_hash=ran.digest,
        seconds=outcome.seconds,
        isolation=outcome.isolation,
        released_to=owner if owner is not None and owner != key.student.id else None,
        claimed_version=claimed if claimed != version else None,
    )
    return grade_harvest(
        key, harvest, error=outcome.error, provenance=provenance, others=others, **rules
    )


def grade_one(
    key: Key,
    notebook: Path | None,
    *,
    keys: Keys,
    runner: Runner,
    reveal: bool,
    others: dict[str, Key] | None = None,
    version: int = 0,
) -> StudentResult:
    """Grade ``notebook``, submitted by ``key``'s student, against ``key``, the key of
    their variant ``version`` (the seed ledger's, at the submission's time).

    ``notebook`` None: nothing was submitted (0 points, free-response parts pending).
    ``others``: the other students' keys, for copy signals (a wrong answer that is another
    student's key).  A notebook that cannot be read or run is this result's error.
    """
    ran = run_notebook(key, notebook, keys=keys, runner=runner)
    return judge(key, notebook, ran, keys=keys, reveal=reveal, others=others, version=version)
