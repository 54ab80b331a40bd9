"""Checks of the DPO loss code part (000 §5.5, Theorem 5.9, Exercise 11).

``probe`` runs in the probe process, beside the student's: it calls the student's
``dpo_loss`` on batches drawn from the seed, as float64 tensors with ``requires_grad`` on
the policy log-probabilities, and returns the loss values and the autograd gradients.
``grade`` runs in the trusted process: it redraws the batches from the seed and compares
with −mean log σ(u) and its analytic gradient ∓β σ(−u)/B.

The properties are separated on purpose: value, gradient and stability are checked at
β = 1 and accept any reduction, so that a forgotten β or a sum over the batch costs only
the β property or the reduction property.
"""

from __future__ import annotations

import numpy as np

from autograder.checklib import (
    Property,
    Record,
    Result,
    Verdict,
    check,
    close,
    expect_close,
    share,
)

ISOLATED = True  # probe() runs in the probe process; dpo_loss, in the student's

RTOL, ATOL = 1e-4, 1e-6  # loss; loose enough for a float32 computation inside
GRAD_RTOL, GRAD_ATOL = 1e-3, 1e-5

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def _batch(rng: np.random.Generator, b: int, low: float, high: float, spread: float) -> dict:
    """b pairs: reference log-probs in [low, high], the policy's moved by N(0, spread²)."""
    ref_w, ref_l = rng.uniform(low, high, b), rng.uniform(low, high, b)
    return {
        "policy_chosen_logps": ref_w + rng.normal(0, spread, b),
        "policy_rejected_logps": ref_l + rng.normal(0, spread, b),
        "ref_chosen_logps": ref_w,
        "ref_rejected_logps": ref_l,
    }


def cases(seed: int) -> dict:
    """The batches and β values of one grading seed."""
    rng = np.random.default_rng([seed, 10])
    value = [_batch(rng, int(rng.integers(4, 17)), -60.0, -5.0, 1.5) for _ in range(2)]
    # margins of order 1e3 in both signs, and two moderate ones (long answers: log-probs ~ -2000)
    u = np.array([-1000.0, -750.0, 900.0, 1200.0, -2.5, 1.5]) * rng.uniform(0.8, 1.2, 6)
    rng.shuffle(u)
    ref_w, ref_l = rng.uniform(-3000, -1500, 6), rng.uniform(-3000, -1500, 6)
    stable = {
        "policy_chosen_logps": ref_w + u / 2,
        "policy_rejected_logps": ref_l - u / 2,
        "ref_chosen_logps": ref_w,
        "ref_rejected_logps": ref_l,
    }
    betas = [float(rng.uniform(0.05, 0.3)), float(rng.uniform(0.4, 0.9))]
    return {
        "value": value,
        "stable": stable,
        "beta_batch": _batch(rng, int(rng.integers(4, 13)), -60.0, -5.0, 3.0),
        "betas": betas,
    }


ARGS = ("policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps")


def _call(student, batch: dict, beta: float, with_grad: bool) -> Record:
    """``dpo_loss`` on one batch, differentiated (in the student's process) with respect
    to the policy's log-probabilities when ``with_grad``."""
    import torch

    tensors = [torch.tensor(batch[k], dtype=torch.float64) for k in ARGS]
    if with_grad:
        tensors[0].requires_grad_(True)
        tensors[1].requires_grad_(True)
    return student.call(*tensors, beta, grad=with_grad, keep=64)


def probe(student, seed: int, params: dict) -> dict:
    """Call ``dpo_loss`` on the seed's batches; return values and gradients as plain data."""
    c = cases(seed)
    return {
        "value": [_call(student, b, 1.0, True) for b in c["value"]],
        "stable": _call(student, c["stable"], 1.0, True),
        "beta": [_call(student, c["beta_batch"], beta, False) for beta in c["betas"]],
    }


# --- grade (trusted) ---------------------------------------------------------------------


def _margin(batch: dict, beta: float) -> np.ndarray:
    return beta * (
        (batch["policy_chosen_logps"] - batch["ref_chosen_logps"])
        - (batch["policy_rejected_logps"] - batch["ref_rejected_logps"])
    )


def _per_pair(batch: dict, beta: float) -> np.ndarray:
    return np.logaddexp(0.0, -_margin(batch, beta))  # −log σ(u), computed stably


def _reduction(rec: Record, per_pair: np.ndarray) -> str | None:
    """How the student's value relates to the per-pair losses: mean, sum, none, or None."""
    v = rec.array()
    if v is None:
        return None
    v = v.reshape(-1)
    if v.size == 1 and close(v, [per_pair.mean()], RTOL, ATOL):
        return "mean"
    if v.size == 1 and close(v, [per_pair.sum()], RTOL, ATOL):
        return "sum"
    if v.size == per_pair.size and close(v, per_pair, RTOL, ATOL):
        return "none"
    return None


def _why(rec: Record, per_pair: np.ndarray, what: str) -> str:
    """Why a value does not match, without the expected value."""
    if not rec.ok:
        return f"{what}: {rec.error}."
    v = rec.array()
    if v is None or v.size == 0:
        return f"{what}: the loss is not a number."
    if v.size not in (1, per_pair.size):
        return f"{what}: the loss has {v.size} elements; return one number for the batch."
    ref = np.full(1, per_pair.mean()) if v.size == 1 else per_pair
    return expect_close(rec, ref, what=f"{what}: your loss", rtol=RTOL, atol=ATOL).why + "."


def _grad_ok(rec: Record, s: np.ndarray, beta: float) -> Verdict:
    """Whether the gradients are ∓β σ(−u) times 1/B (mean) or 1 (sum); why not otherwise."""
    unused = "the loss does not depend on both policy log-probabilities"
    gw, gl = rec.gradient(0, unused), rec.gradient(1, unused)
    if not (gw.ok and gl.ok):
        return Verdict(False, (gl if gw.ok else gw).error)
    if gw.array() is None or gl.array() is None or {gw.shape, gl.shape} != {s.shape}:
        return Verdict(False, "the gradients do not have the batch's shape")
    if not (np.all(np.isfinite(gw.array())) and np.all(np.isfinite(gl.array()))):
        return Verdict(False, "the gradient is not finite (nan or inf)")
    for scale in (1 / s.size, 1.0):
        exp = beta * s * scale
        if close(gw.array(), -exp, GRAD_RTOL, GRAD_ATOL) and close(
            gl.array(), exp, GRAD_RTOL, GRAD_ATOL
        ):
            return Verdict(True)
    return Verdict(False, "the gradient is not ∓β σ(−u)/B (Exercise 11(a))")


@check("loss value on random batches", 2.0)
def value(r: Result, c: dict):
    """At β = 1, whatever the reduction."""
    recs, whys = r.records("value", 2), []
    for i, (b, rec) in enumerate(zip(c["value"], recs, strict=True)):
        per_pair = _per_pair(b, 1.0)
        if _reduction(rec, per_pair) is None:
            whys.append(_why(rec, per_pair, f"batch {i + 1} ({per_pair.size} pairs, β = 1)"))
    if not whys:
        return 1.0, "The loss matches −log σ(u) on both random batches."
    return 1 - len(whys) / 2, " ".join(whys) + (
        " DPO's loss of a pair is −log σ(u), u = β[(log π − log π_ref)(y_w)"
        " − (log π − log π_ref)(y_l)] (Theorem 5.9)."
    )


@check("gradient w.r.t. the policy log-probabilities", 2.0)
def gradient(r: Result, c: dict):
    """Autograd's gradient at β = 1: ∓β σ(−u)/B."""
    verdicts = [
        _grad_ok(rec, 1 / (1 + np.exp(_margin(b, 1.0))), 1.0)  # σ(−u)
        for b, rec in zip(c["value"], r.records("value", 2), strict=True)
    ]
    if all(verdicts):
        return 1.0, "Autograd's gradient w.r.t. the policy log-probabilities is ∓β σ(−u)/B."
    return share(verdicts), " ".join(
        f"batch {i + 1}: {v.why}." for i, v in enumerate(verdicts) if not v
    )


@check("stable at large margins", 2.0)
def stable(r: Result, c: dict):
    """Loss and gradient at |u| ~ 1e3, β = 1."""
    rec, u = r.record("stable"), _margin(c["stable"], 1.0)
    per_pair = np.logaddexp(0.0, -u)
    value_ok = _reduction(rec, per_pair) is not None
    grad = _grad_ok(rec, np.exp(-np.logaddexp(0.0, u)), 1.0)
    if value_ok and grad:
        return 1.0, "Loss and gradient stay finite and exact at margins |u| ~ 1000."
    parts = [] if value_ok else [_why(rec, per_pair, "loss")]
    parts += [] if grad else [f"gradient: {grad.why}."]
    msg = "At margins |u| ~ 1000 (β = 1): " + " ".join(parts)
    if "not finite" in msg:
        msg += (
            " σ(u) underflows to 0 for u ≪ 0: compute −log σ(u) as softplus(−u) "
            "(F.logsigmoid), not log(sigmoid(u))."
        )
    return 0.5 * value_ok + 0.5 * bool(grad), msg


@check("β scales the implicit reward", 1.0)
def beta_scales(r: Result, c: dict):
    oks, whys = [], []
    for beta, rec in zip(c["betas"], r.records("beta", 2), strict=True):
        per_pair = _per_pair(c["beta_batch"], beta)
        oks.append(_reduction(rec, per_pair) is not None)
        if not oks[-1]:
            whys.append(_why(rec, per_pair, f"β = {beta:.3g}"))
    if all(oks):
        return 1.0, f"The loss follows β (β = {c['betas'][0]:.3g} and {c['betas'][1]:.3g})."
    return share(oks), " ".join(whys) + " β multiplies the log-ratios inside the margin u."


@check("mean over the batch", 1.0)
def mean(r: Result, c: dict):
    kinds = [
        _reduction(rec, _per_pair(b, 1.0))
        for b, rec in zip(c["value"], r.records("value", 2), strict=True)
    ]
    judged = [k for k in kinds if k is not None]
    if not judged:
        return 0.0, "Cannot tell: the loss never matches."
    score = sum(k == "mean" for k in judged) / len(judged)
    if score == 1:
        return score, "The loss is the mean over the batch."
    if "sum" in judged:
        return score, "Your loss is the sum over the batch: DPO averages the pairs' losses (mean)."
    return score, "Your loss returns one value per pair: reduce it to the mean over the batch."


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score the probe's result against losses and gradients recomputed from the seed."""
    r, c = Result(result), cases(seed)
    return [value(r, c), gradient(r, c), stable(r, c), beta_scales(r, c), mean(r, c)]
