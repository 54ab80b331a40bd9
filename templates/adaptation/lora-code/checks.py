"""Checks of the LoRA layer code part (000 §5.2; 001 ch. 0, LoRA in five lines).

The forward check accepts any factor in front of BAx, so that a forgotten α/r costs only the
scaling property; the training check uses α = r and accepts any factor and the layout x A B.
Outputs are judged against the layer's own A and B, never alone (issue 36): the fit's cotangent
2(pred − y)/n reveals the target, so a layer could return it, or hand Adam forged gradients.
"""

import math

import numpy as np

from autograder.checklib import Result, check, close, error_text, matrix, plain, shown, vector

RTOL, ATOL = 1e-5, 1e-5  # float32 outputs of order 1
FIT_STEPS, UNDER_STEPS, FIT_LR = 150, 60, 0.03
FIT_MAX = 1e-2  # relative loss a rank-r adapter must reach on a rank-r change
UNDER_MIN = 0.2  # a rank r − 1 adapter cannot go below 1/r ≥ 1/3 (equal singular values)
ZERO = 1e-6  # the largest entry of B A at construction: B = 0 makes it 0
# While training, the output must be base(x) + f·B A x with the probe's A and B for one f, to
# OUT_TOL·(1 + max|output|), and the gradients of A and B that output's to GRAD_TOL of the
# largest: a float32 layer is off by about 1e-6, one that answers anything else by 1e-2 or more.
OUT_TOL, GRAD_TOL = 1e-4, 1e-3


def _layer(rng: np.random.Generator, d_in: int, d_out: int) -> dict:
    weight = (rng.normal(size=(d_out, d_in)) / math.sqrt(d_in)).astype(np.float32)
    return {"weight": weight, "bias": rng.normal(0.0, 0.5, size=d_out).astype(np.float32)}


def cases(seed: int) -> dict:
    """Shapes, rank, α, layers, inputs and factors of one grading seed."""
    rng = np.random.default_rng([seed, 30])
    d_in = int(rng.choice([12, 16, 20, 24]))
    d_out = int(rng.choice([8, 10, 14]))  # d_out ≠ d_in: a transposed factor shows
    r = int(rng.integers(2, 4))
    alpha = float(rng.choice([2.0, 4.0, 8.0, 16.0]) * r)  # α ≠ r: α/r in {2, 4, 8, 16}
    c = {"d_in": d_in, "d_out": d_out, "r": r, "alpha": alpha, "base": _layer(rng, d_in, d_out)}
    c["x"] = rng.normal(size=(5, d_in)).astype(np.float32)
    a = (rng.normal(size=(r, d_in)) / math.sqrt(d_in)).astype(np.float32)
    c["factors"] = {"A": a, "B": rng.normal(0.0, 0.5, size=(d_out, r)).astype(np.float32)}
    # training: whitened inputs and a change of rank r with r equal singular values, so a
    # rank r − 1 adapter keeps at least 1/r of the loss
    xs = np.linalg.qr(rng.normal(size=(32, d_in)))[0] * math.sqrt(32)
    u = np.linalg.qr(rng.normal(size=(d_out, r)))[0]
    v = np.linalg.qr(rng.normal(size=(d_in, r)))[0]
    fit_base, shift = _layer(rng, d_in, d_out), u @ v.T
    target = xs @ (fit_base["weight"].astype(np.float64) + shift).T + fit_base["bias"]
    c |= {"fit_base": fit_base, "fit_x": xs.astype(np.float32), "fit_y": target.astype(np.float32)}
    c["fit_scale"] = float(np.mean((xs @ shift.T) ** 2))
    c["torch_seed"] = int(rng.integers(2**31))
    # inputs first seen after the training (issue 36): its own A and B must explain them
    c["fresh_x"] = np.random.default_rng([seed, 31]).normal(size=(8, d_in)).astype(np.float32)
    return c


def layout(a_shape, b_shape, c: dict, r: int) -> str | None:
    """The factors' layout: "BA" for A (r × d_in) and B (d_out × r), the contract's; "AB"
    for x A B (A of shape d_in × r), which only the forward check refuses; else None."""
    d_in, d_out = c["d_in"], c["d_out"]
    ways = {((r, d_in), (d_out, r)): "BA", ((d_in, r), (r, d_out)): "AB"}
    return ways.get((tuple(a_shape), tuple(b_shape)))


def delta(a, b, how: str):
    """The change of the weight (d_out × d_in) that the factors make, NumPy or torch."""
    return b @ a if how == "BA" else (a @ b).T


def _shapes(a, b, c: dict, r: int) -> str:
    return (
        f"A has shape {tuple(a.shape)} and B {tuple(b.shape)}, not "
        f"({r}, {c['d_in']}) and ({c['d_out']}, {r})"
    )


def _base_of(layer: dict, x: np.ndarray) -> np.ndarray:
    w, b = layer["weight"].astype(np.float64), layer["bias"].astype(np.float64)
    return x.astype(np.float64) @ w.T + b


def _linear(layer: dict):
    """An nn.Linear of this process, lent to the student's code: its calls run here."""
    import torch

    base = torch.nn.Linear(*layer["weight"].shape[::-1])
    base.load_state_dict({name: torch.from_numpy(value) for name, value in layer.items()})
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


def _forward(student, c: dict, alpha: float) -> dict:
    """The output with the probe's A and B copied into the layer, or why there is none."""
    import torch

    try:
        module = student.run(student.hold(_linear(c["base"])), c["r"], alpha)
        for name, value in c["factors"].items():
            p, value = module.read(name), torch.from_numpy(value)
            if not isinstance(p, torch.Tensor):
                return {"error": f"{name} is not a tensor"}
            if tuple(p.shape) != tuple(value.shape):
                return {"error": f"{name} has shape {tuple(p.shape)}, not {tuple(value.shape)}"}
            module.assign({name: value.to(p.dtype)})
    except BaseException as err:  # noqa: BLE001
        return {"error": error_text(err)}
    y = _output(module, c["x"])
    return {"error": y} if isinstance(y, str) else {"error": None, "y": y}


def _update_at_start(module, c: dict) -> float | str:
    """The largest entry of B A read from the layer at construction (issue 36: its first
    output alone can be the base's while B A is not 0), or why there is none."""
    import torch

    try:
        a, b = (module.read(name) for name in ("A", "B"))
    except BaseException as err:  # noqa: BLE001
        return error_text(err)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return "A or B is not a tensor"
    how = layout(a.shape, b.shape, c, c["r"])
    if how is None:
        return _shapes(a, b, c, c["r"])
    return plain([float(delta(a.detach().double(), b.detach().double(), how).abs().max())])[0]


def _start(student, c: dict) -> dict:
    """Output at construction, then one SGD step on every trainable parameter; what happens
    to the pretrained layer (lent: its calls run here) is seen here."""
    import torch

    linear = _linear(c["base"])
    w0, b0 = linear.weight.detach().clone(), linear.bias.detach().clone()
    try:
        module = student.run(student.hold(linear), c["r"], c["alpha"])
    except BaseException as err:  # noqa: BLE001
        return {"error": error_text(err)}
    rec: dict = {"error": None, "update0": _update_at_start(module, c)}
    rec["y"] = _output(module, c["x"])
    if isinstance(rec["y"], str):
        return {"error": rec["y"]}
    try:
        out = module.run(torch.from_numpy(c["x"]))
        if not isinstance(out.value, torch.Tensor):
            raise TypeError(f"the layer returns {out.type}")
        out.backward(2 * out.value)  # the gradient of out.square().sum()
        params = module.parameters()
        module.assign({n: p - 0.1 * g for n, p, _, g in params if isinstance(g, torch.Tensor)})
        _output(module, c["x"])  # one more call: the base's weights as they are now
        calls = [e for e in student.events if e.module is linear]
        forwards = [e.params for e in calls if e.kind == "forward"]
        if not forwards:
            raise RuntimeError("the layer never calls its base: use self.base(x)")
        grads = list(student.grads(linear).values())
        rec["base_grad"] = float(max((g.abs().max().item() for g in grads), default=0.0))
        now = forwards[-1]
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
    """Adam on A and B only, run here, each output and gradient kept to check against the A
    and B set; then A and B read back, and the layer run on inputs it never saw."""
    import torch

    student.seed(c["torch_seed"] + rank)  # the student's random A: the same every time
    try:
        module = student.run(student.hold(_linear(c["fit_base"])), rank, float(rank))  # α = r
        factors = {name: module.read(name).detach() for name in ("A", "B")}
        how = layout(factors["A"].shape, factors["B"].shape, c, rank)
        if how is None:
            raise ValueError(_shapes(factors["A"], factors["B"], c, rank))
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
                ok = isinstance(g, torch.Tensor) and g.shape == p.shape
                grads[name] = g if ok else torch.zeros_like(p)
            # the update x ΔWᵀ of the A and B set and its gradients, by autograd here
            a, b = (p.detach().double().requires_grad_() for p in factors.values())
            update = x64 @ delta(a, b, how).T
            update.backward(cotangent.detach().double())
            got = (pred.detach().double() - base64, grads["A"].double(), grads["B"].double())
            seen.append((got, (update.detach(), a.grad, b.grad), float(pred.detach().abs().max())))
            for name, p in factors.items():
                (m, v), g = moments[name], grads[name]
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
    f, out_err, grad_err = _consistency(seen)
    rec = {"error": None, "layout": how, "factor": f, "out_err": out_err, "grad_err": grad_err}
    rec["held_as_set"] = all(
        held[n].shape == p.shape and torch.equal(held[n].detach().to(p.dtype), p)
        for n, p in factors.items()
    )
    rec |= {n: [plain(row) for row in p.detach().double().tolist()] for n, p in held.items()}
    return rec | {"fresh_y": fresh}


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


def _y(rec: Result, c: dict, what: str) -> tuple[np.ndarray | None, str]:
    """The output (batch × d_out), or None and why not."""
    y = vector(rec.get("y"), c["x"].shape[0] * c["d_out"])
    if y is not None:
        return y.reshape(-1, c["d_out"]), ""
    if not rec.data:
        return None, f"{what}: no result."
    if isinstance(rec.get("error"), str):
        return None, f"{what}: {rec.get('error')}."
    return None, f"{what}: the output is not a (batch, d_out) tensor."


def _factor(rec: Result, c: dict) -> tuple[float | None, str]:
    """The factor f with output = base(x) + f·BAx, or None and why not."""
    y, why = _y(rec, c, "with A and B set")
    if y is None:
        return None, why
    if not np.all(np.isfinite(y)):
        return None, "with A and B set, the output is not finite."
    a, b = (c["factors"][n].astype(np.float64) for n in ("A", "B"))
    diff = (y - _base_of(c["base"], c["x"])).ravel()
    upd = (c["x"].astype(np.float64) @ a.T @ b.T).ravel()
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
    training (times the layer's factor f), or None and why not."""
    if not rec.data or isinstance(rec.get("error"), str):
        return None, rec.get("error", "no result")
    record = vector([rec.get(k) for k in ("factor", "out_err", "grad_err")])
    if record is None or not math.isfinite(record[0]):
        return None, "no usable record of the training"
    f, out_err, grad_err = record.tolist()
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
    drawn = "on inputs drawn after the training,"
    expected = _base_of(c["fit_base"], c["fresh_x"]) + c["fresh_x"].astype(np.float64) @ change.T
    y = vector(rec.get("fresh_y"), expected.size)
    if y is None:
        return None, f"{drawn} no output of the right shape"
    atol = OUT_TOL * (1 + np.abs(expected).max())
    if not np.allclose(y.reshape(expected.shape), expected, rtol=0, atol=atol):
        return None, f"{drawn} the output is not base(x) + f·B A x with the layer's own A and B"
    pred = _base_of(c["fit_base"], c["fit_x"]) + c["fit_x"].astype(np.float64) @ change.T
    return float(np.mean((pred - c["fit_y"]) ** 2) / c["fit_scale"]), ""


@check("starts at the pretrained layer (B = 0)", 2.0)
def starts(start: Result, c: dict):
    """The output at construction equals the frozen layer's, and B A is read as 0."""
    (y0, why), update0 = _y(start, c, "at construction"), start.get("update0")
    if y0 is None:
        return False, why
    if isinstance(update0, str):
        return False, f"At construction A and B cannot be read: {update0}."
    zero = isinstance(update0, float) and update0 <= ZERO
    if close(y0, _base_of(c["base"], c["x"]), RTOL, ATOL) and zero:
        return True, "At construction the layer returns exactly the pretrained layer's output."
    what = "the output differs from base(x)"
    if isinstance(update0, float) and update0 > ZERO:
        what = f"the layer holds B A ≠ 0 (an entry of {update0:.2g})"
    return False, (
        f"At construction {what}: B must start at zero (A random), so that BA = 0 and "
        "training starts exactly from the pretrained model (§5.2)."
    )


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
    training = f"Training only A and B on a change of W₀ of rank r = {rank}:"
    if not fit_ok and fit_why:
        return 0, (
            f"{training} {fit_why}. The layer's output must be base(x) + (α/r)·B A x with its "
            "own A and B, and the gradients of A and B those of that output (§5.2)."
        )
    if not fit_ok:
        return 0, (
            f"{training} the relative loss of the trained A and B is still "
            f"{shown(fit_loss, '.2g')} after {FIT_STEPS} Adam steps. Both factors must receive "
            "gradients: with B = 0, A must start random (if both are zero, neither ever moves) "
            "(§5.2)."
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


def grade(result: dict, seed: int, params: dict) -> list:
    """Score the probe's outputs against W₀x + b + (α/r)BAx recomputed from the seed."""
    r, c = Result(result), cases(seed)
    start, found = r.part("start"), [_factor(rec, c) for rec in r.parts("forward", 2)]
    starting = [starts(start, c), frozen(start), trainable(start, c)]
    return starting + [adds(found), scaled(found, c), fits(r, c)]
