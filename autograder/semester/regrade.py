"""Grade an assignment again against its new keys (after ``scalegrade rekey``).

Each student's latest attempt is graded again from what the gradebook kept of it:

- where only the comparison changed (an answer's key, a tolerance, a misconception, the
  points), from the stored harvest: no notebook runs;
- where a code part's checks changed, the notebook graded (its path and SHA-256 are in
  the attempt) runs again in the sandbox for those probes only, and their results join
  the stored harvest;
- a student whose key is the one they were graded with is left as they are.

Each regraded attempt is recorded (the history keeps both), marks and lateness apply as
before, and :func:`regrade` returns the diff, per student and part, old against new.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from autograder.grading.grade import Provenance, grade_harvest
from autograder.grading.keys import Keys
from autograder.grading.submission import Runner, content_hash
from autograder.sandbox import Plan, Probe
from autograder.semester.batch import publish, reveal_now
from autograder.semester.gradebook import Gradebook, GradebookError, result_to_json
from autograder.semester.submitted_at import SubmittedAt
from contract import Key, KeyFileError

DIFF_COLUMNS = (
    "student_id",
    "question",
    "part",
    "old_score",
    "new_score",
    "old_status",
    "new_status",
)


@dataclass(frozen=True)
class PartChange:
    student_id: str
    question: str
    part: str
    old_score: float | None
    new_score: float | None
    old_status: str
    new_status: str


@dataclass
class Regraded:
    from_harvest: int = 0  # graded again with no notebook run
    rerun: int = 0  # notebooks run again for changed checks
    unchanged: int = 0  # graded with the key they have now
    errors: list[str] = field(default_factory=list)  # students left as they were, and why
    diff: list[PartChange] = field(default_factory=list)
    totals: dict[str, tuple[float, float]] = field(default_factory=dict)  # student -> old, new
    seconds: float = 0.0

    @property
    def gained(self) -> list[str]:
        return [s for s, (old, new) in self.totals.items() if new > old + 1e-9]

    @property
    def lost(self) -> list[str]:
        return [s for s, (old, new) in self.totals.items() if new < old - 1e-9]


def _parts(doc: dict) -> dict[tuple[str, str], dict]:
    return {(g["question"], g["verdict"]["part"]): g["verdict"] for g in doc["parts"]}


def diff(student_id: str, old: dict, new: dict) -> list[PartChange]:
    """Every part whose score or status differs between two standings of one student."""
    before, after = _parts(old), _parts(new)
    out = []
    for where in sorted(before.keys() | after.keys()):
        a, b = before.get(where), after.get(where)
        sa, sb = (a or {}).get("score"), (b or {}).get("score")
        ta, tb = (a or {}).get("status", "absent"), (b or {}).get("status", "absent")
        if sa != sb or ta != tb:
            out.append(PartChange(student_id, *where, sa, sb, ta, tb))
    return out


def regrade(
    book: Gradebook,
    assignment: str,
    *,
    open_runner: Callable[[Keys], AbstractContextManager[Runner]],
    students: set[str] | None = None,
) -> Regraded:
    """Grade ``assignment``'s latest attempts again against the keys where they now are
    (``open_runner(keys)``: a sandbox, opened only when some checks changed)."""
    start = time.perf_counter()
    regrading = _Regrading(book, assignment)
    todo = regrading.to_grade_again(students)
    sandbox = _SandboxOnDemand(open_runner, regrading.keys)
    try:
        for standing, attempt, key, changed in todo:
            harvest = regrading.harvest(standing["student_id"], attempt, changed, sandbox)
            if harvest is not None:
                regrading.grade_again(standing, attempt, key, harvest)
    finally:
        sandbox.close()
    regrading.out.seconds = time.perf_counter() - start
    return regrading.out


class _SandboxOnDemand:
    """The sandbox of ``open_runner(keys)``, opened the first time a notebook must run
    again (most regrades run none), and closed by :meth:`close`."""

    def __init__(self, open_runner: Callable[[Keys], AbstractContextManager[Runner]], keys: Keys):
        self._open, self._keys = open_runner, keys
        self._cm: AbstractContextManager[Runner] | None = None
        self._runner: Runner | None = None

    def runner(self) -> Runner:
        if self._runner is None:
            self._cm = self._open(self._keys)
            self._runner = self._cm.__enter__()
        return self._runner

    def close(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)


def _notebook_of(attempt) -> Path | None:
    """The notebook an attempt graded, if it is still where it was, unchanged."""
    path = Path(attempt.notebook) if attempt.notebook else None
    try:
        return path if path and content_hash(path) == attempt.content_hash else None
    except OSError:
        return None


def _submitted(attempt) -> SubmittedAt | None:
    """An attempt's submission time, as it was recorded."""
    if not attempt.submitted_at:
        return None
    return SubmittedAt(
        datetime.fromisoformat(attempt.submitted_at), attempt.time_source, attempt.time_warning
    )


class _Regrading:
    """One :func:`regrade` of an assignment: its keys where they now are, and the tally
    (``out``)."""

    def __init__(self, book: Gradebook, assignment: str):
        row = book.assignment(assignment)
        try:
            self.keys = Keys(Path(row.keys_dir or ""))
        except KeyFileError as err:
            raise GradebookError(f"{assignment}: {err}") from None
        self.book, self.assignment = book, assignment
        self.info = self.keys.release
        self.all_keys = self.keys.all()
        self.reveal = (
            reveal_now(row.due_override or self.info.due, self.info.policy, self.info.timezone)
            if row.reveal is None
            else row.reveal
        )
        self.out = Regraded()

    def to_grade_again(self, students: set[str] | None) -> list[tuple]:
        """The latest attempts (of ``students``, everyone's when None) whose key or policy
        changed: (standing, attempt, key, the probes whose checks changed).  Those left
        as they are are counted (unchanged) or said (errors) in ``out``."""
        out, keys = self.out, self.keys
        todo = []
        for standing, attempt in self.book.latest(self.assignment):
            sid = standing["student_id"]
            if students is not None and sid not in students:
                continue
            if attempt is None or sid not in keys:
                out.errors.append(f"{sid}: no attempt of theirs to grade again, or no key")
                continue
            at = datetime.fromisoformat(attempt.submitted_at) if attempt.submitted_at else None
            try:
                key, _version = keys.key_at(sid, at)  # the variant current when submitted
            except KeyFileError as err:
                out.errors.append(f"{sid}: {err}")
                continue
            if attempt.key_sha256 == keys.digest(key) and attempt.policy_json == (
                self.info.policy.model_dump_json()
            ):
                out.unchanged += 1
                continue
            if attempt.harvest_json is None:
                out.errors.append(
                    f"{sid}: graded before harvests were kept (or not run): grade the "
                    "submissions again with `scalegrade grade --regrade`"
                )
                continue
            todo.append((standing, attempt, key, self.changed_probes(key, attempt)))
        return todo

    def changed_probes(self, key: Key, attempt) -> tuple[Probe, ...]:
        """The probes of ``key``'s code parts whose checks are not those ``attempt`` was
        graded with."""
        graded_with = json.loads(attempt.checks_json or "{}")
        probes = {p.id: p for p in self.keys.plan(key).probes}
        return tuple(
            probes[f"q{q.index}-{c.id}"]
            for q in key.questions
            for c in q.code
            if c.checks is not None and graded_with.get(c.checks.file) != c.checks.sha256
        )

    def harvest(
        self, sid: str, attempt, changed: tuple[Probe, ...], sandbox: _SandboxOnDemand
    ) -> dict | None:
        """What to grade ``attempt`` from again: its stored harvest, with the ``changed``
        probes run again on its notebook where there are any.  None, said in ``out``'s
        errors, when they cannot run."""
        harvest = json.loads(attempt.harvest_json)
        if not changed:
            self.out.from_harvest += 1
            return harvest
        notebook = _notebook_of(attempt)
        if notebook is None:
            self.out.errors.append(
                f"{sid}: its checks changed, and the notebook graded "
                f"({attempt.notebook or 'path not kept'}) is gone or changed: grade "
                "it again with `scalegrade grade --regrade`"
            )
            return None
        outcome = sandbox.runner().run(notebook, Plan(variables=(), probes=changed))
        if outcome.harvest is None:
            self.out.errors.append(f"{sid}: the probes did not run: {outcome.error}")
            return None
        self.out.rerun += 1
        return {
            **harvest,
            "probes": {**harvest.get("probes", {}), **outcome.harvest["probes"]},
        }

    def grade_again(self, standing: dict, attempt, key: Key, harvest: dict) -> None:
        """Grade ``harvest`` against ``key``, record it as a new attempt, and add what
        changed of the student's standing to ``out``."""
        sid = standing["student_id"]
        raw = json.loads(attempt.result_json)
        result = grade_harvest(
            key,
            harvest,
            policy=self.info.policy,
            checks=self.keys.checks,
            reveal=self.reveal,
            error=raw["error"],
            provenance=Provenance(
                content_hash=attempt.content_hash,
                seconds=raw.get("seconds", 0.0),
                isolation=raw.get("isolation", ""),
                released_to=raw.get("released_to"),
            ),
            others=self.all_keys,
        )
        new, _ = self.book.record(
            self.assignment,
            result,
            result_to_json(result),
            submitted=_submitted(attempt),
            notebook=Path(attempt.notebook) if attempt.notebook else None,
            key_sha256=self.keys.digest(key),
            checks=self.keys.checks_used(key),
            policy=self.info.policy,
        )
        self.out.diff += diff(sid, standing, new)
        self.out.totals[sid] = (standing["score"], new["score"])


def regrade_recorded(
    book: Gradebook,
    assignment: str,
    *,
    open_runner: Callable[[Keys], AbstractContextManager[Runner]],
    by: str,
    why: str,
) -> tuple[Regraded, Path]:
    """`scalegrade regrade` (and the platform's): :func:`regrade`, then the files of the
    students regraded written again, the diff (:func:`write_diff`), who and why in the
    assignment's changes, and the report again with this regrade in its history.  The
    regrade and the diff's path."""
    if not by.strip() or not why.strip():
        raise GradebookError("say who regrades and why (--by NAME --why TEXT): both are recorded")
    done = regrade(book, assignment, open_runner=open_runner)
    out = publish(book, assignment, set(done.totals))
    path = write_diff(out, done)
    book.log(
        assignment,
        "regrade",
        {
            "from_harvest": done.from_harvest,
            "rerun": done.rerun,
            "gained": len(done.gained),
            "lost": len(done.lost),
            "diff": path.name,
        },
        by=by,
        why=why,
    )
    publish(book, assignment, set())  # the report, with this regrade in its history
    return done, path


def write_diff(out: Path, done: Regraded) -> Path:
    """``OUT/regrade-N.csv``: one row per part whose score or status changed."""
    n = len(list(out.glob("regrade-*.csv"))) + 1
    path = out / f"regrade-{n}.csv"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(DIFF_COLUMNS)
    for c in done.diff:
        w.writerow(
            [
                c.student_id,
                c.question,
                c.part,
                "" if c.old_score is None else f"{c.old_score:g}",
                "" if c.new_score is None else f"{c.new_score:g}",
                c.old_status,
                c.new_status,
            ]
        )
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path
