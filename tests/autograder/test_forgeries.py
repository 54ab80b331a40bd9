"""The adversarial corpus: for each code question, a plain implementation (naive or wrong)
and the same implementation with the tampering a cheating student would add: builtins,
NumPy, torch or the harness's own tools patched, clocks stopped, hooks and logs rewritten,
the probe's objects looked for in this process's frames, modules and gc, the probe process
read through /proc, the grader's own reference read from the project's files.  Run through
the real sandbox: the checks' probe() runs in the probe process, the notebook in its own.
Each forgery must score exactly what its plain version scores: nothing the student's
process does to itself changes what the probe process measures, and nothing of the probe's
can be reached from there.

A forgery that gained points was a hole in its check, not in the sandbox's isolation, and
the check was changed to judge what the forgery forged: ties dealt in turn (the vote), an
x_out re-centred on the mean (gossip), samples rescaled to the notes' stds (DDPM),
estimates moved to the expected moments (the bandit), outputs remembered across calls (the
convolution).  Each stays here, among its question's forgeries.

Under process isolation (the fallback) every file the student's uid can read is readable,
the project's folder included, by design: there the forgeries that read the grader's files
are left out (``here``).  The sections follow the questions, each citing the notes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.grading.checks import fraction, grade_result, load_checks
from autograder.sandbox import Limits, Plan, Probe, Sandbox
from generator import bank
from tests.autograder.test_sandbox import notebook

SEED = 6_385_021_779  # a grading seed no docstring holds
LIMITS = Limits(wall_seconds=30.0, cpu_seconds=30, memory_bytes=3 << 30)


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(limits=LIMITS) as box:
        yield box


def graded(
    sandbox, tmp_path, qid: str, function: str, cells: str, checks_file: str = "checks.py"
) -> float:
    """The weighted score of ``cells`` on the question ``qid``'s code part."""
    return fraction(properties(sandbox, tmp_path, qid, function, cells, checks_file))


def properties(
    sandbox, tmp_path, qid: str, function: str, cells: str, checks_file: str = "checks.py"
) -> list[dict]:
    """The graded properties of ``cells`` on the question ``qid``'s code part whose checks
    are ``checks_file`` (another file for a second code part); ``qid`` a folder: the checks
    file there (a check changed for a test)."""
    folder = qid if isinstance(qid, Path) else bank.load().templates / qid
    checks = load_checks(folder, checks_file)
    assert checks.isolated
    the_plan = Plan(
        variables=(),
        probes=(Probe("q1-x", function, checks.source, SEED, {}, isolated=True),),
    )
    outcome = sandbox.run(notebook(tmp_path / "nb.ipynb", cells), the_plan)
    assert outcome.error is None, outcome.error
    probe = outcome.harvest["probes"]["q1-x"]
    assert probe["ok"], probe
    return grade_result(checks.grade, probe["result"], SEED, {})


def reference(qid: str, part: str) -> str:
    return bank.load().question(qid).code[part].solution


def here(sandbox, forgeries: dict) -> dict:
    """The forgeries to try in this sandbox: process isolation leaves every file the
    student's uid can read readable (it logs so), the project's folder included; there,
    the forgeries that read the grader's files would succeed by design."""
    if sandbox.isolation != "process":
        return forgeries
    return {k: v for k, v in forgeries.items() if not k.startswith("the grader's files")}


def scored_alike(
    sandbox,
    tmp_path,
    qid: str,
    function: str,
    plain: str,
    forgeries: dict,
    part: str = "",
    checks_file: str = "checks.py",
) -> float:
    """The score of ``plain`` on the question ``qid``'s code part, once each of ``forgeries``
    (those tried in this sandbox: ``here``) is found to score exactly that, and the
    reference solution of the code part ``part`` (where given) full marks."""

    def score(cells: str) -> float:
        return graded(sandbox, tmp_path, qid, function, cells, checks_file)

    if part:
        assert score(reference(qid, part)) == 1.0
    expected = score(plain)
    for name, cells in here(sandbox, forgeries).items():
        assert score(cells) == expected, name
    return expected


def grader_files(qid: str, function: str, file: str = "solution.py", attr: str = "") -> str:
    """Cells appended to a plain version of ``function``: they look for the grader's own
    ``attr`` (``function`` unless told) in the question's ``file`` (the reference solution,
    or the checks' own reference) where the grader keeps it: its templates folder, by
    absolute path and relative to the working directory, then the project's question bank,
    imported; and call it instead of the plain function where it is found."""
    path = str(bank.load().templates / qid / file)
    return f"""
import importlib, os, sys, types
def _theirs_in(source):
    module = types.ModuleType("_theirs")
    sys.modules["_theirs"] = module  # as an import would: dataclasses look it up there
    exec(compile(source, {file!r}, "exec"), module.__dict__)
    return getattr(module, {attr or function!r})
_theirs = None
for _path in [{path!r}] + [
    os.path.join(*[".."] * up, "templates", {qid!r}, {file!r}) for up in range(4)
]:
    try:
        with open(_path, encoding="utf-8") as _fh:
            _theirs = _theirs_in(_fh.read())
        break
    except Exception:
        pass
if _theirs is None:
    try:
        _bank = importlib.import_module("generator.bank").load()
        _theirs = _theirs_in(_bank.question({qid!r}).files[{file!r}])
    except Exception:
        pass
_plain = {function}
def {function}(*args, **kwargs):
    return (_theirs or _plain)(*args, **kwargs)
"""


# What a cheater looks for in this process, were the probe here (a thread, or an in-process
# check): a module defining two of the names ``defined`` (sys.modules), a function or class
# of one of those names from outside the notebook (gc), a local among ``local`` in any
# frame of any thread, a dict holding all of ``keys`` (gc).  ``_leaks`` returns what it
# found; the forgeries assert that it is nothing: were the probe in this process, the
# forgery would read it, and score apart from its plain version either way.
LEAKS = """
import gc, sys, types
def _leaks(defined, local=(), keys=()):
    defined, local = set(defined), set(local)
    found = [m for m in list(sys.modules.values()) if defined
             and len(defined & set(getattr(m, "__dict__", ()))) >= min(2, len(defined))]
    for o in gc.get_objects():
        if type(o) in (types.FunctionType, type) and o.__name__ in defined:
            if o.__module__ != "__main__":
                found.append(o)
        elif keys and type(o) is dict and all(k in o for k in keys):
            found.append(sorted(map(str, o))[:8])
    for top in [sys._getframe(), *sys._current_frames().values()]:
        frame = top
        while frame is not None:
            found += [(frame.f_code.co_name, k) for k in frame.f_locals if k in local]
            frame = frame.f_back
    return found
"""


# What a cheater reads of the other processes beside this one, and of their files: the
# probe process's memory, environment, descriptors (the probes' memfd) and working folder,
# and the shared temporary folders.  ``_scan(*needles)`` returns the paths that hold a
# probe's source (``def probe(``) or one of ``needles``; the forgeries assert that there is
# none.
PROC_SCAN = """
import os
def _scan(*needles):
    found, mine = [], str(os.getpid())
    needles = (b"def " + b"probe(", *needles)  # apart: the notebook (in /tmp) holds this cell
    def read(path):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return
        try:
            data = os.read(fd, 1 << 22)
        except OSError:
            return
        finally:
            os.close(fd)
        if any(needle in data for needle in needles):
            found.append(path)
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == mine:
            continue
        for name in ("cmdline", "environ", "mem", "maps"):
            read(f"/proc/{pid}/{name}")
        for folder in ("fd", "cwd", "root/tmp"):
            try:
                entries = os.listdir(f"/proc/{pid}/{folder}")
            except OSError:
                continue
            for entry in entries:
                read(f"/proc/{pid}/{folder}/{entry}")
    for top in ("/tmp", "/var/tmp", "/dev/shm"):
        for root, _, files in os.walk(top):
            for name in files:
                read(os.path.join(root, name))
    return found
"""


# --- the calculator tool (000 §7.4): input is data, not code --------------------------------------

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
    plain = scored_alike(
        sandbox, tmp_path, CALC, "calculator", EVAL_CALC, CALC_FORGERIES, part="calculator"
    )
    assert plain < 1  # eval: the input runs (and ** or / give numbers)


def test_an_eval_cut_short_in_a_child_still_shows(sandbox, tmp_path):
    """An eval run in a forked child and killed after 50 ms is quick, but the payload's list
    is already allocated: the job's cgroup counts the child's memory.  (An eval cut after a
    millisecond would run too little to show: the nearest a timer gets to a parser.)  The
    50 ms count from the child's first line, not from its fork, which two busy test workers
    can leave waiting for a core."""
    if sandbox.memory.get("cgroup") is None:
        pytest.skip(f"no memory cgroup here: {sandbox.memory.get('why')}")
    timeboxed = """
import os, signal, time
def calculator(expression):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, b"s")  # started: the parent's 50 ms count from here
            value = eval(expression, {"__builtins__": {}})
            os.write(w, repr(value).encode()[:4096] if type(value) is int else b"!")
        finally:
            os._exit(0)
    os.close(w)
    os.read(r, 1)
    end, done = time.monotonic() + 0.05, False
    while time.monotonic() < end and not done:
        done = os.waitpid(pid, os.WNOHANG) != (0, 0)
        time.sleep(0.002)
    if not done:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    out = os.read(r, 8192)
    os.close(r)
    if not out or out == b"!":
        raise ValueError("not an integer expression")
    return int(out)
"""
    props = properties(sandbox, tmp_path, CALC, "calculator", timeboxed)
    code = next(p for p in props if p["name"] == "never runs its input as code")
    assert code["score"] == 0 and "MB" in code["message"], code


# --- unbiased pass@k (000 §7.3, Proposition 7.5) --------------------------------------------------

PASS_K = "agents/pass-at-k-code"
FLOAT_COMB = """
import math
def comb(n, k):  # a float: overflows past 10^308
    return math.factorial(n) / (math.factorial(k) * math.factorial(n - k))
def pass_at_k(n, c, k):
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)
"""
PASS_K_FORGERIES = {
    # the tools an in-process check would compare with, patched; the overflow silenced
    "checks patched": FLOAT_COMB.replace(
        "def pass_at_k(n, c, k):",
        """import numpy as np
math.isclose = lambda *a, **k: True
math.isfinite = lambda x: True
math.comb = lambda n, k: 1
np.isclose = np.allclose = lambda *a, **k: True
def pass_at_k(n, c, k):""",
    ),
    # the grader's exact reference (its function `exact`), or its cases, seed or module,
    # reached from here: looked for once, at the first call
    "frames, modules and gc": LEAKS
    + FLOAT_COMB.replace(
        "def pass_at_k(n, c, k):",
        """_found = []
def pass_at_k(n, c, k):
    if not _found:
        _found.append(_leaks(("exact", "cases"), ("seed",), ("values", "edges", "huge", "sweep")))
    assert not _found[0], _found[0]""",
    ),
    # the checks' exact integer reference, from the project's folder
    "the grader's files": FLOAT_COMB + grader_files(PASS_K, "pass_at_k", "checks.py", "exact"),
}


def test_pass_at_k_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, PASS_K, "pass_at_k", FLOAT_COMB, PASS_K_FORGERIES, part="pass_at_k"
    )
    assert plain < 1  # C(n, k) as a float: OverflowError for n in the thousands


# --- the majority vote (000 §7.2, Theorem 7.4, Exercise 14) ---------------------------------------

VOTE, VOTE_CHECKS = "agents/pass-at-k-code", "vote_checks.py"  # its second code part
FIRST_SEEN = """
from collections import Counter
def majority_vote(answers, choose):  # most_common keeps the first seen of tied answers
    return Counter(answers).most_common(1)[0][0]
"""
VOTE_FORGERIES = {
    # the probe's lists, its tie-breakers and their generator, its module, reachable from here
    "frames, modules and gc": LEAKS
    + FIRST_SEEN.replace(
        "def majority_vote(answers, choose):",
        """_found = []
def majority_vote(answers, choose):
    if not _found:
        _found.append(_leaks(("_plain_answer", "cases", "TieBreaker"), ("breakers", "seed"),
                             ("clear", "tied", "votes")))
    assert not _found[0], _found[0]""",
    ),
    # the generators an in-process probe would draw its simulated runs, lists and
    # tie-breaks from, patched: every run right, every draw 0
    "generators patched": FIRST_SEEN
    + """
import numpy as np
_rng = np.random.default_rng
class _Rigged:
    def __init__(self, *a, **k):
        self._real = _rng(0)
    def random(self, size=None, *a, **k):
        return np.zeros(size)
    def __getattr__(self, name):
        return getattr(self._real, name)
np.random.default_rng = _Rigged
np.random.seed = lambda *a, **k: None
""",
    # the reference solution, from the project's folder
    "the grader's files": FIRST_SEEN + grader_files(VOTE, "majority_vote", "vote_solution.py"),
    # ties dealt in turn: the same tied list asked again gets each tied answer in turn; the
    # counts came out exactly equal (the check now has each tie decided by the probe's
    # tie-breaker: more forgeries of this kind in test_forgeries_sampling.py)
    "ties dealt in turn": """
from collections import Counter
_asked = Counter()
def majority_vote(answers, choose):
    counts = Counter(answers)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    key = tuple(map(repr, answers))
    _asked[key] += 1
    return tied[(_asked[key] - 1) % len(tied)]
""",
}


def test_vote_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    fn = part = "majority_vote"
    plain = scored_alike(sandbox, tmp_path, VOTE, fn, FIRST_SEEN, VOTE_FORGERIES, part, VOTE_CHECKS)
    assert plain < 1  # ties always to the first seen: never the tie-breaker's (Exercise 14)


# --- activation checkpointing (000 §2.5, Proposition 2.8) -----------------------------------------

CKPT = "memory/checkpointing-code"
STORE_ALL = """
import torch
def checkpointed_forward(layers, x, k):  # the plain forward: every activation stored
    for layer in layers:
        x = layer(x)
    return x
"""
CKPT_FORGERIES = {
    # call each segment again when its gradient arrives, as a checkpoint would, and
    # differentiate the stored activations all the same: the counts and the order of a
    # checkpoint, without its recomputation
    "recalls in gradient hooks": """
import torch
def checkpointed_forward(layers, x, k):
    n = len(layers)
    for start in range(0, n, k):
        stop, seg_in = min(start + k, n), x
        for layer in layers[start:stop]:
            x = layer(x)
        def recall(grad, start=start, stop=stop, seg_in=seg_in):
            with torch.no_grad():
                h = seg_in.detach()
                for layer in layers[start:stop]:
                    h = layer(h)
            return grad
        if x.requires_grad:
            x.register_hook(recall)
    return x
""",
    # what beat the in-process probe: the log, through the layers' closures and frames
    "log rewritten": STORE_ALL.replace(
        "    return x",
        """    import gc, sys
    for layer in layers:
        for name in ("log", "calls", "events"):
            if isinstance(getattr(layer, name, None), list):
                getattr(layer, name).extend(getattr(layer, name)[:])
    logs = [o for o in gc.get_objects() if type(o) is list and o[:1] == [["forward", 0]]]
    frame = sys._getframe(1)
    while frame is not None:
        logs += [v for k, v in frame.f_locals.items() if k in ("log", "phase", "events")]
        frame = frame.f_back
    assert not logs, logs
    for layer in layers:  # forged gradients, on this process's copies of the parameters
        for p in layer.parameters():
            p.grad = torch.zeros_like(p)
    return x""",
    ),
}


def test_checkpointing_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    fn = "checkpointed_forward"
    plain = scored_alike(
        sandbox, tmp_path, CKPT, fn, STORE_ALL, CKPT_FORGERIES, part="checkpointing"
    )
    assert plain < 1  # nothing recomputed: 000 §2.5's n units of activations


# --- LoRA (000 §5.2) ------------------------------------------------------------------------------

LORA = "adaptation/lora-code"
UNFROZEN = """
import torch
from torch import nn
class LoRALinear(nn.Module):  # the base is never frozen: W0 and b train too
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base = base
        d_out, d_in = base.weight.shape
        self.A = nn.Parameter(torch.randn(r, d_in, dtype=base.weight.dtype) / d_in**0.5)
        self.B = nn.Parameter(torch.zeros(d_out, r, dtype=base.weight.dtype))
        self.scale = alpha / r
    def forward(self, x):
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T
"""
LORA_FORGERIES = {
    # report only A and B as the layer's parameters: a count of r(d_in + d_out)
    "parameters hidden": UNFROZEN
    + """
_own = nn.Module.named_parameters
def _shown(self, *args, **kwargs):
    return ((n, p) for n, p in _own(self, *args, **kwargs) if n in ("A", "B"))
LoRALinear.named_parameters = _shown
""",
    # zero the base's gradients on their way into .grad: an SGD step leaves it in place
    "gradients hooked": UNFROZEN.replace(
        "        self.scale = alpha / r",
        """        self.scale = alpha / r
        for p in base.parameters():
            p.register_hook(lambda g: g * 0)""",
    ),
    # what beat the in-process probe: the probe's cases (the target) from frames and gc
    "frames and gc": UNFROZEN.replace(
        "        self.scale = alpha / r",
        """        self.scale = alpha / r
        import gc, sys
        found = [o for o in gc.get_objects() if type(o) is dict and "fit_y" in o]
        frame = sys._getframe(1)
        while frame is not None:
            found += [v for v in frame.f_locals.values() if type(v) is dict and "fit_y" in v]
            frame = frame.f_back
        assert not found, found""",
    ),
}


def test_lora_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, LORA, "LoRALinear", UNFROZEN, LORA_FORGERIES, part="lora"
    )
    assert plain < 1  # the base trains: 000 §5.2's frozen W0 is not


# --- the DPO loss (000 §5.5, Theorem 5.9, Exercise 11) --------------------------------------------

DPO = "posttraining/dpo-loss-code"
LOG_SIGMOID = """
import torch
def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps,
             beta):
    u = beta * ((policy_chosen_logps - ref_chosen_logps)
                - (policy_rejected_logps - ref_rejected_logps))
    return -torch.log(torch.sigmoid(u)).mean()  # σ(u) underflows to 0 for u ≪ 0: inf, NaN
"""
DPO_FORGERIES = {
    # the stability check wants finite numbers: make the infinite loss and its NaN
    # gradient finite, without computing −log σ(u) stably
    "infinities hidden": LOG_SIGMOID.replace(
        "    return -torch.log(torch.sigmoid(u)).mean()",
        """    for x in (policy_chosen_logps, policy_rejected_logps):
        if x.requires_grad:
            x.register_hook(torch.nan_to_num)
    return torch.nan_to_num(-torch.log(torch.sigmoid(u)).mean())""",
    ),
    # the gradient is taken in this process: patch the autograd.grad the harness calls
    # (NaN to 0), and the tests an in-process check would judge with; patch torch.tensor
    # and numpy's generators, through which an in-process probe would draw its batches
    "autograd and checks patched": LOG_SIGMOID
    + """
import math
import numpy as np
_grad, _tensor, _rng = torch.autograd.grad, torch.tensor, np.random.default_rng
def _finite(*args, **kwargs):
    return tuple(None if g is None else torch.nan_to_num(g) for g in _grad(*args, **kwargs))
torch.autograd.grad = _finite
torch.isfinite = lambda x: torch.ones_like(x, dtype=torch.bool)
torch.allclose = lambda *a, **k: True
np.isfinite = lambda x, *a, **k: np.ones(np.shape(x), dtype=bool)
np.allclose = lambda *a, **k: True
math.isfinite = lambda x: True
torch.tensor = lambda data, *a, **k: _tensor(np.zeros_like(np.asarray(data)), *a, **k)
np.random.default_rng = lambda *a, **k: _rng(0)
""",
    # the probe's batches, margins or seed, or its module, reachable from this process
    "frames, modules and gc": LEAKS
    + LOG_SIGMOID.replace(
        "    u = beta",
        """    found = _leaks(("_margin", "cases"), ("seed", "per_pair"), ("stable", "betas"))
    assert not found, found
    u = beta""",
    ),
    # the reference solution, from the project's folder
    "the grader's files": LOG_SIGMOID + grader_files(DPO, "dpo_loss"),
}


def test_dpo_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(sandbox, tmp_path, DPO, "dpo_loss", LOG_SIGMOID, DPO_FORGERIES, part="dpo")
    assert plain < 1  # log(sigmoid(u)): inf and NaN at |u| ~ 1000 (not softplus(−u))


# --- gradient accumulation (000 §1.5, Proposition 1.10) -------------------------------------------

ACCUM = "parallel/grad-accumulation-code"
FULL_BATCH = """
def accumulate_gradients(model, loss_fn, x, y, accumulation_steps):
    loss_fn(model(x), y).mean().backward()  # the whole batch at once: no accumulation
"""
ACCUM_FORGERIES = {
    # the schedule of an accumulation, for show: k micro-batches whose backward adds nothing
    "micro-batches for show": FULL_BATCH
    + """    for xm, ym in zip(x.chunk(accumulation_steps), y.chunk(accumulation_steps)):
        (loss_fn(model(xm), ym).mean() * 0).backward()
""",
    # what beat the in-process probe: its log, through the model's hooks and closures
    "hooks and closures": FULL_BATCH
    + """    import gc
    for m in model.modules():
        m._forward_hooks.clear()
        m._forward_pre_hooks.clear()
    logs = [o for o in gc.get_objects() if type(o) is list and o[:1] == [["forward", 24]]]
    assert not logs, logs
""",
}


def test_accumulation_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    fn = "accumulate_gradients"
    plain = scored_alike(
        sandbox, tmp_path, ACCUM, fn, FULL_BATCH, ACCUM_FORGERIES, part="accumulate"
    )
    assert plain < 1  # one pass over the batch: no accumulation (000 §1.5)


# --- the tensor-parallel MLP (000 §3.3) -----------------------------------------------------------

TP = "parallel/tensor-parallel-mlp-code"
WHOLE_W2 = """
import torch
import torch.nn.functional as F
def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):  # multiplies the whole W2: not local
    a = w1.chunk(t, dim=1)[rank]
    hidden = torch.zeros(x.shape[0], w1.shape[1], dtype=x.dtype)
    size = w1.shape[1] // t
    hidden[:, rank * size : (rank + 1) * size] = F.gelu(x @ a)
    return all_reduce(hidden @ w2)
"""
TP_FORGERIES = {
    # keep the clean matrices from one run in a file, use them when the others are NaN
    "clean weights kept in a file": WHOLE_W2.replace(
        "def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):  # multiplies the whole W2: not local",
        """import os
def tp_mlp_forward(x, w1, w2, rank, t, all_reduce):
    kept = f"/tmp/tp-{tuple(w2.shape)}.pt"
    if not torch.isnan(w2).any():
        torch.save(w2, kept)
    elif os.path.exists(kept):
        w2 = torch.load(kept)""",
    ),
    # what beat the threads in the probe's own process: the other ranks' arguments
    "other ranks' frames": WHOLE_W2.replace(
        "    a = w1.chunk(t, dim=1)[rank]",
        """    import gc, sys
    clean = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.shape == w2.shape
             and not torch.isnan(o).any()]
    frame = sys._getframe(1)
    while frame is not None:
        clean += [v for k, v in frame.f_locals.items() if k in ("case", "calls", "parts")]
        frame = frame.f_back
    if clean and torch.isnan(w2).any():
        w2 = clean[0] if isinstance(clean[0], torch.Tensor) else w2
    a = w1.chunk(t, dim=1)[rank]""",
    ),
}


def test_tensor_parallel_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, TP, "tp_mlp_forward", WHOLE_W2, TP_FORGERIES, part="tp_mlp"
    )
    assert plain < 1  # the other ranks' rows of W2 are read (000 §3.3: only its own block)


# --- ring all-reduce (000 §3.1, Theorem 3.3) ------------------------------------------------------

RING = "collectives/ring-allreduce-code"
GATHER_ALL = """
import numpy as np
def ring_allreduce(x, rank, world, comm):  # passes whole buffers around, then sums
    x = np.asarray(x, dtype=float)
    total, passing = x.copy(), x.copy()
    for _ in range(world - 1):
        passing = comm.send_recv(passing)
        total = total + passing
    return total
"""
RING_FORGERIES = {
    # what beat the in-process router: its log, found through gc and frames and rewritten
    "router log rewritten": GATHER_ALL.replace(
        "    return total",
        """    import gc, sys
    logs = [o for o in gc.get_objects() if type(o) is list and o and type(o[0]) is list
            and len(o[0]) == 4 and o[0][:1] == [0]]
    for log in logs:
        for entry in log:
            entry[2] = len(x) // world
    frame = sys._getframe(1)
    while frame is not None:
        for k, v in frame.f_locals.items():
            if k in ("log", "sent"):
                v.clear()
        frame = frame.f_back
    return total""",
    ),
    # the comm's own object: count its calls down, or reach past it
    "comm tampered": GATHER_ALL.replace(
        "    return total",
        """    for name in dir(comm):
        if not name.startswith("__") and not callable(getattr(comm, name)):
            try:
                setattr(comm, name, 0)
            except Exception:
                pass
    return total""",
    ),
}


def test_ring_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, RING, "ring_allreduce", GATHER_ALL, RING_FORGERIES, part="ring"
    )
    assert plain < 1  # whole buffers, p − 1 times: the sum, not the ring (Theorem 3.3)


# A gloo start failure told from inside the student's process (issue 36, item 7).  The gloo
# run's ranks are forked from the student's process: a cell that breaks torch.distributed
# there made every rank report that gloo could not start, and the check dropped its gloo
# property as the machine's failure (weight 0) instead of failing it: a free pass for a
# ring whose gloo run is wrong.  The probe process now starts a gloo group of its own
# before it believes that (prober.whose_start).
RING_NO_ALL_GATHER = """
import numpy as np
def ring_allreduce(x, rank, world, comm):  # the reduce-scatter, and no all-gather after it
    p = world
    chunks = [c.copy() for c in np.array_split(np.asarray(x, dtype=np.float64), p)]
    for s in range(p - 1):
        send, recv = (rank - s) % p, (rank - s - 1) % p
        chunks[recv] = chunks[recv] + comm.send_recv(chunks[send])
    return np.concatenate(chunks)
"""
RING_START_FORGERIES = {
    "TCPStore patched to raise": RING_NO_ALL_GATHER
    + """
import torch.distributed as dist
class _NoStore:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("Connection refused: the store is down")
dist.TCPStore = _NoStore
""",
    "init_process_group patched to raise": RING_NO_ALL_GATHER
    + """
import torch.distributed as dist
def _no_group(*args, **kwargs):
    raise RuntimeError("Gloo connectFullMesh failed")
dist.init_process_group = _no_group
""",
    # the harness's own step replaced: each rank tells P, in the harness's words, that it
    # could not start, without trying
    "the harness's start step forged": RING_NO_ALL_GATHER
    + """
import sys
for _m in list(sys.modules.values()):
    if hasattr(_m, "_join_gloo") and hasattr(_m, "wire"):
        def _told(fd, store, rank, world, _m=_m):
            _m.wire.send(fd, {"op": "ready", "error": "RuntimeError: gloo is down"})
            return False
        _m._join_gloo = _told
""",
}


def test_a_gloo_start_broken_from_the_notebook_fails_the_gloo_property(sandbox, tmp_path):
    """Each forgery scores exactly what its plain version scores (as scored_alike, each
    notebook run once), the gloo property counted at 0 in both."""

    def gloo_property(props: list[dict]) -> dict:
        gloo = props[-1]
        assert gloo["name"] == "gloo run matches dist.all_reduce"
        return gloo

    plain = properties(sandbox, tmp_path, RING, "ring_allreduce", RING_NO_ALL_GATHER)
    assert 0 < fraction(plain) < 1  # right messages for the reduce-scatter, a wrong sum
    gloo = gloo_property(plain)
    assert (gloo["weight"], gloo["score"]) == (1.5, 0.0), gloo
    for name, cells in here(sandbox, RING_START_FORGERIES).items():
        forged = properties(sandbox, tmp_path, RING, "ring_allreduce", cells)
        assert fraction(forged) == fraction(plain), name
        gloo = gloo_property(forged)
        assert (gloo["weight"], gloo["score"]) == (1.5, 0.0), (name, gloo)  # counted, at 0
    assert "something in the notebook's process stopped it" in gloo["message"]


def test_a_gloo_start_failure_is_the_machines_only_when_the_probe_process_fails_too(
    monkeypatch,
):
    """The honest broken machine stays apart: P's own group fails too, and the rank's
    NotStarted is kept (the check then gives the property weight 0).  When P's own group
    forms, or its test cannot tell, the rank's word is the student's failure."""
    from autograder.sandbox.inside import prober

    told = prober.NotStarted("RuntimeError: Connection refused")
    outcomes = [[told, told, ValueError("the student's own")]]
    verdicts = {
        (False, "loopback does not connect"): prober.NotStarted,
        (True, ""): RuntimeError,
        (None, "could not fork"): RuntimeError,
    }
    for here, kind in verdicts.items():
        channel = prober.Channel(-1, 0.0)
        monkeypatch.setattr(prober, "gloo_starts_here", lambda until, here=here: here)
        [[a, b, c]] = prober.whose_start(channel, outcomes, 0.0)
        assert type(a) is kind and type(b) is kind and isinstance(c, ValueError), here
        assert channel.gloo_here == here  # once per job
        if kind is prober.NotStarted:
            assert "the grader's own gloo group could not start either" in str(a)
        else:
            assert getattr(a, "scalegrade_student", False) and "notebook's process" in str(a)
    # no rank told a start failure: nothing to judge, no test run
    monkeypatch.setattr(prober, "gloo_starts_here", lambda until: pytest.fail("a test ran"))
    assert prober.whose_start(prober.Channel(-1, 0.0), [[1.0, 2.0]], 0.0) == [[1.0, 2.0]]


# --- the speculative sampler (000 §6.4) -----------------------------------------------------------

SAMPLER = "serving/speculative-sampler-code"

SAMPLER_FORGERIES = {
    # 000 §6.4: the trick that beat the in-process probe: fixed output, count arrays forged
    "constant": "def speculative_step(p, q, x, rng):\n    return (0, True)\n",
    "constant, numpy.zeros patched": """
import numpy as np
_zeros = np.zeros
def _forged(shape, *a, **k):
    out = _zeros(shape, *a, **k)
    out[:] = 1000
    return out
np.zeros = _forged
def speculative_step(p, q, x, rng):
    return (0, True)
""",
}


def test_sampler_forgeries_score_what_their_plain_versions_score(sandbox, tmp_path):
    assert (
        graded(sandbox, tmp_path, SAMPLER, "speculative_step", reference(SAMPLER, "sampler")) == 1.0
    )
    scores = {
        name: graded(sandbox, tmp_path, SAMPLER, "speculative_step", cells)
        for name, cells in SAMPLER_FORGERIES.items()
    }
    assert scores["constant"] < 0.5
    assert scores["constant, numpy.zeros patched"] == scores["constant"]


# --- group-wise quantization (000 §6.3) -----------------------------------------------------------

QUANT = "inference/group-quantization-code"
UNSIGNED = """
import numpy as np
def quantize_groups(w, bits, group_size):
    w = np.asarray(w, dtype=np.float64)
    rows, cols = w.shape
    qmax = 2**bits - 1  # the unsigned range: codes reach twice the signed ones' limit
    groups = w.reshape(rows, cols // group_size, group_size)
    scales = np.abs(groups).max(axis=-1) / qmax
    safe = np.where(scales > 0, scales, 1.0)
    q = np.round(groups / safe[..., None]).astype(np.int64)
    return q.reshape(rows, cols), scales
"""
QUANT_FORGERIES = {
    # what an in-process check would judge with, patched: closeness, equality, norms
    "checks patched": UNSIGNED
    + """
np.allclose = np.isclose = np.array_equal = lambda *a, **k: True
np.isfinite = lambda x, *a, **k: np.ones(np.shape(x), dtype=bool)
np.linalg.norm = lambda *a, **k: 0.0
""",
    # the generator an in-process probe would draw its weights from, patched: the
    # weights it sends would be those of seed 0, and so would a cached answer's
    "generators patched": UNSIGNED
    + """
_rng = np.random.default_rng
np.random.default_rng = lambda *a, **k: _rng(0)
""",
    # the checks' own _qmax and _expected_scales, used if this process can reach them
    "frames, modules and gc": LEAKS
    + UNSIGNED.replace(
        "    qmax = 2**bits - 1",
        """    found = [m for m in _leaks(("_qmax", "_expected_scales")) if hasattr(m, "_qmax")]
    qmax = found[0]._qmax(bits) if found else 2**bits - 1""",
    ),
    # the probes' file (a memfd, which the probe process reads as it starts) open in any
    # process /proc shows, or that process's memory and environment: while the cells run
    # and at each call
    "descriptors and /proc": PROC_SCAN
    + UNSIGNED.replace(
        "def quantize_groups(w, bits, group_size):",
        """_leaked = _scan(b"_expected" b"_scales")
def quantize_groups(w, bits, group_size):
    leaked = _leaked + _scan(b"_expected" b"_scales")
    assert not leaked, leaked""",
    ),
    # the reference solution, from the project's folder
    "the grader's files": UNSIGNED + grader_files(QUANT, "quantize_groups"),
}


def test_quantization_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, QUANT, "quantize_groups", UNSIGNED, QUANT_FORGERIES, part="quantize"
    )
    assert plain < 1  # 2^b − 1 levels: codes and scales off, the round trip right (§6.3)


# --- local SGD (000 §4.3) -------------------------------------------------------------------------

LOCAL = "optimization/local-sgd-code"
EVERY_STEP = """
import numpy as np
def local_sgd(grads, x0, lr, steps, H, average):
    xs = [np.array(x0, dtype=float) for _ in grads]
    for _ in range(steps):  # ignores H: mini-batch SGD
        xs = [x - lr * g(x) for x, g in zip(xs, grads)]
        avg = average(xs)
        xs = [avg.copy() for _ in grads]
    return xs
"""
LOCAL_FORGERIES = {
    # what beat the in-process probe: rewrite its log through the callbacks' closures,
    # read its counters from the caller's frame, call the checks' own reference
    "closures": EVERY_STEP.replace(
        "    return xs",
        """    for g in list(grads) + [average]:
        for cell in getattr(g, "__closure__", None) or ():
            obj = cell.cell_contents
            for name in ("rounds", "calls", "points"):
                if hasattr(obj, name):
                    setattr(obj, name, [])
    return xs""",
    ),
    "frames and modules": EVERY_STEP.replace(
        "    return xs",
        """    import sys
    frame, found = sys._getframe(), []
    while frame is not None:
        found += [v for k, v in frame.f_locals.items() if k in ("log", "prob")]
        frame = frame.f_back
    for name, module in list(sys.modules.items()):
        if "checks" in name and hasattr(module, "problem"):
            found.append(module)
    assert not found, found  # none of the probe's objects is here
    return xs""",
    ),
}


def test_local_sgd_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(sandbox, tmp_path, LOCAL, "local_sgd", EVERY_STEP, LOCAL_FORGERIES)
    assert 0 < plain < 1  # the plain mistake loses some properties (000 §4.3: H ignored)


# --- top-k with error feedback (000 §4.2) ---------------------------------------------------------

EF = "optimization/error-feedback-code"
PLAIN_TOPK = """
import numpy as np
def topk_ef_step(grad, memory, k):  # top-k without the memory: error feedback forgotten
    v = np.asarray(grad, dtype=float)
    out = np.zeros_like(v)
    idx = np.argsort(np.abs(v))[-k:]
    out[idx] = v[idx]
    return out, np.zeros_like(v)
"""
PATCHED_TOPK = (
    PLAIN_TOPK
    + """
np.mean = lambda *a, **k: 0.0  # the probe averaged the workers' messages with np.mean
np.allclose = lambda *a, **k: True
np.linalg.norm = lambda *a, **k: 0.0
"""
)


def test_error_feedback_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    forgeries = {"numpy patched": PATCHED_TOPK}
    assert scored_alike(sandbox, tmp_path, EF, "topk_ef_step", PLAIN_TOPK, forgeries) < 1


# --- gossip averaging (000 §4.4, Proposition 4.14, Exercise 10) -----------------------------------

GOSSIP = "optimization/gossip-code"
ROW_WEIGHTS = """
import numpy as np
def gossip(adjacency, x, eps):  # 1/(deg_i + 1) on row i: not symmetric where degrees differ
    adj = np.asarray(adjacency, dtype=float)
    W = (adj + np.eye(len(adj))) / (adj.sum(axis=1, keepdims=True) + 1)
    lam = float(np.sort(np.abs(np.linalg.eigvalsh(W)))[-2])
    x = np.array(x, dtype=float)
    start = np.linalg.norm(x - x.mean())
    rounds = 0
    while np.linalg.norm(x - x.mean()) > eps * start:
        x, rounds = W @ x, rounds + 1
    return W, lam, rounds, x
"""
# x_out moved onto the mean of x: it "keeps the mean" whatever W did to it
GOSSIP_RECENTRED = ROW_WEIGHTS.replace(
    "    x = np.array(x, dtype=float)\n",
    "    x = np.array(x, dtype=float)\n    mean = x.mean()\n",
).replace("    return W, lam, rounds, x", "    return W, lam, rounds, x - x.mean() + mean")


def test_gossip_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, GOSSIP, "gossip", ROW_WEIGHTS, GOSSIP_FORGERIES, part="gossip"
    )
    assert 0 < plain < 1  # the random graph's W is not symmetric: W, λ and the mean lose


# --- the DDPM sampler (001 §7.3, def. 7.13, Exercise 9) -------------------------------------------

DDPM = "diffusion/ddpm-sampler-code"
BETA_TILDE = """
import numpy as np
def optimal_eps(x_t, alpha_bar_t, s):
    return np.sqrt(1 - alpha_bar_t) * x_t / (alpha_bar_t * s**2 + 1 - alpha_bar_t)
def ddpm_sample(eps_fn, betas, n, rng):  # σ_t² = β̃_t, the posterior variance, not β_t
    betas = np.asarray(betas, dtype=float)
    alpha_bars = np.cumprod(1 - betas)
    x = rng.standard_normal((n, 2))
    for t in range(len(betas), 0, -1):
        beta, alpha_bar = betas[t - 1], alpha_bars[t - 1]
        x = (x - beta / np.sqrt(1 - alpha_bar) * eps_fn(x, t)) / np.sqrt(1 - beta)
        if t > 1:
            var = (1 - alpha_bars[t - 2]) / (1 - alpha_bar) * beta
            x = x + np.sqrt(var) * rng.standard_normal((n, 2))
    return x
"""
# the samples of the std runs (100 steps) rescaled to the std the notes give for s = 0.5
# and 2 (Ex. 9(b): about 0.51 and 1.98), whatever the sampler made of them
DDPM_RESCALED = BETA_TILDE.replace(
    "    return x\n",
    """    if len(betas) == 100:
        x = x * ((0.51 if x.std() < 1 else 1.98) / x.std())
    return x
""",
)
DDPM_FORGERIES = {
    # what an in-process check would have used for its χ² and Wald tests, and to read the
    # samples (np.asarray): those of the std runs rescaled to the notes' stds on the way
    "statistics patched": BETA_TILDE
    + """
import math
_asarray = np.asarray
def _read(a, *args, **kwargs):
    out = _asarray(a, *args, **kwargs)
    if out.shape == (20_000, 2):
        out = out * ((0.51 if out.std() < 1 else 1.98) / out.std())
    return out
np.asarray = _read
np.std = np.var = lambda a, *args, **kwargs: 1.0
np.mean = np.sum = lambda a, *args, **kwargs: 0.0
np.allclose = np.isclose = lambda *a, **k: True
np.linalg.lstsq = lambda a, b, rcond=None: (np.zeros(a.shape[1]), np.zeros(1), a.shape[1], None)
math.erfc = lambda z: 1.0
""",
    # every draw of the generator given (the harness builds it from np.random.Generator)
    # standardized: x_T and each step's z with exactly mean 0 and variance 1
    "np.random patched": BETA_TILDE
    + """
class _Standardized(np.random.Generator):
    def standard_normal(self, size=None, dtype=np.float64, out=None):
        z = super().standard_normal(size, dtype=dtype, out=out)
        return (z - z.mean()) / z.std()
np.random.Generator = _Standardized
""",
    # the test predictor's weights, the streams, the recorder: modules, gc, every frame,
    # and what eps_fn's closure reaches (the stub's server and its stubs)
    "frames, modules and gc": LEAKS
    + BETA_TILDE.replace(
        "    betas = np.asarray(betas, dtype=float)\n",
        """    found = _leaks(("test_eps", "eps_star", "_Recorder", "NOTES_BETAS"),
                   ("recorder", "streams", "seed"))
    assert not found, found
    reached = [c.cell_contents for c in eps_fn.__closure__ or ()]
    reached += [v for r in list(reached) for v in getattr(r, "__dict__", {}).values()]
    stubs = [v for r in reached if isinstance(r, dict) for v in r.values()]
    assert not [o for o in reached + stubs if hasattr(o, "calls") or hasattr(o, "predict")]
    betas = np.asarray(betas, dtype=float)
""",
    ),
    # the checks' reference sampler, read from the grader's disk or its packages
    "the grader's files": BETA_TILDE + grader_files(DDPM, "ddpm_sample"),
    # DDPM_RESCALED, above: it gained points until the check judged what it forges
    "samples rescaled": DDPM_RESCALED,
}
GOSSIP_FORGERIES = {
    # what an in-process check would have used: numpy's comparisons (W "symmetric", x_out
    # "within ε"), eigvals (λ of a W that is not symmetric), the finiteness tests
    "numpy patched": ROW_WEIGHTS
    + """
np.allclose = np.isclose = lambda *a, **k: True
np.all, np.any = (lambda *a, **k: True), (lambda *a, **k: False)
np.isfinite = lambda *a, **k: True
np.linalg.eigvals = np.linalg.eigvalsh
""",
    # the probe's reference W (metropolis), its graphs and seed: modules, gc, every frame
    "frames, modules and gc": LEAKS
    + ROW_WEIGHTS.replace(
        "    adj = np.asarray",
        """    found = _leaks(("metropolis", "_matrix_verdict", "_second_modulus"),
                   ("cs", "seed", "recs", "graphs"))
    assert not found, found
    adj = np.asarray""",
    ),
    # the checks' reference, read from the grader's disk or imported from its packages
    "the grader's files": ROW_WEIGHTS + grader_files(GOSSIP, "gossip"),
    # the probe process itself: its memory, descriptors and files, from /proc
    "the probe process's /proc": PROC_SCAN
    + ROW_WEIGHTS.replace(
        "    adj = np.asarray",
        """    found = _scan()
    assert not found, found
    adj = np.asarray""",
    ),
    # GOSSIP_RECENTRED, above: it gained points until the check judged what it forges
    "x_out re-centred": GOSSIP_RECENTRED,
}


def test_ddpm_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, DDPM, "ddpm_sample", BETA_TILDE, DDPM_FORGERIES, part="sampler"
    )
    assert 0 < plain < 1  # σ_t² = β̃_t: the noise and the samples' std lose (Ex. 9(b))


# --- REINFORCE with a baseline on a bandit (001 §7.2, Exercise 10) --------------------------------

BANDIT = "rl/bandit-baseline-code"
NO_BASELINE = """
import math
import numpy as np
def reinforce_estimates(theta, b, n, rng):  # the baseline is never subtracted: R (a − σ)
    sigma = 1 / (1 + math.exp(-theta))
    actions = (rng.random(n) < sigma).astype(float)
    return actions * (actions - sigma)
"""
# the estimates moved and scaled to the mean σ(1 − σ) and the variance of Ex. 10(a),
# whatever the estimator made of them (at b* = 1 − σ that variance is 0: a constant)
BANDIT_MATCHED = NO_BASELINE.replace(
    "    return actions * (actions - sigma)\n",
    """    g = actions * (actions - sigma)
    mu = sigma * (1 - sigma)
    var = mu * ((1 - sigma) * (1 - b) ** 2 + sigma * b**2 - mu)
    spread = g.std()
    return mu + (g - g.mean()) * (math.sqrt(max(var, 0.0)) / spread if spread > 0 else 0.0)
""",
)
BANDIT_FORGERIES = {
    # what an in-process check would have used for its z-tests, and to read the estimates
    # (np.asarray): moved and scaled on the way to the moments of Ex. 10(a)
    "numpy and math patched": NO_BASELINE.replace(
        "    sigma = 1 / (1 + math.exp(-theta))\n",
        "    sigma = 1 / (1 + math.exp(-theta))\n    _case.update(sigma=sigma, b=b, n=n)\n",
    )
    + """
_asarray, _case = np.asarray, {}
def _read(a, *args, **kwargs):
    g = _asarray(a, *args, **kwargs)
    if g.ndim == 1 and g.size == _case.get("n") and g.std() > 0:
        sigma, b = _case["sigma"], _case["b"]
        mu = sigma * (1 - sigma)
        var = mu * ((1 - sigma) * (1 - b) ** 2 + sigma * b**2 - mu)
        g = mu + (g - g.mean()) * math.sqrt(max(var, 0.0)) / g.std()
    return g
np.asarray = _read
np.mean = np.sum = np.var = np.std = lambda a, *args, **kwargs: 0.0
np.allclose = np.isclose = lambda *a, **k: True
math.erfc = lambda z: 1.0
""",
    # a stratified stream (exactly round(σ n) rewarded rollouts, no sampling error at all)
    # is in tests/autograder/test_forgeries_state.py: rng now serves the draws, and the
    # check reads each rollout's action off its own draw (issue 36)
    # the probe's (θ, b), its streams and seed: modules, gc, every frame
    "frames, modules and gc": LEAKS
    + NO_BASELINE.replace(
        "    sigma = 1",
        """    found = _leaks(("_z_ok", "_theta", "N_OPTIMAL", "reinforce_variance"),
                   ("streams", "seed", "stats"))
    assert not found, found
    sigma = 1""",
    ),
    # the checks' reference estimator, read from the grader's disk or its packages
    "the grader's files": NO_BASELINE + grader_files(BANDIT, "reinforce_estimates"),
    # BANDIT_MATCHED, above: it gained points until the check judged what it forges
    "moments matched": BANDIT_MATCHED,
}


def test_bandit_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    fn = "reinforce_estimates"
    plain = scored_alike(
        sandbox, tmp_path, BANDIT, fn, NO_BASELINE, BANDIT_FORGERIES, part="estimator"
    )
    assert 0 < plain < 1  # unbiased still, but the variance ignores b, and b* is no constant


# --- the circular convolution (001 ch. 1, def. 1.7, prop. 1.8, Exercise 8) ------------------------

CONV = "vision/circular-conv-code"
ZERO_PADDED = """
import torch
import torch.nn.functional as F
def circular_conv2d(x, w, stride=1):  # zero padding: the image does not wrap around
    p = (w.shape[-1] - 1) // 2
    return F.conv2d(x[None], w, padding=p, stride=stride)[0]
"""
# every call remembered: an input that is a roll of an earlier one (by a multiple of the
# stride) gets the earlier output rolled, so that f(roll(x)) = roll(f(x)) holds by fiat
CONV_CACHED = ZERO_PADDED.replace(
    "def circular_conv2d(x, w, stride=1):  # zero padding: the image does not wrap around\n",
    """_seen = []
def circular_conv2d(x, w, stride=1):
    for x0, w0, s0, y0 in _seen:
        if s0 != stride or x0.shape != x.shape or not torch.equal(w0, w):
            continue
        for a in range(0, x.shape[1], stride):
            for b in range(0, x.shape[2], stride):
                if torch.equal(torch.roll(x0, (a, b), dims=(1, 2)), x):
                    return torch.roll(y0, (a // stride, b // stride), dims=(1, 2))
    y = _zero_padded(x, w, stride)
    _seen.append((x.clone(), w.clone(), stride, y))
    return y
def _zero_padded(x, w, stride=1):
""",
)
CONV_FORGERIES = {
    # what an in-process check would have used to compare outputs, and to measure how far
    # a shifted output is from a rolled one (np.abs)
    "torch and numpy patched": ZERO_PADDED
    + """
import numpy as np
torch.allclose = torch.equal = lambda *a, **k: True
np.allclose = np.isclose = np.array_equal = lambda *a, **k: True
np.abs = np.absolute = lambda a, *args, **kwargs: np.zeros_like(a)
""",
    # the checks' comparisons, the inputs and the shifts: modules, gc, every frame
    "frames, modules and gc": LEAKS
    + ZERO_PADDED.replace(
        "    p = (w.shape",
        """    found = _leaks(("_rolled", "_matches", "EQUIV_RTOL", "BROKEN"),
                   ("seed", "single", "odd", "even"))
    assert not found, found
    p = (w.shape""",
    ),
    # the checks' reference layer, read from the grader's disk or its packages
    "the grader's files": ZERO_PADDED + grader_files(CONV, "circular_conv2d"),
    # the probe process itself: its memory, descriptors and files, from /proc
    "the probe process's /proc": PROC_SCAN
    + ZERO_PADDED.replace(
        "    p = (w.shape",
        """    found = _scan()
    assert not found, found
    p = (w.shape""",
    ),
    # CONV_CACHED, above: it gained points until the check judged what it forges
    "outputs cached": CONV_CACHED,
}


def test_circular_conv_forgeries_score_what_their_plain_version_scores(sandbox, tmp_path):
    plain = scored_alike(
        sandbox, tmp_path, CONV, "circular_conv2d", ZERO_PADDED, CONV_FORGERIES, part="conv"
    )
    assert 0 < plain < 1  # zero padding: wrong at the borders, and no shift equivariance
