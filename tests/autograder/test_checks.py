"""Code checks grade the algorithm: the reference scores full marks, the starter 0, and each
realistic mistake loses exactly the properties it breaks.

Real runs, no mocks: the ring forks its ranks and runs torch.distributed (gloo); the DPO
checks call autograd; the sampler is tested by chi-square at a fixed grading seed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autograder.grading.checks import Checks, ChecksError, grade_result, load_checks
from tests.templates.codecheck import (
    TEMPLATES,
    fraction,
    function,
    grade,
    lost,
    names,
    probed,
    starter,
    student_for,
)

RING = TEMPLATES / "collectives" / "ring-allreduce-code"
DPO = TEMPLATES / "posttraining" / "dpo-loss-code"
SPEC = TEMPLATES / "serving" / "speculative-sampler-code"


# --- the loader ----------------------------------------------------------------------------


def test_loader_gives_the_source_and_the_instructors_grade():
    checks = load_checks(RING, "checks.py")
    assert checks.source == (RING / "checks.py").read_text(encoding="utf-8")
    assert checks is load_checks(RING, "checks.py")  # compiled once
    props = grade_result(checks.grade, None, 1, {})  # no result: every property 0, no crash
    assert props and all(p["score"] == 0 for p in props)


def test_checks_compile_from_their_text_and_write_no_bytecode(tmp_path):
    # what grading does with the copy release wrote to keys/: no import, no __pycache__
    source = (RING / "checks.py").read_text(encoding="utf-8")
    copy = tmp_path / "keys" / "checks" / "ring.py"
    copy.parent.mkdir(parents=True)
    copy.write_text(source, encoding="utf-8")
    checks = Checks.from_source(copy.read_text(encoding="utf-8"), str(copy))
    assert checks.source == source and callable(checks.module.probe)
    assert not any(tmp_path.rglob("__pycache__"))
    with pytest.raises(ChecksError, match="ring.py: cannot be loaded: SyntaxError"):
        Checks.from_source("def probe(:\n", str(copy))


def test_checks_say_what_the_warm_executor_imports_for_them(tmp_path):
    """PRELOAD where declared (the checkpointing part: torch.utils.checkpoint's first call
    imports torch._dynamo), torch where the checks import it, nothing otherwise."""
    ckpt = load_checks(TEMPLATES / "memory" / "checkpointing-code", "checks.py")
    assert ckpt.preload == ("torch", "torch._dynamo")
    assert load_checks(DPO, "checks.py").preload == ("torch",)  # imports torch: derived
    assert load_checks(SPEC, "checks.py").preload == ()  # NumPy only
    bad = "PRELOAD = 'torch'\ndef probe(s, seed, p):\n    return 1\n"
    bad += "def grade(r, s, p):\n    return []\n"
    with pytest.raises(ChecksError, match="PRELOAD must be a tuple of module names"):
        Checks.from_source(bad, str(tmp_path / "checks.py"))


def test_loader_refuses_files_outside_the_folder_and_bad_checks(tmp_path):
    with pytest.raises(ChecksError, match="outside the question folder"):
        load_checks(RING, "../ring-vs-server/question.yaml")
    with pytest.raises(ChecksError, match="missing"):
        load_checks(RING, "nope.py")
    (tmp_path / "checks.py").write_text("def probe(student, seed, params):\n    return {}\n")
    with pytest.raises(ChecksError, match="grade"):
        load_checks(tmp_path, "checks.py")
    with pytest.raises(ChecksError, match="score"):
        grade_result(
            lambda r, s, p: [{"name": "x", "weight": 1, "score": 2, "message": ""}], {}, 0, {}
        )


# --- ring all-reduce -----------------------------------------------------------------------

RING_PROPS = {
    "sum": "every rank ends with the sum",
    "steps": "2(p − 1) calls to send_recv per rank",
    "elements": "2(p − 1)n/p elements sent per rank",
    "chunk": "each message is one chunk of n/p elements",
    "reduce_scatter": "reduce-scatter messages are partial sums of one chunk",
    "all_gather": "all-gather messages are completed chunks",
    "gloo": "gloo run matches dist.all_reduce",
}


def ring_full_buffers(x, rank, world, comm):
    """Pass whole buffers around the ring and sum them: the right result, not a ring."""
    seen = [np.asarray(x, dtype=float)]
    for _ in range(world - 1):
        seen.append(comm.send_recv(seen[-1]))
    return sum(seen)


def ring_reduce_scatter_only(x, rank, world, comm):
    """The reduce-scatter without the all-gather: one complete chunk per rank."""
    chunks = [c.copy() for c in np.array_split(np.asarray(x, dtype=float), world)]
    for s in range(world - 1):
        send, recv = (rank - s) % world, (rank - s - 1) % world
        chunks[recv] = chunks[recv] + comm.send_recv(chunks[send])
    return np.concatenate(chunks)


def ring_p_plus_one_chunks(x, rank, world, comm):
    """p + 1 chunks with the schedule of p: the last chunk is never reduced."""
    chunks = [c.copy() for c in np.array_split(np.asarray(x, dtype=float), world + 1)]
    for s in range(world - 1):
        send, recv = (rank - s) % world, (rank - s - 1) % world
        chunks[recv] = chunks[recv] + comm.send_recv(chunks[send])
    for s in range(world - 1):
        send, recv = (rank + 1 - s) % world, (rank - s) % world
        chunks[recv] = comm.send_recv(chunks[send])
    return np.concatenate(chunks)


@pytest.mark.parametrize("seed", [11, 2024])
def test_ring_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(RING, "solution.py", "ring_allreduce")
    first = grade(RING, fn, seed)
    assert names(first) == set(RING_PROPS.values())
    assert fraction(first) == 1, [p["message"] for p in first if p["score"] < 1]
    assert all(p["weight"] > 0 for p in first)  # the gloo run really ran here
    assert grade(RING, fn, seed) == first  # same seed, same grade


def test_ring_starter_scores_zero():
    props = grade(RING, starter(RING, "ring_allreduce"), 11)
    assert fraction(props) == 0
    assert "NotImplementedError" in props[0]["message"]


@pytest.mark.parametrize(
    ("fn", "broken"),
    [
        (ring_full_buffers, {"steps", "elements", "chunk", "reduce_scatter", "all_gather"}),
        (ring_reduce_scatter_only, {"sum", "steps", "elements", "all_gather", "gloo"}),
        (ring_p_plus_one_chunks, {"sum", "elements", "chunk", "gloo"}),
    ],
)
def test_ring_mistakes_lose_exactly_what_they_break(fn, broken):
    props = grade(RING, fn, 11)
    assert lost(props) == {RING_PROPS[k] for k in broken}
    for p in props:
        if p["name"] in lost(props):
            assert p["message"] and p["score"] < 1


def test_ring_full_buffer_exchange_loses_the_algorithm_points():
    """The result is right, but a solution that gathers whole buffers is not a ring."""
    props = grade(RING, ring_full_buffers, 11)
    assert fraction(props) < 0.5
    by_name = {p["name"]: p for p in props}
    assert "whole buffer" in by_name[RING_PROPS["reduce_scatter"]]["message"]


def test_ring_router_breaks_a_deadlock_instead_of_hanging():
    def rank0_quits(x, rank, world, comm):
        if rank == 0:
            return np.asarray(x)  # never sends: rank 1 waits forever in a real ring
        return ring_reduce_scatter_only(x, rank, world, comm)

    module = load_checks(RING, "checks.py").module
    sim = module._simulate(student_for(module, rank0_quits), 11)
    assert not sim["timed_out"]
    assert any("deadlock" in (e or "") for e in sim["errors"])


def test_ring_gloo_that_cannot_start_weighs_nothing():
    """No fault of the student's: the property is reported with weight 0."""
    checks = load_checks(RING, "checks.py").module
    p, n = checks.sizes(11, "gloo")
    result = {
        "gloo": {
            "p": p,
            "n": n,
            "ranks": [{"stage": "start", "error": "RuntimeError: no lo"} for _ in range(p)],
        }
    }
    props = grade_result(load_checks(RING, "checks.py").grade, result, 11, {})
    gloo = [x for x in props if "gloo" in x["name"]]
    assert gloo[0]["weight"] == 0 and "Not run" in gloo[0]["message"]


# --- DPO loss ------------------------------------------------------------------------------

DPO_PROPS = {
    "value": "loss value on random batches",
    "gradient": "gradient w.r.t. the policy log-probabilities",
    "stable": "stable at large margins",
    "beta": "β scales the implicit reward",
    "mean": "mean over the batch",
}


def _margin(pw, pl, rw, rl, beta):
    return beta * ((pw - rw) - (pl - rl))


def dpo_log_of_sigmoid(pw, pl, rw, rl, beta):
    return -torch.log(torch.sigmoid(_margin(pw, pl, rw, rl, beta))).mean()


def dpo_sum(pw, pl, rw, rl, beta):
    return -F.logsigmoid(_margin(pw, pl, rw, rl, beta)).sum()


def dpo_ignores_beta(pw, pl, rw, rl, beta):
    return -F.logsigmoid(_margin(pw, pl, rw, rl, 1.0)).mean()


def dpo_detached(pw, pl, rw, rl, beta):
    return -F.logsigmoid(_margin(pw, pl, rw, rl, beta)).mean().detach()


def dpo_float32(pw, pl, rw, rl, beta):
    return -F.logsigmoid(_margin(pw.float(), pl.float(), rw.float(), rl.float(), beta)).mean()


@pytest.mark.parametrize("seed", [3, 2024])
def test_dpo_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(DPO, "solution.py", "dpo_loss")
    first = grade(DPO, fn, seed)
    assert names(first) == set(DPO_PROPS.values())
    assert fraction(first) == 1, [p["message"] for p in first if p["score"] < 1]
    assert grade(DPO, fn, seed) == first


def test_dpo_starter_scores_zero():
    assert fraction(grade(DPO, starter(DPO, "dpo_loss"), 3)) == 0


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (dpo_log_of_sigmoid, {"stable"}, "softplus"),
        (dpo_sum, {"mean"}, "sum over the batch"),
        (dpo_ignores_beta, {"beta"}, "β"),
        (dpo_detached, {"gradient", "stable"}, "no gradient"),
        (dpo_float32, set(), ""),  # float32 inside is fine
    ],
)
def test_dpo_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(DPO, fn, 3)
    assert lost(props) == {DPO_PROPS[k] for k in broken}
    messages = " ".join(p["message"] for p in props if p["score"] < 1)
    assert hint in messages


# --- speculative sampler -------------------------------------------------------------------

SPEC_PROPS = {
    "output": "output tokens follow the target p",
    "rate": "a draft x is kept with probability min(1, p(x)/q(x))",
    "kept": "a kept draft is the token returned",
    "residual": "after a rejection, tokens follow the residual (p − q)₊ normalised",
}


def spec_always_accept(p, q, x, rng):
    return int(x), True


def spec_sample_p(p, q, x, rng):
    """A token of p, flagged kept: right output law, no draft verified."""
    return int(rng.choice(len(p), p=p)), True


def spec_fresh_draft_when_kept(p, q, x, rng):
    """The right test, but a kept draft replaced by a fresh sample of q."""
    if rng.random() < min(1.0, p[x] / q[x]):
        return int(rng.choice(len(q), p=q)), True
    residual = np.maximum(p - q, 0.0)
    return int(rng.choice(len(p), p=residual / residual.sum())), False


def spec_ratio_unclipped_inverted(p, q, x, rng):
    """Keeps x with probability min(1, q(x)/p(x)): the ratio upside down."""
    if rng.random() < min(1.0, q[x] / p[x]):
        return int(x), True
    residual = np.maximum(p - q, 0.0)
    return int(rng.choice(len(p), p=residual / residual.sum())), False


def spec_unnormalised_residual(p, q, x, rng):
    """Inverse-CDF sampling on (p − q)₊ without dividing by its sum (clamped to the last)."""
    if rng.random() < min(1.0, p[x] / q[x]):
        return int(x), True
    cdf = np.cumsum(np.maximum(p - q, 0.0))
    return min(int(np.searchsorted(cdf, rng.random(), side="right")), len(p) - 1), False


def spec_one_uniform(p, q, x, rng):
    """One uniform for the test and the residual draw: a residual token correlated with
    the rejection (u is large after a rejection), so the residual's law is wrong."""
    u = rng.random()
    if u < min(1.0, p[x] / q[x]):
        return int(x), True
    cdf = np.cumsum(np.maximum(p - q, 0.0))
    return min(int(np.searchsorted(cdf / cdf[-1], u, side="right")), len(p) - 1), False


def test_sampler_reference_scores_full_marks_and_the_same_twice():
    fn = function(SPEC, "solution.py", "speculative_step")
    first = grade(SPEC, fn, 5)
    assert names(first) == set(SPEC_PROPS.values())
    assert fraction(first) == 1, [p["message"] for p in first if p["score"] < 1]
    assert grade(SPEC, fn, 5) == first  # a fixed grading seed: reproducible grades


def test_sampler_steps_get_their_own_copies_of_p_and_q():
    """A step that builds the residual in p's own memory changes nothing for the next."""

    def in_place(p, q, x, rng):
        if rng.random() < min(1.0, p[x] / q[x]):
            return int(x), True
        p -= q
        np.maximum(p, 0.0, out=p)
        p /= p.sum()
        return int(rng.choice(len(p), p=p)), False

    assert fraction(grade(SPEC, in_place, 7)) == 1


def test_sampler_starter_scores_zero():
    assert fraction(grade(SPEC, starter(SPEC, "speculative_step"), 5)) == 0


@pytest.mark.parametrize(
    ("fn", "broken"),
    [
        (spec_always_accept, {"output", "rate", "residual"}),
        (spec_sample_p, {"output", "rate", "kept", "residual"}),
        (spec_fresh_draft_when_kept, {"output", "rate", "kept", "residual"}),
        (spec_ratio_unclipped_inverted, {"output", "rate"}),
        (spec_unnormalised_residual, {"output", "residual"}),
        (spec_one_uniform, {"output", "residual"}),
    ],
)
def test_sampler_mistakes_lose_exactly_what_they_break(fn, broken):
    """Seed 7: a residual on several tokens (seed 5's is a single token, which any draw
    after a rejection gets right)."""
    assert lost(grade(SPEC, fn, 7)) == {SPEC_PROPS[k] for k in broken}


def test_sampler_judges_each_step_on_its_draft():
    """The drafts are the probe's: a step that returns the joint law of (token, accepted)
    without the draft loses every property, though its tokens follow p exactly."""

    def joint_law(p, q, x, rng):
        keep = np.minimum(p, q)
        if rng.random() < keep.sum():
            return int(rng.choice(len(p), p=keep / keep.sum())), True
        rest = np.maximum(p - q, 0.0)
        return int(rng.choice(len(p), p=rest / rest.sum())), False

    props = grade(SPEC, joint_law, 7)
    assert fraction(props) == 0
    assert "the draft" in props[2]["message"] and "Not judged" in props[0]["message"]


def test_probe_results_are_plain_json():
    """What comes out of the sandbox is JSON data: no arrays, no NaN literals."""
    module = load_checks(DPO, "checks.py").module
    json.dumps(probed(module, dpo_log_of_sigmoid, 3), allow_nan=False)
