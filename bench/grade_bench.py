"""Grading speed: the sandbox's per-submission overhead, and a batch of tdlsm/hw1.

(a) Overhead: a trivial notebook (``x = 1``) through the warm sandbox, one at a time, as a
    ratio to a cold ``python -c "import numpy"`` measured in the same run (target <= 0.25).
(c) The probe process: a notebook with one ISOLATED probe calling its function once,
    against the same notebook without it, in the same run.
(b) Batch: ``scalegrade grade`` of the solution notebooks of tdlsm/hw1 for a 40-student
    roster, 2 jobs, every check on, as a user runs it (a process of its own, everything it
    pays included): the time per submission in units (target <= 1.5), and the peak memory
    of the whole process tree.
(d) Growth: the same at 10, 40 and 160 submissions: the time per submission (the slope)
    and what is paid once (the intercept); and the time to the first verdict (the first
    results.json written; target <= 3 s), both of a one-submission run (what Gradescope
    and a student's resubmission wait) and of the smallest batch.

The unit is one cold ``python -c "import numpy"``, measured in the same run.

    .venv/bin/python bench/grade_bench.py [--students 40] [--growth 10,40,160] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.sandbox import Plan, Probe, Sandbox  # noqa: E402
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
    return median_run(sandbox, path, plan, runs, {"kind": "number", "value": 1}, None)


def median_run(sandbox: Sandbox, path: Path, plan: Plan, runs: int, x, probe) -> float:
    """The median time of ``runs`` runs of ``path`` (after one to warm up); each must read
    ``x`` and, where ``probe`` is given, the probe q1-f's result."""
    sandbox.run(path, plan)  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        outcome = sandbox.run(path, plan)
        times.append(time.perf_counter() - start)
        harvest = outcome.harvest or {}
        got = harvest.get("answers", {}).get("x"), harvest.get("probes", {}).get("q1-f")
        if outcome.error or got[0] != x or (probe is not None and got[1] != probe):
            sys.exit(f"{path.name} failed: {outcome.error} {got}\n{outcome.log}")
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
    x = {"kind": "number", "value": 1}
    return (
        median_run(sandbox, path, bare, runs, x, None),
        median_run(sandbox, path, probed, runs, x, {"ok": True, "result": {"y": 10}}),
    )


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


class Peak:
    """The peak memory of a command's whole process tree: a memory cgroup of its own where
    this runs as root with cgroups (v1 max_usage_in_bytes, v2 memory.peak), else the largest
    single process's peak RSS (getrusage of the children)."""

    def __init__(self) -> None:
        from autograder.sandbox.inside import memory

        self.folder = None
        try:
            version, own, _ = memory._grader_memory_cgroup()
            folder = Path(own) / f"scalegrade-bench-{os.getpid()}"
            folder.mkdir()
            self.folder, self.version = folder, version
        except OSError:
            pass

    @property
    def what(self) -> str:
        return "the batch's memory cgroup" if self.folder else "the largest process's RSS"

    def join(self) -> None:  # in the child, before exec
        if self.folder:
            (self.folder / "cgroup.procs").write_text(str(os.getpid()))

    def read(self) -> int:
        if self.folder:
            name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
            return int((self.folder / name).read_text())
        return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024

    def close(self) -> None:
        if self.folder:
            for _ in range(50):
                try:
                    self.folder.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


def grade_cli(solutions: Path, keys_dir: Path, out: Path, n: int, jobs: int, *extra: str) -> dict:
    """`scalegrade grade` on the first ``n`` solution notebooks, as a user runs it: the
    wall time, the time to its first verdict (the first results.json written), its peak
    memory and its mean score."""
    subset = out.parent / f"submissions-{n}"
    if not subset.is_dir():
        for folder in sorted(solutions.iterdir())[:n]:
            shutil.copytree(folder, subset / folder.name)
    peak = Peak()
    command = [sys.executable, "-m", "scalegrade.cli", "grade", "tdlsm/hw1", str(subset)]
    command += ["--keys", str(keys_dir), "--out", str(out), "--jobs", str(jobs), *extra]
    try:
        start = time.time()
        done = subprocess.run(command, capture_output=True, text=True, preexec_fn=peak.join)
        wall = time.time() - start
        memory = peak.read()
    finally:
        peak.close()
    if done.returncode:
        sys.exit(f"scalegrade grade failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    results = [json.loads(p.read_text()) for p in out.glob("*/results.json")]
    first = min(p.stat().st_mtime for p in out.glob("*/results.json")) - start
    summary = (out / "summary.csv").read_text().splitlines()
    header = summary[0].split(",")
    errors = [row for row in summary[1:] if row.split(",")[header.index("error")]]
    score = statistics.mean(r["score"] / r["max_score"] for r in results)
    return {"n": len(results), "wall": wall, "first": first, "memory": memory,
            "memory_how": peak.what, "score": score, "errors": len(errors)}  # fmt: skip


def served_runs(folder: Path, solutions: Path, keys_dir: Path, small: int, args) -> dict:
    """One submission and the smallest batch, graded by a warm sandbox service."""
    sock = folder / "sandbox.sock"
    serving = subprocess.Popen(
        [sys.executable, "-m", "scalegrade.cli", "sandbox-serve", str(sock), "--hide", str(folder),
         "--jobs", str(args.jobs), "--sandbox", args.backend],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while not sock.exists():
            if serving.poll() is not None:
                sys.exit("scalegrade sandbox-serve did not start")
            time.sleep(0.05)
        via = ("--executor", "service", "--service", str(sock))
        grade_cli(solutions, keys_dir, folder / "out-warming", 1, args.jobs, *via)
        return {
            what: grade_cli(solutions, keys_dir, folder / f"out-served-{n}", n, args.jobs, *via)
            for what, n in (("one submission", 1), (f"a batch of {small}", small))
        }
    finally:
        serving.terminate()
        serving.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--growth", default="10,40,160", help="batch sizes for (d)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    sizes = sorted({int(x) for x in args.growth.split(",") if x} | {args.students})
    folder = Path(tempfile.mkdtemp(prefix="scalegrade-bench-"))
    try:
        unit = cold_numpy(7)
        solutions, keys_dir, release_s = release_hw1(folder, max(sizes))
        start = time.perf_counter()
        with Sandbox(backend=args.backend, hide=[keys_dir, folder]) as sandbox:
            startup = time.perf_counter() - start
            warm = overhead(sandbox, folder, args.runs)
            bare, probed = probe_overhead(sandbox, folder, args.runs)
            isolation = sandbox.isolation
        runs = {n: grade_cli(solutions, keys_dir, folder / f"out-{n}", n, args.jobs) for n in sizes}
        single = runs.get(1) or grade_cli(solutions, keys_dir, folder / "out-1", 1, args.jobs)
        served = served_runs(folder, solutions, keys_dir, sizes[0], args)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"sandbox: {isolation}; unit: one cold `python -c 'import numpy'` = {unit * 1e3:.0f} ms")
    ratio = warm / unit
    print(
        f"(a) per-submission overhead (trivial notebook): {warm * 1e3:.1f} ms = {ratio:.3f} "
        f"units (target <= 0.25: {'met' if ratio <= 0.25 else 'MISSED'}); executor start "
        f"{startup:.2f} s"
    )
    print(
        f"(c) the probe process: the same notebook {bare * 1e3:.1f} ms without a probe, "
        f"{probed * 1e3:.1f} ms with one probe process calling it once: "
        f"+{(probed - bare) * 1e3:.1f} ms, ratio {probed / bare:.2f}"
    )
    b = runs[args.students]
    per = b["wall"] / b["n"]
    print(
        f"(b) `scalegrade grade` of {b['n']} tdlsm/hw1 solution notebooks, {args.jobs} jobs, "
        f"every check on: {b['wall']:.2f} s, {per * 1e3:.0f} ms = {per / unit:.2f} units per "
        f"submission (target <= 1.5: {'met' if per / unit <= 1.5 else 'MISSED'}); peak memory "
        f"{b['memory'] / 2**20:.0f} MiB ({b['memory_how']}); mean score {b['score']:.1%} "
        f"(free-response parts pending); errors {b['errors']}"
    )
    small, large = runs[sizes[0]], runs[sizes[-1]]
    slope = (large["wall"] - small["wall"]) / max(1, large["n"] - small["n"])
    fixed = small["wall"] - slope * small["n"]
    print(
        f"(d) growth, {args.jobs} jobs: "
        + "; ".join(
            f"{n}: {r['wall']:.1f} s ({r['wall'] / r['n'] * 1e3:.0f} ms each, "
            f"{r['memory'] / 2**20:.0f} MiB)"
            for n, r in runs.items()
        )
    )
    print(f"    per submission {slope * 1e3:.0f} ms ({slope / unit:.2f} units), once {fixed:.2f} s")
    for what, r in (("one submission", single), (f"a batch of {small['n']}", small)):
        print(
            f"    first verdict of {what}: {r['first']:.2f} s (target <= 3 s: "
            f"{'met' if r['first'] <= 3 else 'MISSED'}); the whole run {r['wall']:.2f} s"
        )
    print(
        "(e) the same through a warm sandbox (`scalegrade sandbox-serve`, started before and "
        "warmed by one command, not timed; `grade --executor service`):"
    )
    for what, r in served.items():
        print(
            f"    first verdict of {what}: {r['first']:.2f} s (target <= 3 s: "
            f"{'met' if r['first'] <= 3 else 'MISSED'}); the whole run {r['wall']:.2f} s"
        )
    print(f"    not in the above: release of the {max(sizes)} notebooks {release_s:.1f} s")


if __name__ == "__main__":
    main()
