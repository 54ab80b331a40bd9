"""Checks of the activation-checkpointing code part (000 §2.5, Proposition 2.8).

Two cases: the input requires a gradient and k does not divide n (the call counts and
the recomputed segments are read from this one), then an input without gradient, as in
the notes' code, where a reentrant checkpoint loses every gradient.
"""

import math
from itertools import groupby

import numpy as np

from autograder.checklib import Result, Verdict, check, close, error_text, judged, plain, vector

PRELOAD = ("torch", "torch._dynamo")  # torch.utils.checkpoint's first call imports _dynamo
RTOL, ATOL = 1e-9, 1e-12  # recomputation repeats the same float64 operations
MAX_LOG = 1000  # layer calls logged per case
PHASES = {"keep": "forward", "backward": "backward"}  # the request S was answering
# k divides neither n nor n + 1, and n // k and ⌈n/k⌉ differ from k: reading k as the number
# of segments gives other segments
UNEVEN = [(10, 4), (11, 4), (11, 5), (12, 5), (13, 3), (13, 5), (14, 3), (14, 5)]
EVEN = [(8, 2), (8, 4), (9, 3), (12, 3), (12, 4), (12, 6)]


def _case(rng: np.random.Generator, n: int, k: int, x_grad: bool) -> dict:
    width, batch = int(rng.choice([6, 8])), int(rng.integers(3, 6))
    return {
        "n": n,
        "k": k,
        "x_grad": x_grad,
        "weights": [rng.normal(0, 1 / math.sqrt(width), (width, width)) for _ in range(n)],
        "biases": [rng.normal(0, 0.1, width) for _ in range(n)],
        "x": rng.standard_normal((batch, width)),
        "loss_weights": rng.standard_normal((batch, width)),  # loss = sum(out * loss_weights)
    }


def cases(seed: int) -> list[dict]:
    """Case 0: k does not divide n, the input requires grad; case 1: k divides n, it does not."""
    rng = np.random.default_rng([seed, 40])
    (n0, k0), (n1, k1) = UNEVEN[int(rng.integers(8))], EVEN[int(rng.integers(6))]
    return [_case(rng, n0, k0, True), _case(rng, n1, k1, False)]


def segments(n: int, k: int) -> list[list[int]]:
    """The layers of each segment: [0, k), [k, 2k), ..., the last one shorter."""
    return [list(range(i, min(i + k, n))) for i in range(0, n, k)]


def _layers(case: dict):
    """Linear(w, w) then tanh, lent to the student's code: their calls run here."""
    import torch

    class Layer(torch.nn.Module):
        def __init__(self, weight: np.ndarray, bias: np.ndarray):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.from_numpy(weight.copy()))
            self.bias = torch.nn.Parameter(torch.from_numpy(bias.copy()))

        def forward(self, h):
            return torch.tanh(h @ self.weight.T + self.bias)

    pairs = zip(case["weights"], case["biases"], strict=True)
    return torch.nn.ModuleList([Layer(w, b) for w, b in pairs])


def _served(student, layers) -> dict:
    """The layer calls served: [phase, layer, call]; the backwards: [layer, call]."""
    index = {id(m): i for i, m in enumerate(layers)}
    calls, vjps = [], []
    for e in student.events:
        i = index.get(id(e.module))
        if i is not None and e.kind == "forward":
            calls.append([PHASES.get(e.phase, str(e.phase)), i, e.token])
        elif i is not None:
            vjps.append([i, e.token])
    return {"log": calls[:MAX_LOG], "vjps": vjps[:MAX_LOG]}


def _run(student, case: dict) -> dict:
    """The output, the parameters' (and the input's) gradients, and the served log."""
    import torch

    layers = _layers(case)
    x = student.hold(torch.tensor(case["x"], dtype=torch.float64, requires_grad=case["x_grad"]))
    rec: dict = {"error": None, "backward_error": None}
    try:
        out = student.run(layers, x, case["k"])
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return {"error": error_text(err), **_served(student, layers)}
    if not isinstance(out.value, torch.Tensor):
        return {"error": f"returned {out.type}, not a tensor", **_served(student, layers)}
    rec["shape"] = list(out.value.shape)
    rec["value"] = plain(out.value.to(torch.float64).reshape(-1)[:200].tolist())
    try:  # loss = sum(out * loss_weights): its gradient with respect to out
        out.backward(torch.tensor(case["loss_weights"], dtype=torch.float64))
    except BaseException as err:  # noqa: BLE001
        rec["backward_error"] = error_text(err)
    rec["grads"] = [  # summed here, from the backward passes this process computed
        None if g is None else plain(g.reshape(-1).tolist())
        for got in map(student.grads, layers)
        for g in (got.get("weight"), got.get("bias"))
    ]
    if case["x_grad"]:
        try:
            g = x.read("grad")
        except BaseException as err:  # noqa: BLE001
            g, rec["backward_error"] = None, error_text(err)
        rec["x_grad"] = plain(g.reshape(-1).tolist()) if isinstance(g, torch.Tensor) else None
    return rec | _served(student, layers)


def probe(student, seed: int, params: dict) -> dict:
    return {"cases": [_run(student, case) for case in cases(seed)]}


def plain_forward_backward(case: dict) -> dict:
    """Output and gradients of the plain forward and backward, in NumPy."""
    hs = [case["x"]]
    for w, b in zip(case["weights"], case["biases"], strict=True):
        hs.append(np.tanh(hs[-1] @ w.T + b))
    g = case["loss_weights"]  # d loss / d out
    grads: list[np.ndarray] = []
    for i in reversed(range(case["n"])):
        pre = g * (1 - hs[i + 1] ** 2)  # through tanh
        grads[:0] = [(pre.T @ hs[i]).reshape(-1), pre.sum(axis=0)]
        g = pre @ case["weights"][i]
    return {"out": hs[-1].reshape(-1), "grads": grads, "x_grad": g.reshape(-1)}


def _entry(e, n: int) -> bool:
    """A logged entry: a list of ``n`` items, the last two ints (a layer, a call)."""
    return isinstance(e, list) and len(e) == n and all(type(x) is int for x in e[-2:])


def _log(rec: Result) -> list[tuple[str, int, int]] | None:
    """(phase, layer, call) of each layer call, or None when the log is malformed."""
    log = rec.get("log")
    phases = ("forward", "backward")
    if isinstance(log, list) and all(_entry(e, 3) and e[0] in phases for e in log):
        return [tuple(e) for e in log]
    return None


def _vjps(rec: Result) -> list[tuple[int, int]]:
    """(layer, call) of each backward through a layer: the call it differentiated."""
    vjps = rec.get("vjps")
    return [tuple(e) for e in vjps if _entry(e, 2)] if isinstance(vjps, list) else []


def _runs(indices: list[int]) -> list[list[int]]:
    """Maximal runs of consecutive increasing layer indices."""
    runs = groupby(enumerate(indices), key=lambda t: t[1] - t[0])  # i − position: constant
    return [[i for _, i in run] for _, run in runs]


def _spans(runs: list[list[int]]) -> str:
    """'10–12, 5–9, 0–4': the first and last layer of each run."""
    return ", ".join(f"{s[0]}–{s[-1]}" if len(s) > 1 else f"{s[0]}" for s in runs)


def _label(c: dict) -> str:
    grad = "requires grad" if c["x_grad"] else "does not require grad"
    return f"n = {c['n']}, k = {c['k']}, input that {grad}"


def _output(c: dict, rec: Result, ref: dict) -> Verdict:
    if not rec.get("error") and close(vector(rec.get("value")), ref["out"], RTOL, ATOL):
        return Verdict(True)
    why = rec.get("error") or (
        f"the output has shape {rec.get('shape')}"
        if rec.get("shape") != list(c["x"].shape)
        else "the output differs from the plain forward"
    )
    return Verdict(False, f"{_label(c)}: {why}.")


@check("same output as the plain forward", 1.0)
def output(verdicts: list[Verdict]):
    good = "The output equals the plain forward's on both cases."
    return judged(verdicts, good, " Apply every layer once, in order, segment after segment.")


def _grads(c: dict, rec: Result, ref: dict) -> Verdict:
    """Whether the case's gradients are the plain backward's; why not."""
    grads = rec.get("grads") if isinstance(rec.get("grads"), list) else []
    missing = [i // 2 for i, g in enumerate(grads) if g is None]
    if rec.get("error") or rec.get("backward_error"):
        why = rec.get("error") or f"the backward pass fails: {rec.get('backward_error')}"
    elif len(grads) != len(ref["grads"]):
        why = "no gradients"
    elif missing:
        why = f"layers {sorted(set(missing))} get no gradient"
    elif not all(close(vector(g), e, RTOL, ATOL) for g, e in zip(grads, ref["grads"], strict=True)):
        why = "the parameters' gradients differ from the plain backward's"
    elif c["x_grad"] and not close(vector(rec.get("x_grad")), ref["x_grad"], RTOL, ATOL):
        why = "the input's gradient differs from the plain backward's"
    else:
        return Verdict(True)
    return Verdict(False, f"{_label(c)}: {why}.")


@check("same gradients as the plain backward", 2.0)
def gradients(verdicts: list[Verdict]):
    score, msg = judged(
        verdicts,
        "Every gradient equals the plain backward's, with and without an input gradient.",
        " Checkpointing must not change the gradients (Proposition 2.8): let autograd "
        "recompute each segment (torch.utils.checkpoint), do not detach between segments.",
    )
    if not verdicts[1]:  # the input of case 1 does not require grad
        msg += (
            " With an input that does not require grad, a reentrant checkpoint returns an "
            "output without gradient: pass use_reentrant=False, as in the notes' code."
        )
    return score, msg


def _cannot(c: dict, rec: Result) -> str | None:
    """Why the call log of case 0 (k does not divide n) tells nothing, or None."""
    if _log(rec) is not None and not rec.get("error") and not rec.get("backward_error"):
        return None
    why = rec.get("error") or rec.get("backward_error") or "no call log"
    return f"Cannot tell: with {_label(c)} the forward and backward do not run ({why})."


@check("every layer runs twice: one extra forward", 2.0)
def calls(c: dict, rec: Result):
    if cannot := _cannot(c, rec):
        return 0, cannot
    log, last = _log(rec), set(segments(c["n"], c["k"])[-1])
    calls = [sum(1 for _, i, _ in log if i == j) for j in range(c["n"])]
    wrong = [j for j in range(c["n"]) if calls[j] != 2 and not (j in last and calls[j] == 1)]
    # the backward of each layer before the last segment differentiates a recomputed call:
    # calling the layers again during the backward pass, and not using them, is no checkpoint
    phase_of = {token: phase for phase, _, token in log}
    stored = sorted(
        {i for i, token in _vjps(rec) if phase_of.get(token) != "backward" and i not in last}
    )
    if not wrong and stored:
        return False, (
            f"With {_label(c)}, the layers run again during the backward pass, but the "
            f"gradients of layers {stored[:6]} come from their first calls: the stored "
            "activations are used, nothing is recomputed from the checkpoints. Let "
            "torch.utils.checkpoint recompute each segment (Proposition 2.8)."
        )
    if not wrong:
        return True, (
            f"Each of the {c['n']} layers runs once forward and is recomputed once in the "
            "backward pass."
        )
    if all(x == 1 for x in calls):
        return False, (
            f"With {_label(c)}, every layer runs once: nothing is recomputed, so every "
            "activation was stored. Wrap each segment in torch.utils.checkpoint.checkpoint "
            "(Proposition 2.8)."
        )
    counts = ", ".join(f"layer {j}: {calls[j]}" for j in wrong[:6])
    return False, (
        f"With {_label(c)}, {counts} calls. Checkpointing runs each layer once forward and "
        "recomputes it once in the backward pass: 2 calls per layer, one extra forward "
        "(Proposition 2.8)."
    )


@check("recomputes segments of k layers", 2.0)
def recomputed(c: dict, rec: Result):
    if cannot := _cannot(c, rec):
        return 0, cannot
    used = {token for _, token in _vjps(rec)}
    runs = _runs([i for p, i, token in _log(rec) if p == "backward" and token in used])
    expected = segments(c["n"], c["k"])[::-1]
    if runs in (expected, expected[1:]):
        return True, (
            f"The backward pass recomputes the segments {_spans(expected)}: a checkpoint every "
            f"k = {c['k']} layers, n/k + k units at the peak."
        )
    if not runs:
        return False, (
            f"With {_label(c)}, the backward pass recomputes nothing: no layer is checkpointed."
        )
    msg = (
        f"With {_label(c)}, the backward pass recomputes the layers in runs {_spans(runs[:8])}, "
        f"not in segments of k = {c['k']} layers [0, k), [k, 2k), ... (the last one shorter)."
    )
    if all(len(s) == 1 for s in runs):
        return False, msg + (
            " Checkpointing every layer on its own stores n checkpoints: the peak is "
            "n/k + k with k = 1, no saving (Proposition 2.8)."
        )
    return False, msg + (
        " k is the number of layers per segment, not the number of segments "
        "(checkpoint_sequential takes the latter and sizes the segments itself)."
    )


def grade(result: dict, seed: int, params: dict) -> list:
    """Output and gradients on both cases; call counts and segments from case 0's log."""
    cs, recs = cases(seed), Result(result).parts("cases", 2)
    refs = [plain_forward_backward(c) for c in cs]
    trios = list(zip(cs, recs, refs, strict=True))
    return [
        output([_output(*trio) for trio in trios]),
        gradients([_grads(*trio) for trio in trios]),
        calls(cs[0], recs[0]),
        recomputed(cs[0], recs[0]),
    ]
