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

import math

import numpy as np

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


def _plain(values) -> list:
    return [float(v) if math.isfinite(v) else str(float(v)) for v in values]


def _call(student, batch: dict, beta: float, with_grad: bool) -> dict:
    import torch

    tensors = [torch.tensor(batch[k], dtype=torch.float64) for k in ARGS]
    if with_grad:  # differentiated in the student's process, with respect to the policy's
        tensors[0].requires_grad_(True)
        tensors[1].requires_grad_(True)
    try:
        if with_grad:
            loss, grads, why = student.gradient(*tensors, beta)
        else:
            loss, grads, why = student(*tensors, beta), None, None
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return {"error": f"{type(err).__name__}: {err}"[:300]}
    rec: dict = {"error": None, "type": type(loss).__name__}
    try:
        if isinstance(loss, torch.Tensor):
            rec["shape"] = list(loss.shape)
            rec["value"] = _plain(loss.detach().to(torch.float64).reshape(-1)[:64].tolist())
        else:
            rec["shape"] = None
            rec["value"] = _plain(np.asarray(loss, dtype=np.float64).reshape(-1)[:64].tolist())
    except Exception as err:  # noqa: BLE001
        return {"error": f"the loss is not a number: {type(err).__name__}: {err}"[:300]}
    if not with_grad:
        return rec
    if grads is None:
        rec["grad_error"] = why or "the loss carries no gradient"
        return rec
    try:
        rec["grad"] = [
            None if g is None else _plain(torch.as_tensor(g).to(torch.float64).tolist())
            for g in grads[:2]
        ]
    except Exception as err:  # noqa: BLE001 - a gradient that is not numbers
        rec["grad_error"] = f"{type(err).__name__}: {err}"[:300]
    return rec


def probe(student, seed: int, params: dict) -> dict:
    """Call ``dpo_loss`` on the seed's batches; return values and gradients as plain data."""
    c = cases(seed)
    return {
        "value": [_call(student, b, 1.0, True) for b in c["value"]],
        "stable": _call(student, c["stable"], 1.0, True),
        "beta": [_call(student, c["beta_batch"], beta, False) for beta in c["betas"]],
    }


# --- grade (trusted) ---------------------------------------------------------------------


def _prop(name: str, weight: float, score: float, message: str) -> dict:
    from autograder.checktools import prop  # grade side only: the trusted process

    return prop(name, weight, score, message)


def _margin(batch: dict, beta: float) -> np.ndarray:
    return beta * (
        (batch["policy_chosen_logps"] - batch["ref_chosen_logps"])
        - (batch["policy_rejected_logps"] - batch["ref_rejected_logps"])
    )


def _vector(x) -> np.ndarray | None:
    from autograder.checktools import vector

    return vector(x)


def _close(a: np.ndarray, b: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> bool:
    from autograder.checktools import close

    return close(a, b, rtol, atol)


def _reduction(rec, per_pair: np.ndarray) -> str | None:
    """How the student's value relates to the per-pair losses: mean, sum, none, or None."""
    v = _vector(rec.get("value")) if isinstance(rec, dict) else None
    if v is None:
        return None
    if v.size == 1 and _close(v, np.array([per_pair.mean()])):
        return "mean"
    if v.size == 1 and _close(v, np.array([per_pair.sum()])):
        return "sum"
    if v.size == per_pair.size and _close(v, per_pair):
        return "none"
    return None


def _why(rec, per_pair: np.ndarray, what: str) -> str:
    """Why a value does not match, without the expected value."""
    if not isinstance(rec, dict):
        return f"{what}: no result."
    if rec.get("error"):
        return f"{what}: {rec['error']}."
    v = _vector(rec.get("value"))
    if v is None or v.size == 0:
        return f"{what}: the loss is not a number."
    if not np.all(np.isfinite(v)):
        return f"{what}: the loss is not finite ({', '.join(sorted({str(x) for x in v[~np.isfinite(v)]}))})."  # noqa: E501
    if v.size not in (1, per_pair.size):
        return f"{what}: the loss has {v.size} elements; return one number for the batch."
    ref = per_pair.mean() if v.size == 1 else per_pair
    err = float(np.max(np.abs(v - ref) / np.maximum(np.abs(ref), 1e-12)))
    return f"{what}: your loss is off by a relative error of {err:.2g}."


def _grad_ok(rec, s: np.ndarray, beta: float) -> tuple[bool, str]:
    """Whether the gradients are ∓β σ(−u) times 1/B (mean) or 1 (sum); why not otherwise."""
    if not isinstance(rec, dict):
        return False, "no result"
    if rec.get("error"):
        return False, rec["error"]
    if rec.get("grad_error"):
        return False, rec["grad_error"]
    grads = rec.get("grad")
    if not (isinstance(grads, list) and len(grads) == 2):
        return False, "no gradient"
    if grads[0] is None or grads[1] is None:
        return False, "the loss does not depend on both policy log-probabilities"
    gw, gl = _vector(grads[0]), _vector(grads[1])
    if gw is None or gl is None or gw.shape != s.shape or gl.shape != s.shape:
        return False, "the gradients do not have the batch's shape"
    if not (np.all(np.isfinite(gw)) and np.all(np.isfinite(gl))):
        return False, "the gradient is not finite (nan or inf)"
    for scale in (1 / s.size, 1.0):
        exp = beta * s * scale
        if _close(gw, -exp, GRAD_RTOL, GRAD_ATOL) and _close(gl, exp, GRAD_RTOL, GRAD_ATOL):
            return True, ""
    return False, "the gradient is not ∓β σ(−u)/B (Exercise 11(a))"


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score the probe's result against losses and gradients recomputed from the seed."""
    c = cases(seed)
    result = result if isinstance(result, dict) else {}
    values = result.get("value") if isinstance(result.get("value"), list) else []
    values = (values + [None, None])[:2]
    props = []

    # 1. value at β = 1, whatever the reduction
    kinds, notes = [], []
    for i, (b, rec) in enumerate(zip(c["value"], values, strict=True)):
        per_pair = np.logaddexp(0.0, -_margin(b, 1.0))  # −log σ(u), computed stably
        kinds.append(_reduction(rec, per_pair))
        if kinds[-1] is None:
            notes.append(_why(rec, per_pair, f"batch {i + 1} ({per_pair.size} pairs, β = 1)"))
    hit = sum(k is not None for k in kinds)
    msg = (
        "The loss matches −log σ(u) on both random batches."
        if hit == 2
        else " ".join(notes) + " DPO's loss of a pair is −log σ(u), u = β[(log π − log π_ref)(y_w)"
        " − (log π − log π_ref)(y_l)] (Theorem 5.9)."
    )
    props.append(_prop("loss value on random batches", 2.0, hit / 2, msg))

    # 2. autograd gradient at β = 1
    oks, notes = [], []
    for i, (b, rec) in enumerate(zip(c["value"], values, strict=True)):
        ok, why = _grad_ok(rec, 1 / (1 + np.exp(_margin(b, 1.0))), 1.0)  # σ(−u)
        oks.append(ok)
        if not ok:
            notes.append(f"batch {i + 1}: {why}.")
    msg = (
        "Autograd's gradient w.r.t. the policy log-probabilities is ∓β σ(−u)/B."
        if all(oks)
        else " ".join(notes)
    )
    props.append(_prop("gradient w.r.t. the policy log-probabilities", 2.0, sum(oks) / 2, msg))

    # 3. stability at |u| ~ 1e3
    rec = result.get("stable")
    u = _margin(c["stable"], 1.0)
    per_pair = np.logaddexp(0.0, -u)
    value_ok = _reduction(rec, per_pair) is not None
    grad_ok, why = _grad_ok(rec, np.exp(-np.logaddexp(0.0, u)), 1.0)
    if value_ok and grad_ok:
        msg = "Loss and gradient stay finite and exact at margins |u| ~ 1000."
    else:
        parts = [] if value_ok else [_why(rec, per_pair, "loss")]
        parts += [] if grad_ok else [f"gradient: {why}."]
        msg = "At margins |u| ~ 1000 (β = 1): " + " ".join(parts)
        if "not finite" in msg:
            msg += (
                " σ(u) underflows to 0 for u ≪ 0: compute −log σ(u) as softplus(−u) "
                "(F.logsigmoid), not log(sigmoid(u))."
            )
    props.append(_prop("stable at large margins", 2.0, 0.5 * value_ok + 0.5 * grad_ok, msg))

    # 4. β
    recs = result.get("beta") if isinstance(result.get("beta"), list) else []
    recs = (recs + [None, None])[:2]
    oks, notes = [], []
    for beta, rec in zip(c["betas"], recs, strict=True):
        per_pair = np.logaddexp(0.0, -_margin(c["beta_batch"], beta))
        oks.append(_reduction(rec, per_pair) is not None)
        if not oks[-1]:
            notes.append(_why(rec, per_pair, f"β = {beta:.3g}"))
    msg = (
        f"The loss follows β (β = {c['betas'][0]:.3g} and {c['betas'][1]:.3g})."
        if all(oks)
        else " ".join(notes) + " β multiplies the log-ratios inside the margin u."
    )
    props.append(_prop("β scales the implicit reward", 1.0, sum(oks) / 2, msg))

    # 5. reduction: one number, the mean over the batch
    judged = [k for k in kinds if k is not None]
    if not judged:
        props.append(_prop("mean over the batch", 1.0, 0, "Cannot tell: the loss never matches."))
    else:
        score = sum(k == "mean" for k in judged) / len(judged)
        if score == 1:
            msg = "The loss is the mean over the batch."
        elif "sum" in judged:
            msg = "Your loss is the sum over the batch: DPO averages the pairs' losses (mean)."
        else:
            msg = "Your loss returns one value per pair: reduce it to the mean over the batch."
        props.append(_prop("mean over the batch", 1.0, score, msg))
    return props
