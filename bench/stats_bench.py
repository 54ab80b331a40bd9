"""Item analysis speed: `scalegrade stats` on tdlsm/hw1 for 300 students (14 questions).

Releases the assignment to 300 students, grades a simulated cohort's answers with the
real comparison (scalegrade/cohort.py's model, no notebooks) into a gradebook, then times
`scalegrade stats` as a user runs it (its own process: reading the gradebook and the
keys, the item statistics, every part against every drawn parameter), against a cold
``python -c "import numpy"`` measured in the same run.  Target: a few seconds.

    .venv/bin/python bench/stats_bench.py [--students 300]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grade_bench import cold_numpy  # noqa: E402  (this folder: the same unit as there)

from autograder.analysis.item_report import analysis  # noqa: E402
from autograder.grading.keys import Keys  # noqa: E402
from autograder.semester.gradebook import Gradebook  # noqa: E402
from generator import bank  # noqa: E402
from generator.release import release  # noqa: E402
from generator.roster import parse  # noqa: E402
from scalegrade import cohort  # noqa: E402

SECRET = b"stats-bench-secret-0123456789abcdef"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    args = parser.parse_args()
    n = args.students
    folder = Path(tempfile.mkdtemp(prefix="scalegrade-stats-bench-"))
    try:
        hw1 = bank.load().assignment("tdlsm/hw1")
        roster = parse(
            "student_id,name,email\n" + "".join(f"s{i:03d},S {i},s{i:03d}@x\n" for i in range(n))
        )
        release(hw1, roster, secret=SECRET, out=folder / "hw1")
        keys = Keys(folder / "hw1" / "keys")
        graded, _ = cohort.answered(hw1, roster, secret=SECRET)  # the released keys' numbers
        book = Gradebook(f"sqlite:///{folder / 'gradebook.sqlite'}")
        book.record_release(keys.release, keys.folder, folder, reveal=False)
        for result in graded:
            book.record("tdlsm/hw1", result)
        results = book.results("tdlsm/hw1")
        book.close()
        start = time.perf_counter()
        found = analysis(results, keys.all())
        in_process = time.perf_counter() - start
        command = [sys.executable, "-m", "scalegrade.cli", "stats", "tdlsm/hw1", "--grades",
                   str(folder)]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode:
            sys.exit(f"scalegrade stats failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        unit = cold_numpy(5)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    items, tests = len(found.stats.items), found.fairness.tests
    print(f"scalegrade stats tdlsm/hw1, {n} students, {items} scored parts, {tests} "
          f"attribution tests: {wall:.2f} s as a command ({wall / unit:.0f} units of a cold "
          f"numpy import, {1000 * unit:.0f} ms), of which the analysis itself "
          f"{in_process:.2f} s; target: a few seconds")  # fmt: skip


if __name__ == "__main__":
    main()
