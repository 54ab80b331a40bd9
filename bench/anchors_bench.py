"""Grading speed against the anchors: one homework graded by ScaleGrade, nbgrader and otter.

The common homework has three parts: (a) a memory answer with a unit (the model states of
mixed-precision Adam, 16 bytes per parameter, in GB: a number or a string like "26.8 GB"),
the ring all-reduce in code and the DPO loss in code.

- ScaleGrade grades its own bank's questions, unchanged: ``memory/seven-b-states``,
  ``collectives/ring-allreduce-code`` and ``posttraining/dpo-loss-code``, assembled by
  ``bench/anchors/bank`` (a ``courses.yaml`` and ``assignments/bench/hw.yaml``; the three
  question folders are copied from the repository's ``templates/`` into a temporary bank at
  run time).  Each student gets their own numbers, and the questions are whole: besides
  the three parts they hold 15 more numeric parts (all answered right in every
  submission) and a free-response part (pending, for a person); its ring check also runs
  the ring over torch.distributed (gloo).  ScaleGrade thus grades more per submission.
- nbgrader (``bench/anchors/nbgrader/source/hw/hw.ipynb``, an nbgrader source notebook:
  solution regions and autograder test cells with hidden tests) and otter-grader
  (``bench/anchors/otter/hw.ipynb``, an ``otter assign`` master notebook with hidden
  exception-based tests) cannot give each student their own numbers: they use one fixed
  variant, N = 1.675e9 parameters (26.8 GB).  Their tests are the same functions in both
  notebooks (checked at start): (a) the value within 1 %, reading GB, GiB, MB, ... from a
  string; the ring on a simulated ring of threads for p = 2..8 (every rank ends with the
  sum; 2(p - 1) calls of one n/p chunk each; reduce-scatter messages are partial sums of a
  chunk, all-gather messages completed chunks), no gloo run; DPO on random batches: the
  value (the mean of -log sigma(u)) at beta = 1, the autograd gradient against
  -/+ beta sigma(-u)/B, margins |u| ~ 1000, two other betas.  9 points.

Submissions (the same mix for all three tools; made from each tool's released student
notebook with the same code): 12 right (the memory answer alternately a number and a
string with its unit), 5 classic mistakes (GiB written where GB are asked; the states
without Adam's optimizer states, 4 bytes per parameter; a ring whose all-gather sends the
wrong chunks; DPO without beta; DPO with the margin's sign flipped), 3 whose cell raises
(the memory cell, the ring cell before its ``def``, the DPO cell on a misspelled import).
Expected: a right one earns every autograded point; a mistake loses points in its part and
only there; a raising one scores 0 in that part and full marks elsewhere.

Each tool runs as a user would run it, as its CLI in a subprocess, timed as the whole
command, from a clean state (fresh copies of the submissions; ScaleGrade a fresh --out,
nbgrader a fresh course folder with the generated assignment, otter a fresh output
folder): ``scalegrade grade ... --jobs 2`` (sandbox on, the default), ``nbgrader
autograde hw`` (every submission in submitted/, one kernel each, one at a time),
``otter run -a autograder.zip`` once per submission, one at a time (``otter run`` is
otter's no-container mode; ``otter grade`` needs Docker).  Rounds are interleaved (S, N,
O, S, N, O, ...); wall and CPU times are the medians of the rounds, peak memory the
largest.  CPU: user + system seconds of the tool's process tree, from the rusage that
os.wait4 returns for the command (its reaped descendants included); it moves less than
the wall time when other work shares the machine (the load average at start and end is
printed).  Peak memory: PSS, the summed proportional set size of the process tree,
sampled every 0.1 s with psutil (shared pages counted once, so forked workers are not
counted twice), and RSS, the largest single process's peak RSS from the same rusage.
The targets compare wall time per submission: nbgrader >= 20x and otter >= 60x
ScaleGrade's, both as one ``scalegrade grade`` command with a sandbox of its own and
(``scalegrade-warm``) through a warm sandbox (``scalegrade sandbox-serve``, started and
warmed by one command before the rounds, not timed): that row is the ``grade`` command
alone, the service's CPU and memory not counted.
The unit is a cold ``python -c "import numpy"`` measured in the same run.

A full run takes 15-20 minutes on this 2-core machine, nearly all of it otter's
(9-13 s per ``otter run``) and nbgrader's (4-5 s per submission); ``--rounds 1
--submissions 6`` about 2-3 minutes.

    .venv/bin/python bench/anchors_bench.py [--rounds 3] [--submissions 20]
        [--tools scalegrade,scalegrade-warm,nbgrader,otter] [--jobs 2] [--keep DIR]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from generator import bank

try:
    import psutil
except ImportError:  # the wait4 rusage alone
    psutil = None

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = Path(__file__).resolve().parent / "anchors"
BIN = Path(sys.executable).parent  # the venv's bin/: scalegrade, nbgrader, otter, alembic
TOOLS = ("scalegrade", "scalegrade-warm", "nbgrader", "otter")
TARGETS = {"nbgrader": 20.0, "otter": 60.0}  # per-submission time, as a multiple of ScaleGrade's
PARTS = ("memory", "ring", "dpo")
QUESTIONS = (
    "memory/seven-b-states",
    "collectives/ring-allreduce-code",
    "posttraining/dpo-loss-code",
)
ASSIGNMENT = "bench/hw"
SECRET = "anchors-bench-secret-0123456789abcdef0123456789abcdef"
TIMEOUT = 1800  # seconds per command

# --- the submissions ---------------------------------------------------------------------

# (scenario, kind, part): kind "right", "mistake" or "raises"; part the one it concerns.
PATTERN = [
    ("right", "right", None),
    ("GiB written as GB", "mistake", "memory"),
    ("right", "right", None),
    ("ring: wrong all-gather chunks", "mistake", "ring"),
    ("memory cell raises", "raises", "memory"),
    ("right", "right", None),
    ("DPO without beta", "mistake", "dpo"),
    ("right", "right", None),
    ("ring cell raises", "raises", "ring"),
    ("right", "right", None),
    ("DPO margin's sign flipped", "mistake", "dpo"),
    ("right", "right", None),
    ("no optimizer states", "mistake", "memory"),
    ("right", "right", None),
    ("DPO cell raises", "raises", "dpo"),
    ("right", "right", None),
    ("right", "right", None),
    ("right", "right", None),
    ("right", "right", None),
    ("right", "right", None),
]

# The bank's own reference (what a right submission writes), for all three tools alike.
RING_RIGHT = bank.load().question("collectives/ring-allreduce-code").code["ring"].solution
# The all-gather indexed like the reduce-scatter: it forwards chunks that are not complete.
RING_WRONG = RING_RIGHT.replace(
    "        send, recv = (rank + 1 - s) % p, (rank - s) % p\n",
    "        send, recv = (rank - s) % p, (rank - s - 1) % p\n",
)
# Tried out before it is defined: NameError, and the function never exists.
RING_RAISES = RING_RIGHT.replace(
    "\n\ndef ring_allreduce",
    "\nprint(ring_allreduce(np.ones(4), 0, 1, None))  # try it first\n\n\ndef ring_allreduce",
)

DPO_RIGHT = '''\
import torch
import torch.nn.functional as F


def dpo_loss(
    policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta
):
    """Mean over the batch of -log sigma(u); u = beta (chosen log-ratio - rejected log-ratio)."""
    chosen = policy_chosen_logps - ref_chosen_logps
    rejected = policy_rejected_logps - ref_rejected_logps
    u = beta * (chosen - rejected)
    return -F.logsigmoid(u).mean()  # log sigma(u) = -softplus(-u): finite for any u
'''
DPO_NO_BETA = DPO_RIGHT.replace("u = beta * (chosen - rejected)", "u = chosen - rejected")
DPO_SIGN = DPO_RIGHT.replace("u = beta * (chosen - rejected)", "u = beta * (rejected - chosen)")
DPO_RAISES = DPO_RIGHT.replace(
    "import torch.nn.functional as F", "import torch.nn.functionnal as F"
)

assert len({RING_RIGHT, RING_WRONG, RING_RAISES}) == 3
assert len({DPO_RIGHT, DPO_NO_BETA, DPO_SIGN, DPO_RAISES}) == 4


def memory_answer(student: Student, state_bytes: float) -> str:
    """The right-hand side of the memory answer, given the key in bytes."""
    scenario = student.scenario
    if scenario == "GiB written as GB":
        return repr(float(f"{state_bytes / 2**30:.4g}"))
    if scenario == "no optimizer states":  # bf16 weights and gradients only: 4 of 16 bytes
        return repr(float(f"{state_bytes / 4 / 1e9:.4g}"))
    if scenario == "memory cell raises":
        return "16 * n_params / GB"  # GB: not defined
    if student.text:
        return repr(f"{state_bytes / 1e9:.4g} GB")  # a string with its unit
    return repr(float(f"{state_bytes / 1e9:.4g}"))


def ring_code(scenario: str) -> str:
    return {"ring: wrong all-gather chunks": RING_WRONG, "ring cell raises": RING_RAISES}.get(
        scenario, RING_RIGHT
    )


def dpo_code(scenario: str) -> str:
    return {
        "DPO without beta": DPO_NO_BETA,
        "DPO margin's sign flipped": DPO_SIGN,
        "DPO cell raises": DPO_RAISES,
    }.get(scenario, DPO_RIGHT)


@dataclass
class Student:
    sid: str
    index: int
    scenario: str
    kind: str
    part: str | None
    text: bool = False  # a right memory answer written as a string with its unit


def students(n: int) -> list[Student]:
    roster = [Student(f"s{i:02d}", i, *PATTERN[i % len(PATTERN)]) for i in range(n)]
    for i, s in enumerate(s for s in roster if s.kind == "right"):
        s.text = i % 2 == 0  # every other right one: "26.8 GB"; the others 26.8
    return roster


# --- running a command: wall time, peak memory ---------------------------------------------


@dataclass
class Run:
    seconds: float = 0.0
    pss_peak: float = 0.0  # bytes: the process tree's summed PSS, sampled
    rss_max: float = 0.0  # bytes: the largest single process (wait4 rusage)
    cpu: float = 0.0  # user + system seconds of the commands and their reaped descendants
    failures: list[str] = field(default_factory=list)


class TreeSampler(threading.Thread):
    """Samples the summed PSS of the process tree under ``self.pid`` every ``period`` s."""

    def __init__(self, period: float = 0.1):
        super().__init__(daemon=True)
        self.period, self.pid, self.peak = period, None, 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            pid = self.pid
            if pid is not None:
                self.peak = max(self.peak, tree_pss(pid))
            self._done.wait(self.period)

    def stop(self) -> None:
        self._done.set()
        self.join()


def tree_pss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total


def run_commands(commands: list[tuple[list[str], Path]], env: dict, log: Path) -> Run:
    """Run each (argv, cwd) in turn; the wall time of them all, their memory."""
    out = Run()
    sampler = TreeSampler() if psutil else None
    if sampler:
        sampler.start()
    with log.open("ab") as sink:
        start = time.perf_counter()
        for argv, cwd in commands:
            stdio = {"stdout": sink, "stderr": subprocess.STDOUT}
            proc = subprocess.Popen(argv, cwd=cwd, env=env, start_new_session=True, **stdio)
            if sampler:
                sampler.pid = proc.pid
            timer = threading.Timer(TIMEOUT, os.killpg, (proc.pid, signal.SIGKILL))
            timer.start()
            _, status, usage = os.wait4(proc.pid, 0)
            timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.rss_max = max(out.rss_max, usage.ru_maxrss * 1024)  # KiB on Linux
            out.cpu += usage.ru_utime + usage.ru_stime
            if proc.returncode != 0:
                out.failures.append(f"{' '.join(map(str, argv[:3]))} ...: exit {proc.returncode}")
        out.seconds = time.perf_counter() - start
    if sampler:
        sampler.stop()
        out.pss_peak = sampler.peak
    return out


def cold_numpy() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import numpy"], check=True)
    return time.perf_counter() - start


def tool_env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # nbgrader runs `alembic`
    env.pop("SCALEGRADE_BANK", None)
    return env


def check(argv: list, cwd: Path, env: dict, what: str) -> None:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(
            f"{what} failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )


# --- the anchors' notebooks: the same tests in both --------------------------------------


def test_functions(nb: nbformat.NotebookNode) -> dict[str, str]:
    """Each ``def test_...`` of a notebook's test cells, unparsed (comments and the otter
    config header dropped)."""
    found = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "def test_" not in cell.source:
            continue
        source = cell.source.replace("### BEGIN HIDDEN TESTS", "").replace(
            "### END HIDDEN TESTS", ""
        )
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[node.name] = ast.unparse(node)
    return found


def same_tests() -> None:
    nbg = test_functions(nbformat.read(ANCHORS / "nbgrader/source/hw/hw.ipynb", as_version=4))
    ott = test_functions(nbformat.read(ANCHORS / "otter/hw.ipynb", as_version=4))
    if nbg != ott or len(nbg) != 8:
        differ = sorted(k for k in nbg.keys() | ott.keys() if nbg.get(k) != ott.get(k))
        sys.exit(f"bench/anchors: the nbgrader and otter notebooks' tests differ: {differ}")


# --- ScaleGrade ------------------------------------------------------------------------------


def setup_scalegrade(work: Path, roster: list[Student], env: dict) -> dict:
    bank = work / "bank"
    shutil.copytree(ANCHORS / "bank", bank)
    for qid in QUESTIONS:
        shutil.copytree(ROOT / "templates" / qid, bank / "templates" / qid)
    (work / "roster.csv").write_text(
        "student_id,name,email\n"
        + "".join(f"{s.sid},Student {s.index},{s.sid}@example.edu\n" for s in roster),
        encoding="utf-8",
    )
    (work / "secret.txt").write_text(SECRET, encoding="utf-8")
    argv = [BIN / "scalegrade", "generate", ASSIGNMENT, "--bank", bank]
    argv += ["--roster", work / "roster.csv", "--out", work / "hw"]
    argv += ["--secret-file", work / "secret.txt", "--with-solutions"]
    check(argv, work, env, "scalegrade generate")
    subs = work / "submissions"
    for s in roster:
        released = nbformat.read(work / "hw/release" / s.sid / "hw.ipynb", as_version=4)
        solved = nbformat.read(work / "hw/solutions" / s.sid / "hw.ipynb", as_version=4)
        key = json.loads((work / "hw/keys" / f"{s.sid}.json").read_text(encoding="utf-8"))
        states = next(
            a
            for q in key["questions"]
            if q["id"] == QUESTIONS[0]
            for a in q["answers"]
            if a["id"] == "states_gb"
        )
        solution = {
            c.metadata["nbgrader"]["grade_id"]: c.source
            for c in solved.cells
            if "nbgrader" in c.metadata
        }
        for cell in released.cells:
            meta = cell.metadata.get("scalegrade", {})
            if meta.get("kind") == "answer":
                cell.source = solution[cell.metadata["nbgrader"]["grade_id"]]
                if meta["variable"] == states["variable"]:
                    answer = memory_answer(s, states["value"])
                    cell.source = f"{meta['variable']} = {answer}"
            elif meta.get("kind") == "free_response":
                cell.source = "Shard the states (ZeRO-3); batch the decode, quantize the weights."
            elif meta.get("kind") == "code":
                cell.source = {"ring_allreduce": ring_code, "dpo_loss": dpo_code}[meta["function"]](
                    s.scenario
                )
        (subs / s.sid).mkdir(parents=True)
        nbformat.write(released, subs / s.sid / "hw.ipynb")
    return {"subs": subs, "keys": work / "hw/keys"}


def setup_warm(work: Path, roster: list[Student], env: dict, jobs: int) -> dict:
    """ScaleGrade through a warm sandbox (`scalegrade sandbox-serve`, started here and
    warmed by one grade command, neither timed): what a course's grading server pays."""
    ctx = setup_scalegrade(work, roster, env)
    sock = work / "sandbox.sock"
    argv = [BIN / "scalegrade", "sandbox-serve", sock, "--hide", work, "--jobs", str(jobs)]
    with (work / "service.log").open("ab") as sink:
        ctx["service"] = subprocess.Popen(argv, cwd=work, env=env, stdout=sink, stderr=sink)
    while not sock.exists():
        if ctx["service"].poll() is not None:
            sys.exit(f"scalegrade sandbox-serve did not start: see {work / 'service.log'}")
        time.sleep(0.05)
    ctx["via"] = ["--executor", "service", "--service", str(sock)]
    round_scalegrade(work, ctx, "warming", jobs, env)
    return ctx


def round_scalegrade(work: Path, ctx: dict, r, jobs: int, env: dict) -> tuple[Run, Path]:
    subs = work / f"round{r}" / "submissions"
    shutil.copytree(ctx["subs"], subs)
    out = work / f"round{r}" / "grades"
    argv = [
        BIN / "scalegrade",
        "grade",
        ASSIGNMENT,
        subs,
        "--keys",
        ctx["keys"],
        "--out",
        out,
        "--jobs",
        str(jobs),
        *ctx.get("via", ()),
    ]
    return run_commands([(argv, work)], env, work / "scalegrade.log"), out


def part_of(name: str, marks: tuple[str, str, str]) -> str:
    """The part a test belongs to: the first of PARTS whose mark is in its name."""
    return next((part for part, mark in zip(PARTS, marks, strict=True) if mark in name), "other")


def scores_from_results(out: Path, roster: list[Student], part_of_test, counted) -> dict:
    """Per student, [points, max] per part, from out/<student>/results.json (Gradescope's
    format, which ScaleGrade and otter both write): ``part_of_test(test)`` names a test's
    part, ``counted(test)`` says whether it carries points."""
    scores = {}
    for s in roster:
        path = out / s.sid / "results.json"
        if not path.is_file():
            continue
        parts = {p: [0.0, 0.0] for p in (*PARTS, "other")}
        for test in json.loads(path.read_text(encoding="utf-8"))["tests"]:
            if counted(test):
                part = part_of_test(test)
                parts[part][0] += test.get("score") or 0.0
                parts[part][1] += test["max_score"]
        scores[s.sid] = parts
    return scores


def scores_scalegrade(out: Path, roster: list[Student]) -> dict:
    marks = ("_states_gb", "ring_allreduce", "dpo_loss")
    return scores_from_results(
        out,
        roster,
        lambda test: part_of(test["name"], marks),
        lambda test: test.get("score") is not None,  # pending: free response
    )


# --- nbgrader --------------------------------------------------------------------------------

NBGRADER_CONFIG = """\
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "anchors"
c.CourseDirectory.root = {root!r}
"""


def setup_nbgrader(work: Path, roster: list[Student], env: dict) -> dict:
    course = work / "course"
    (course / "source/hw").mkdir(parents=True)
    shutil.copy(ANCHORS / "nbgrader/source/hw/hw.ipynb", course / "source/hw/hw.ipynb")
    (course / "nbgrader_config.py").write_text(NBGRADER_CONFIG.format(root="."), encoding="utf-8")
    check(
        [BIN / "nbgrader", "generate_assignment", "hw"], course, env, "nbgrader generate_assignment"
    )
    released = course / "release/hw/hw.ipynb"
    for s in roster:
        nb = nbformat.read(released, as_version=4)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if gid == "states":
                cell.source = f"states_gb = {memory_answer(s, 26.8e9)}"
            elif gid == "ring":
                cell.source = ring_code(s.scenario)
            elif gid == "dpo":
                cell.source = dpo_code(s.scenario)
        (course / "submitted" / s.sid / "hw").mkdir(parents=True)
        nbformat.write(nb, course / "submitted" / s.sid / "hw/hw.ipynb")
    return {"course": course}


def round_nbgrader(work: Path, ctx: dict, r: int, env: dict) -> tuple[Run, Path]:
    course = work / f"round{r}" / "course"
    shutil.copytree(ctx["course"], course)  # the gradebook with the assignment, no grades
    run = run_commands(
        [([BIN / "nbgrader", "autograde", "hw"], course)], env, work / "nbgrader.log"
    )
    return run, course


def scores_nbgrader(course: Path, roster: list[Student]) -> dict:
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for s in roster:
            try:
                nb = gb.find_submission_notebook("hw", "hw", s.sid)
            except MissingEntry:
                continue
            parts = {p: [0.0, 0.0] for p in (*PARTS, "other")}
            for grade in nb.grades:
                part = part_of(grade.name, ("_states_gb", "ring_", "dpo_"))
                parts[part][0] += grade.score
                parts[part][1] += grade.max_score
            scores[s.sid] = parts
    return scores


# --- otter -----------------------------------------------------------------------------------


def setup_otter(work: Path, roster: list[Student], env: dict) -> dict:
    master = work / "master"
    master.mkdir()
    shutil.copy(ANCHORS / "otter/hw.ipynb", master / "hw.ipynb")
    check([BIN / "otter", "assign", "hw.ipynb", "dist"], master, env, "otter assign")
    (zip_path,) = (master / "dist/autograder").glob("*.zip")
    student_nb = master / "dist/student/hw.ipynb"
    subs = work / "submissions"
    for s in roster:
        nb = nbformat.read(student_nb, as_version=4)
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            if cell.source.startswith("states_gb ="):
                cell.source = f"states_gb = {memory_answer(s, 26.8e9)}"
            elif "def ring_allreduce" in cell.source:
                cell.source = ring_code(s.scenario)
            elif "def dpo_loss" in cell.source:
                cell.source = dpo_code(s.scenario)
        (subs / s.sid).mkdir(parents=True)
        nbformat.write(nb, subs / s.sid / "hw.ipynb")
    return {"subs": subs, "zip": zip_path}


def round_otter(
    work: Path, ctx: dict, r: int, roster: list[Student], env: dict
) -> tuple[Run, Path]:
    subs = work / f"round{r}" / "submissions"
    shutil.copytree(ctx["subs"], subs)
    out = work / f"round{r}" / "results"
    commands = []
    for s in roster:
        (out / s.sid).mkdir(parents=True)
        argv = [
            BIN / "otter",
            "run",
            "-a",
            ctx["zip"],
            "-o",
            out / s.sid,
            "--no-logo",
            subs / s.sid / "hw.ipynb",
        ]
        commands.append((argv, subs / s.sid))
    return run_commands(commands, env, work / "otter.log"), out


def scores_otter(out: Path, roster: list[Student]) -> dict:
    names = {"q1": "memory", "q2": "ring", "q3": "dpo"}
    return scores_from_results(
        out,
        roster,
        lambda test: names.get(test["name"], "other"),
        lambda test: test.get("max_score") is not None,  # not the public tests' summary
    )


# --- expectations ----------------------------------------------------------------------------


def expected_mismatches(scores: dict, roster: list[Student]) -> list[str]:
    """Each submission whose scores do not follow its scenario, with why."""
    bad = []
    eps = 1e-6
    for s in roster:
        parts = scores.get(s.sid)
        if parts is None:
            bad.append(f"{s.sid} ({s.scenario}): no result")
            continue
        why = []
        for part, (got, most) in parts.items():
            if most == 0:
                continue
            if part == s.part and s.kind == "mistake":
                if got >= most - eps:
                    why.append(f"{part} {got:g}/{most:g}, expected a loss")
            elif part == s.part and s.kind == "raises":
                if got > eps:
                    why.append(f"{part} {got:g}/{most:g}, expected 0")
            elif got < most - eps:
                why.append(f"{part} {got:g}/{most:g}, expected full marks")
        if any(parts[p][1] == 0 for p in PARTS):
            why.append("a part is missing from the results")
        if why:
            bad.append(f"{s.sid} ({s.scenario}): {'; '.join(why)}")
    return bad


def score_table(all_scores: dict, roster: list[Student]) -> list[str]:
    """Per submission and tool: memory / ring / DPO / other parts, as score/max."""
    lines = []
    tools = list(all_scores)
    head = f"    {'':4} {'scenario':30}" + "".join(f" {t:>34}" for t in tools)
    lines.append(head)
    for s in roster:
        row = f"    {s.sid:4} {s.scenario:30}"
        for t in tools:
            parts = all_scores[t].get(s.sid)
            if parts is None:
                row += f" {'no result':>34}"
                continue
            cells = [f"{parts[p][0]:g}/{parts[p][1]:g}" for p in PARTS]
            if parts["other"][1]:
                cells.append(f"+{parts['other'][0]:g}/{parts['other'][1]:g}")
            row += f" {' '.join(cells):>34}"
        lines.append(row)
    return lines


# --- main ------------------------------------------------------------------------------------


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--submissions", type=int, default=20)
    parser.add_argument(
        "--tools",
        default=",".join(TOOLS),
        help=f"a subset of {','.join(TOOLS)} (scalegrade-warm: through `sandbox-serve`)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="ScaleGrade's --jobs")
    parser.add_argument("--keep", type=Path, help="keep the work folders here")
    args = parser.parse_args()
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if not tools or any(t not in TOOLS for t in tools) or args.rounds < 1 or args.submissions < 1:
        parser.error(f"--tools: a subset of {','.join(TOOLS)}; --rounds, --submissions >= 1")
    tools = [t for t in TOOLS if t in tools]
    same_tests()
    roster = students(args.submissions)
    env = tool_env()
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="anchors-", dir=args.keep)).resolve()
    else:
        work = Path(tempfile.mkdtemp(prefix="scalegrade-anchors-")).resolve()
    ctx: dict = {}
    try:
        load_start = os.getloadavg()[0]
        start = time.perf_counter()
        setups = {"scalegrade": setup_scalegrade, "nbgrader": setup_nbgrader, "otter": setup_otter}
        for t in tools:
            (work / t).mkdir()
            if t == "scalegrade-warm":
                ctx[t] = setup_warm(work / t, roster, env, args.jobs)
            else:
                ctx[t] = setups[t](work / t, roster, env)
        setup_s = time.perf_counter() - start
        runs: dict[str, list[Run]] = {t: [] for t in tools}
        outs: dict[str, Path] = {}
        units = []
        for r in range(args.rounds):
            units += [cold_numpy() for _ in range(3)]
            for t in tools:
                if t.startswith("scalegrade"):
                    run, outs[t] = round_scalegrade(work / t, ctx[t], r, args.jobs, env)
                elif t == "nbgrader":
                    run, outs[t] = round_nbgrader(work / t, ctx[t], r, env)
                else:
                    run, outs[t] = round_otter(work / t, ctx[t], r, roster, env)
                runs[t].append(run)
                print(
                    f"  round {r + 1}/{args.rounds}: {t} {run.seconds:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
        scorers = {
            "scalegrade": scores_scalegrade,
            "scalegrade-warm": scores_scalegrade,
            "nbgrader": scores_nbgrader,
            "otter": scores_otter,
        }
        scores = {t: scorers[t](outs[t], roster) for t in tools}  # the last round's
        loads = (load_start, os.getloadavg()[0])
        report(args, tools, roster, runs, scores, units, setup_s, loads)
    finally:
        service = ctx.get("scalegrade-warm", {}).get("service")
        if service is not None:
            service.terminate()
            service.wait(30)
        if args.keep:
            print(f"work folders kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def report(args, tools, roster, runs, scores, units, setup_s, loads) -> None:
    n = len(roster)
    unit = statistics.median(units)
    kinds = {k: sum(s.kind == k for s in roster) for k in ("right", "mistake", "raises")}
    print(
        f"anchors bench: {n} submissions ({kinds['right']} right, {kinds['mistake']} with a "
        f"classic mistake, {kinds['raises']} raising), {args.rounds} interleaved round(s) of "
        f"{', '.join(tools)}; ScaleGrade --jobs {args.jobs}, sandbox on; nbgrader and otter "
        "one submission at a time"
    )
    print(
        f"unit: cold `python -c 'import numpy'` {unit * 1e3:.0f} ms (median of {len(units)}); "
        f"{os.cpu_count()} cores, load average {loads[0]:.1f} at start, {loads[1]:.1f} at end; "
        f"setup (release, assign, submissions; not timed) {setup_s:.1f} s"
    )
    print(
        "wall: the whole command(s), median of the rounds; CPU: user + system of the tool's "
        "process tree (os.wait4 rusage), median;"
    )
    print(
        "peak memory, the largest of the rounds: "
        + (
            "PSS = summed proportional set size of the process tree sampled every 0.1 s "
            "(psutil); RSS = the largest single process's peak RSS (os.wait4 rusage)"
            if psutil
            else "RSS = the largest single process's peak RSS (os.wait4 rusage; psutil is "
            "not installed, no tree sum)"
        )
    )
    print(
        f"{'tool':16}{'wall s':>8}{'per sub':>10}{'CPU s':>8}{'PSS MiB':>9}{'RSS MiB':>9}"
        "  rounds (wall s)        scores as expected"
    )
    per_sub, cpu = {}, {}
    for t in tools:
        rs = runs[t]
        wall = statistics.median(r.seconds for r in rs)
        per_sub[t] = wall / n
        cpu[t] = statistics.median(r.cpu for r in rs)
        bad = expected_mismatches(scores[t], roster)
        failures = [f for r in rs for f in r.failures]
        verdict = "yes" if not bad else f"NO: {len(bad)} of {n} differ"
        if failures:
            verdict += f"; {len(failures)} commands failed"
        pss = f"{max(r.pss_peak for r in rs) / 2**20:9.0f}" if psutil else f"{'-':>9}"
        rounds = ", ".join(f"{r.seconds:.1f}" for r in rs)
        print(
            f"{t:16}{wall:8.2f}{per_sub[t] * 1e3:8.0f}ms{cpu[t]:8.1f}{pss}"
            f"{max(r.rss_max for r in rs) / 2**20:9.0f}  {rounds:22}  {verdict}"
        )
        for line in bad[:8] + failures[:4]:
            print(f"{'':18}{line}")
    if "scalegrade" in tools:
        print(
            f"ScaleGrade per submission: {per_sub['scalegrade'] * 1e3:.0f} ms = "
            f"{per_sub['scalegrade'] / unit:.1f} units (cold numpy imports)"
        )
        for t in ("nbgrader", "otter"):
            if t in tools:
                ratio = per_sub[t] / per_sub["scalegrade"]
                print(
                    f"{t}/ScaleGrade per submission: {ratio:5.1f}x (target >= {TARGETS[t]:g}x: "
                    f"{'met' if ratio >= TARGETS[t] else 'MISSED'}); CPU "
                    f"{cpu[t] / cpu['scalegrade']:.1f}x"
                )
    if "scalegrade-warm" in tools:
        warm = per_sub["scalegrade-warm"]
        print(
            f"ScaleGrade through a warm sandbox (`sandbox-serve`, started and warmed before, "
            f"not timed; its CPU and memory are not in the row): {warm * 1e3:.0f} ms = "
            f"{warm / unit:.1f} units per submission"
        )
        for t in ("nbgrader", "otter"):
            if t in tools:
                print(f"{t}/ScaleGrade through a warm sandbox: {per_sub[t] / warm:5.1f}x")
    print("scores (last round): memory, ring, DPO, and + ScaleGrade's other autograded parts")
    for line in score_table(scores, roster):
        print(line)


if __name__ == "__main__":
    main()
