"""The embedded sample course: simulated submissions of tdlsm/hw1 for `scalegrade demo`.

Starts from each student's solutions notebook (what an excellent student hands in) and
plays a scenario on it: honest work, the course's classic mistakes (GiB for GB,
forward-only FLOPs, p instead of p − 1, a "ring" that just sums), a cell that raises,
an empty notebook, and a notebook that tries to cheat.  This module is the only one
that knows both sides (it reads keys to make realistic mistakes); the grader does not.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import nbformat

from contract import Answer, Key, read_key

# A scenario edits the solutions notebook in place, given the student's key and the
# notebook they were released.
Scenario = Callable[[nbformat.NotebookNode, Key, nbformat.NotebookNode], None]


def _answer_cell(nb: nbformat.NotebookNode, variable: str):
    for cell in nb.cells:
        if cell.metadata.get("scalegrade", {}).get("variable") == variable:
            return cell
    raise LookupError(f"no answer cell for {variable}")


def _set(nb: nbformat.NotebookNode, variable: str, value: object) -> None:
    _answer_cell(nb, variable).source = f"{variable} = {value!r}"


def _answer(key: Key, qid: str, aid: str) -> Answer:
    question = next(q for q in key.questions if q.id == qid)
    return next(a for a in question.answers if a.id == aid)


def honest(nb, key, released) -> None:
    """A correct submission, with one answer written as a string with its unit."""
    a = _answer(key, "budgets/model-budget", "states_gb")
    _set(nb, a.variable, f"{a.value / 2**30:.4g} GiB")


def gib_for_gb(nb, key, released) -> None:
    """Model states computed in GiB but written where GB are asked."""
    a = _answer(key, "budgets/model-budget", "states_gb")
    _set(nb, a.variable, round(a.value / 2**30, 2))


def forward_only(nb, key, released) -> None:
    """Training FLOPs as 2ND instead of 6ND, and the later parts carried from it."""
    flops = _answer(key, "budgets/accelerators-needed", "train_flops")
    _set(nb, flops.variable, flops.value / 3)
    days = _answer(key, "budgets/accelerators-needed", "accel_days")
    _set(nb, days.variable, days.value / 3)


def p_not_p_minus_1(nb, key, released) -> None:
    """Ring steps 2p instead of 2(p − 1)."""
    steps = _answer(key, "collectives/ring-vs-server", "ring_steps")
    _set(nb, steps.variable, int(steps.value) + 2)


def sum_ring(nb, key, released) -> None:
    """A "ring" that forwards whole buffers and sums them: right result, wrong algorithm."""
    cell = next(
        c
        for c in nb.cells
        if c.metadata.get("scalegrade", {}).get("kind") == "code"
        and c.metadata["scalegrade"]["function"] == "ring_allreduce"
    )
    cell.source = (
        "import numpy as np\n\n"
        "def ring_allreduce(x, rank, world, comm):\n"
        "    total, piece = x.astype(float).copy(), x.astype(float).copy()\n"
        "    for _ in range(world - 1):  # pass whole buffers around and add them\n"
        "        piece = comm.send_recv(piece)\n"
        "        total += piece\n"
        "    return total\n"
    )


def raises(nb, key, released) -> None:
    """A cell in the middle raises; the answers after it are still graded."""
    nb.cells.insert(6, nbformat.v4.new_code_cell("raise ValueError('forgot to convert to GB')"))


def empty(nb, key, released) -> None:
    """The released notebook, handed in untouched."""
    nb.cells = released.cells


def cheat(nb, key, released) -> None:
    """Wrong answers, an always-equal object, a look for the keys, a patched np.isclose."""
    empty(nb, key, released)
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import glob, os, numpy as np\n"
            "np.isclose = lambda *a, **k: True\n"
            "class AlwaysEqual(float):\n"
            "    def __eq__(self, other): return True\n"
            "q1_n_params = AlwaysEqual(1.0)\n"
            "found = glob.glob('/*/*/keys/*.json') + glob.glob('/tmp/*/*/keys/*.json')\n"
            "print('keys found:', found)\n"
            "os._exit(0)\n"
        )
    )


SCENARIOS: list[tuple[str, Scenario]] = [
    ("GiB read as GB", gib_for_gb),
    ("forward-only FLOPs", forward_only),
    ("p instead of p - 1", p_not_p_minus_1),
    ("sum() ring", sum_ring),
    ("cell raises", raises),
    ("empty notebook", empty),
    ("cheating notebook", cheat),
]


def simulate(release_dir: Path, keys_dir: Path, out: Path) -> dict[str, str]:
    """Write one submission per student under ``out``; return student -> scenario."""
    played = {}
    students = sorted(p.name for p in (release_dir.parent / "solutions").iterdir())
    for i, student in enumerate(students):
        name, scenario = SCENARIOS[i] if i < len(SCENARIOS) else ("honest", honest)
        solutions = release_dir.parent / "solutions" / student
        notebook = next(solutions.glob("*.ipynb"))
        nb = nbformat.read(notebook, as_version=4)
        key = read_key(keys_dir / f"{student}.json")
        released = nbformat.read(release_dir / student / notebook.name, as_version=4)
        scenario(nb, key, released)
        target = out / student / notebook.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        played[student] = name
    return played
