"""Checks of the circular convolution code part (001 ch. 1, def. 1.7, prop. 1.8, Ex. 8(b, c)).

Values and equivariance are separate: the shift properties judge the student's own outputs,
not the reference, so a wrong value and a broken symmetry count apart. Each output compared
with another comes from a fresh rank of its own (``student.ranks``), which shares nothing with
the student's process or another call's, so no call can answer a rolled input from a cache
or from what another call left in a file or in shared memory (test_forgeries_ranks.py).
"""

import numpy as np

from autograder.checklib import Record, Result, Verdict, check, judged, per_case, shape_note

RTOL = 1e-5  # values: loose enough for a float32 computation inside
EQUIV_RTOL = 1e-6  # a shift of the input is the same shift of the output: equal to rounding
BROKEN = 1e-3  # an odd shift moves the stride-2 output by more than this (relative)
MAX_VALUES = 4096  # an output's numbers kept: beyond, it is "far too large"


def cases(seed: int) -> dict:
    """One-channel images for k = 3 and 5, a multi-channel one, and the shifts."""
    rng = np.random.default_rng([seed, 50])
    single = []
    for k in (3, 5):
        h, w = (int(v) for v in rng.choice([6, 8, 10, 12], size=2, replace=False))  # H ≠ W, even
        x, kernel = rng.normal(size=(1, h, w)), rng.normal(size=(1, 1, k, k))
        shift = (int(rng.integers(1, h)), int(rng.integers(1, w)))
        single.append({"x": x, "w": kernel, "shift": shift})
    h, w = single[0]["x"].shape[1:]
    # an even shift (2a, 2b) moves the stride-2 output by (a, b); an odd one by nothing
    even = (2 * int(rng.integers(1, h // 2)), 2 * int(rng.integers(0, w // 2)))
    odd = (2 * int(rng.integers(0, h // 2)) + 1, 2 * int(rng.integers(0, w // 2)))
    multi = {"x": rng.normal(size=(3, 6, 8)), "w": rng.normal(size=(2, 3, 3, 3))}
    return {"single": single, "multi": multi, "even": even, "odd": odd}


def reference(x: np.ndarray, w: np.ndarray, stride: int = 1) -> np.ndarray:
    """conv2d(padding_mode="circular"), p = (k − 1)/2: the output (o, i, j) is
    Σ_{c,u,v} w[o, c, u, v] x[c, s·i + u − p, s·j + v − p], indices modulo H and W."""
    k = w.shape[-1]
    p = (k - 1) // 2
    y = np.zeros((w.shape[0], *x.shape[1:]))
    for u in range(k):
        for v in range(k):
            tap = np.roll(x, shift=(p - u, p - v), axis=(1, 2))  # x[c, i + u − p, j + v − p]
            y += np.einsum("oc,chw->ohw", w[:, :, u, v], tap)
    return y[:, ::stride, ::stride]


def _args(x: np.ndarray, w: np.ndarray, stride: int, shift=(0, 0)) -> tuple:
    """The arguments of one call: x rolled by ``shift``, as float64 tensors."""
    import torch

    xt = torch.roll(torch.tensor(x, dtype=torch.float64), shifts=shift, dims=(1, 2))
    wt = torch.tensor(w, dtype=torch.float64)
    return (xt, wt) if stride == 1 else (xt, wt, stride)


def _call(student, case: dict, stride: int) -> Record:
    return student.call(*_args(case["x"], case["w"], stride), keep=MAX_VALUES)


def probe(student, seed: int, params: dict) -> dict:
    """The outputs the shift properties compare, from processes apart, all at once; then,
    in the student's own process, those compared with the reference only."""
    c = cases(seed)
    s = c["single"][0]
    calls = [_args(q["x"], q["w"], 1, t) for q in c["single"] for t in ((0, 0), q["shift"])]
    calls += [_args(s["x"], s["w"], 2, t) for t in ((0, 0), c["even"], c["odd"])]
    apart = [Record.of(out, keep=MAX_VALUES) for out in student.ranks(calls)]
    base, even, odd = apart[4:]
    return {
        "single": [
            {"plain": _call(student, q, 1), "base": apart[2 * i], "shifted": apart[2 * i + 1]}
            for i, q in enumerate(c["single"])
        ],
        "multi": _call(student, c["multi"], 1),
        "stride2": {"plain": _call(student, s, 2), "base": base, "even": even, "odd": odd},
    }


def _output(rec: Record, image: tuple | None = None) -> tuple[np.ndarray | None, str]:
    """The output, or None and why; ``image``: its shape, where the last two axes are rolled."""
    if not rec.ok:
        return None, rec.error
    y = rec.array()
    if y is None and rec.shape is not None and (rec.size or 0) > MAX_VALUES:
        return None, f"the output has shape {list(rec.shape)}, far too large"
    if y is None:
        return None, "the output is not an array of numbers"
    if not np.all(np.isfinite(y)):
        return None, "the output is not finite (nan or inf)"
    if image is not None and (y.ndim < 2 or y.size == 0):
        return None, shape_note(y.shape, image, "your layer returned an array")
    return y, ""


def _size(case: dict) -> str:
    return f"k = {case['w'].shape[-1]}, {case['x'].shape[1]}×{case['x'].shape[2]} image"


def _matches(rec: Record, expected: np.ndarray, what: str) -> Verdict:
    """The output equals ``expected``; else ``what: why not.``"""
    y, why = _output(rec)
    if y is not None and y.shape != expected.shape:
        why = f"output shape {list(y.shape)}, expected (c_out, H', W') = {list(expected.shape)}"
    elif y is not None:
        scale = float(np.abs(expected).max())
        if np.allclose(y, expected, rtol=RTOL, atol=RTOL * scale):
            return Verdict(True)
        err = float(np.abs(y - expected).max()) / scale
        why = f"wrong values (largest error {err:.2g} of the output's scale)"
    return Verdict(False, f"{what}: {why}.")


def _rolled(base: np.ndarray, shifted: np.ndarray, shift, rtol: float = EQUIV_RTOL) -> bool:
    """``shifted`` is ``base`` rolled by ``shift`` on its last two axes, to rtol of its scale."""
    if base.shape != shifted.shape or base.ndim < 2 or base.size == 0:
        return False
    moved = np.roll(base, shift=shift, axis=(-2, -1))
    scale = max(float(np.abs(base).max()), 1e-12)
    return bool(np.abs(moved - shifted).max() <= rtol * scale)


def _commutes(single: Result, case: dict) -> Verdict:
    """Stride 1: the output of the shifted input is the output rolled by the shift."""
    shape = reference(case["x"], case["w"]).shape
    base, why = _output(single.record("base"), shape)
    moved, why2 = _output(single.record("shifted"), shape)
    if base is None or moved is None:
        return Verdict(False, f"shift {case['shift']}: {why or why2}.")
    if not _rolled(base, moved, case["shift"]):
        return Verdict(False, f"shift {case['shift']}: f(roll(x)) ≠ roll(f(x)).")
    return Verdict(True)


value = per_case(
    'matches conv2d with padding_mode="circular" (stride 1)',
    2.0,
    "Your layer matches conv2d with circular padding for k = 3 and k = 5.",
    " y[o, i, j] = Σ w[o, c, u, v] x[c, i + u − p, j + v − p] with p = (k − 1)/2 and "
    "indices modulo H and W: a cross-correlation (no kernel flip), with the image "
    "wrapped around, not padded with zeros (def. 1.7).",
)
channels = per_case(
    "c_in → c_out channels, w[o, c, u, v]",
    1.0,
    "c_in = 3 → c_out = 2 channels: each output channel sums its filter over all inputs.",
    " Output channel o sums over every input channel c the correlation of x[c] with w[o, c] "
    "(def. 1.7); w has shape (c_out, c_in, k, k).",
)
roll = per_case(
    "commutes with torch.roll at stride 1 (prop. 1.8)",
    2.0,
    "Shifting the input by torch.roll shifts your output by the same amount.",
    " With circular padding every output uses the same k × k neighbourhood, taken "
    "modulo the image size, so the layer commutes with cyclic shifts (prop. 1.8, "
    "Ex. 8(b)); zero padding breaks this at the borders.",
)
stride = per_case(
    "stride 2 keeps the stride-1 outputs at (2i, 2j)",
    1.0,
    "Stride 2 keeps the stride-1 outputs at (2i, 2j), half the size in each direction.",
    " The stride-s output is the stride-1 output at (s·i, s·j), starting at (0, 0): an "
    "output of side ⌊(H + 2p − k)/s⌋ + 1.",
)


@check("stride 2: a shift by 2t moves the output by t, an odd shift by nothing", 2.0)
def shifts(s2: Result, c: dict):
    """Stride 2 follows even shifts (2t → t) and no odd one, on the student's own outputs."""
    case, (a, b), odd_shift = c["single"][0], c["even"], c["odd"]
    shape, half = reference(case["x"], case["w"], 2).shape, (a // 2, b // 2)
    (base, why), (even, why_even), (odd, why_odd) = (
        _output(s2.record(key), shape) for key in ("base", "even", "odd")
    )
    follows = Verdict(
        base is not None and even is not None and _rolled(base, even, half),
        f"Shifting the input by ({a}, {b}) does not shift your stride-2 output by {half}"
        + (f": {why or why_even}." if why or why_even else "."),
    )
    if base is None or odd is None:
        ignores = Verdict(False, f"Odd shift {odd_shift}: {why or why_odd}.")
    else:
        rolls = [(i, j) for i in range(base.shape[-2]) for j in range(base.shape[-1])]
        ignores = Verdict(
            base.shape == odd.shape and not any(_rolled(base, odd, t, BROKEN) for t in rolls),
            f"Your stride-2 output follows the odd shift {odd_shift} of the input: a strided "
            "layer samples every other position, so an odd shift falls between the samples.",
        )
    return judged(
        [follows, ignores],
        f"A shift by ({a}, {b}) moves your stride-2 output by {half}, and no shift of the "
        f"output reproduces the odd shift {odd_shift} (Ex. 8(c)).",
        " The stride-2 output at (i, j) is the stride-1 output at (2i, 2j): an even shift "
        "2t moves it by t, an odd one has no counterpart (Ex. 8(c)).",
    )


def grade(result: dict, seed: int, params: dict) -> list:
    r, c = Result(result), cases(seed)
    single = list(zip(c["single"], r.parts("single", 2), strict=True))
    s, m, s2 = c["single"][0], c["multi"], r.part("stride2")
    return [
        value(
            [_matches(p.record("plain"), reference(q["x"], q["w"]), _size(q)) for q, p in single]
        ),
        channels([_matches(r.record("multi"), reference(m["x"], m["w"]), "c_in = 3 → c_out = 2")]),
        roll([_commutes(p, q) for q, p in single]),
        stride([_matches(s2.record("plain"), reference(s["x"], s["w"], 2), "Stride 2")]),
        shifts(s2, c),
    ]
