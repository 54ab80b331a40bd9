"""Nothing is released that cannot grade itself.

Before release (`scalegrade validate`, `scalegrade generate`), each code part's own
``solution.py`` is graded through its checks in the real sandbox, for several seeds, as a
student's notebook would be: the solution notebook must earn every point of the part,
and the starter (the notebook the student gets) must not.  A check that raises, in its
``probe()`` or its ``grade()``, is a failure naming the file, the line and the seed.

This module knows both sides (the generator releases, the autograder grades), so it
lives with the CLI, like :mod:`scalegrade.cohort`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

SEEDS = 3  # synthetic students, each with its own variant and grading seed
SECRET = hashlib.sha256(b"scalegrade selfcheck").digest()  # never a course's: no real variant


@dataclass(frozen=True)
class PartCheck:
    """One code part graded for ``seeds`` synthetic students."""

    question: str  # "collectives/ring-allreduce-code"
    part: str
    checks: Path  # the bank's checks file
    points: float
    solution: tuple[float, ...]  # the reference's score per seed
    starter: tuple[float, ...]  # the starter's score per seed
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class SelfCheck:
    parts: list[PartCheck] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        return [p for part in self.parts for p in part.problems]


def code_parts(assignment) -> list[tuple]:
    """(question, code part) of every part graded by checks."""
    return [(q, c) for q in assignment.questions for c in q.spec.code if c.checks is not None]


def selfcheck(assignment, *, seeds: int = SEEDS, sandbox=None) -> SelfCheck:
    """Grade each code part's solution and starter for ``seeds`` synthetic students, in
    ``sandbox`` (a :class:`autograder.sandbox.Sandbox`; one is started when None)."""
    start = time.perf_counter()
    parts = code_parts(assignment)
    if not parts:
        return SelfCheck([], time.perf_counter() - start)
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from autograder.keys import Keys, probe_seed
    from autograder.sandbox import Sandbox
    from autograder.submission import grade_one
    from contract import Student
    from generator.release import release

    students = [Student(id=f"selfcheck-{i + 1}", name=f"Self-check {i + 1}") for i in range(seeds)]
    with tempfile.TemporaryDirectory(prefix="scalegrade-selfcheck-") as tmp:
        root = Path(tmp)
        release(assignment, students, secret=SECRET, out=root / "rel", with_solutions=True)
        keys = Keys(root / "rel" / "keys")
        own = sandbox is None
        box = Sandbox(hide=[root / "rel" / "keys"], preload=keys.preload) if own else sandbox
        runs = [
            (s, kind, root / "rel" / folder / s.id / keys.release.notebook)
            for s in students
            for kind, folder in (("solution", "solutions"), ("starter", "release"))
        ]
        try:
            with ThreadPoolExecutor(box.jobs) as pool:
                done = pool.map(
                    lambda r: grade_one(
                        keys.key(r[0].id), r[2], keys=keys, runner=box, reveal=False
                    ),
                    runs,
                )
                graded = {
                    (s.id, kind): result for (s, kind, _), result in zip(runs, done, strict=True)
                }
        finally:
            if own:
                box.close()
        prefix = str(keys.folder) + "/"
    out = []
    for q, c in parts:
        bank_file = q.folder / c.checks
        problems: list[str] = []
        scores: dict[str, list[float]] = {"solution": [], "starter": []}
        points = 0.0
        for s in students:
            asked = next(kq for kq in keys.key(s.id).questions if kq.id == q.id)
            who = f"{s.id} (grading seed {probe_seed(asked.seed, c.id)})"
            for kind in ("solution", "starter"):
                result = graded[(s.id, kind)]
                verdict = next(
                    g.verdict for g in result.parts if g.question == q.id and g.verdict.part == c.id
                )
                points = verdict.points
                scores[kind].append(verdict.score or 0.0)
                problems += [
                    f"{kind} of {s.id}: {e.replace(prefix, '')}"
                    for e in result.check_errors
                    if e.startswith(f"checks/{q.id}/") or f"/checks/{q.id}/" in e
                ]
                if kind == "starter":
                    continue
                if result.error:
                    problems.append(
                        f"{q.folder / c.solution}: the solution notebook of {who} could not be "
                        f"run: {result.error}"
                    )
                elif verdict.score is not None and verdict.score < points - 1e-9:
                    problems.append(
                        f"{bank_file}: the reference {c.solution} earns {verdict.score:.3g} of "
                        f"{points:g} points for {who}: {verdict.feedback}"
                    )
        if all(x >= points - 1e-9 for x in scores["starter"]):
            problems.append(
                f"{bank_file}: the starter (the reference without its solution regions) earns "
                "every point: the checks do not test what the student writes"
            )
        out.append(
            PartCheck(
                q.id,
                c.id,
                bank_file,
                points,
                tuple(scores["solution"]),
                tuple(scores["starter"]),
                tuple(dict.fromkeys(problems)),
            )
        )
    return SelfCheck(out, time.perf_counter() - start)
