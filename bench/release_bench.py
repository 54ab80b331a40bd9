"""Release speed: tdlsm/hw1 for 300 students (target < 15 s on 2 cores), and its growth.

Run: .venv/bin/python bench/release_bench.py [N_STUDENTS ...]   (default: 50 300 1000)
Each size is a release as `scalegrade generate` writes it by default (notebooks, keys
with their worked solutions; no filled-in solution notebooks).  The growth is the
least-squares line through the sizes: what each student costs and what is paid once.  The
baseline, measured in the same run, is writing the same number of empty notebooks with
nbformat (the floor any notebook-producing release pays).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from generator import bank
from generator.release import release
from generator.roster import parse

TARGET_S, TARGET_N = 15.0, 300


def timed_release(n: int, tmp: Path) -> tuple[float, float, float]:
    """(release seconds, baseline seconds, the largest share of students sharing numbers)."""
    roster = parse("student_id,name,email\n" + "".join(f"s{i},S {i},s{i}@x\n" for i in range(n)))
    hw1 = bank.load().assignment("tdlsm/hw1")
    start = time.perf_counter()
    for i in range(n):
        (tmp / f"empty{i}.ipynb").write_text(nbformat.writes(nbformat.v4.new_notebook()))
    baseline = time.perf_counter() - start
    start = time.perf_counter()
    summary = release(hw1, roster, secret=b"bench-secret-0123456789abcdef", out=tmp / "o")
    return time.perf_counter() - start, baseline, max(summary.shared_numbers.values())


def main(sizes: list[int]) -> None:
    runs = {}
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            runs[n] = timed_release(n, Path(tmp))
    for n, (took, baseline, shared) in runs.items():
        verdict = ""
        if n == TARGET_N:
            verdict = f"; target < {TARGET_S:.0f} s: {'met' if took < TARGET_S else 'MISSED'}"
        print(f"release tdlsm/hw1 for {n} students: {took:.2f} s, "
              f"{1000 * took / n:.1f} ms per student (baseline, {n} empty notebooks: "
              f"{baseline:.2f} s; {took / baseline:.0f} x){verdict}; students sharing "
              f"numbers: {shared:.1%} at most")  # fmt: skip
    if len(runs) > 1:
        slope, fixed = statistics.linear_regression(list(runs), [t for t, _, _ in runs.values()])
        print(f"growth: {slope * 1000:.1f} ms per student + {fixed:.1f} s once")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [50, 300, 1000])
