"""Grading speed: the sandbox's per-submission overhead, and a batch of tdlsm/hw1.

(a) Overhead: a trivial notebook (``x = 1``) through the warm sandbox, one at a time, as a
    ratio to a cold ``python -c "import numpy"`` measured in the same run (target <= 0.25).
(c) The probe process: a notebook with one ISOLATED probe calling its function once,
    against the same notebook without it, in the same run.
(b) Batch: the solution notebooks of tdlsm/hw1 for a 40-student roster with 2 threads,
    sandbox and trusted grading (``grade_one``; target < 10 s).  What is paid once per
    batch (the executor's start, the first submission importing torch for the ring's
    checks) and the release are timed apart.

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

from autograder.keys import Keys  # noqa: E402
from autograder.sandbox import Plan, Probe, Sandbox  # noqa: E402
from autograder.submission import grade_one  # noqa: E402
from generator import bank  # noqa: E402


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


PROBE = """
ISOLATED = True


def probe(student, seed, params):
    return {"y": student(seed % 7)}
"""


def probe_overhead(sandbox: Sandbox, folder: Path, runs: int) -> tuple[float, float]:
    """The same notebook without a probe, and with one probe process calling it once:
    the cost of the probe process per submission (its fork, its channel, one call)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("def f(x):\n    return 2 * x\nx = 1")]
    path = folder / "probed.ipynb"
    nbformat.write(nb, path)
    bare = Plan(variables=("x",))
    probed = Plan(variables=("x",), probes=(Probe("q1-f", "f", PROBE, 5, {}, isolated=True),))
    medians = []
    for plan in (bare, probed):
        sandbox.run(path, plan)  # warm-up
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            outcome = sandbox.run(path, plan)
            times.append(time.perf_counter() - start)
            probes = outcome.harvest["probes"] if outcome.harvest else {}
            if outcome.error or (
                plan is probed and probes["q1-f"] != {"ok": True, "result": {"y": 10}}
            ):
                sys.exit(f"the probed notebook failed: {outcome.error} {probes}\n{outcome.log}")
        medians.append(statistics.median(times))
    return medians[0], medians[1]


def release_hw1(folder: Path, students: int) -> tuple[Path, Path, float]:
    from generator.release import release
    from generator.roster import parse

    roster = parse(
        "student_id,name,email\n"
        + "".join(f"s{i:03d},Student {i},s{i:03d}@example.edu\n" for i in range(students))
    )
    start = time.perf_counter()
    out = folder / "release"
    release(
        bank.load().assignment("tdlsm/hw1"),
        roster,
        secret=b"grade-bench-secret-0123456789abcdef",
        out=out,
        with_solutions=True,
    )
    return out / "solutions", out / "keys", time.perf_counter() - start


def batch(sandbox: Sandbox, solutions: Path, keys_dir: Path, jobs: int) -> dict:
    keys = Keys(keys_dir)
    notebooks = sorted(solutions.glob("*/*.ipynb"))

    def one(path: Path) -> tuple[str | None, float]:
        key = keys.key(path.parent.name)
        result = grade_one(key, path, keys=keys, runner=sandbox, reveal=False)
        return result.error, result.score / result.max_score

    # Warm-up: the first submission pays the one-time import of what its checks need
    # (torch for the ring's gloo run) in the warm executor, once per batch.
    start = time.perf_counter()
    one(notebooks[0])
    warmup = time.perf_counter() - start
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, notebooks))
    seconds = time.perf_counter() - start
    return {
        "n": len(notebooks),
        "seconds": seconds,
        "warmup": warmup,
        "errors": [e for e, _ in results if e],
        "mean_score": statistics.mean(s for _, s in results),
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
            bare, probed = probe_overhead(sandbox, folder, args.runs)
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
    print(
        f"(c) the probe process: the same notebook {bare * 1e3:.1f} ms without a probe, "
        f"{probed * 1e3:.1f} ms with one probe process calling it once: "
        f"+{(probed - bare) * 1e3:.1f} ms, ratio {probed / bare:.2f}"
    )
    print(
        f"(b) {result['n']} tdlsm/hw1 solution notebooks, {args.jobs} threads, sandbox and "
        f"trusted grading: {result['seconds']:.2f} s "
        f"({result['seconds'] / max(1, result['n']) * 1e3:.0f} ms each; target < 10 s: "
        f"{'met' if result['seconds'] < 10 else 'MISSED'}); mean score "
        f"{result['mean_score']:.1%}; errors {len(result['errors'])}"
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
