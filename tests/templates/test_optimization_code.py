"""Code questions of chapter 4 of the tdlsm notes (000): top-k with error feedback (§4.2,
Theorem 4.8, Code 4.9), local SGD (§4.3) and gossip (§4.4, Proposition 4.14, Exercise 10).

The reference scores full marks, the starter 0, and each realistic mistake loses exactly
the properties it breaks.  Real runs, no mocks: the probes call the functions on the
notes' problems, and the grades replay them from the seed.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from autograder.grading.checks import grade_result, load_checks
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

EF = TEMPLATES / "optimization" / "error-feedback-code"
LOCAL = TEMPLATES / "optimization" / "local-sgd-code"
GOSSIP = TEMPLATES / "optimization" / "gossip-code"

GARBAGE = [None, {}, [], "probe", {"calls": "x", "train": 5, "runs": 3, "graphs": {"W": 1}}]


def _messages(props: list[dict]) -> str:
    return " ".join(p["message"] for p in props if p["score"] < 1)


# --- top-k with error feedback -------------------------------------------------------------

EF_PROPS = {
    "count": "exactly k entries sent",
    "choice": "the k largest |grad + memory| are sent",
    "memory": "the memory keeps what was not sent",
    "converges": "converges where top-k without memory stalls",
}


def _top_k(v: np.ndarray, k: int, by=np.abs) -> np.ndarray:
    out = np.zeros_like(v)
    idx = np.argsort(by(v))[-k:]
    out[idx] = v[idx]
    return out


def ef_without_memory(grad, memory, k):
    """Plain top-k: the memory is ignored and stays 0."""
    return _top_k(grad, k), np.zeros_like(grad)


def ef_memory_sign_flipped(grad, memory, k):
    sent = _top_k(grad + memory, k)
    return sent, sent - (grad + memory)


def ef_signed_top_k(grad, memory, k):
    """The k largest values, not magnitudes: large negative entries are never sent."""
    sent = _top_k(grad + memory, k, by=lambda v: v)
    return sent, grad + memory - sent


def ef_k_plus_one(grad, memory, k):
    sent = _top_k(grad + memory, k + 1)
    return sent, grad + memory - sent


def ef_damped_memory(grad, memory, k):
    """A memory that forgets half of what was not sent."""
    sent = _top_k(grad + memory, k)
    return sent, 0.5 * (grad + memory - sent)


@pytest.mark.parametrize("seed", [3, 2024])
def test_ef_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(EF, "solution.py", "topk_ef_step")
    first = grade(EF, fn, seed)
    assert names(first) == set(EF_PROPS.values())
    assert fraction(first) == 1, _messages(first)
    assert grade(EF, fn, seed) == first


def test_ef_starter_scores_zero():
    props = grade(EF, starter(EF, "topk_ef_step"), 3)
    assert fraction(props) == 0
    assert "NotImplementedError" in props[0]["message"]


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (ef_without_memory, {"choice", "memory", "converges"}, "stalls like top-k without memory"),
        (ef_memory_sign_flipped, {"memory", "converges"}, "e ← v − C(v)"),
        (ef_signed_top_k, {"choice", "converges"}, "negative entries count too"),
        (ef_k_plus_one, {"count"}, "5 nonzero entries"),  # k = 4 in the first call
        (ef_damped_memory, {"memory", "converges"}, "remembers exactly what it did not send"),
    ],
)
def test_ef_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(EF, fn, 3)
    assert lost(props) == {EF_PROPS[k] for k in broken}
    assert hint in _messages(props)


def test_ef_separates_memory_from_stalling_on_the_notes_problem():
    """Code 4.9 (§4.2): without memory f − f* stalls near 3.5; with it ~0.05 (here 300 steps).

    The grade's threshold is the geometric middle, so both sides keep a wide margin."""
    checks = load_checks(EF, "checks.py").module
    for seed in (3, 2024):
        with_memory, without = checks.reference_gaps(seed)
        assert with_memory < 0.2 < 1.0 < without
        assert without / with_memory > 20


def test_ef_float32_implementation_passes():
    """Rounding of float32 inside is not a mistake: the checks scale with |grad| + |memory|."""

    def ef_float32(grad, memory, k):
        v = memory.astype(np.float32) + grad.astype(np.float32)
        sent = np.zeros_like(v)
        idx = np.argpartition(np.abs(v), -k)[-k:]
        sent[idx] = v[idx]
        return sent, v - sent

    assert fraction(grade(EF, ef_float32, 3)) == 1


def test_ef_memory_kept_between_calls_loses_the_convergence_it_ran():
    """Issue 36: top-k without memory, each worker's memory kept in a global (the worker
    told by the call count) runs error feedback and converges; the run's calls, judged on
    the memory passed in, are not top-k of grad + memory, and the run does not count."""
    kept = {"calls": 0}

    def ef_hidden_memory(grad, memory, k):
        if grad.size != 50:  # the single calls: as top-k without memory
            return ef_without_memory(grad, memory, k)
        slot = kept["calls"] % 4
        kept["calls"] += 1
        sent = _top_k(grad + kept.get(slot, 0.0), k)
        kept[slot] = grad + kept.get(slot, 0.0) - sent
        return sent, np.zeros_like(grad)

    props = grade(EF, ef_hidden_memory, 3)
    assert lost(props) == lost(grade(EF, ef_without_memory, 3))
    assert "does not explain" in _messages(props)


def test_ef_output_that_changes_with_the_call_count_is_caught_by_a_call_made_again():
    """The same (grad, memory, k) must give the same outputs: k + 1 entries on every other
    call is top-k of grad + memory on each call, but not a function of its arguments."""
    kept = {"calls": 0}

    def ef_every_other_call(grad, memory, k):
        kept["calls"] += 1
        return (
            ef_k_plus_one(grad, memory, k)
            if kept["calls"] % 2
            else (_top_k(grad + memory, k), memory + grad - _top_k(grad + memory, k))
        )

    props = grade(EF, ef_every_other_call, 3)
    assert lost(props) == {EF_PROPS["count"], EF_PROPS["converges"]}
    assert "made again" in _messages(props)


# --- local SGD -----------------------------------------------------------------------------

LOCAL_PROPS = {
    "sync": "H = 1 is mini-batch SGD",
    "rounds": "⌊T/H⌋ rounds, each averaging the models after H local steps",
    "restart": "every worker restarts from the average",
    "trajectory": "matches local SGD on a quadratic",
}


def local_np_mean(grads, x0, lr, steps, H, average):
    """Averages with np.mean: the right models, but no communication round is counted."""
    xs = [np.array(x0, dtype=float) for _ in grads]
    for t in range(1, steps + 1):
        xs = [x - lr * g(x) for x, g in zip(xs, grads, strict=True)]
        if t % H == 0:
            avg = np.mean(xs, axis=0)
            xs = [avg.copy() for _ in grads]
    return xs


def local_every_step(grads, x0, lr, steps, H, average):
    """Ignores H: mini-batch SGD whatever H."""
    xs = [np.array(x0, dtype=float) for _ in grads]
    for _ in range(steps):
        xs = [x - lr * g(x) for x, g in zip(xs, grads, strict=True)]
        avg = average(xs)
        xs = [avg.copy() for _ in grads]
    return xs


def local_off_by_one(grads, x0, lr, steps, H, average):
    """t counted from 0: averages after steps 1, H + 1, 2H + 1, ..."""
    xs = [np.array(x0, dtype=float) for _ in grads]
    for t in range(steps):
        xs = [x - lr * g(x) for x, g in zip(xs, grads, strict=True)]
        if t % H == 0:
            avg = average(xs)
            xs = [avg.copy() for _ in grads]
    return xs


def local_shared_array(grads, x0, lr, steps, H, average):
    """[avg] * p and in-place steps: after a round every worker updates the same array."""
    xs = [np.array(x0, dtype=float) for _ in grads]
    for t in range(1, steps + 1):
        for x, g in zip(xs, grads, strict=True):
            x -= lr * g(x)
        if t % H == 0:
            xs = [average(xs)] * len(grads)
    return xs


def local_averages_before_the_step(grads, x0, lr, steps, H, average):
    """average given the models before the round's last step; the mean taken here: the
    right trajectory and count, but not the workers' models in the round (issue 36)."""
    xs = [np.array(x0, dtype=float) for _ in grads]
    for t in range(1, steps + 1):
        before = [x.copy() for x in xs]
        xs = [x - lr * g(x) for x, g in zip(xs, grads, strict=True)]
        if t % H == 0:
            average(before)
            avg = np.mean(xs, axis=0)
            xs = [avg.copy() for _ in grads]
    return xs


def local_final_average(grads, x0, lr, steps, H, average):
    """An extra round for the last incomplete segment: ⌈T/H⌉ rounds."""
    xs = function(LOCAL, "solution.py", "local_sgd")(grads, x0, lr, steps, H, average)
    if steps % H:
        avg = average(xs)
        xs = [avg.copy() for _ in grads]
    return xs


@pytest.mark.parametrize("seed", [3, 2024])
def test_local_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(LOCAL, "solution.py", "local_sgd")
    first = grade(LOCAL, fn, seed)
    assert names(first) == set(LOCAL_PROPS.values())
    assert fraction(first) == 1, _messages(first)
    assert grade(LOCAL, fn, seed) == first


def test_local_starter_scores_zero():
    props = grade(LOCAL, starter(LOCAL, "local_sgd"), 3)
    assert fraction(props) == 0
    assert "NotImplementedError" in props[0]["message"]


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (local_np_mean, {"rounds"}, "average was never called"),
        (local_every_step, {"rounds", "trajectory"}, "average was called"),
        (local_off_by_one, {"rounds", "restart", "trajectory"}, "t mod H = 0"),
        (local_shared_array, {"sync", "restart", "trajectory"}, "[avg] * p"),
        (local_final_average, {"rounds", "trajectory"}, "⌊T/H⌋"),
        (local_averages_before_the_step, {"rounds"}, "was not given the workers' models"),
    ],
)
def test_local_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(LOCAL, fn, 3)
    assert lost(props) == {LOCAL_PROPS[k] for k in broken}
    assert hint in _messages(props)


def test_local_runs_cover_both_endings():
    """One run ends after an incomplete segment (no averaging), one with an averaging (§4.3)."""
    checks = load_checks(LOCAL, "checks.py").module
    for seed in (3, 2024):
        runs = checks.problem(seed)["runs"]
        assert runs[0][0] == 1
        assert runs[1][1] % runs[1][0] != 0 and runs[2][1] % runs[2][0] == 0
        assert all(t // h >= 3 for h, t in runs[1:])


# --- gossip --------------------------------------------------------------------------------

GOSSIP_PROPS = {
    "matrix": "W is symmetric, doubly stochastic, 1/(degree + 1) on regular graphs",
    "lambda": "λ is the second-largest eigenvalue modulus of W",
    "rounds": "rounds to divide the disagreement by 1/ε",
    "mean": "gossip keeps the mean and reaches it within ε",
}


def _simulate(W, x, eps):
    x = np.array(x, dtype=float)
    start, rounds = np.linalg.norm(x - x.mean()), 0
    while np.linalg.norm(x - x.mean()) > eps * start:
        x, rounds = W @ x, rounds + 1
    return rounds, x


def gossip_row_weights(adjacency, x, eps):
    """The code of Exercise 10 on any graph: 1/(deg_i + 1) per row, λ by eigvalsh."""
    W = (adjacency + np.eye(len(adjacency))) / (adjacency.sum(axis=1, keepdims=True) + 1)
    lam = np.sort(np.abs(np.linalg.eigvalsh(W)))[-2]
    return W, lam, *_simulate(W, x, eps)


def gossip_signed_lambda(adjacency, x, eps):
    W, _, rounds, x_out = function(GOSSIP, "solution.py", "gossip")(adjacency, x, eps)
    return W, np.sort(np.linalg.eigvalsh(W))[-2], rounds, x_out


def gossip_returns_the_bound(adjacency, x, eps):
    """Proposition 4.14's ⌈ln(1/ε)/ln(1/λ)⌉ instead of a simulation."""
    W, lam, _, _ = function(GOSSIP, "solution.py", "gossip")(adjacency, x, eps)
    bound = math.ceil(math.log(1 / eps) / math.log(1 / lam))
    return W, lam, bound, np.linalg.matrix_power(W, bound) @ x


def gossip_counts_from_one(adjacency, x, eps):
    W, lam, rounds, x_out = function(GOSSIP, "solution.py", "gossip")(adjacency, x, eps)
    return W, lam, rounds + 1, x_out


def gossip_largest_modulus(adjacency, x, eps):
    W, _, rounds, x_out = function(GOSSIP, "solution.py", "gossip")(adjacency, x, eps)
    return W, np.abs(np.linalg.eigvalsh(W)).max(), rounds, x_out


@pytest.mark.parametrize("seed", [3, 2024])
def test_gossip_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(GOSSIP, "solution.py", "gossip")
    first = grade(GOSSIP, fn, seed)
    assert names(first) == set(GOSSIP_PROPS.values())
    assert fraction(first) == 1, _messages(first)
    assert grade(GOSSIP, fn, seed) == first


def test_gossip_starter_scores_zero():
    props = grade(GOSSIP, starter(GOSSIP, "gossip"), 3)
    assert fraction(props) == 0
    assert "NotImplementedError" in props[0]["message"]


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (gossip_row_weights, {"matrix", "lambda", "mean"}, "Metropolis"),
        (gossip_signed_lambda, {"lambda"}, "not modulus"),
        (gossip_returns_the_bound, {"rounds"}, "bound of Proposition 4.14"),
        (gossip_counts_from_one, {"rounds"}, "from 0"),
        (gossip_largest_modulus, {"lambda"}, "eigenvalue 1 of the consensus"),
    ],
)
def test_gossip_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(GOSSIP, fn, 3)
    assert lost(props) == {GOSSIP_PROPS[k] for k in broken}
    assert hint in _messages(props)


def test_gossip_reference_reproduces_exercise_10():
    """Exercise 10, p = 16: λ = 0.949 (ring) and 0.6 (4 × 4 torus); the simulation from
    default_rng(0) observes 124 and 13 rounds against the bounds 133 and 14."""
    checks = load_checks(GOSSIP, "checks.py").module
    fn = function(GOSSIP, "solution.py", "gossip")
    rng = np.random.default_rng(0)
    got = []
    for adj in (checks.ring(16), checks.torus(4)):
        W, lam, rounds, x_out = fn(adj, rng.standard_normal(16), 1e-3)
        got.append((round(lam, 3), rounds, math.ceil(math.log(1e3) / -math.log(lam))))
    assert got == [(0.949, 124, 133), (0.6, 13, 14)]


def test_gossip_cases_separate_the_bound_from_the_simulation():
    """Where the degrees differ the weights are not 1/(degree + 1), and a negative
    eigenvalue dominates on K_{m,m}: −(m − 1)/(m + 1) against 1/(m + 1)."""
    checks = load_checks(GOSSIP, "checks.py").module
    cs = checks.cases(3)
    deg = cs[2]["adj"].sum(axis=1)
    assert deg.max() > deg.min()
    eig = np.linalg.eigvalsh(checks.metropolis(cs[3]["adj"]))
    assert abs(eig.min()) > np.sort(eig)[-2]


# --- all three: garbage and plain data -----------------------------------------------------


@pytest.mark.parametrize("folder", [EF, LOCAL, GOSSIP])
@pytest.mark.parametrize("result", GARBAGE)
def test_grade_of_garbage_scores_zero_without_crashing(folder, result):
    props = grade_result(load_checks(folder, "checks.py").grade, result, 3, {})
    assert props and all(p["score"] == 0 for p in props)


@pytest.mark.parametrize(
    ("folder", "name", "bad"),
    [
        (EF, "topk_ef_step", ef_memory_sign_flipped),
        (LOCAL, "local_sgd", local_shared_array),
        (GOSSIP, "gossip", gossip_row_weights),
    ],
)
def test_probe_results_are_plain_json(folder, name, bad):
    module = load_checks(folder, "checks.py").module
    for fn in (function(folder, "solution.py", name), bad, starter(folder, name)):
        json.dumps(probed(module, fn, 3), allow_nan=False)
