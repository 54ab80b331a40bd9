"""Nothing is released that cannot grade itself.

Before release (`scalegrade validate`, `scalegrade generate`), each code part's own
``solution.py`` is graded through its checks in the real sandbox, for several seeds, as a
student's notebook would be: the solution notebook must earn every point of the part,
and the starter (the notebook the student gets) must not.  A check that raises, in its
``probe()`` or its ``grade()``, is a failure naming the file, the line and the seed.

An author may declare the mistakes they expect of a part (``known_wrong`` in
``question.yaml``: text of the reference replaced, and the points that should earn); each
is graded too, and a check harsher or more lenient than declared is a warning.

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
    warnings: tuple[str, ...] = ()  # known wrong variants earning other than declared


@dataclass(frozen=True)
class SelfCheck:
    parts: list[PartCheck] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        return [p for part in self.parts for p in part.problems]

    @property
    def warnings(self) -> list[str]:
        return [w for part in self.parts for w in part.warnings]


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

    from autograder.grading.keys import Keys, probe_seed
    from autograder.grading.submission import grade_one
    from autograder.sandbox import Sandbox
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
        runs += _wrong_notebooks(parts, students, root, keys.release.notebook)
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
                if kind != "solution":
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
        warnings = [
            w
            for j, wrong in enumerate(c.known_wrong)
            for w in _judged(q, c, j, wrong, graded, students)
        ]
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
                tuple(warnings),
            )
        )
    return SelfCheck(out, time.perf_counter() - start)


def _wrong_kind(q, c, j: int) -> str:
    return f"wrong {q.id} {c.id} {j}"


def _wrong_notebooks(parts, students, root: Path, notebook: str) -> list[tuple]:
    """The solution notebooks with each known wrong variant's replacements made: runs of
    (student, kind, notebook), kind naming the question, part and variant."""
    import nbformat

    runs = []
    for q, c in parts:
        for j, wrong in enumerate(c.known_wrong):
            kind = _wrong_kind(q, c, j)
            for s in students:
                nb = nbformat.read(root / "rel" / "solutions" / s.id / notebook, as_version=4)
                made = 0
                for cell in nb.cells:
                    part = cell.metadata.get("scalegrade", {})
                    if part.get("question") == q.id and part.get("answer") == c.id:
                        for old, new in wrong.replace.items():
                            made += cell.source.count(old)
                            cell.source = cell.source.replace(old, new)
                if made != len(wrong.replace):  # question.py found each once in the reference
                    raise RuntimeError(f"{q.id} {c.id}: {wrong.name!r} not applied to {s.id}")
                path = root / "wrong" / f"{q.id.replace('/', '--')}--{c.id}--{j}" / s.id / notebook
                path.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, path)
                runs.append((s, kind, path))
    return runs


def _judged(q, c, j: int, wrong, graded: dict, students) -> list[str]:
    """A warning per seed where the known wrong variant ``wrong`` earns other than declared."""
    out = []
    for s in students:
        result = graded[(s.id, _wrong_kind(q, c, j))]
        verdict = next(
            g.verdict for g in result.parts if g.question == q.id and g.verdict.part == c.id
        )
        earned = verdict.score or 0.0
        low, high = wrong.range
        slack = 1e-6 * max(1.0, verdict.points)
        if not low - slack <= earned <= high + slack:
            how = "harsher" if earned < low else "more lenient"
            out.append(
                f"{q.folder / c.checks}: the checks are {how} than declared: known wrong "
                f"{wrong.name!r} earns {earned:.3g} of {verdict.points:g} points for {s.id}, "
                f"declared {wrong.shown()} (question.yaml): {verdict.feedback}"
            )
    return out
