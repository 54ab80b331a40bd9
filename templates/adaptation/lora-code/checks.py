"""Checks of the LoRA layer code part (000 §5.2; 001 ch. 0, LoRA in five lines).

``probe`` runs in the probe process, beside the student's: it lends float32 ``nn.Linear``
layers drawn from the seed to the student's ``LoRALinear`` (their calls run here), keeps
the student's layers in the student's process, and records the update B A the layer holds
at construction (read from it) and its output there, the base's weight after one
optimizer step, the number of trainable parameters, the outputs with factors A and B set
by the probe (at α = r and at another α), and a training of A and B alone, with Adam run
here, on a rank-r change of the weight (and with a rank r − 1 adapter).
``grade`` runs in the trusted process: it redraws the layers and inputs from the seed and
compares with W₀x + b + (α/r)BAx computed in float64.

Outputs are judged against the layer's own A and B, never alone (issue 36): the cotangent
of the fit's loss, 2(pred − y)/n, reveals the target, and a layer could return it, or
remember the fit's inputs, or train a matrix of its own, or hand Adam gradients that are
not its output's.  So every output during the training must be base(x) + f·B A x with the
A and B the probe set, for one factor f, and the gradients of A and B those of that
output; the trained A and B are read back from the layer, the loss is computed from them,
and the layer must match them on inputs drawn after the training.

The properties are separated on purpose: the forward check accepts any factor in front
of BAx, so that a forgotten α/r costs only the scaling property; the training check uses
α = r, where every correct scaling is 1, and accepts any factor f all the same, and the
layout x A B (A of shape d_in × r), which only the forward check refuses.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.checklib import (
    Property,
    Result,
    check,
    close,
    error_text,
    matrix,
    number,
    plain,
    shown,
    vector,
)

ISOLATED = True  # probe() runs in the probe process; LoRALinear, in the student's
RTOL, ATOL = 1e-5, 1e-5  # float32 outputs of order 1
FIT_STEPS, UNDER_STEPS, FIT_LR = 150, 60, 0.03
FIT_MAX = 1e-2  # relative loss a rank-r adapter must reach on a rank-r change
UNDER_MIN = 0.2  # a rank r − 1 adapter cannot go below 1/r ≥ 1/3 (equal singular values)
FRESH = 8  # inputs drawn after the training
ZERO = 1e-6  # the largest entry of B A at construction: B = 0 makes it 0
# While training, the output must be base(x) + f·B A x with the probe's A and B, for one
# factor f (any f: the scaling is property 5's), to OUT_TOL·(1 + max|output|), and the
# gradients of A and B those of that output to GRAD_TOL of the largest: a float32 layer
# is off by about 1e-6 of each, a layer that answers anything else by 1e-2 or more.
OUT_TOL, GRAD_TOL = 1e-4, 1e-3

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def _layer(rng: np.random.Generator, d_in: int, d_out: int) -> dict:
    return {
        "weight": (rng.normal(size=(d_out, d_in)) / math.sqrt(d_in)).astype(np.float32),
        "bias": rng.normal(0.0, 0.5, size=d_out).astype(np.float32),
    }


def cases(seed: int) -> dict:
    """Shapes, rank, α, layers, inputs and factors of one grading seed."""
    rng = np.random.default_rng([seed, 30])
    d_in = int(rng.choice([12, 16, 20, 24]))
    d_out = int(rng.choice([8, 10, 14]))  # d_out ≠ d_in: a transposed factor shows
    r = int(rng.integers(2, 4))
    alpha = float(rng.choice([2.0, 4.0, 8.0, 16.0]) * r)  # α ≠ r: α/r in {2, 4, 8, 16}
    base = _layer(rng, d_in, d_out)
    x = rng.normal(size=(5, d_in)).astype(np.float32)
    factors = {
        "A": (rng.normal(size=(r, d_in)) / math.sqrt(d_in)).astype(np.float32),
        "B": rng.normal(0.0, 0.5, size=(d_out, r)).astype(np.float32),
    }
    # training: whitened inputs and a change of rank r with r equal singular values, so a
    # rank r − 1 adapter keeps at least 1/r of the loss
    n = 32
    xs = np.linalg.qr(rng.normal(size=(n, d_in)))[0] * math.sqrt(n)
    u = np.linalg.qr(rng.normal(size=(d_out, r)))[0]
    v = np.linalg.qr(rng.normal(size=(d_in, r)))[0]
    fit_base = _layer(rng, d_in, d_out)
    shift = u @ v.T
    target = xs @ (fit_base["weight"].astype(np.float64) + shift).T + fit_base["bias"]
    return {
        "d_in": d_in,
        "d_out": d_out,
        "r": r,
        "alpha": alpha,
        "base": base,
        "x": x,
        "factors": factors,
        "fit_base": fit_base,
        "fit_x": xs.astype(np.float32),
        "fit_y": target.astype(np.float32),
        "fit_scale": float(np.mean((xs @ shift.T) ** 2)),
        "torch_seed": int(rng.integers(2**31)),
        # inputs the layer first sees after its training (issue 36): its own A and B must
        # explain its outputs there, not what it remembers of the fit
        "fresh_x": np.random.default_rng([seed, 31]).normal(size=(FRESH, d_in)).astype(np.float32),
    }


def layout(a_shape, b_shape, c: dict, r: int) -> str | None:
    """How the factors make the update: "BA" for A (r × d_in) and B (d_out × r), as the
    contract says; "AB" for A (d_in × r) and B (r × d_out), x A B, a valid layout that
    the forward check refuses and the training check accepts; None otherwise."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if a_shape == (r, c["d_in"]) and b_shape == (c["d_out"], r):
        return "BA"
    if a_shape == (c["d_in"], r) and b_shape == (r, c["d_out"]):
        return "AB"
    return None


def delta(a, b, how: str):
    """The change of the weight (d_out × d_in) that the factors make, NumPy or torch."""
    return b @ a if how == "BA" else (a @ b).T


def _linear(layer: dict):
    """An nn.Linear of this process, lent to the student's code: its calls run here."""
    import torch
    from torch import nn

    d_out, d_in = layer["weight"].shape
    base = nn.Linear(d_in, d_out)
    with torch.no_grad():
        base.weight.copy_(torch.from_numpy(layer["weight"]))
        base.bias.copy_(torch.from_numpy(layer["bias"]))
    return base


def _output(module, x: np.ndarray) -> list | str:
    """The kept module's output on x as a flat list, or why there is none."""
    import torch

    try:
        out = module.run(torch.from_numpy(x))
        out.release()
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return error_text(err)
    y = out.value
    if not isinstance(y, torch.Tensor):
        return f"the layer returns {out.type}, not a tensor"
    if y.dim() != 2 or y.shape[0] != x.shape[0]:
        return f"the output has shape {tuple(y.shape)}, not (batch, d_out)"
    return plain(y.to(torch.float64).reshape(-1).tolist())


def _set_factors(module, factors: dict) -> str | None:
    """Copy the probe's A and B into the student's factors; why not, if that fails."""
    import torch

    try:
        for name in ("A", "B"):
            p = module.read(name)
            value = torch.from_numpy(factors[name])
            if not isinstance(p, torch.Tensor):
                return f"{name} is not a tensor"
            if tuple(p.shape) != tuple(value.shape):
                return f"{name} has shape {tuple(p.shape)}, not {tuple(value.shape)}"
            module.assign({name: value.to(p.dtype)})
    except BaseException as err:  # noqa: BLE001
        return error_text(err)
    return None


def _layer_of(student, base, r: int, alpha: float):
    """``LoRALinear(base, r, alpha)``, kept in the student's process."""
    return student.run(student.hold(base), r, alpha)


def _forward(student, c: dict, alpha: float) -> dict:
    try:
        module = _layer_of(student, _linear(c["base"]), c["r"], alpha)
    except BaseException as err:  # noqa: BLE001
        return {"error": error_text(err)}
    y = _set_factors(module, c["factors"]) or _output(module, c["x"])
    return {"error": y} if isinstance(y, str) else {"error": None, "y": y}


def _update_at_start(module, c: dict) -> float | str:
    """The largest entry of the update B A that the layer holds at construction, read from
    it (issue 36: its first output alone can be the base's while B A is not 0); or why
    there is none."""
    import torch

    try:
        a, b = (module.read(name) for name in ("A", "B"))
    except BaseException as err:  # noqa: BLE001
        return error_text(err)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return "A or B is not a tensor"
    how = layout(a.shape, b.shape, c, c["r"])
    if how is None:
        return (
            f"A has shape {tuple(a.shape)} and B {tuple(b.shape)}, not "
            f"({c['r']}, {c['d_in']}) and ({c['d_out']}, {c['r']})"
        )
    return plain([float(delta(a.detach().double(), b.detach().double(), how).abs().max())])[0]


def _start(student, c: dict) -> dict:
    """Output at construction, then one SGD step on every trainable parameter.  What
    happens to the pretrained layer is seen here: the gradients the student's process asks
    of it, and the weights it sends with each call."""
    import torch

    linear = _linear(c["base"])
    w0, b0 = linear.weight.detach().clone(), linear.bias.detach().clone()
    try:
        module = student.run(student.hold(linear), c["r"], c["alpha"])
    except BaseException as err:  # noqa: BLE001
        return {"error": error_text(err)}
    rec: dict = {"error": None, "update0": _update_at_start(module, c)}
    y = _output(module, c["x"])
    if isinstance(y, str):
        return {"error": y}
    rec["y"] = y
    try:
        out = module.run(torch.from_numpy(c["x"]))
        if not isinstance(out.value, torch.Tensor):
            raise TypeError(f"the layer returns {out.type}")
        out.backward(2 * out.value)  # the gradient of out.square().sum()
        params = module.parameters()
        step = {  # one SGD step on every parameter with a gradient
            name: value - 0.1 * g for name, value, _, g in params if isinstance(g, torch.Tensor)
        }
        module.assign(step)
        _output(module, c["x"])  # one more call: the base's weights as they are now
        calls = [e for e in student.events if e.module is linear]
        if not any(e.kind == "forward" for e in calls):
            raise RuntimeError("the layer never calls its base: use self.base(x)")
        grads = list(student.grads(linear).values())
        rec["base_grad"] = float(max((g.abs().max().item() for g in grads), default=0.0))
        now = [e.params for e in calls if e.kind == "forward"][-1]
        moved = max((now["weight"] - w0).abs().max().item(), (now["bias"] - b0).abs().max().item())
        rec["base_moved"] = plain([moved])[0]
        # at least the factors and what this process saw the base trained with
        trained = {n for e in calls if e.kind == "vjp" for n in e.params}
        seen = sum(p.numel() for n, p in linear.named_parameters() if n in trained)
        reported = sum(p.numel() for _, p, grad, _ in params if grad)
        factors = [module.read(name) for name in ("A", "B")]
        own = sum(f.numel() for f in factors if isinstance(f, torch.Tensor) and f.requires_grad)
        rec["trainable"] = int(max(reported, own + seen))
    except BaseException as err:  # noqa: BLE001
        rec["step_error"] = rec["trainable_error"] = error_text(err)
    return rec


def _train(student, c: dict, rank: int, steps: int) -> dict:
    """Adam on A and B only, from the student's own initialisation.

    Adam runs here (β = 0.9, 0.999): the student's process computes the layer's output and
    the gradients of A and B; this process the loss, the steps and the new A and B.  What
    comes back is judged against the probe's own A and B (issue 36): the cotangent of the
    loss reveals the target, so an output, or a gradient, could be the target's and not
    the layer's.  Each output must be base(x) + f·ΔW x, ΔW the update of the A and B set,
    and the gradients those of that output; after the training A and B are read back from
    the layer, the loss is computed from them (in ``grade``), and the layer is run on
    inputs it never saw in the fit.
    """
    import torch

    student.seed(c["torch_seed"] + rank)  # the student's random A: the same every time
    try:
        module = _layer_of(student, _linear(c["fit_base"]), rank, float(rank))  # α = r: 1
        factors = {name: module.read(name).detach() for name in ("A", "B")}
        how = layout(factors["A"].shape, factors["B"].shape, c, rank)
        if how is None:
            raise ValueError(
                f"A has shape {tuple(factors['A'].shape)} and B {tuple(factors['B'].shape)}, "
                f"not ({rank}, {c['d_in']}) and ({c['d_out']}, {rank})"
            )
        x, y = torch.from_numpy(c["fit_x"]), torch.from_numpy(c["fit_y"])
        x64, base64 = x.double(), torch.from_numpy(_base_of(c["fit_base"], c["fit_x"]))
        seen: list[tuple] = []  # (output − base(x), grad A, grad B) and what they must be
        moments = {n: (torch.zeros_like(p), torch.zeros_like(p)) for n, p in factors.items()}
        for t in range(1, steps + 1):
            out = module.run(x)
            pred = out.value
            if not isinstance(pred, torch.Tensor) or pred.shape != y.shape:
                raise TypeError(f"the layer returns {out.type} of the wrong shape")
            cotangent = 2 * (pred - y) / y.numel()  # the gradient of the mean squared error
            out.backward(cotangent)
            grads = {n: g for n, _, _, g in module.parameters(clear=True)}
            for name, p in factors.items():
                g = grads.get(name)
                g = g if isinstance(g, torch.Tensor) and g.shape == p.shape else None
                grads[name] = torch.zeros_like(p) if g is None else g
            seen.append(_step_seen(x64, base64, pred, cotangent, factors, grads, how))
            for name, p in factors.items():
                g = grads[name]
                m, v = moments[name]
                m.mul_(0.9).add_(g, alpha=0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                p -= FIT_LR * (m / (1 - 0.9**t)) / ((v / (1 - 0.999**t)).sqrt() + 1e-8)
            module.assign(factors)
        held = {name: module.read(name) for name in ("A", "B")}
        fresh = _output(module, c["fresh_x"])
    except BaseException as err:  # noqa: BLE001
        return {"error": error_text(err)}
    if isinstance(fresh, str):
        return {"error": f"on inputs after the training: {fresh}"}
    if not all(isinstance(v, torch.Tensor) for v in held.values()):
        return {"error": "A or B, read after the training, is not a tensor"}
    same = all(
        held[n].shape == p.shape and torch.equal(held[n].detach().to(p.dtype), p)
        for n, p in factors.items()
    )
    f, out_err, grad_err = _consistency(seen)
    return {
        "error": None,
        "layout": how,
        "factor": f,
        "out_err": out_err,
        "grad_err": grad_err,
        "held_as_set": same,
        "A": [plain(row) for row in held["A"].detach().double().tolist()],
        "B": [plain(row) for row in held["B"].detach().double().tolist()],
        "fresh_y": fresh,
    }


def _base_of(layer: dict, x: np.ndarray) -> np.ndarray:
    w, b = layer["weight"].astype(np.float64), layer["bias"].astype(np.float64)
    return x.astype(np.float64) @ w.T + b


def _step_seen(x64, base64, pred, cotangent, factors: dict, grads: dict, how: str) -> tuple:
    """One step's output and gradients, and what they must be for the A and B set: the
    update x ΔWᵀ and its gradients, by autograd here, in float64."""
    a = factors["A"].detach().double().requires_grad_()
    b = factors["B"].detach().double().requires_grad_()
    update = x64 @ delta(a, b, how).T
    update.backward(cotangent.detach().double())
    got = (pred.detach().double() - base64, grads["A"].double(), grads["B"].double())
    return got, (update.detach(), a.grad, b.grad), float(pred.detach().abs().max())


def _consistency(seen: list[tuple]) -> tuple:
    """The factor f with output − base(x) = f·x ΔWᵀ (least squares over every step's
    outputs; over the gradients, f times the update's, when ΔW was 0 throughout; 1 when
    both were: A = B = 0), and the largest relative misfits of outputs and gradients at
    that f; "inf" for a misfit that is not a number."""
    f = 1.0
    for part in ((0,), (1, 2)):  # the outputs, else the gradients
        num = sum(float((got[i] * want[i]).sum()) for got, want, _ in seen for i in part)
        den = sum(float((want[i] * want[i]).sum()) for _, want, _ in seen for i in part)
        if den > 0:
            f = num / den if math.isfinite(num) else 1.0
            break
    out_err = grad_err = 0.0
    for (out, ga, gb), (update, wa, wb), size in seen:
        miss = float((out - f * update).abs().max()) / (1 + size)
        out_err = max(out_err, miss if math.isfinite(miss) else math.inf)
        scale = max(float((f * wa).abs().max()), float((f * wb).abs().max()))
        miss = max(float((ga - f * wa).abs().max()), float((gb - f * wb).abs().max()))
        miss = miss / scale if scale > 0 else (0.0 if miss == 0 else math.inf)
        grad_err = max(grad_err, miss if math.isfinite(miss) else math.inf)
    return f, *plain([out_err, grad_err])


def probe(student, seed: int, params: dict) -> dict:
    """Wrap the seed's layers with ``LoRALinear``; return outputs and losses (plain data)."""
    c = cases(seed)
    student.seed(c["torch_seed"])  # the student's random A: the same grade every time
    return {
        "start": _start(student, c),
        "forward": [_forward(student, c, float(c["r"])), _forward(student, c, c["alpha"])],
        "fit": _train(student, c, c["r"], FIT_STEPS),
        "under": _train(student, c, c["r"] - 1, UNDER_STEPS),
    }


# --- grade (trusted) ---------------------------------------------------------------------


def _base_out(c: dict) -> np.ndarray:
    w, b = c["base"]["weight"].astype(np.float64), c["base"]["bias"].astype(np.float64)
    return c["x"].astype(np.float64) @ w.T + b


def _update(c: dict) -> np.ndarray:
    a, b = c["factors"]["A"].astype(np.float64), c["factors"]["B"].astype(np.float64)
    return c["x"].astype(np.float64) @ a.T @ b.T


def _y(rec: Result, shape: tuple) -> np.ndarray | None:
    v = vector(rec.get("y"))
    return v.reshape(shape) if v is not None and v.size == shape[0] * shape[1] else None


def _why(rec: Result, what: str) -> str:
    if not rec.data:
        return f"{what}: no result."
    if isinstance(rec.get("error"), str):
        return f"{what}: {rec.get('error')}."
    return f"{what}: the output is not a (batch, d_out) tensor."


def _factor(rec: Result, c: dict) -> tuple[float | None, str]:
    """The factor f with output = base(x) + f·BAx, or None and why not."""
    y = _y(rec, (c["x"].shape[0], c["d_out"]))
    if y is None:
        return None, _why(rec, "with A and B set")
    if not np.all(np.isfinite(y)):
        return None, "with A and B set, the output is not finite."
    diff, upd = (y - _base_out(c)).ravel(), _update(c).ravel()
    f = float(diff @ upd / (upd @ upd))
    if np.allclose(diff, f * upd, rtol=1e-4, atol=ATOL * (1 + np.abs(upd).max())):
        return f, ""
    err = np.abs(diff - f * upd).max() / np.abs(upd).max()
    return None, (
        f"with A and B set, output − base(x) is not a multiple of B A x (off by {err:.2g} "
        "relative): the layer must return base(x) + (α/r)·B A x, A of shape r × d_in, "
        "B of shape d_out × r."
    )


def _trained(rec: Result, c: dict, rank: int) -> tuple[float | None, str]:
    """The relative loss on the fit's data of the A and B read from the layer after its
    training (with the layer's factor f), or None and why not: the outputs or gradients
    during the training were not those of the A and B set, A and B read back are not the
    values set, or on the inputs drawn after the training the output is not base(x) +
    f·ΔW x with them."""
    if not rec.data:
        return None, "no result"
    if isinstance(rec.get("error"), str):
        return None, rec.get("error")
    f, out_err, grad_err = (number(rec.get(k)) for k in ("factor", "out_err", "grad_err"))
    if f is None or out_err is None or grad_err is None or not math.isfinite(f):
        return None, "no usable record of the training"
    if not out_err <= OUT_TOL:
        return None, (
            "during the training the output is not base(x) + f·B A x with the A and B the "
            f"training set (off by {out_err:.2g} relative): an output that is not the layer's"
        )
    if not grad_err <= GRAD_TOL:
        return None, (
            "the gradients of A and B are not those of the layer's output (off by "
            f"{grad_err:.2g} relative)"
        )
    if rec.get("held_as_set") is not True:
        return None, "A and B read from the layer after the training are not the values set"
    a, b = matrix(rec.get("A")), matrix(rec.get("B"))
    how = layout(a.shape, b.shape, c, rank) if a is not None and b is not None else None
    if how is None:
        return None, "A and B read from the layer after the training have the wrong shapes"
    change = f * delta(a, b, how)
    if not np.all(np.isfinite(change)):
        return None, "A and B after the training are not finite"
    fresh = c["fresh_x"].astype(np.float64)
    expected = _base_of(c["fit_base"], c["fresh_x"]) + fresh @ change.T
    y = vector(rec.get("fresh_y"))
    if y is None or y.size != expected.size:
        return None, "on inputs drawn after the training, no output of the right shape"
    if not np.allclose(
        y.reshape(expected.shape), expected, rtol=0, atol=OUT_TOL * (1 + np.abs(expected).max())
    ):
        return None, (
            "on inputs drawn after the training, the output is not base(x) + f·B A x with "
            "the layer's own A and B"
        )
    pred = _base_of(c["fit_base"], c["fit_x"]) + c["fit_x"].astype(np.float64) @ change.T
    return float(np.mean((pred - c["fit_y"]) ** 2) / c["fit_scale"]), ""


@check("starts at the pretrained layer (B = 0)", 2.0)
def starts(start: Result, c: dict):
    """The output at construction equals the frozen layer's, and B A is read as 0."""
    y0, update0 = _y(start, (c["x"].shape[0], c["d_out"])), start.get("update0")
    if y0 is None:
        return False, _why(start, "at construction")
    if isinstance(update0, str):
        return False, f"At construction A and B cannot be read: {update0}."
    if close(y0, _base_out(c), RTOL, ATOL) and isinstance(update0, float) and update0 <= ZERO:
        return True, "At construction the layer returns exactly the pretrained layer's output."
    zero = (
        "B must start at zero (A random), so that BA = 0 and training starts exactly from the "
        "pretrained model (§5.2)."
    )
    if isinstance(update0, float) and update0 > ZERO:
        return False, f"At construction the layer holds B A ≠ 0 (an entry of {update0:.2g}): {zero}"
    return False, f"At construction the output differs from base(x): {zero}"


@check("W₀ and b frozen", 1.0)
def frozen(start: Result):
    grad, moved = start.get("base_grad"), start.get("base_moved")
    if start.get("step_error") or not isinstance(grad, float) or not isinstance(moved, float):
        why = start.get("step_error") or start.get("error") or "no result"
        return False, f"A backward pass and an SGD step failed: {why}."
    if grad == 0 and moved == 0:
        return True, "No gradient reaches W₀ and b; an optimizer step leaves them unchanged."
    return False, (
        "The pretrained weight or bias receives a gradient and changes in an optimizer "
        "step: freeze them (requires_grad_(False)); LoRA trains only A and B (§5.2)."
    )


@check("r(d_in + d_out) trainable parameters", 1.0)
def trainable(start: Result, c: dict):
    r, n = c["r"], start.get("trainable")
    shapes = f"r = {r}, d_in = {c['d_in']}, d_out = {c['d_out']}"
    if type(n) is int and n == r * (c["d_in"] + c["d_out"]):
        return True, f"r(d_in + d_out) trainable parameters for {shapes}."
    got = f"{n} trainable parameters" if type(n) is int else "No count"
    why = start.get("trainable_error") or start.get("error")
    return False, (f"{why}. " if why else "") + (
        f"{got} for {shapes}: only A (r × d_in) and B (d_out × r) may require gradients; "
        "W₀ and b are frozen (§5.2)."
    )


@check("adds B A x to the frozen output", 2.0)
def adds(found: list[tuple[float | None, str]]):
    """With A and B set by the probe: base(x) + f·BAx for some factor f."""
    if all(f is not None for f, _ in found):
        return 1.0, "With A and B set, the output is base(x) plus a multiple of B A x."
    return sum(f is not None for f, _ in found) / 2, " ".join(w for f, w in found if f is None)


@check("scaled by α/r", 1.0)
def scaled(found: list[tuple[float | None, str]], c: dict):
    """The factor f is α/r, at α = r and at another α."""
    r, alphas, factors = c["r"], [float(c["r"]), c["alpha"]], [f for f, _ in found]
    pairs = list(zip(factors, alphas, strict=True))
    oks = [f is not None and math.isclose(f, a / r, rel_tol=1e-4) for f, a in pairs]
    if all(f is None for f in factors):
        return 0, "Cannot tell: the output is never base(x) plus a multiple of B A x."
    if all(oks):
        return 1.0, f"The update is scaled by α/r (α = {alphas[0]:g} and {alphas[1]:g}, r = {r})."
    seen = ", ".join(f"{f:.4g} at α = {a:g}" for f, a in pairs if f is not None)
    msg = f"B A x is multiplied by {seen} (r = {r}): scale it by α/r (Hu et al. 2022)."
    return sum(oks) / 2, msg


@check("training A and B fits a rank-r change", 2.0)
def fits(r: Result, c: dict):
    """Training A and B fits a rank-r change; a rank r − 1 adapter cannot."""
    rank = c["r"]
    fit_loss, fit_why = _trained(r.part("fit"), c, rank)
    under_loss, under_why = _trained(r.part("under"), c, rank - 1)
    fit_ok = fit_loss is not None and fit_loss <= FIT_MAX
    if not fit_ok and fit_why:
        return 0, (
            f"Training only A and B on a change of W₀ of rank r = {rank}: {fit_why}. The "
            "layer's output must be base(x) + (α/r)·B A x with its own A and B, and the "
            "gradients of A and B those of that output (§5.2)."
        )
    if not fit_ok:
        return 0, (
            f"Training only A and B on a change of W₀ of rank r = {rank}: the relative loss "
            f"of the trained A and B is still {shown(fit_loss, '.2g')} after {FIT_STEPS} "
            "Adam steps. Both factors must receive gradients: with B = 0, A must start "
            "random (if both are zero, neither ever moves) (§5.2)."
        )
    if under_loss is None:
        # the rank r − 1 run raised or was not the layer's: the fit counts, the bound unknown
        return 0.5, (
            f"Training a rank r − 1 = {rank - 1} adapter the same way failed: {under_why}. It "
            f"must train and stay above a relative loss of {UNDER_MIN:g}, which shows that "
            "your adapter has r degrees of freedom and not more (§5.2)."
        )
    if not under_loss >= UNDER_MIN:
        return 0.5, (
            f"A rank r − 1 = {rank - 1} adapter also fits the rank-{rank} change (relative "
            f"loss {under_loss:.2g}): your adapter has more than r degrees of freedom (§5.2)."
        )
    return 1, (
        f"Training A and B alone fits the rank-{rank} change (relative loss {fit_loss:.1e}); "
        f"a rank-{rank - 1} adapter cannot ({under_loss:.2f})."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score the probe's outputs against W₀x + b + (α/r)BAx recomputed from the seed."""
    r, c = Result(result), cases(seed)
    start, found = r.part("start"), [_factor(rec, c) for rec in r.parts("forward", 2)]
    return [
        starts(start, c),
        frozen(start),
        trainable(start, c),
        adds(found),
        scaled(found, c),
        fits(r, c),
    ]
