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
    return fraction(properties(sandbox, tmp_path, qid, function, cells))


def properties(sandbox, tmp_path, qid: str, function: str, cells: str) -> list[dict]:
    """The graded properties of ``cells`` on the question ``qid``'s code part."""
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
    assert probe["ok"], probe
    return grade_result(checks.grade, probe["result"], SEED, {})


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


# --- activation checkpointing (000 §2.5, Proposition 2.8) ---------------------------------

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
    assert graded(sandbox, tmp_path, CKPT, fn, reference(CKPT, "checkpointing")) == 1.0
    plain = graded(sandbox, tmp_path, CKPT, fn, STORE_ALL)
    assert plain < 1  # nothing recomputed: 000 §2.5's n units of activations
    for name, cells in CKPT_FORGERIES.items():
        assert graded(sandbox, tmp_path, CKPT, fn, cells) == plain, name


# --- LoRA (000 §5.2) ------------------------------------------------------------------------

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
    assert graded(sandbox, tmp_path, LORA, "LoRALinear", reference(LORA, "lora")) == 1.0
    plain = graded(sandbox, tmp_path, LORA, "LoRALinear", UNFROZEN)
    assert plain < 1  # the base trains: 000 §5.2's frozen W0 is not
    for name, cells in LORA_FORGERIES.items():
        assert graded(sandbox, tmp_path, LORA, "LoRALinear", cells) == plain, name


# --- gradient accumulation (000 §1.5, Proposition 1.10) -----------------------------------

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
    assert graded(sandbox, tmp_path, ACCUM, fn, reference(ACCUM, "accumulate")) == 1.0
    plain = graded(sandbox, tmp_path, ACCUM, fn, FULL_BATCH)
    assert plain < 1  # one pass over the batch: no accumulation (000 §1.5)
    for name, cells in ACCUM_FORGERIES.items():
        assert graded(sandbox, tmp_path, ACCUM, fn, cells) == plain, name


# --- the tensor-parallel MLP (000 §3.3) -----------------------------------------------------

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
    fn = "tp_mlp_forward"
    assert graded(sandbox, tmp_path, TP, fn, reference(TP, "tp_mlp")) == 1.0
    plain = graded(sandbox, tmp_path, TP, fn, WHOLE_W2)
    assert plain < 1  # the other ranks' rows of W2 are read (000 §3.3: only its own block)
    for name, cells in TP_FORGERIES.items():
        assert graded(sandbox, tmp_path, TP, fn, cells) == plain, name


# --- ring all-reduce (000 §3.1, Theorem 3.3) -------------------------------------------------

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
    fn = "ring_allreduce"
    assert graded(sandbox, tmp_path, RING, fn, reference(RING, "ring")) == 1.0
    plain = graded(sandbox, tmp_path, RING, fn, GATHER_ALL)
    assert plain < 1  # whole buffers, p − 1 times: the sum, not the ring (Theorem 3.3)
    for name, cells in RING_FORGERIES.items():
        assert graded(sandbox, tmp_path, RING, fn, cells) == plain, name


def test_an_eval_cut_short_in_a_child_still_shows(sandbox, tmp_path):
    """An eval run in a forked child and killed after 50 ms is quick, but the payload's list
    is already allocated: the job's cgroup counts the child's memory.  (An eval cut after a
    millisecond would run too little to show: the nearest a timer gets to a parser.)"""
    if sandbox.memory.get("cgroup") is None:
        pytest.skip(f"no memory cgroup here: {sandbox.memory.get('why')}")
    timeboxed = """
import os, signal, time
def calculator(expression):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            value = eval(expression, {"__builtins__": {}})
            os.write(w, repr(value).encode()[:4096] if type(value) is int else b"!")
        finally:
            os._exit(0)
    os.close(w)
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


# --- the speculative sampler (000 §6.4) ---------------------------------------------------

SAMPLER = "serving/speculative-sampler-code"

SAMPLER_FORGERIES = {
    # 000 §6.4: the trick that beat the in-process probe: fixed output, count arrays forged
    "constant": "def speculative_step(p, q, rng):\n    return (0, True)\n",
    "constant, numpy.zeros patched": """
import numpy as np
_zeros = np.zeros
def _forged(shape, *a, **k):
    out = _zeros(shape, *a, **k)
    out[:] = 1000
    return out
np.zeros = _forged
def speculative_step(p, q, rng):
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


# --- local SGD (000 §4.3) ------------------------------------------------------------------

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
    plain = graded(sandbox, tmp_path, LOCAL, "local_sgd", EVERY_STEP)
    assert 0 < plain < 1  # the plain mistake loses some properties (000 §4.3: H ignored)
    for name, cells in LOCAL_FORGERIES.items():
        assert graded(sandbox, tmp_path, LOCAL, "local_sgd", cells) == plain, name


# --- top-k with error feedback (000 §4.2) --------------------------------------------------

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
    plain = graded(sandbox, tmp_path, EF, "topk_ef_step", PLAIN_TOPK)
    assert plain < 1
    assert graded(sandbox, tmp_path, EF, "topk_ef_step", PATCHED_TOPK) == plain
