"""Regrade speed: tdlsm/hw1 for 300 students after a question's tolerance was fixed.

Grades the solution notebooks of a release (every notebook run in the sandbox, 2 jobs:
the baseline, measured in the same run), then widens the tolerance of model-budget's
(a) in a copy of the bank, re-keys (the same numbers) and regrades from the stored
harvests: no notebook runs (the sandbox is never opened; the bench fails if it is).
Prints the regrade per student in units (one cold ``python -c "import numpy"``, measured
in the same run) and as a ratio to grading.

    .venv/bin/python bench/regrade_bench.py [--students 300] [--jobs 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grade_bench import cold_numpy  # noqa: E402  (this folder: the same unit as there)

from autograder.grading.keys import Keys  # noqa: E402
from autograder.sandbox import Limits, Sandbox  # noqa: E402
from autograder.semester.batch import grade_batch  # noqa: E402
from autograder.semester.gradebook import Gradebook  # noqa: E402
from autograder.semester.regrade import regrade  # noqa: E402
from generator import bank  # noqa: E402
from generator.rekey import rekey  # noqa: E402
from generator.release import release  # noqa: E402
from generator.roster import parse  # noqa: E402

SECRET = b"regrade-bench-secret-0123456789abcdef"
QUESTION = "templates/budgets/model-budget/question.yaml"


def never(_keys) -> AbstractContextManager:
    raise SystemExit("the regrade opened a sandbox: a notebook would have run")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    n = args.students
    folder = Path(tempfile.mkdtemp(prefix="scalegrade-regrade-bench-"))
    try:
        source = bank.load().root
        copy = folder / "bank"
        copy.mkdir()
        for name in ("courses.yaml", "notes", "templates", "assignments"):
            (shutil.copytree if (source / name).is_dir() else shutil.copy)(
                source / name, copy / name
            )
        roster = parse(
            "student_id,name,email\n" + "".join(f"s{i:03d},S {i},s{i:03d}@x\n" for i in range(n))
        )
        out = folder / "hw1"
        hw1 = bank.load(copy, fresh=True).assignment("tdlsm/hw1")
        release(hw1, roster, secret=SECRET, out=out, with_solutions=True)
        url = f"sqlite:///{folder / 'gradebook.sqlite'}"
        keys = Keys(out / "keys")
        start = time.perf_counter()
        with Sandbox(limits=Limits(wall_seconds=120), hide=[out], preload=keys.preload) as box:
            graded = grade_batch(
                keys, out / "solutions", folder / "grades", sandbox=box, db_url=url,
                jobs=args.jobs, reveal=False,
            )  # fmt: skip
        grading = time.perf_counter() - start
        question = copy / QUESTION
        text = question.read_text(encoding="utf-8")
        question.write_text(text.replace("tolerance: {rel: 0.01}", "tolerance: {rel: 0.02}", 1))
        start = time.perf_counter()
        changed = rekey(
            bank.load(copy, fresh=True).assignment("tdlsm/hw1"),
            out, secret=SECRET, submitted={s.id for s in roster},
        )  # fmt: skip
        rekeying = time.perf_counter() - start
        book = Gradebook(url)
        try:
            done = regrade(book, "tdlsm/hw1", open_runner=never)
        finally:
            book.close()
        unit = cold_numpy(5)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.from_harvest == n and not done.errors, (done.from_harvest, done.errors[:3])
    per = done.seconds / n
    print(
        f"grading tdlsm/hw1 ({n} notebooks, {args.jobs} jobs, sandbox on): {grading:.1f} s, "
        f"{1000 * grading / n:.0f} ms per submission ({graded.errors} errors)"
    )
    print(f"rekey after the tolerance fix ({', '.join(changed.changes)}): {rekeying:.1f} s")
    print(f"regrade from the stored harvests, no notebook run: {done.seconds:.2f} s for {n} "
          f"students, {1000 * per:.1f} ms each = {per / unit:.3f} units (cold numpy "
          f"{1000 * unit:.0f} ms); {grading / done.seconds:.0f}x faster than grading")  # fmt: skip


if __name__ == "__main__":
    main()
