"""Per-submission overhead in the grading image, against the warm namespaces sandbox.

A trivial notebook (``x = 1``) run one at a time: through ``--sandbox docker`` (a container
per submission: the engine's start, the harness's Python start and imports, the stop) and
through the warm namespaces sandbox (a fork of a warm executor), in the same run, with a
cold ``python -c "import numpy"`` as the unit.  The image is ``$SCALEGRADE_IMAGE``
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
        with Sandbox(backend="docker", image=image, limits=limits) as box:
            container = median_seconds(box, path, args.runs)
            engine = box.engine.name
        with Sandbox(limits=limits) as box:
            warm = median_seconds(box, path, args.runs)
            isolation = box.isolation
    unit = cold_numpy(5)
    print(f"a trivial notebook, median of {args.runs}: in the image ({engine}, a container "
          f"per submission) {1000 * container:.0f} ms = {container / unit:.1f} units; warm "
          f"{isolation} sandbox {1000 * warm:.0f} ms = {warm / unit:.2f} units; the container "
          f"costs {container / warm:.0f}x (unit: cold numpy, {1000 * unit:.0f} ms)")  # fmt: skip


if __name__ == "__main__":
    main()
