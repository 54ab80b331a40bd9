"""Checks of the gradient-accumulation code part (000 §1.5, Proposition 1.10, Exercise 6).

Direction (every example counted once), scale (means divided by k; a sum over examples
multiplies the gradient by the examples per micro-step times k) and schedule (one forward
and one backward per micro-batch) are separate, as in Exercise 6: a summed loss costs only
the scale.
"""

import numpy as np

from autograder.checklib import Property, Result, check, close, error_text, plain, vector

BATCH = 24
STEPS = (2, 3, 8)  # B/k = 12, 8, 3: never equal to k, so every wrong factor is told apart
D_IN, D_HIDDEN, D_OUT = 5, 8, 3
MAX_LOG = 200


def data(seed: int) -> dict:
    """The MLP's weights and one batch of BATCH examples."""
    rng = np.random.default_rng([seed, 60])
    return {
        "w1": rng.normal(0, 1 / np.sqrt(D_IN), (D_HIDDEN, D_IN)),
        "b1": rng.normal(0, 0.1, D_HIDDEN),
        "w2": rng.normal(0, 1 / np.sqrt(D_HIDDEN), (D_OUT, D_HIDDEN)),
        "b2": rng.normal(0, 0.1, D_OUT),
        "x": rng.standard_normal((BATCH, D_IN)),
        "y": rng.standard_normal((BATCH, D_OUT)),
    }


def _run(student, d: dict, k: int) -> dict:
    """One call, lent the MLP Linear(5, 8) + tanh + Linear(8, 3) and the per-example loss,
    torch modules whose calls and backward passes run and are logged here: .grad, the log."""
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name in ("w1", "b1", "w2", "b2"):
                setattr(self, name, torch.nn.Parameter(torch.from_numpy(d[name].copy())))

        def forward(self, inputs):
            return torch.tanh(inputs @ self.w1.T + self.b1) @ self.w2.T + self.b2

    class SquaredError(torch.nn.Module):  # each example's squared error, summed over outputs
        def forward(self, pred, target):
            return ((pred - target) ** 2).sum(dim=1)

    mlp, loss_fn = MLP(), SquaredError()
    model = student.hold(mlp)  # the student's process keeps its copy: P reads its .grad
    x, y = (torch.tensor(d[n], dtype=torch.float64) for n in ("x", "y"))
    error = student.call(model, loss_fn, x, y, k).error
    try:
        grads = [
            plain(g.detach().reshape(-1).tolist()) if isinstance(g, torch.Tensor) else None
            for _, _, _, g in model.parameters()
        ]
    except BaseException as err:  # noqa: BLE001
        error, grads = error or error_text(err), None
    log = [
        ["forward" if e.kind == "forward" else "backward", int(e.shapes[0][0]) if e.shapes else 0]
        for e in student.events
        if e.module is mlp
    ]
    return {"k": k, "error": error, "grads": grads, "log": log[:MAX_LOG]}


def probe(student, seed: int, params: dict) -> dict:
    d = data(seed)
    return {"runs": [_run(student, d, k) for k in STEPS]}


def full_batch_gradient(d: dict) -> np.ndarray:
    """Gradient of mean_i Σ_j (pred − y)² over the whole batch, flattened as the parameters."""
    h = np.tanh(d["x"] @ d["w1"].T + d["b1"])
    pred = h @ d["w2"].T + d["b2"]
    g_pred = 2 * (pred - d["y"]) / len(d["x"])
    g_pre = (g_pred @ d["w2"]) * (1 - h**2)
    parts = [g_pre.T @ d["x"], g_pre.sum(axis=0), g_pred.T @ h, g_pred.sum(axis=0)]
    return np.concatenate([p.reshape(-1) for p in parts])


def _factor(run: Result, ref: np.ndarray) -> tuple[float | None, str]:
    """c with the run's gradient c·ref (c > 0), or None and why not."""
    if not run.data or run.get("error"):
        return None, str(run.get("error") or "no result")
    grads, sizes = run.get("grads"), [D_HIDDEN * D_IN, D_HIDDEN, D_OUT * D_HIDDEN, D_OUT]
    if not isinstance(grads, list) or len(grads) != 4 or any(g is None for g in grads):
        return None, "some parameters have no gradient (.grad is None): call backward()"
    parts = [vector(g, n) for g, n in zip(grads, sizes, strict=True)]
    if any(p is None for p in parts):
        return None, "the gradients do not have the parameters' shapes"
    g = np.concatenate(parts)
    if not np.all(np.isfinite(g)):
        return None, "the gradient is not finite"
    c = float(g @ ref / (ref @ ref))
    if c > 0 and close(g, c * ref, rtol=1e-7, atol=1e-12):
        return c, ""
    return None, "the gradient is not along the full-batch gradient"


def _schedule(run: Result, k: int) -> str:
    """'' if the log is k × (forward of B/k, its backward), else what is wrong."""
    log, b = run.get("log"), BATCH // k
    pairs = isinstance(log, list) and all(isinstance(e, list) and len(e) == 2 for e in log)
    if not pairs or not all(e[0] in ("forward", "backward") and type(e[1]) is int for e in log):
        return "no log of the model's calls"
    forwards = [n for p, n in log if p == "forward"]
    if log == [["forward", b], ["backward", b]] * k:
        return ""
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
    known = {
        b * k: f"the gradient is {b * k} times too large, the examples per micro-batch times k: "
        "the micro-step losses are summed over their examples, not averaged (Exercise 6(b))",
        b: "the gradient is multiplied by the examples per micro-batch, B/k: each micro-step "
        "loss is a sum over its examples; take their mean (Exercise 6(b))",
        k: "the gradient is k times too large: divide each micro-step's mean loss by k "
        "(Exercise 6(a))",
    }
    told = [why for factor, why in known.items() if abs(c - factor) < 1e-6 * factor]
    return told[0] if told else f"the gradient is {c:.3g} times the mean-loss gradient"


def _by_k(name: str, good: str, advice: str):
    """A property of its score and the wrong values of k, (k, why) each: ``good`` if none,
    else 'k = 2, 3: why; k = 8: other why', then ``advice``."""

    @check(name, 2.0)
    def graded(score: float, bad: list[tuple[int, str]]):
        groups: dict[str, list[int]] = {}
        for k, why in bad:
            groups.setdefault(why, []).append(k)
        told = "; ".join(f"k = {', '.join(map(str, ks))}: {why}" for why, ks in groups.items())
        return (score, told + advice) if bad else (1.0, good)

    return graded


direction = _by_k(
    "proportional to the full-batch gradient",
    f"For k = {', '.join(map(str, STEPS))} the accumulated gradient points along the "
    "full-batch gradient: every example is counted once.",
    ". Run every micro-batch once and let backward() add its gradient to .grad: never "
    "zero .grad between micro-steps, never skip one (§1.5).",
)
scale = _by_k(
    "equals the mean-loss gradient",
    "The accumulated gradient equals the gradient of the batch's mean loss.",
    ". By Proposition 1.10 the mean over B examples is the average over the k "
    "micro-batches of their means: each micro-step loss is a mean divided by k.",
)
schedule = _by_k(
    "one forward and one backward per micro-batch",
    "The model runs k forward passes on micro-batches of B/k examples, each followed "
    "by its own backward pass.",
    ".",
)
CANNOT_TELL = "Cannot tell: the gradient never points along the full-batch gradient."


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    ref, runs = full_batch_gradient(data(seed)), Result(result).parts("runs", len(STEPS))
    found = [(k, *_factor(run, ref)) for k, run in zip(STEPS, runs, strict=True)]
    along = [(k, c) for k, c, _ in found if c is not None]
    wrong = [(k, _scale_note(k, c)) for k, c in along if abs(c - 1) >= 1e-6]
    late = [(k, why) for k, run in zip(STEPS, runs, strict=True) if (why := _schedule(run, k))]
    return [
        direction(len(along) / len(STEPS), [(k, why) for k, c, why in found if c is None]),
        scale((len(along) - len(wrong)) / len(along), wrong)
        if along
        else Property(scale.name, scale.weight, 0.0, CANNOT_TELL),
        schedule(1 - len(late) / len(STEPS), late),
    ]
