"""The adversarial corpus: for each code question, a naive or wrong implementation, and the
same implementation with the tampering a cheating student would add.  Run through the real
sandbox: the checks' probe() runs in the probe process, the notebook in its own.  Each
forgery must score exactly what its plain version scores: nothing the student's process
does to itself changes what the probe process measures.
"""

from __future__ import annotations

import pytest

from autograder.checks import fraction, grade_result, load_checks
from autograder.sandbox import Limits, Plan, Probe, Sandbox
from generator import bank
from tests.autograder.test_sandbox import notebook

SEED = 6_385_021_779  # a grading seed no docstring holds
LIMITS = Limits(wall_seconds=30.0, cpu_seconds=30, memory_bytes=3 << 30)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(limits=LIMITS) as box:
        yield box


def graded(sandbox, tmp_path, qid: str, function: str, cells: str) -> float:
    """The weighted score of ``cells`` on the question ``qid``'s code part."""
    folder = bank.load().templates / qid
    checks = load_checks(folder, "checks.py")
    assert checks.module.ISOLATED
    the_plan = Plan(
        variables=(),
        probes=(Probe("q1-x", function, checks.source, SEED, {}, isolated=True),),
    )
    outcome = sandbox.run(notebook(tmp_path / "nb.ipynb", cells), the_plan)
    assert outcome.error is None, outcome.error
    probe = outcome.harvest["probes"]["q1-x"]
    if not probe["ok"]:
        return 0.0
    return fraction(grade_result(checks.grade, probe["result"], SEED, {}))


def reference(qid: str, part: str) -> str:
    return bank.load().question(qid).code[part].solution


# --- the calculator tool (000 §7.4): input is data, not code --------------------------------

CALC = "agents/calculator-tool-code"
EVAL_CALC = """
def calculator(expression):
    try:
        return eval(expression, {"__builtins__": {}})  # the mistake: the input runs
    except Exception as err:
        raise ValueError(str(err)) from None
"""
CALC_FORGERIES = {
    # the in-process check replaced builtins.eval by a tripwire: keep the real one
    "the real eval kept": EVAL_CALC.replace(
        "def calculator", "import builtins\n_eval = builtins.eval\ndef calculator"
    ).replace("return eval(", "return _eval("),
    # the probe process times each call: stop this process's clocks
    "clocks stopped": "import time\n"
    "time.monotonic = time.perf_counter = time.time = lambda: 0.0\n"
    "time.monotonic_ns = time.perf_counter_ns = time.time_ns = lambda: 0\n" + EVAL_CALC,
    # look for the probe's payloads, seed or expected values in this process
    "frames and modules": EVAL_CALC.replace(
        "    try:",
        """    import gc, sys
    frame, found = sys._getframe(1), []
    while frame is not None:
        found += [k for k in frame.f_locals if k in ("seed", "payloads", "cases")]
        frame = frame.f_back
    found += [n for n, m in sys.modules.items() if hasattr(m, "code_payloads")]
    found += [o for o in gc.get_objects() if getattr(o, "__name__", "") == "code_payloads"]
    if found:
        raise ValueError(repr(found))
    try:""",
    ),
}


def test_calculator_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    assert graded(sandbox, tmp_path, CALC, "calculator", reference(CALC, "calculator")) == 1.0
    plain = graded(sandbox, tmp_path, CALC, "calculator", EVAL_CALC)
    assert plain < 1  # eval: the input runs (and ** or / give numbers)
    for name, cells in CALC_FORGERIES.items():
        assert graded(sandbox, tmp_path, CALC, "calculator", cells) == plain, name
