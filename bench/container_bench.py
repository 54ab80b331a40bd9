"""Per-submission overhead in the grading image, against the warm namespaces sandbox.

A trivial notebook (``x = 1``) run one at a time, in the same run, three ways:

- a container per submission (what a one-shot ``docker run`` per notebook costs: the
  engine's start, the executor's start and imports, the run, the stop);
- the warm container ``--sandbox docker`` uses: one per batch, each submission a fresh
  child of its executor, with the probe process beside it;
- the warm namespaces sandbox on the host (a fork of the warm executor).

The unit is a cold ``python -c "import numpy"``.  The image is ``$SCALEGRADE_IMAGE``
(`make image`); the engine is docker or podman (``$SCALEGRADE_PODMAN_ARGS``).

    SCALEGRADE_IMAGE=scalegrade/grader:cpu .venv/bin/python bench/container_bench.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grade_bench import cold_numpy  # noqa: E402  (this folder: the same unit as there)

from autograder.sandbox import Limits, Plan, Sandbox  # noqa: E402


def median_seconds(sandbox: Sandbox, notebook: Path, runs: int) -> float:
    plan = Plan(variables=("x",))
    sandbox.run(notebook, plan)  # the first run pays what is paid once
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        outcome = sandbox.run(notebook, plan)
        times.append(time.perf_counter() - start)
        if outcome.harvest is None or outcome.harvest["answers"]["x"]["value"] != 1:
            sys.exit(f"the trivial notebook did not run: {outcome.error}\n{outcome.log[-2000:]}")
    return statistics.median(times)


def one_shot_seconds(image: str, limits: Limits, notebook: Path, runs: int) -> float:
    """A container per submission: a Sandbox started, used once and closed, each time."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        with Sandbox(backend="docker", image=image, limits=limits) as box:
            outcome = box.run(notebook, Plan(variables=("x",)))
        times.append(time.perf_counter() - start)
        if outcome.harvest is None:
            sys.exit(f"the trivial notebook did not run: {outcome.error}\n{outcome.log[-2000:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    image = os.environ.get("SCALEGRADE_IMAGE") or sys.exit(
        "set $SCALEGRADE_IMAGE to the grading image (`make image`)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("x = 1")]
        path = Path(tmp) / "trivial.ipynb"
        nbformat.write(nb, path)
        limits = Limits(wall_seconds=60)
        one_shot = one_shot_seconds(image, limits, path, max(3, args.runs // 3))
        with Sandbox(backend="docker", image=image, limits=limits) as box:
            container = median_seconds(box, path, args.runs)
            engine = box.container.engine.name
        with Sandbox(limits=limits) as box:
            warm = median_seconds(box, path, args.runs)
            isolation = box.isolation
    unit = cold_numpy(5)

    def ms(seconds: float) -> str:
        return f"{1000 * seconds:.0f} ms = {seconds / unit:.2f} units"

    print(f"a trivial notebook, median of {args.runs} (unit: cold numpy, {1000 * unit:.0f} ms):")
    print(f"  a container per submission ({engine}): {ms(one_shot)}")
    print(f"  the warm container ({engine}, one per batch): {ms(container)}")
    print(f"  the warm {isolation} sandbox on the host: {ms(warm)}")
    print(f"  warm container / warm host: {container / warm:.2f}x; "
          f"a container per submission / warm container: {one_shot / container:.0f}x")  # fmt: skip


if __name__ == "__main__":
    main()
