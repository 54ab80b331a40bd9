"""Where a tdlsm/hw1 submission's CPU goes: its cells, and each code check on top of them.

One warm sandbox, one job, the solution notebooks of a fresh hw1 release.  Each submission
runs once per configuration, the configurations interleaved: its cells alone (its answers
read, no check), each check alone on top of the cells, then every check (what `grade`
runs).  A run's CPU is that of the sandbox's whole process tree: the executor and every
live process under it, each with the CPU of the children it reaped (/proc/PID/stat: utime,
stime, cutime, cstime), read before and after the run.  So a check's figure holds its
probe process, the student's process serving it and the rank processes it forks, their
forks, faults and exits included; the trusted comparison in the grader is not in it.

"each alone − cells" pays a probe process and ranks of its own; "every check − cells" runs
them all in one probe process, where the tensor-parallel check runs on the ring's simulated
ranks (prober.Channel.ranks).  The unit is one cold
``python -c "import numpy"``, measured in the same run.

    .venv/bin/python bench/probe_bench.py [--submissions 12]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grade_bench import cold_numpy, release_hw1  # noqa: E402

from autograder.grading.keys import Keys  # noqa: E402
from autograder.sandbox import Plan, Sandbox  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> tuple[float, float]:
    """User and system seconds of ``root`` and every live process under it, each with
    what it has reaped: what the tree has spent so far, the dead included."""
    parent, spent = {}, {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile: its parent reaped it, and holds its time
            continue
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        utime, stime, cutime, cstime = (int(x) / TICK for x in fields[11:15])
        spent[pid] = (utime + cutime, stime + cstime)
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    user = system = 0.0
    todo = [root]
    while todo:
        pid = todo.pop()
        u, s = spent.get(pid, (0.0, 0.0))
        user, system = user + u, system + s
        todo.extend(children.get(pid, ()))
    return user, system


def configurations(plan: Plan) -> dict[str, Plan]:
    """The cells alone, each check alone on top of them, every check."""
    out = {"cells alone": Plan(variables=plan.variables)}
    for probe in plan.probes:
        out[f"+ {probe.id.split('-', 1)[-1]}"] = Plan(variables=plan.variables, probes=(probe,))
    out["every check"] = plan
    return out


def measure(solutions: Path, keys: Keys, hide: list[Path], count: int) -> dict[str, list]:
    """(user, system, wall) seconds of each configuration's runs, one per submission."""
    folders = sorted(solutions.iterdir())[: count + 1]
    runs: dict[str, list] = {}
    with Sandbox(hide=hide, preload=keys.preload) as sandbox:
        for i, folder in enumerate(folders):
            notebook = next(folder.glob("*.ipynb"))
            root = sandbox._executor(0).proc.pid
            for name, plan in configurations(keys.plan(keys.key(folder.name))).items():
                user, system = tree_cpu(root)
                start = time.perf_counter()
                outcome = sandbox.run(notebook, plan)
                wall = time.perf_counter() - start
                after = tree_cpu(root)
                if outcome.error:
                    sys.exit(f"{folder.name}, {name}: {outcome.error}\n{outcome.log}")
                if i:  # the first submission warms the executor up
                    runs.setdefault(name, []).append((after[0] - user, after[1] - system, wall))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=12)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="scalegrade-probe-bench-"))
    try:
        unit = cold_numpy(7)
        solutions, keys_dir, _ = release_hw1(folder, args.submissions + 1)
        runs = measure(solutions, Keys(keys_dir), [folder], args.submissions)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    mean = {
        name: tuple(statistics.mean(r[k] for r in rs) for k in range(2))
        + (statistics.median(r[2] for r in rs),)
        for name, rs in runs.items()
    }
    cells = sum(mean["cells alone"][:2])
    print(
        f"unit: one cold `python -c 'import numpy'` = {unit * 1e3:.0f} ms; "
        f"{args.submissions} hw1 submissions, one job, CPU of the sandbox's process tree "
        "(mean per run), wall (median)"
    )
    print(f"{'':24s}{'user':>8s}{'system':>8s}{'CPU':>8s}{'− cells':>9s}{'wall':>8s}")
    for name, (user, system, wall) in mean.items():
        extra = "" if name == "cells alone" else f"{(user + system - cells) * 1e3:9.0f}"
        print(
            f"{name:24s}{user * 1e3:8.0f}{system * 1e3:8.0f}{(user + system) * 1e3:8.0f}"
            f"{extra:>9s}{wall * 1e3:8.0f}"
        )
    alone = sum(sum(v[:2]) - cells for k, v in mean.items() if k.startswith("+ "))
    every = sum(mean["every check"][:2])
    print(
        f"the checks alone add {alone * 1e3:.0f} ms, together {(every - cells) * 1e3:.0f} ms "
        "(together: one probe process, and a check's ranks may serve the next check); "
        f"every check = {every / unit:.2f} units of CPU"
    )


if __name__ == "__main__":
    main()
