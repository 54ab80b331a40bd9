"""Grading speed: the sandbox's per-submission overhead, and a batch of tdlsm/hw1.

(a) Overhead: a trivial notebook (``x = 1``) through the warm sandbox, one at a time, as a
    ratio to a cold ``python -c "import numpy"`` measured in the same run (target <= 0.25).
(b) Batch: the solution notebooks of tdlsm/hw1 for a 40-student roster through the sandbox
    with 2 threads (target < 10 s): harvest, and the trusted grading when
    ``autograder.grade`` is there.  What is paid once per batch (the executor's start, the
    first submission importing torch for the ring's checks) and the release are timed apart.

    .venv/bin/python bench/grade_bench.py [--students 40] [--jobs 2] [--backend auto]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.sandbox import Plan, Sandbox  # noqa: E402


def cold_numpy(runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import numpy"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def overhead(sandbox: Sandbox, folder: Path, runs: int) -> float:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    path = folder / "trivial.ipynb"
    nbformat.write(nb, path)
    plan = Plan(variables=("x",))
    sandbox.run(path, plan)  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        outcome = sandbox.run(path, plan)
        times.append(time.perf_counter() - start)
        if outcome.error or outcome.harvest["answers"]["x"] != {"kind": "number", "value": 1}:
            sys.exit(f"trivial notebook failed: {outcome.error}\n{outcome.log}")
    return statistics.median(times)


def release_hw1(folder: Path, students: int) -> tuple[Path, Path, float]:
    from generator import assignment
    from generator.release import release
    from generator.roster import parse

    roster = parse(
        "student_id,name,email\n"
        + "".join(f"s{i:03d},Student {i},s{i:03d}@example.edu\n" for i in range(students))
    )
    start = time.perf_counter()
    out = folder / "release"
    release(
        assignment.load("tdlsm/hw1"),
        roster,
        secret=b"grade-bench-secret-0123456789abcdef",
        out=out,
        with_solutions=True,
    )
    return out / "solutions", out / "keys", time.perf_counter() - start


def batch(sandbox: Sandbox, solutions: Path, keys_dir: Path, jobs: int) -> dict:
    try:
        from autograder import key as keys
        from autograder.grade import grade_harvest, plan_for
    except ImportError:  # harvest only, with the answer variables the notebooks declare
        keys = None
    notebooks = sorted(solutions.glob("*/*.ipynb"))
    if keys is not None:
        all_keys = keys.load_all(keys_dir)
        policy = keys.load_info(keys_dir).policy

    def plan_from_notebook(path: Path) -> Plan:
        nb = nbformat.read(path, as_version=4)
        names = [
            c.metadata["scalegrade"]["variable"]
            for c in nb.cells
            if c.metadata.get("scalegrade", {}).get("kind") == "answer"
        ]
        return Plan(variables=tuple(names))

    def one(path: Path) -> tuple[str | None, float | None]:
        student = path.parent.name
        if keys is None:
            outcome = sandbox.run(path, plan_from_notebook(path))
            return outcome.error, None
        key = all_keys[student]
        outcome = sandbox.run(path, plan_for(key))
        result = grade_harvest(
            key, outcome.harvest, policy=policy, reveal=False, error=outcome.error
        )
        return outcome.error, result.score / result.max_score

    # Warm-up: the first submission pays the one-time import of what its checks need
    # (torch for the ring's gloo run) in the warm executor, once per batch.
    start = time.perf_counter()
    one(notebooks[0])
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, notebooks))
    seconds = time.perf_counter() - start
    errors = [e for e, _ in results if e]
    scores = [s for _, s in results if s is not None]
    return {
        "n": len(notebooks),
        "seconds": seconds,
        "warmup": warmup,
        "errors": errors,
        "graded": keys is not None,
        "mean_score": statistics.mean(scores) if scores else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="scalegrade-bench-"))
    try:
        cold = cold_numpy(7)
        solutions, keys_dir, release_s = release_hw1(folder, args.students)
        start = time.perf_counter()
        with Sandbox(backend=args.backend, hide=[keys_dir, folder]) as sandbox:
            startup = time.perf_counter() - start
            warm = overhead(sandbox, folder, args.runs)
            result = batch(sandbox, solutions, keys_dir, args.jobs)
            isolation = sandbox.isolation
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ratio = warm / cold
    print(f"sandbox: {isolation}")
    print(
        f"(a) per-submission overhead (trivial notebook): {warm * 1e3:.1f} ms; "
        f"cold `python -c 'import numpy'`: {cold * 1e3:.1f} ms; "
        f"ratio {ratio:.3f} (target <= 0.25: {'met' if ratio <= 0.25 else 'MISSED'})"
    )
    what = "harvest + trusted grading" if result["graded"] else "harvest only"
    score = "" if result["mean_score"] is None else f"; mean score {result['mean_score']:.1%}"
    print(
        f"(b) {result['n']} tdlsm/hw1 solution notebooks, {args.jobs} threads, {what}: "
        f"{result['seconds']:.2f} s ({result['seconds'] / max(1, result['n']) * 1e3:.0f} ms "
        f"each; target < 10 s: {'met' if result['seconds'] < 10 else 'MISSED'}){score}; "
        f"errors {len(result['errors'])}"
    )
    print(
        f"    once per batch, not in (b): executor start {startup:.2f} s; first submission "
        f"{result['warmup']:.2f} s (imports its checks' torch into the warm executor); "
        f"release of the {args.students} notebooks {release_s:.1f} s"
    )
    for error in result["errors"][:5]:
        print(f"    error: {error}")


if __name__ == "__main__":
    main()
