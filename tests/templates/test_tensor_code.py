"""Code questions of the tdlsm course (notes 000) on tensors: online-softmax attention
(§2.3, Prop 2.4), activation checkpointing (§2.5, Prop 2.8), the tensor-parallel MLP (§3.3)
and gradient accumulation (§1.5, Prop 1.10, Exercise 6).

Each check grades the algorithm: the reference scores full marks, the starter 0, and each
realistic mistake loses exactly the properties it breaks.  Real runs, no mocks: attention's
memory measured by this process's VmHWM (the functions run here; through the sandbox, by
the job's memory cgroup: test_tensor_code_sandbox.py), checkpointing through autograd, the
tensor-parallel ranks on threads with a real summing all-reduce.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from autograder.grading.checks import grade_result, load_checks
from costmodel.memory import layer_forward_calls
from costmodel.parallel import sum_loss_gradient_factor
from tests.templates.codecheck import (
    TEMPLATES,
    fraction,
    function,
    grade,
    lost,
    names,
    probed,
    starter,
)

ATTENTION = TEMPLATES / "systems" / "online-softmax-code"
CHECKPOINT = TEMPLATES / "memory" / "checkpointing-code"
TP = TEMPLATES / "parallel" / "tensor-parallel-mlp-code"
ACCUM = TEMPLATES / "parallel" / "grad-accumulation-code"

QUESTIONS = {  # folder: the function the student writes
    ATTENTION: "online_softmax_attention",
    CHECKPOINT: "checkpointed_forward",
    TP: "tp_mlp_forward",
    ACCUM: "accumulate_gradients",
}

GARBAGE = [
    None,
    {},
    [],
    "x",
    {"value": "x", "blocks": [1, None], "base": 3, "shifted": {}, "memory": {"largest": 1}},
    {"cases": [{"log": [["forward", "a"]], "grads": "x"}, 7]},
    {"runs": [1, {"clean": [{"result": {"shape": [2], "values": [1, 2]}}]}, "x"]},
    {"runs": [{"k": 2, "grads": [[1.0], None], "log": [["forward", 12]]}]},
]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One torch thread, as in the sandbox (OMP_NUM_THREADS=1): small ops stay fast on a
    busy machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def messages(props: list[dict]) -> str:
    return " ".join(p["message"] for p in props if p["score"] < 1)


@pytest.mark.parametrize("folder", list(QUESTIONS))
@pytest.mark.parametrize("seed", [1, 2024])
def test_reference_scores_full_marks_and_the_same_twice(folder, seed):
    fn = function(folder, "solution.py", QUESTIONS[folder])
    first = grade(folder, fn, seed)
    assert 3 <= len(first) <= 6
    assert fraction(first) == 1, messages(first)
    assert grade(folder, fn, seed) == first


@pytest.mark.parametrize("folder", list(QUESTIONS))
def test_starter_scores_zero(folder):
    props = grade(folder, starter(folder, QUESTIONS[folder]), 1)
    assert fraction(props) == 0
    assert "NotImplementedError" in messages(props)


@pytest.mark.parametrize("folder", list(QUESTIONS))
@pytest.mark.parametrize("garbage", GARBAGE)
def test_grade_on_garbage_scores_zero_without_crashing(folder, garbage):
    props = grade_result(load_checks(folder, "checks.py").grade, garbage, 1, {})
    assert props and all(p["score"] == 0 for p in props)


@pytest.mark.parametrize("folder", list(QUESTIONS))
def test_a_function_that_returns_nothing_scores_zero(folder):
    assert fraction(grade(folder, lambda *args: None, 1)) == 0


@pytest.mark.parametrize(
    ("folder", "fn"),
    [
        (ATTENTION, lambda q, k, v, block: torch.softmax(q @ k.T, dim=1) @ v),
        (CHECKPOINT, lambda layers, x, k: x * float("nan")),
        (TP, lambda x, w1, w2, rank, t, all_reduce: all_reduce(w2 @ w1 * float("inf"))),
        (ACCUM, lambda model, loss_fn, x, y, k: loss_fn(model(x), y).sum().backward()),
    ],
)
def test_probe_results_are_plain_json(folder, fn):
    """What comes out of the sandbox is JSON data: no arrays, no NaN literals."""
    module = load_checks(folder, "checks.py").module
    json.dumps(probed(module, fn, 1), allow_nan=False)


# --- online-softmax attention (§2.3, Proposition 2.4) -----------------------------------------

ATTENTION_PROPS = {
    "value": "matches softmax(QKᵀ/√d)V",
    "ones": "attention weights sum to one",
    "blocks": "independent of the block size",
    "stable": "stable with scores of ±10⁴",
    "memory": "never materialises the n × n score matrix",
}


def online(
    q,
    k,
    v,
    block,
    *,
    running_max=True,
    rescale=True,
    scaled=True,
    divide=True,
    m_start=-math.inf,
    last_block=True,
):
    """The online softmax with switches for the usual mistakes."""
    m = torch.full((q.shape[0], 1), m_start, dtype=q.dtype)
    ell = torch.zeros((q.shape[0], 1), dtype=q.dtype)
    o = torch.zeros((q.shape[0], v.shape[1]), dtype=q.dtype)
    stop = k.shape[0] if last_block else k.shape[0] // block * block
    for j in range(0, stop, block):
        s = q @ k[j : j + block].T / (math.sqrt(q.shape[1]) if scaled else 1.0)
        m_new = (
            torch.maximum(m, s.max(dim=1, keepdim=True).values)
            if running_max
            else torch.zeros_like(m)
        )
        scale = torch.exp(m - m_new) if rescale else torch.ones_like(m)
        p = torch.exp(s - m_new)
        ell = scale * ell + p.sum(dim=1, keepdim=True)
        o = scale * o + p @ v[j : j + block]
        m = m_new
    return o / ell if divide else o


def attention_torch_naive(q, k, v, block):
    return torch.softmax(q @ k.T / math.sqrt(q.shape[1]), dim=1) @ v


def attention_numpy_naive(q, k, v, block):
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    s = q @ k.T / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True) @ v


def attention_notes_numpy(q, k, v, block):
    """The notes' NumPy code of §2.3, as a function."""
    Q, K, V = np.asarray(q), np.asarray(k), np.asarray(v)
    T, d = Q.shape
    m, ell, o = np.full((T, 1), -np.inf), np.zeros((T, 1)), np.zeros((T, V.shape[1]))
    for j in range(0, K.shape[0], block):
        s = Q @ K[j : j + block].T / np.sqrt(d)
        m_new = np.maximum(m, s.max(axis=1, keepdims=True))
        scale = np.exp(m - m_new)
        ell = scale * ell + np.exp(s - m_new).sum(axis=1, keepdims=True)
        o = scale * o + np.exp(s - m_new) @ V[j : j + block]
        m = m_new
    return o / ell


def attention_fused(q, k, v, block):
    """3-D inputs: torch's math kernel, which forms the whole score matrix."""
    return F.scaled_dot_product_attention(q[None], k[None], v[None])[0]


def attention_flash(q, k, v, block):
    """4-D inputs and v padded to the width of q: torch's flash kernel on the CPU, which
    goes by blocks of its own (little memory) and ignores ``block``."""
    vp = F.pad(v, (0, q.shape[1] - v.shape[1]))
    return F.scaled_dot_product_attention(q[None, None], k[None, None], vp[None, None])[
        0, 0, :, : v.shape[1]
    ]


def attention_naive_when_small(q, k, v, block):
    """Right at the small sizes (the whole matrix), something cheap at the large one."""
    if k.shape[0] <= 100:
        return attention_torch_naive(q, k, v, block)
    return torch.cat([q[:, : v.shape[1] - 1], torch.ones(q.shape[0], 1, dtype=q.dtype)], 1)


def test_attention_properties_and_the_notes_numpy_code():
    """The notes' NumPy code scores full marks too: the memory probe sees NumPy's arrays."""
    props = grade(ATTENTION, attention_notes_numpy, 1)
    assert names(props) == set(ATTENTION_PROPS.values())
    assert fraction(props) == 1, messages(props)


def test_attention_memory_is_measured_against_the_drawn_score_matrix():
    """The memory call's sizes are drawn from the seed, within the bounds the question
    states; its float64 score matrix (34-52 MB) is large against what blocks take."""
    module = load_checks(ATTENTION, "checks.py").module
    sizes = set()
    for seed in range(40):
        mem = module.cases(seed)["memory"]
        m, n, block = mem["q"].shape[0], mem["k"].shape[0], mem["block"]
        assert 2048 <= m <= 2560 and 2048 <= n <= 2560 and n % block == 0
        assert 8 * m * block * 3 < 8 * m * n / 20  # three m × block temporaries, vs the matrix
        sizes.add((m, n, block))
    assert len(sizes) == 40  # a notebook cannot know them before the call


def test_attention_without_a_memory_meter_cannot_tell():
    """Where the sandbox has no meter (sandbox.MEMORY_METERS "off"), the property says so."""
    module = load_checks(ATTENTION, "checks.py").module
    fn = function(ATTENTION, "solution.py", "online_softmax_attention")
    result = json.loads(json.dumps(probed(module, fn, 1)))
    result["memory"] |= {"peak_bytes": None, "meter": "no memory meter: asked for none"}
    props = grade_result(module.grade, result, 1, {})
    assert lost(props) == {ATTENTION_PROPS["memory"]}
    assert "could not measure the memory" in messages(props) and "asked for none" in messages(props)


def test_attention_reference_reproduces_the_notes_example():
    """§2.3: T = 512, d = 64, blocks of 64: the online result matches the naive one to ~1e-15."""
    fn = function(ATTENTION, "solution.py", "online_softmax_attention")
    torch.manual_seed(0)
    q, k, v = (torch.randn(512, 64, dtype=torch.float64) for _ in range(3))
    naive = attention_torch_naive(q, k, v, 64)
    for block in (64, 100, 1):
        assert (fn(q, k, v, block) - naive).abs().max().item() < 1e-12


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (attention_torch_naive, {"memory"}, "one block of keys at a time"),
        (attention_numpy_naive, {"memory"}, "one block of keys at a time"),
        (attention_fused, {"memory"}, "at least half the"),
        (attention_flash, {"memory"}, "fused attention kernel"),
        (attention_naive_when_small, {"memory"}, "though right on the small inputs"),
        (lambda q, k, v, b: online(q, k, v, b, running_max=False), {"stable"}, "overflows"),
        (lambda q, k, v, b: online(q, k, v, b, m_start=0.0), {"stable"}, "start m at −∞"),
        (lambda q, k, v, b: online(q, k, v, b, rescale=False), {"value", "blocks"}, "exp(m_old"),
        (lambda q, k, v, b: online(q, k, v, b, last_block=False), {"blocks"}, "shorter block"),
        (lambda q, k, v, b: online(q, k, v, b, scaled=False), {"value"}, "√d"),
        (lambda q, k, v, b: online(q, k, v, b, divide=False), {"value", "ones"}, "running sum ℓ"),
    ],
)
def test_attention_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(ATTENTION, fn, 1)
    assert lost(props) == {ATTENTION_PROPS[k] for k in broken}
    assert hint in messages(props)


# --- activation checkpointing (§2.5, Proposition 2.8) -----------------------------------------

CHECKPOINT_PROPS = {
    "output": "same output as the plain forward",
    "grads": "same gradients as the plain backward",
    "calls": "every layer runs twice: one extra forward",
    "segments": "recomputes segments of k layers",
}


def run_layers(layers, h, start, stop):
    for layer in layers[start:stop]:
        h = layer(h)
    return h


def ckpt_plain(layers, x, k):
    return run_layers(layers, x, 0, len(layers))


def ckpt_reentrant(layers, x, k):
    n = len(layers)
    for i in range(0, n, k):
        x = checkpoint(run_layers, layers, x, i, min(i + k, n), use_reentrant=True)
    return x


def ckpt_every_layer(layers, x, k):
    for layer in layers:
        x = checkpoint(layer, x, use_reentrant=False)
    return x


def ckpt_k_segments(layers, x, k):
    """k read as the number of segments, the way checkpoint_sequential reads it."""
    return checkpoint_sequential(layers, k, x, use_reentrant=False)


def ckpt_detached(layers, x, k):
    n = len(layers)
    for i in range(0, n, k):
        x = checkpoint(run_layers, layers, x, i, min(i + k, n), use_reentrant=False)
        if i + k < n:
            x = x.detach().requires_grad_()
    return x


def ckpt_last_segment_kept(layers, x, k):
    """The last segment's activations kept: it runs once, which the checks accept."""
    n = len(layers)
    for i in range(0, n, k):
        if i + k >= n:
            return run_layers(layers, x, i, n)
        x = checkpoint(run_layers, layers, x, i, i + k, use_reentrant=False)
    return x


@pytest.mark.filterwarnings("ignore::UserWarning")  # the reentrant checkpoint warns
@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (ckpt_plain, {"calls", "segments"}, "nothing is recomputed"),
        (ckpt_reentrant, {"grads"}, "use_reentrant=False"),
        (ckpt_every_layer, {"segments"}, "k = 1"),
        (ckpt_k_segments, {"calls", "segments"}, "number of segments"),
        (ckpt_detached, {"grads", "calls", "segments"}, "do not detach"),
        (ckpt_last_segment_kept, set(), ""),
    ],
)
def test_checkpointing_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(CHECKPOINT, fn, 1)
    assert names(props) == set(CHECKPOINT_PROPS.values())
    assert lost(props) == {CHECKPOINT_PROPS[k] for k in broken}
    assert hint in messages(props)


def test_checkpointing_reference_counts_the_notes_calls():
    """§2.5's code: 16 layers, segments of 4, 16 calls without and 32 with checkpointing."""
    fn = function(CHECKPOINT, "solution.py", "checkpointed_forward")
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(
        [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()) for _ in range(16)]
    )
    calls = [0]
    for layer in layers:
        layer.register_forward_pre_hook(lambda *args: calls.__setitem__(0, calls[0] + 1))
    fn(layers, torch.randn(4, 8), 4).pow(2).mean().backward()
    assert calls[0] == layer_forward_calls(16, extra_forwards=1) == 32


# --- tensor-parallel MLP (§3.3) ---------------------------------------------------------------

TP_PROPS = {
    "value": "every rank ends with GeLU(XW₁)W₂",
    "comm": "one all-reduce of the b × d partial outputs",
    "local": "rank r uses only its shards of W₁ and W₂",
}


def shards(w1, w2, rank, t):
    return w1.chunk(t, dim=1)[rank], w2.chunk(t, dim=0)[rank]


def tp_averaged(x, w1, w2, rank, t, all_reduce):
    a, b = shards(w1, w2, rank, t)
    return all_reduce(F.gelu(x @ a) @ b) / t


def tp_gelu_after_the_reduction(x, w1, w2, rank, t, all_reduce):
    a, b = shards(w1, w2, rank, t)
    return F.gelu(all_reduce(x @ a @ b))


def tp_row_split_of_w1(x, w1, w2, rank, t, all_reduce):
    """Rows of W₁ with the matching columns of X: GeLU of a partial pre-activation."""
    pre = x.chunk(t, dim=1)[rank] @ w1.chunk(t, dim=0)[rank]
    return all_reduce(F.gelu(pre) @ w2)


def tp_two_reductions(x, w1, w2, rank, t, all_reduce):
    """A correct but chatty layout: all-reduce the pre-activation, then the output."""
    hidden = all_reduce(x.chunk(t, dim=1)[rank] @ w1.chunk(t, dim=0)[rank])
    mine = F.gelu(hidden).chunk(t, dim=1)[rank]
    return all_reduce(mine @ w2.chunk(t, dim=0)[rank])


def tp_zero_padded(x, w1, w2, rank, t, all_reduce):
    """The right sum, but every rank multiplies the whole W₂ (zeros outside its block)."""
    a, _ = shards(w1, w2, rank, t)
    hidden = torch.zeros(x.shape[0], w1.shape[1], dtype=x.dtype)
    size = w1.shape[1] // t
    hidden[:, rank * size : (rank + 1) * size] = F.gelu(x @ a)
    return all_reduce(hidden @ w2)


def tp_strided(x, w1, w2, rank, t, all_reduce):
    return all_reduce(F.gelu(x @ w1[:, rank::t]) @ w2[rank::t, :])


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (tp_averaged, {"value"}, "the sum of the t partial outputs"),
        (tp_gelu_after_the_reduction, {"value"}, "GeLU is not additive"),
        (tp_row_split_of_w1, {"value", "local"}, "split by columns and not by rows"),
        (tp_two_reductions, {"comm", "local"}, "nothing is exchanged between the two"),
        (tp_zero_padded, {"local"}, "multiplying the other blocks by zero"),
        (tp_strided, {"local"}, "contiguous blocks"),
    ],
)
def test_tp_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(TP, fn, 1)
    assert names(props) == set(TP_PROPS.values())
    assert lost(props) == {TP_PROPS[k] for k in broken}
    assert hint in messages(props)


def test_tp_rank_that_skips_the_all_reduce_does_not_hang_the_others():
    """Rank 0 never joins: the other ranks are released at once, not after a timeout."""

    def rank0_quits(x, w1, w2, rank, t, all_reduce):
        a, b = shards(w1, w2, rank, t)
        partial = F.gelu(x @ a) @ b
        return partial if rank == 0 else all_reduce(partial)

    props = grade(TP, rank0_quits, 1)
    assert fraction(props) == 0
    assert "never made that call" in messages(props)


def test_tp_starter_simulate_reproduces_the_notes_example():
    """§3.3's code: b = 8, d = 64, t = 4; the sum of the partial outputs is the full MLP."""
    simulate = starter(TP, "simulate")
    torch.manual_seed(0)
    x = torch.randn(8, 64)
    w1, w2 = torch.randn(64, 256) / 8, torch.randn(256, 64) / 16
    outputs, calls = simulate(function(TP, "solution.py", "tp_mlp_forward"), x, w1, w2, 4)
    assert all(torch.allclose(y, F.gelu(x @ w1) @ w2, atol=1e-5) for y in outputs)
    assert calls == [[(8, 64)]] * 4


# --- gradient accumulation (§1.5, Proposition 1.10, Exercise 6) -------------------------------

ACCUM_PROPS = {
    "direction": "proportional to the full-batch gradient",
    "scale": "equals the mean-loss gradient",
    "schedule": "one forward and one backward per micro-batch",
}


def micro_batches(x, y, k):
    return zip(x.chunk(k), y.chunk(k), strict=True)


def accum_not_divided(model, loss_fn, x, y, k):
    for xm, ym in micro_batches(x, y, k):
        loss_fn(model(xm), ym).mean().backward()


def accum_summed(model, loss_fn, x, y, k):
    for xm, ym in micro_batches(x, y, k):
        loss_fn(model(xm), ym).sum().backward()


def accum_one_backward(model, loss_fn, x, y, k):
    sum(loss_fn(model(xm), ym).mean() / k for xm, ym in micro_batches(x, y, k)).backward()


def accum_full_batch(model, loss_fn, x, y, k):
    loss_fn(model(x), y).mean().backward()


def accum_zeroed_each_step(model, loss_fn, x, y, k):
    for xm, ym in micro_batches(x, y, k):
        model.zero_grad()
        (loss_fn(model(xm), ym).mean() / k).backward()


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (accum_not_divided, {"scale"}, "divide each micro-step's mean loss by k"),
        (accum_summed, {"scale"}, "Exercise 6(b)"),
        (accum_one_backward, {"schedule"}, "activations"),
        (accum_full_batch, {"schedule"}, "no accumulation"),
        (accum_zeroed_each_step, {"direction", "scale"}, "never zero .grad"),
    ],
)
def test_accumulation_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(ACCUM, fn, 1)
    assert names(props) == set(ACCUM_PROPS.values())
    assert lost(props) == {ACCUM_PROPS[k] for k in broken}
    assert hint in messages(props)


def test_accumulation_summed_losses_name_the_factor_of_exercise_6b():
    """Exercise 6(b): summed micro-losses multiply the gradient by b·k, the examples per
    GPU; the checks use B = 24, so the factor is 24 = b·k for every k."""
    checks = load_checks(ACCUM, "checks.py").module
    props = grade(ACCUM, accum_summed, 1)
    factors = {int(f) for f in re.findall(r"(\d+) times too large", messages(props))}
    assert (
        factors
        == {sum_loss_gradient_factor(checks.BATCH // k, k) for k in checks.STEPS}
        == {checks.BATCH}
    )
