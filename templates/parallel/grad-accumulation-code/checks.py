"""Checks of the gradient-accumulation code part (000 §1.5, Proposition 1.10, Exercise 6).

``probe`` runs in the probe process, beside the student's: it builds a float64 MLP
Linear(5, 8) + tanh + Linear(8, 3) and the per-example loss from the seed and lends them
to the student's ``accumulate_gradients(model, loss_fn, x, y, k)``, for three values of k
on the same batch: every forward call of the model (with its batch size) and every
backward pass through it run, and are logged, here.  It returns the gradients left in the
student's .grad and that log.  ``grade`` runs in the trusted
process: it redraws the model and the batch and computes the full-batch gradient of the
mean squared error in NumPy.

The properties are separated on purpose, as in Exercise 6: the direction (every example
counted once), the scale (means divided by k; a sum over examples multiplies the gradient
by the examples per micro-step times k) and the schedule (one forward and one backward
per micro-batch), so that a summed loss costs only the scale.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.checklib import Property, Result, check, close, error_text, plain, vector

ISOLATED = True  # probe() runs in the probe process; accumulate_gradients, in the student's
BATCH = 24
STEPS = (2, 3, 8)  # B/k = 12, 8, 3: never equal to k, so every wrong factor is told apart
D_IN, D_HIDDEN, D_OUT = 5, 8, 3
MAX_LOG = 200

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def data(seed: int) -> dict:
    """The MLP's weights and one batch of BATCH examples."""
    rng = np.random.default_rng([seed, 60])
    return {
        "w1": rng.normal(0, 1 / math.sqrt(D_IN), (D_HIDDEN, D_IN)),
        "b1": rng.normal(0, 0.1, D_HIDDEN),
        "w2": rng.normal(0, 1 / math.sqrt(D_HIDDEN), (D_OUT, D_HIDDEN)),
        "b2": rng.normal(0, 0.1, D_OUT),
        "x": rng.standard_normal((BATCH, D_IN)),
        "y": rng.standard_normal((BATCH, D_OUT)),
    }


def _modules(d: dict):
    """The MLP Linear(5, 8) + tanh + Linear(8, 3) and the per-example loss: torch modules of
    this process, lent to the student's code (their calls and backward passes run here)."""
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name in ("w1", "b1", "w2", "b2"):
                setattr(self, name, torch.nn.Parameter(torch.from_numpy(d[name].copy())))

        def forward(self, inputs):
            return torch.tanh(inputs @ self.w1.T + self.b1) @ self.w2.T + self.b2

    class SquaredError(torch.nn.Module):
        """The loss of each example: the squared error summed over the outputs."""

        def forward(self, pred, target):
            return ((pred - target) ** 2).sum(dim=1)

    return MLP(), SquaredError()


def _run(student, d: dict, k: int) -> dict:
    import torch

    mlp, loss_fn = _modules(d)
    model = student.hold(mlp)  # the student's process keeps its copy: P reads its .grad
    x, y = (torch.tensor(d[n], dtype=torch.float64) for n in ("x", "y"))
    rec: dict = {"k": k, "error": student.call(model, loss_fn, x, y, k).error}
    try:
        rec["grads"] = [
            plain(g.detach().reshape(-1).tolist()) if isinstance(g, torch.Tensor) else None
            for _, _, _, g in model.parameters()
        ]
    except BaseException as err:  # noqa: BLE001
        rec["error"], rec["grads"] = rec["error"] or error_text(err), None
    # the model's calls and backward passes, as this process served them
    log = [
        ["forward" if e.kind == "forward" else "backward", int(e.shapes[0][0]) if e.shapes else 0]
        for e in student.events
        if e.module is mlp
    ]
    rec["log"] = log[:MAX_LOG]
    return rec


def probe(student, seed: int, params: dict) -> dict:
    """Call ``accumulate_gradients`` for each k on the seed's batch; return grads and logs."""
    d = data(seed)
    return {"runs": [_run(student, d, k) for k in STEPS]}


# --- grade (trusted) ---------------------------------------------------------------------


def full_batch_gradient(d: dict) -> np.ndarray:
    """Gradient of mean_i Σ_j (pred − y)² over the whole batch, flattened as the parameters."""
    h = np.tanh(d["x"] @ d["w1"].T + d["b1"])
    pred = h @ d["w2"].T + d["b2"]
    g_pred = 2 * (pred - d["y"]) / len(d["x"])
    g_pre = (g_pred @ d["w2"]) * (1 - h**2)
    parts = [g_pre.T @ d["x"], g_pre.sum(axis=0), g_pred.T @ h, g_pred.sum(axis=0)]
    return np.concatenate([p.reshape(-1) for p in parts])


def _gradient(run: Result) -> tuple[np.ndarray | None, str]:
    if not run.data:
        return None, "no result"
    if run.get("error"):
        return None, str(run.get("error"))
    grads, sizes = run.get("grads"), [D_HIDDEN * D_IN, D_HIDDEN, D_OUT * D_HIDDEN, D_OUT]
    if not isinstance(grads, list) or len(grads) != 4 or any(g is None for g in grads):
        return None, "some parameters have no gradient (.grad is None): call backward()"
    parts = [vector(g, n) for g, n in zip(grads, sizes, strict=True)]
    if any(p is None for p in parts):
        return None, "the gradients do not have the parameters' shapes"
    g = np.concatenate(parts)
    if not np.all(np.isfinite(g)):
        return None, "the gradient is not finite"
    return g, ""


def _factor(g: np.ndarray, ref: np.ndarray) -> float | None:
    """c with g = c·ref (c > 0), or None when g is not a positive multiple of ref."""
    c = float(g @ ref / (ref @ ref))
    return c if c > 0 and close(g, c * ref, rtol=1e-7, atol=1e-12) else None


def _schedule(run: Result, k: int) -> str:
    """'' if the log is k × (forward of B/k, its backward), else what is wrong."""
    log = run.get("log")
    if not isinstance(log, list) or not all(
        isinstance(e, list)
        and len(e) == 2
        and e[0] in ("forward", "backward")
        and type(e[1]) is int
        for e in log
    ):
        return "no log of the model's calls"
    b = BATCH // k
    if log == [["forward", b], ["backward", b]] * k:
        return ""
    forwards = [n for p, n in log if p == "forward"]
    if BATCH in forwards:
        return "the model runs on the whole batch at once: that is no accumulation"
    if forwards != [b] * k:
        return f"the model runs on micro-batches of {forwards[:10]}, not k of B/k examples"
    if log == [["forward", b]] * k + [["backward", b]] * k:
        return (
            "the k forward passes all run before one backward pass: the graphs, and the "
            "activations, of the whole batch are kept alive, which accumulation is meant to "
            "avoid; call backward() on each micro-batch's loss"
        )
    return "each forward pass must be followed by the backward pass of its own loss"


def _scale_note(k: int, c: float) -> str:
    """What a gradient c times the mean-loss gradient says about the micro-step losses."""
    b = BATCH // k
    if abs(c - b * k) < 1e-6 * b * k:
        return (
            f"the gradient is {b * k} times too large, the examples per micro-batch times k: "
            "the micro-step losses are summed over their examples, not averaged (Exercise 6(b))"
        )
    if abs(c - b) < 1e-6 * b:
        return (
            "the gradient is multiplied by the examples per micro-batch, B/k: each micro-step "
            "loss is a sum over its examples; take their mean (Exercise 6(b))"
        )
    if abs(c - k) < 1e-6 * k:
        return (
            "the gradient is k times too large: divide each micro-step's mean loss by k "
            "(Exercise 6(a))"
        )
    return f"the gradient is {c:.3g} times the mean-loss gradient"


def _grouped(notes: list[tuple[int, str]]) -> str:
    """'k = 2, 3: why; k = 8: other why', the values of k that share a diagnosis together."""
    groups: dict[str, list[int]] = {}
    for k, why in notes:
        groups.setdefault(why, []).append(k)
    return "; ".join(f"k = {', '.join(map(str, ks))}: {why}" for why, ks in groups.items())


@check("proportional to the full-batch gradient", 2.0)
def direction(found: list[tuple[int, float | None, str]]):
    if all(c is not None for _, c, _ in found):
        return 1.0, (
            f"For k = {', '.join(map(str, STEPS))} the accumulated gradient points along the "
            "full-batch gradient: every example is counted once."
        )
    return sum(c is not None for _, c, _ in found) / len(found), _grouped(
        [(k, why) for k, c, why in found if c is None]
    ) + (
        ". Run every micro-batch once and let backward() add its gradient to .grad: never "
        "zero .grad between micro-steps, never skip one (§1.5)."
    )


@check("equals the mean-loss gradient", 2.0)
def scale(found: list[tuple[int, float | None, str]]):
    judged = [(k, c) for k, c, _ in found if c is not None]
    if not judged:
        return 0, "Cannot tell: the gradient never points along the full-batch gradient."
    good = [abs(c - 1) < 1e-6 for _, c in judged]
    if all(good):
        return 1.0, "The accumulated gradient equals the gradient of the batch's mean loss."
    bad = [(k, _scale_note(k, c)) for (k, c), fine in zip(judged, good, strict=True) if not fine]
    return sum(good) / len(judged), _grouped(bad) + (
        ". By Proposition 1.10 the mean over B examples is the average over the k "
        "micro-batches of their means: each micro-step loss is a mean divided by k."
    )


@check("one forward and one backward per micro-batch", 2.0)
def schedule(runs: list[Result]):
    bad = [(k, why) for k, run in zip(STEPS, runs, strict=True) if (why := _schedule(run, k))]
    if not bad:
        return 1.0, (
            "The model runs k forward passes on micro-batches of B/k examples, each followed "
            "by its own backward pass."
        )
    return 1 - len(bad) / len(STEPS), _grouped(bad) + "."


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score direction, scale and schedule of the accumulated gradients, for each k."""
    ref, runs = full_batch_gradient(data(seed)), Result(result).parts("runs", len(STEPS))
    found = []  # (k, c with the gradient c times the full-batch one, or None; why not)
    for k, run in zip(STEPS, runs, strict=True):
        g, why = _gradient(run)
        c = None if g is None else _factor(g, ref)
        found.append((k, c, why or "the gradient is not along the full-batch gradient"))
    return [direction(found), scale(found), schedule(runs)]
