"""Release speed: tdlsm/hw1 for 300 students, against the 20 s target on 2 cores.

Run: .venv/bin/python bench/release_bench.py [N_STUDENTS]
The baseline, measured in the same run, is writing the same number of empty notebooks
with nbformat (the floor any notebook-producing release pays).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import nbformat

from generator import bank
from generator.release import release
from generator.roster import parse

TARGET_S = 20.0


def main(n: int = 300) -> None:
    roster = parse("student_id,name,email\n" + "".join(f"s{i},S {i},s{i}@x\n" for i in range(n)))
    hw1 = bank.load().assignment("tdlsm/hw1")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        for i in range(n):
            path = Path(tmp) / f"empty{i}.ipynb"
            path.write_text(nbformat.writes(nbformat.v4.new_notebook()))
        baseline = time.perf_counter() - start
        start = time.perf_counter()
        summary = release(hw1, roster, secret=b"bench-secret-0123456789abcdef", out=Path(tmp) / "o")
        took = time.perf_counter() - start
    print(f"release tdlsm/hw1 ({len(hw1.questions)} questions) for {n} students: {took:.2f} s "
          f"= {took / TARGET_S:.2f} x the {TARGET_S:.0f} s target; "
          f"{1000 * took / n:.1f} ms per student")  # fmt: skip
    print(f"baseline (write {n} empty notebooks): {baseline:.3f} s; release / baseline = "
          f"{took / baseline:.0f} x")  # fmt: skip
    print(f"students sharing numbers: {max(summary.shared_numbers.values()):.1%} at most")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
