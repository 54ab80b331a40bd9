"""Checks of the LoRA layer code part (000 §5.2; 001 ch. 0, LoRA in five lines).

``probe`` runs in the probe process, beside the student's: it lends float32 ``nn.Linear``
layers drawn from the seed to the student's ``LoRALinear`` (their calls run here), keeps
the student's layers in the student's process, and records the output at the start, the
base's weight after one optimizer step, the number of trainable parameters, the outputs
with factors A and B set by the probe (at α = r and at another α), and the loss reached
by training A and B alone, with Adam run here, on a rank-r change of the weight (and with
a rank r − 1 adapter).
``grade`` runs in the trusted process: it redraws the layers and inputs from the seed and
compares with W₀x + b + (α/r)BAx computed in float64.

The properties are separated on purpose: the forward check accepts any factor in front
of BAx, so that a forgotten α/r costs only the scaling property; the training check uses
α = r, where every correct scaling is 1.
"""

from __future__ import annotations

import math

import numpy as np

ISOLATED = True  # probe() runs in the probe process; LoRALinear, in the student's
RTOL, ATOL = 1e-5, 1e-5  # float32 outputs of order 1
FIT_STEPS, UNDER_STEPS, FIT_LR = 150, 60, 0.03
FIT_MAX = 1e-2  # relative loss a rank-r adapter must reach on a rank-r change
UNDER_MIN = 0.2  # a rank r − 1 adapter cannot go below 1/r ≥ 1/3 (equal singular values)

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
    }


def _plain(values) -> list:
    return [float(v) if math.isfinite(v) else str(float(v)) for v in values]


def _error(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:300]


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
        return _error(err)
    y = out.value
    if not isinstance(y, torch.Tensor):
        return f"the layer returns {out.type}, not a tensor"
    if y.dim() != 2 or y.shape[0] != x.shape[0]:
        return f"the output has shape {tuple(y.shape)}, not (batch, d_out)"
    return _plain(y.to(torch.float64).reshape(-1).tolist())


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
        return _error(err)
    return None


def _layer_of(student, base, r: int, alpha: float):
    """``LoRALinear(base, r, alpha)``, kept in the student's process."""
    return student.run(student.hold(base), r, alpha)


def _forward(student, c: dict, alpha: float) -> dict:
    try:
        module = _layer_of(student, _linear(c["base"]), c["r"], alpha)
    except BaseException as err:  # noqa: BLE001
        return {"error": _error(err)}
    why = _set_factors(module, c["factors"])
    if why:
        return {"error": why}
    y = _output(module, c["x"])
    return {"error": y} if isinstance(y, str) else {"error": None, "y": y}


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
        return {"error": _error(err)}
    rec: dict = {"error": None}
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
        rec["base_moved"] = float(moved) if math.isfinite(moved) else str(moved)
        # at least the factors and what this process saw the base trained with
        trained = {n for e in calls if e.kind == "vjp" for n in e.params}
        seen = sum(p.numel() for n, p in linear.named_parameters() if n in trained)
        reported = sum(p.numel() for _, p, grad, _ in params if grad)
        factors = [module.read(name) for name in ("A", "B")]
        own = sum(f.numel() for f in factors if isinstance(f, torch.Tensor) and f.requires_grad)
        rec["trainable"] = int(max(reported, own + seen))
    except BaseException as err:  # noqa: BLE001
        rec["step_error"] = rec["trainable_error"] = _error(err)
    return rec


def _train(student, c: dict, rank: int, steps: int) -> dict:
    """Adam on A and B only, from the student's own initialisation; the final relative loss.

    Adam runs here (β = 0.9, 0.999): the student's process computes the layer's output and
    the gradients of A and B; this process the loss, the steps and the new A and B.
    """
    import torch

    student.seed(c["torch_seed"] + rank)  # the student's random A: the same every time
    try:
        module = _layer_of(student, _linear(c["fit_base"]), rank, float(rank))  # α = r: 1
        factors = {name: module.read(name).detach() for name in ("A", "B")}
        x, y = torch.from_numpy(c["fit_x"]), torch.from_numpy(c["fit_y"])
        moments = {n: (torch.zeros_like(p), torch.zeros_like(p)) for n, p in factors.items()}
        for t in range(1, steps + 1):
            out = module.run(x)
            pred = out.value
            if not isinstance(pred, torch.Tensor) or pred.shape != y.shape:
                raise TypeError(f"the layer returns {out.type} of the wrong shape")
            out.backward(2 * (pred - y) / y.numel())  # the gradient of the mean squared error
            grads = {n: g for n, _, _, g in module.parameters(clear=True)}
            for name, p in factors.items():
                g = grads.get(name)
                g = g if isinstance(g, torch.Tensor) else torch.zeros_like(p)
                m, v = moments[name]
                m.mul_(0.9).add_(g, alpha=0.1)
                v.mul_(0.999).addcmul_(g, g, value=0.001)
                p -= FIT_LR * (m / (1 - 0.9**t)) / ((v / (1 - 0.999**t)).sqrt() + 1e-8)
            module.assign(factors)
        final = _mse(module, x, y) / c["fit_scale"]
    except BaseException as err:  # noqa: BLE001
        return {"error": _error(err)}
    return {"error": None, "loss": float(final) if math.isfinite(final) else str(final)}


def _mse(module, x, y) -> float:
    import torch

    out = module.run(x)
    out.release()
    if not isinstance(out.value, torch.Tensor):
        raise TypeError(f"the layer returns {out.type}")
    return ((out.value.to(torch.float64) - y) ** 2).mean().item()


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


def _y(rec, shape: tuple) -> np.ndarray | None:
    from autograder.checktools import vector

    v = vector(rec.get("y")) if isinstance(rec, dict) else None
    return v.reshape(shape) if v is not None and v.size == shape[0] * shape[1] else None


def _why(rec, what: str) -> str:
    if not isinstance(rec, dict):
        return f"{what}: no result."
    if isinstance(rec.get("error"), str):
        return f"{what}: {rec['error']}."
    return f"{what}: the output is not a (batch, d_out) tensor."


def _factor(rec, c: dict) -> tuple[float | None, str]:
    """The factor f with output = base(x) + f·BAx, or None and why not."""
    y = _y(rec, (c["x"].shape[0], c["d_out"]))
    if y is None:
        return None, _why(rec, "with A and B set")
    if not np.all(np.isfinite(y)):
        return None, "with A and B set, the output is not finite."
    delta, upd = (y - _base_out(c)).ravel(), _update(c).ravel()
    f = float(delta @ upd / (upd @ upd))
    if np.allclose(delta, f * upd, rtol=1e-4, atol=ATOL * (1 + np.abs(upd).max())):
        return f, ""
    err = np.abs(delta - f * upd).max() / np.abs(upd).max()
    return None, (
        f"with A and B set, output − base(x) is not a multiple of B A x (off by {err:.2g} "
        "relative): the layer must return base(x) + (α/r)·B A x, A of shape r × d_in, "
        "B of shape d_out × r."
    )


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score the probe's outputs against W₀x + b + (α/r)BAx recomputed from the seed."""
    from autograder.checktools import close, prop

    c = cases(seed)
    r, d_in, d_out = c["r"], c["d_in"], c["d_out"]
    result = result if isinstance(result, dict) else {}
    props = []

    # 1. output at the start equals the frozen layer's
    start = result.get("start") if isinstance(result.get("start"), dict) else {}
    y0 = _y(start, (c["x"].shape[0], d_out))
    base_out = _base_out(c)
    if close(y0, base_out, RTOL, ATOL):
        ok, msg = True, "At construction the layer returns exactly the pretrained layer's output."
    elif y0 is None:
        ok, msg = False, _why(start, "at construction")
    else:
        ok = False
        msg = (
            "At construction the output differs from base(x): B must start at zero (A "
            "random), so that BA = 0 and training starts exactly from the pretrained model "
            "(§5.2)."
        )
    props.append(prop("starts at the pretrained layer (B = 0)", 2.0, ok, msg))

    # 2. the base stays frozen
    grad, moved = start.get("base_grad"), start.get("base_moved")
    if start.get("step_error") or not isinstance(grad, float) or not isinstance(moved, float):
        why = start.get("step_error") or start.get("error") or "no result"
        ok, msg = False, f"A backward pass and an SGD step failed: {why}."
    elif grad == 0 and moved == 0:
        ok, msg = True, "No gradient reaches W₀ and b; an optimizer step leaves them unchanged."
    else:
        ok = False
        msg = (
            "The pretrained weight or bias receives a gradient and changes in an optimizer "
            "step: freeze them (requires_grad_(False)); LoRA trains only A and B (§5.2)."
        )
    props.append(prop("W₀ and b frozen", 1.0, ok, msg))

    # 3. r(d_in + d_out) trainable parameters
    expected = r * (d_in + d_out)
    trainable = start.get("trainable")
    shapes = f"r = {r}, d_in = {d_in}, d_out = {d_out}"
    if type(trainable) is int and trainable == expected:
        ok, msg = True, f"r(d_in + d_out) trainable parameters for {shapes}."
    else:
        ok = False
        got = f"{trainable} trainable parameters" if type(trainable) is int else "No count"
        why = start.get("trainable_error") or start.get("error")
        msg = (f"{why}. " if why else "") + (
            f"{got} for {shapes}: only A (r × d_in) and B (d_out × r) may require gradients; "
            "W₀ and b are frozen (§5.2)."
        )
    props.append(prop("r(d_in + d_out) trainable parameters", 1.0, ok, msg))

    # 4. forward with given A and B: base(x) + f·BAx for some factor f
    recs = result.get("forward") if isinstance(result.get("forward"), list) else []
    recs = (recs + [None, None])[:2]
    found = [_factor(rec, c) for rec in recs]
    hit = sum(f is not None for f, _ in found)
    msg = (
        "With A and B set, the output is base(x) plus a multiple of B A x."
        if hit == 2
        else " ".join(why for f, why in found if f is None)
    )
    props.append(prop("adds B A x to the frozen output", 2.0, hit / 2, msg))

    # 5. the factor is α/r
    alphas = [float(r), c["alpha"]]
    factors = [f for f, _ in found]
    oks = [
        f is not None and math.isclose(f, a / r, rel_tol=1e-4)
        for f, a in zip(factors, alphas, strict=True)
    ]
    if hit == 0:
        msg = "Cannot tell: the output is never base(x) plus a multiple of B A x."
    elif all(oks):
        msg = f"The update is scaled by α/r (α = {alphas[0]:g} and {alphas[1]:g}, r = {r})."
    else:
        seen = ", ".join(
            f"{f:.4g} at α = {a:g}" for f, a in zip(factors, alphas, strict=True) if f is not None
        )
        msg = f"B A x is multiplied by {seen} (r = {r}): scale it by α/r (Hu et al. 2022)."
    props.append(prop("scaled by α/r", 1.0, sum(oks) / 2, msg))

    # 6. training A and B fits a rank-r change; rank r − 1 cannot
    fit, under = result.get("fit"), result.get("under")
    fit_loss = fit.get("loss") if isinstance(fit, dict) else None
    under_loss = under.get("loss") if isinstance(under, dict) else None
    fit_ok = isinstance(fit_loss, float) and fit_loss <= FIT_MAX
    under_ok = isinstance(under_loss, float) and under_loss >= UNDER_MIN
    name = "training A and B fits a rank-r change"
    if not fit_ok:
        why = (
            fit["error"]
            if isinstance(fit, dict) and isinstance(fit.get("error"), str)
            else f"the relative loss is still {fit_loss} after {FIT_STEPS} Adam steps"
        )
        props.append(
            prop(
                name,
                2.0,
                0,
                f"Training only A and B on a change of W₀ of rank r = {r}: {why}. Both factors "
                "must receive gradients: with B = 0, A must start random (if both are zero, "
                "neither ever moves) (§5.2).",
            )
        )
    elif not under_ok:
        props.append(
            prop(
                name,
                2.0,
                0.5,
                f"A rank r − 1 = {r - 1} adapter also fits the rank-{r} change (relative loss "
                f"{under_loss:.2g}): your adapter has more than r degrees of freedom (§5.2).",
            )
        )
    else:
        props.append(
            prop(
                name,
                2.0,
                1,
                f"Training A and B alone fits the rank-{r} change (relative loss {fit_loss:.1e}); "
                f"a rank-{r - 1} adapter cannot ({under_loss:.2f}).",
            )
        )
    return props
