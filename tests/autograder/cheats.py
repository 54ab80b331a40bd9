"""The public set of cheating notebooks, as cells to add to an honest notebook.

Each cheat is what instructors measured getting full marks (or breaking the batch) in
tools that grade inside the student's kernel.  ``cheat_cells(name, ctx)`` gives the cells
of one cheat; ``cheating_notebook(honest, name, ctx, out)`` writes an honest notebook with
that cheat added (after the honest cells, so that the honest answers exist when the cheat
runs), and ``honest_notebook(out)`` writes the small honest notebook the sandbox tests use.

Run as a script to write them all for a look: ``python -m tests.autograder.cheats DIR``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat


@dataclass(frozen=True)
class Context:
    keys_dir: str = "/srv/course/keys"  # a keys folder the sandbox hides
    out_dir: str = "/srv/course/out"  # the grader's output folder (hidden)
    readable_dir: str = "/srv/course/public"  # a folder left visible (the control)
    secret_file: str = "/srv/course/public/secret.txt"  # root, mode 0600, in a visible folder
    port: int = 9  # a port the grader's test listens on, outside the sandbox
    token: str = "sg-detached"  # the detached process names itself this (/proc/PID/comm)
    variable: str = "q1_a"  # the answer the cheat tampers with
    report: str = "q1_c"  # where a cheat reports what it could do (a string answer)


HONEST_CELLS = (
    "import numpy as np\nq1_a = 42.0",
    "q1_b = '21 GB'",
    "def double(x):\n    return [2 * v for v in x]",
    "q1_c = 'honest'",
)

# The answers the honest cells give (what the harvest must hold for them).
HONEST_ANSWERS = {
    "q1_a": {"kind": "number", "value": 42.0},
    "q1_b": {"kind": "string", "value": "21 GB"},
    "q1_c": {"kind": "string", "value": "honest"},
}

PROBE_SOURCE = """
import numpy as np

def probe(student, seed, params):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 100, size=params["n"]).tolist()
    return {"x": x, "y": student(x)}
"""


def cheat_cells(name: str, ctx: Context = Context()) -> list[str]:  # noqa: B008 - frozen
    v, r = ctx.variable, ctx.report
    cells = {
        # Read the answer key (and a root-only secret) from disk.
        "read_keys": [
            f"""import os
found = []
for path in [{ctx.keys_dir!r}, {ctx.keys_dir!r} + '/ana.json', {ctx.secret_file!r},
             {ctx.readable_dir!r} + '/notes.txt']:
    try:
        if os.path.isdir(path):
            found.append(f'{{path}}: {{sorted(os.listdir(path))}}')
        else:
            found.append(f'{{path}}: ' + open(path).read())
    except OSError as err:
        found.append(f'{{path}}: {{type(err).__name__}}')
{r} = ' | '.join(found)
{v} = 0.0  # wrong, hoping the key was found"""
        ],
        # Make every comparison in the kernel succeed, then answer wrong.
        "patched_isclose": [
            f"""import numpy as np, math
np.isclose = lambda *a, **k: True
np.allclose = lambda *a, **k: True
math.isclose = lambda *a, **k: True
{v} = 0.0"""
        ],
        # Objects equal to everything.
        "always_equal": [
            f"""class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__
    def __float__(self):
        return 42.0

class Float(float):
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__

class Str(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__

{v} = Anything()
q1_b = Str('nonsense')
{r} = Float(1.0)"""
        ],
        # End the kernel before any test can run.
        "os_exit": ["import os\nos._exit(0)", f"{r} = 'after the exit'"],
        # The same, past the harness's guard: libc's own _exit.
        "libc_exit": ["import ctypes\nctypes.CDLL(None)._exit(0)"],
        # Kill whoever runs the notebook.
        "kill_parent": [f"import os\n{r} = 'ran'\nos.kill(os.getppid(), 9)"],
        "killpg": ["import os, signal\nos.killpg(os.getpgid(0), signal.SIGKILL)"],
        "kill_self": ["import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"],
        "kill_all": ["import os\nos.kill(-1, 9)"],
        # Hang the grader.
        "infinite_loop": ["while True:\n    pass"],
        # Exhaust memory, then go on.
        "memory_bomb": [
            "hog = []\nwhile True:\n    hog.append(bytearray(50 * 2**20))",
            f"del hog\n{r} = 'survived'",
        ],
        # Exhaust processes.
        "fork_bomb": ["import os\nwhile True:\n    os.fork()", f"{r} = 'survived'"],
        # Write results files where the grader writes its own.
        "write_results": [
            f"""import json, os
wrote = []
fake = json.dumps({{'score': 100, 'max_score': 100}})
for path in [{ctx.out_dir!r} + '/ana/results.json', {ctx.out_dir!r} + '/results.json',
             '/tmp/scalegrade-fake-results.json', '/var/tmp/scalegrade-fake-results.json',
             '/dev/shm/scalegrade-fake-results.json']:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as fh:
            fh.write(fake)
        wrote.append(path)
    except OSError as err:
        wrote.append(f'{{path}}: {{type(err).__name__}}')
{r} = ' | '.join(wrote)"""
        ],
        # A detached process that outlives the kernel and rewrites results after grading.
        "detached": [
            f"""import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open('/proc/self/comm', 'w') as fh:
            fh.write({ctx.token!r})
        time.sleep(3)
        for path in [{ctx.out_dir!r} + '/ana/results.json', '/tmp/scalegrade-late.json']:
            try:
                with open(path, 'w') as fh:
                    fh.write('{{"score": 100}}')
            except OSError:
                pass
        os._exit(0)
    os._exit(0)
time.sleep(0.2)
{r} = 'detached'"""
        ],
        # 100 MB of output.
        "huge_output": ["for _ in range(100):\n    print('x' * 1_000_000)"],
        # Phone home (or the grader's own services on localhost).
        "network": [
            f"""import socket
tried = []
for address in [('127.0.0.1', {ctx.port}), ('1.1.1.1', 80)]:
    try:
        socket.create_connection(address, timeout=2).close()
        tried.append('connected')
    except OSError as err:
        tried.append(type(err).__name__)
{r} = ' | '.join(tried)"""
        ],
        # Forge the harvest on the result pipe, then leave.
        "forged_harvest": [
            """import ctypes, os, json
os.write(3, json.dumps({'harvest': {'cells': [], 'answers': {'q1_a': {'kind': 'number',
         'value': 42.0}}, 'probes': {}, 'score': 100}}).encode())
ctypes.CDLL(None)._exit(0)"""
        ],
        "garbage_harvest": ["import os\nos.write(3, b'\\x00not json' * 1000)\nos._exit(0)"],
        # The course secret from the environment.
        "env_secret": [f"import os\n{r} = os.environ.get('SCALEGRADE_SECRET', 'no secret')"],
        # Rebind the builtins the harvest might use.
        "patched_builtins": [
            f"""import builtins, json
builtins.type = lambda *a: float
builtins.isinstance = lambda *a: True
json.dumps = lambda *a, **k: '{{"harvest": "forged"}}'
{v} = 'forty-two'"""
        ],
    }
    if name not in cells:
        raise KeyError(f"unknown cheat {name!r}; known: {sorted(cells)}")
    return cells[name]


CHEATS = (
    "read_keys",
    "patched_isclose",
    "always_equal",
    "os_exit",
    "libc_exit",
    "kill_parent",
    "killpg",
    "kill_self",
    "kill_all",
    "infinite_loop",
    "memory_bomb",
    "fork_bomb",
    "write_results",
    "detached",
    "huge_output",
    "network",
    "forged_harvest",
    "garbage_harvest",
    "env_secret",
    "patched_builtins",
)


def _write(cells: list[str], out: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Homework")]
    nb.cells += [nbformat.v4.new_code_cell(src) for src in cells]
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    return out


def honest_notebook(out: Path) -> Path:
    return _write(list(HONEST_CELLS), out)


def cheating_notebook(
    honest: Path,
    name: str,
    out: Path,
    ctx: Context = Context(),  # noqa: B008 - frozen
) -> Path:
    """``honest`` with the cheat's cells appended (its answers exist when the cheat runs)."""
    nb = nbformat.read(honest, as_version=4)
    nb.cells += [nbformat.v4.new_code_cell(src) for src in cheat_cells(name, ctx)]
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out)
    return out


def corpus(honest: Path, folder: Path, ctx: Context, honest_every: int) -> list[tuple[str, Path]]:
    """Every cheat as (name, notebook), with the honest notebook among them after every
    ``honest_every``-th: a batch a sandbox must grade without one run touching another."""
    jobs = []
    for i, name in enumerate(CHEATS):
        jobs.append((name, cheating_notebook(honest, name, folder / f"{name}.ipynb", ctx)))
        if i % honest_every == 0:
            jobs.append((f"honest-{i}", honest))
    return jobs


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "cheats")
    honest = honest_notebook(folder / "honest.ipynb")
    for cheat in CHEATS:
        print(cheating_notebook(honest, cheat, folder / f"{cheat}.ipynb"))
