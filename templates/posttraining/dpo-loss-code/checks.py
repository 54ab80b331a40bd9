"""Checks of the DPO loss code part (000 §5.5, Theorem 5.9, Exercise 11).

Value, gradient and stability are checked at β = 1 and accept any reduction, so that a
forgotten β or a sum over the batch costs only the β property or the reduction property.
"""

import numpy as np

from autograder.checklib import Result, Verdict, check, close, expect_close, judged, per_case

RTOL, ATOL = 1e-4, 1e-6  # loss; loose enough for a float32 computation inside
GRAD_TOL = 1e-3, 1e-5  # rtol, atol
ARGS = ("policy_chosen_logps", "policy_rejected_logps", "ref_chosen_logps", "ref_rejected_logps")


def _batch(rng: np.random.Generator, b: int, low: float, high: float, spread: float) -> dict:
    """b pairs: reference log-probs in [low, high], the policy's moved by N(0, spread²)."""
    ref_w, ref_l = rng.uniform(low, high, b), rng.uniform(low, high, b)
    policy = ref_w + rng.normal(0, spread, b), ref_l + rng.normal(0, spread, b)
    return dict(zip(ARGS, (*policy, ref_w, ref_l), strict=True))


def cases(seed: int) -> dict:
    """The batches and β values of one grading seed."""
    rng = np.random.default_rng([seed, 10])
    value = [_batch(rng, int(rng.integers(4, 17)), -60.0, -5.0, 1.5) for _ in range(2)]
    # margins of order 1e3 in both signs, and two moderate ones (long answers: log-probs ~ -2000)
    u = np.array([-1000.0, -750.0, 900.0, 1200.0, -2.5, 1.5]) * rng.uniform(0.8, 1.2, 6)
    rng.shuffle(u)
    ref_w, ref_l = rng.uniform(-3000, -1500, 6), rng.uniform(-3000, -1500, 6)
    return {
        "value": value,
        "stable": dict(zip(ARGS, (ref_w + u / 2, ref_l - u / 2, ref_w, ref_l), strict=True)),
        "betas": [float(rng.uniform(0.05, 0.3)), float(rng.uniform(0.4, 0.9))],
        "beta_batch": _batch(rng, int(rng.integers(4, 13)), -60.0, -5.0, 3.0),
    }


def _call(student, batch: dict, beta: float, with_grad: bool):
    """``dpo_loss`` on one batch, differentiated w.r.t. the policy's log-probs if ``with_grad``."""
    import torch

    tensors = [torch.tensor(batch[k], dtype=torch.float64) for k in ARGS]
    if with_grad:  # the policy's log-probabilities
        tensors[0].requires_grad_(True)
        tensors[1].requires_grad_(True)
    return student.call(*tensors, beta, grad=with_grad, keep=64)


def probe(student, seed: int, params: dict) -> dict:
    c = cases(seed)
    return {
        "value": [_call(student, b, 1.0, True) for b in c["value"]],
        "stable": _call(student, c["stable"], 1.0, True),
        "beta": [_call(student, c["beta_batch"], beta, False) for beta in c["betas"]],
    }


def _margin(batch: dict, beta: float) -> np.ndarray:
    pw, pl, rw, rl = (batch[k] for k in ARGS)
    return beta * ((pw - rw) - (pl - rl))


def _per_pair(batch: dict, beta: float) -> np.ndarray:
    return np.logaddexp(0.0, -_margin(batch, beta))  # −log σ(u), computed stably


def _reduction(rec, per_pair: np.ndarray) -> str | None:
    """How the student's value relates to the per-pair losses: mean, sum, none, or None."""
    refs = {"mean": [per_pair.mean()], "sum": [per_pair.sum()], "none": per_pair}
    return next((k for k, ref in refs.items() if expect_close(rec, ref, "", RTOL, ATOL)), None)


def _matches(rec, per_pair: np.ndarray, what: str) -> Verdict:
    """The value is the per-pair losses, reduced any way; else why not (no expected value)."""
    v = rec.array()
    if _reduction(rec, per_pair) is not None:
        return Verdict(True)
    if not rec.ok:
        why = rec.error
    elif v is None or v.size == 0:
        why = "the loss is not a number"
    elif v.size not in (1, per_pair.size):
        why = f"the loss has {v.size} elements; return one number for the batch"
    else:  # off, under the reduction its size says
        ref = [per_pair.mean()] if v.size == 1 else per_pair
        why = expect_close(rec, ref, "your loss", RTOL, ATOL).why
    return Verdict(False, f"{what}: {why}.")


def _gradient(rec, s: np.ndarray, what: str) -> Verdict:
    """The gradients are ∓σ(−u) (β = 1) times 1/B (mean) or 1 (sum); else why not."""
    unused = "the loss does not depend on both policy log-probabilities"
    gw, gl = rec.gradient(0, unused), rec.gradient(1, unused)
    why = None
    if not (gw.ok and gl.ok):
        why = (gl if gw.ok else gw).error
    elif gw.array() is None or gl.array() is None or {gw.shape, gl.shape} != {s.shape}:
        why = "the gradients do not have the batch's shape"
    elif not (np.all(np.isfinite(gw.array())) and np.all(np.isfinite(gl.array()))):
        why = "the gradient is not finite (nan or inf)"
    elif not any(
        close(gw.array(), -s * k, *GRAD_TOL) and close(gl.array(), s * k, *GRAD_TOL)
        for k in (1 / s.size, 1.0)  # mean, sum
    ):
        why = "the gradient is not ∓β σ(−u)/B (Exercise 11(a))"
    return Verdict(why is None, f"{what}: {why}.")


value = per_case(
    "loss value on random batches",
    2.0,
    "The loss matches −log σ(u) on both random batches.",
    " DPO's loss of a pair is −log σ(u), u = β[(log π − log π_ref)(y_w)"
    " − (log π − log π_ref)(y_l)] (Theorem 5.9).",
)
gradient = per_case(
    "gradient w.r.t. the policy log-probabilities",
    2.0,
    "Autograd's gradient w.r.t. the policy log-probabilities is ∓β σ(−u)/B.",
)


@check("stable at large margins", 2.0)
def stable(r: Result, c: dict):
    """Loss and gradient at |u| ~ 1e3, β = 1."""
    rec, u = r.record("stable"), _margin(c["stable"], 1.0)
    loss = _matches(rec, np.logaddexp(0.0, -u), "loss")
    grad = _gradient(rec, np.exp(-np.logaddexp(0.0, u)), "gradient")
    if loss and grad:
        return 1.0, "Loss and gradient stay finite and exact at margins |u| ~ 1000."
    msg = "At margins |u| ~ 1000 (β = 1): " + " ".join(v.why for v in (loss, grad) if not v)
    if "not finite" in msg:
        msg += (
            " σ(u) underflows to 0 for u ≪ 0: compute −log σ(u) as softplus(−u) "
            "(F.logsigmoid), not log(sigmoid(u))."
        )
    return 0.5 * bool(loss) + 0.5 * bool(grad), msg


@check("β scales the implicit reward", 1.0)
def beta_scales(r: Result, c: dict):
    verdicts = [
        _matches(rec, _per_pair(c["beta_batch"], beta), f"β = {beta:.3g}")
        for beta, rec in zip(c["betas"], r.records("beta", 2), strict=True)
    ]
    good = f"The loss follows β (β = {c['betas'][0]:.3g} and {c['betas'][1]:.3g})."
    return judged(verdicts, good, " β multiplies the log-ratios inside the margin u.")


@check("mean over the batch", 1.0)
def mean(kinds: list):
    found = [k for k in kinds if k is not None]
    if not found:
        return 0.0, "Cannot tell: the loss never matches."
    score = sum(k == "mean" for k in found) / len(found)
    if score == 1:
        return score, "The loss is the mean over the batch."
    if "sum" in found:
        return score, "Your loss is the sum over the batch: DPO averages the pairs' losses (mean)."
    return score, "Your loss returns one value per pair: reduce it to the mean over the batch."


def grade(result: dict, seed: int, params: dict) -> list:
    r, c = Result(result), cases(seed)
    values, grads, kinds = [], [], []  # the random batches, at β = 1, whatever the reduction
    for i, (b, rec) in enumerate(zip(c["value"], r.records("value", 2), strict=True)):
        pp = _per_pair(b, 1.0)
        values.append(_matches(rec, pp, f"batch {i + 1} ({pp.size} pairs, β = 1)"))
        grads.append(_gradient(rec, 1 / (1 + np.exp(_margin(b, 1.0))), f"batch {i + 1}"))  # σ(−u)
        kinds.append(_reduction(rec, pp))
    return [value(values), gradient(grads), stable(r, c), beta_scales(r, c), mean(kinds)]
