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

from autograder.batch import reveal_now
from autograder.grade import copy_signals, grade_harvest
from autograder.gradebook import Gradebook, GradebookError, result_to_json
from autograder.keys import Keys
from autograder.sandbox import Plan
from autograder.submission import Runner, content_hash
from autograder.submitted_at import SubmittedAt
from contract import KeyFileError

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
    row = book.assignment(assignment)
    try:
        keys = Keys(Path(row.keys_dir or ""))
    except KeyFileError as err:
        raise GradebookError(f"{assignment}: {err}") from None
    info = keys.release
    all_keys = keys.all()
    reveal = (
        reveal_now(row.due_override or info.due, info.policy, info.timezone)
        if row.reveal is None
        else row.reveal
    )
    out = Regraded()
    todo = []
    for standing, attempt in book.latest(assignment):
        sid = standing["student_id"]
        if students is not None and sid not in students:
            continue
        if attempt is None or sid not in keys:
            out.errors.append(f"{sid}: no attempt of theirs to grade again, or no key")
            continue
        at = datetime.fromisoformat(attempt.submitted_at) if attempt.submitted_at else None
        try:
            key, _version = keys.key_at(sid, at)  # the variant current when it was submitted
        except KeyFileError as err:
            out.errors.append(f"{sid}: {err}")
            continue
        if attempt.key_sha256 == keys.digest(key) and attempt.policy_json == (
            info.policy.model_dump_json()
        ):
            out.unchanged += 1
            continue
        if attempt.harvest_json is None:
            out.errors.append(
                f"{sid}: graded before harvests were kept (or not run): grade the "
                "submissions again with `scalegrade grade --regrade`"
            )
            continue
        graded_with = json.loads(attempt.checks_json or "{}")
        probes = {p.id: p for p in keys.plan(key).probes}
        changed = tuple(
            probes[f"q{q.index}-{c.id}"]
            for q in key.questions
            for c in q.code
            if c.checks is not None and graded_with.get(c.checks.file) != c.checks.sha256
        )
        todo.append((standing, attempt, key, changed))

    def notebook_of(attempt) -> Path | None:
        path = Path(attempt.notebook) if attempt.notebook else None
        try:
            return path if path and content_hash(path) == attempt.content_hash else None
        except OSError:
            return None

    runner_cm = None
    runner = None
    try:
        for standing, attempt, key, changed in todo:
            sid = standing["student_id"]
            harvest = json.loads(attempt.harvest_json)
            if changed:
                notebook = notebook_of(attempt)
                if notebook is None:
                    out.errors.append(
                        f"{sid}: its checks changed, and the notebook graded "
                        f"({attempt.notebook or 'path not kept'}) is gone or changed: grade "
                        "it again with `scalegrade grade --regrade`"
                    )
                    continue
                if runner is None:
                    runner_cm = open_runner(keys)
                    runner = runner_cm.__enter__()
                outcome = runner.run(notebook, Plan(variables=(), probes=changed))
                if outcome.harvest is None:
                    out.errors.append(f"{sid}: the probes did not run: {outcome.error}")
                    continue
                harvest = {
                    **harvest,
                    "probes": {**harvest.get("probes", {}), **outcome.harvest["probes"]},
                }
                out.rerun += 1
            else:
                out.from_harvest += 1
            raw = json.loads(attempt.result_json)
            result = grade_harvest(
                key,
                harvest,
                policy=info.policy,
                checks=keys.checks,
                reveal=reveal,
                error=raw["error"],
            )
            result.content_hash = attempt.content_hash
            result.seconds = raw.get("seconds", 0.0)
            result.isolation = raw.get("isolation", "")
            result.released_to = raw.get("released_to")
            result.harvest = harvest
            result.copy_signals = copy_signals(result, key, all_keys)
            when = (
                SubmittedAt(
                    datetime.fromisoformat(attempt.submitted_at),
                    attempt.time_source,
                    attempt.time_warning,
                )
                if attempt.submitted_at
                else None
            )
            new, _ = book.record(
                assignment,
                result,
                result_to_json(result),
                submitted=when,
                notebook=Path(attempt.notebook) if attempt.notebook else None,
                key_sha256=keys.digest(key),
                checks=keys.checks_used(key),
                policy=info.policy,
            )
            out.diff += diff(sid, standing, new)
            out.totals[sid] = (standing["score"], new["score"])
    finally:
        if runner_cm is not None:
            runner_cm.__exit__(None, None, None)
    out.seconds = time.perf_counter() - start
    return out


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
