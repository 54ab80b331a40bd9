"""Checks of the circular convolution code part (001 ch. 1, def. 1.7, prop. 1.8, Ex. 8(b, c)).

``probe`` runs in the probe process, beside the student's: it calls the student's
``circular_conv2d`` on float64 tensors drawn from the seed (one channel with k = 3 and 5,
then c_in = 3 → c_out = 2), at stride 1 and 2, on the inputs and on their cyclic shifts,
and returns the outputs; each output compared with another comes from a process of its
own, forked from the student's, so that no call can remember another.  ``grade`` runs in
the trusted process: it recomputes the circular cross-correlation of
conv2d(padding_mode="circular") from the seed, and checks the equivariance properties on
the student's own outputs, so that a wrong value and a broken symmetry count apart."""

from __future__ import annotations

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, check, judged, shape_note

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

RTOL = 1e-5  # values: loose enough for a float32 computation inside
EQUIV_RTOL = 1e-6  # a shift of the input is the same shift of the output: equal to rounding
BROKEN = 1e-3  # an odd shift moves the stride-2 output by more than this (relative)
MAX_VALUES = 4096  # an output's numbers kept: beyond, it is "far too large"

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def cases(seed: int) -> dict:
    """One-channel images for k = 3 and 5, a multi-channel one, and the shifts."""
    rng = np.random.default_rng([seed, 50])
    single = []
    for k in (3, 5):
        h, w = (int(v) for v in rng.choice([6, 8, 10, 12], size=2, replace=False))  # H ≠ W, even
        single.append(
            {
                "x": rng.normal(size=(1, h, w)),
                "w": rng.normal(size=(1, 1, k, k)),
                "shift": (int(rng.integers(1, h)), int(rng.integers(1, w))),
            }
        )
    h, w = single[0]["x"].shape[1:]
    even = (2 * int(rng.integers(1, h // 2)), 2 * int(rng.integers(0, w // 2)))
    odd = (2 * int(rng.integers(0, h // 2)) + 1, 2 * int(rng.integers(0, w // 2)))
    return {
        "single": single,
        "multi": {"x": rng.normal(size=(3, 6, 8)), "w": rng.normal(size=(2, 3, 3, 3))},
        "even": even,  # (2a, 2b): the stride-2 output moves by (a, b)
        "odd": odd,  # an odd row shift: no shift of the stride-2 output reproduces it
    }


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


# --- probe (sandbox) -------------------------------------------------------------------------


def _args(x: np.ndarray, w: np.ndarray, stride: int, shift=(0, 0)) -> tuple:
    """The arguments of one call: x rolled by ``shift``, as float64 tensors."""
    import torch

    xt = torch.roll(torch.tensor(x, dtype=torch.float64), shifts=shift, dims=(1, 2))
    wt = torch.tensor(w, dtype=torch.float64)
    return (xt, wt) if stride == 1 else (xt, wt, stride)


def _call(student, x: np.ndarray, w: np.ndarray, stride: int) -> dict:
    return student.call(*_args(x, w, stride), keep=MAX_VALUES)


def probe(student, seed: int, params: dict) -> dict:
    """Call circular_conv2d on the seed's inputs and their shifts; return the outputs.

    The outputs that the equivariance properties compare with each other come first, each
    from a call of its own in a process of its own, forked from the student's before any
    of these inputs was sent, all running at once (``student.ranks``): no call can see
    another, nor remember an earlier one, so an output cache (a rolled input answered with
    the earlier output, rolled) has nothing to draw on.  Then the student's process
    computes the outputs compared with the reference only: the values at stride 1 and 2
    and the channels (what it may have seen of the ranks' calls cannot help there)."""
    c = cases(seed)
    s = c["single"][0]
    calls = [
        _args(case["x"], case["w"], 1, shift)
        for case in c["single"]
        for shift in ((0, 0), case["shift"])
    ]
    calls += [_args(s["x"], s["w"], 2, shift) for shift in ((0, 0), c["even"], c["odd"])]
    apart = [Record.of(out, keep=MAX_VALUES) for out in student.ranks(calls)]
    return {
        "single": [
            {"plain": _call(student, case["x"], case["w"], 1), "base": base, "shifted": moved}
            for case, base, moved in zip(c["single"], apart[0:4:2], apart[1:4:2], strict=True)
        ],
        "multi": _call(student, c["multi"]["x"], c["multi"]["w"], 1),
        "stride2": {
            "plain": _call(student, s["x"], s["w"], 2),
            "base": apart[4],
            "even": apart[5],
            "odd": apart[6],
        },
    }


# --- grade (trusted) ---------------------------------------------------------------------


def _output(rec: Record) -> tuple[np.ndarray | None, str]:
    """The student's output as an array, or None and why."""
    if not rec.ok:
        return None, rec.error
    y = rec.array()
    if y is None and rec.shape is not None and (rec.size or 0) > MAX_VALUES:
        return None, f"the output has shape {list(rec.shape)}, far too large"
    if y is None:
        return None, "the output is not an array of numbers"
    if not np.all(np.isfinite(y)):
        return None, "the output is not finite (nan or inf)"
    return y, ""


def _image(rec: Record, expected: tuple) -> tuple[np.ndarray | None, str]:
    """The student's output for the shift properties, which roll its last two axes (the
    image's): an array with both, or None and why (a 2-D output is still an image)."""
    y, why = _output(rec)
    if y is not None and (y.ndim < 2 or y.size == 0):
        return None, shape_note(y.shape, expected, "your layer returned an array")
    return y, why


def _matches(rec: Record, expected: np.ndarray) -> Verdict:
    y, why = _output(rec)
    if y is None:
        return Verdict(False, why)
    if y.shape != expected.shape:
        return Verdict(
            False,
            f"output shape {list(y.shape)}, expected (c_out, H', W') = {list(expected.shape)}",
        )
    scale = float(np.abs(expected).max())
    if not np.allclose(y, expected, rtol=RTOL, atol=RTOL * scale):
        err = float(np.abs(y - expected).max()) / scale
        return Verdict(False, f"wrong values (largest error {err:.2g} of the output's scale)")
    return Verdict(True)


def _rolled(base: np.ndarray, shifted: np.ndarray, shift, rtol: float = EQUIV_RTOL) -> bool:
    """Whether ``shifted`` is ``base`` rolled by ``shift`` on its last two axes, up to rtol
    of the output's scale (rounding by default)."""
    if base.shape != shifted.shape or base.ndim < 2 or base.size == 0:
        return False
    moved = np.roll(base, shift=shift, axis=(-2, -1))
    scale = max(float(np.abs(base).max()), 1e-12)
    return bool(np.abs(moved - shifted).max() <= rtol * scale)


@check('matches conv2d with padding_mode="circular" (stride 1)', 2.0)
def value(r: Result, c: dict):
    """Values, one channel, stride 1."""
    verdicts = []
    for case, rec in zip(c["single"], r.parts("single", 2), strict=True):
        k, (h, w) = case["w"].shape[-1], case["x"].shape[1:]
        ok = _matches(rec.record("plain"), reference(case["x"], case["w"]))
        verdicts.append(ok or Verdict(False, f"k = {k}, {h}×{w} image: {ok.why}."))
    return judged(
        verdicts,
        "Your layer matches conv2d with circular padding for k = 3 and k = 5.",
        " y[o, i, j] = Σ w[o, c, u, v] x[c, i + u − p, j + v − p] with p = (k − 1)/2 and "
        "indices modulo H and W: a cross-correlation (no kernel flip), with the image "
        "wrapped around, not padded with zeros (def. 1.7).",
    )


@check("c_in → c_out channels, w[o, c, u, v]", 1.0)
def channels(r: Result, c: dict):
    ok = _matches(r.record("multi"), reference(c["multi"]["x"], c["multi"]["w"]))
    if ok:
        return (
            1.0,
            "c_in = 3 → c_out = 2 channels: each output channel sums its filter over all inputs.",
        )
    return 0.0, (
        f"c_in = 3 → c_out = 2: {ok.why}. Output channel o sums over every input channel c "
        "the correlation of x[c] with w[o, c] (def. 1.7); w has shape (c_out, c_in, k, k)."
    )


@check("commutes with torch.roll at stride 1 (prop. 1.8)", 2.0)
def roll(r: Result, c: dict):
    """Equivariance at stride 1, on the student's own outputs (from processes apart)."""
    verdicts = []
    for case, rec in zip(c["single"], r.parts("single", 2), strict=True):
        shape = reference(case["x"], case["w"]).shape
        base, why = _image(rec.record("base"), shape)
        moved, why2 = _image(rec.record("shifted"), shape)
        if base is None or moved is None:
            verdicts.append(Verdict(False, f"shift {case['shift']}: {why or why2}."))
        elif not _rolled(base, moved, case["shift"]):
            verdicts.append(Verdict(False, f"shift {case['shift']}: f(roll(x)) ≠ roll(f(x))."))
        else:
            verdicts.append(Verdict(True))
    return judged(
        verdicts,
        "Shifting the input by torch.roll shifts your output by the same amount.",
        " With circular padding every output uses the same k × k neighbourhood, taken "
        "modulo the image size, so the layer commutes with cyclic shifts (prop. 1.8, "
        "Ex. 8(b)); zero padding breaks this at the borders.",
    )


@check("stride 2 keeps the stride-1 outputs at (2i, 2j)", 1.0)
def stride(r: Result, c: dict):
    case = c["single"][0]
    ok = _matches(r.part("stride2").record("plain"), reference(case["x"], case["w"], 2))
    if ok:
        return (
            1.0,
            "Stride 2 keeps the stride-1 outputs at (2i, 2j), half the size in each direction.",
        )
    return 0.0, (
        f"Stride 2: {ok.why}. The stride-s output is the stride-1 output at (s·i, s·j), "
        "starting at (0, 0): an output of side ⌊(H + 2p − k)/s⌋ + 1."
    )


@check("stride 2: a shift by 2t moves the output by t, an odd shift by nothing", 2.0)
def shifts(r: Result, c: dict):
    """Stride 2 follows even shifts (2t → t) and no odd one, on the student's own outputs
    (each from a process of its own)."""
    case, s2 = c["single"][0], r.part("stride2")
    shape = reference(case["x"], case["w"], 2).shape
    base, why = _image(s2.record("base"), shape)
    even, why_even = _image(s2.record("even"), shape)
    odd, why_odd = _image(s2.record("odd"), shape)
    (a, b), odd_shift = c["even"], c["odd"]
    notes = []
    even_ok = base is not None and even is not None and _rolled(base, even, (a // 2, b // 2))
    if not even_ok:
        notes.append(
            f"Shifting the input by ({a}, {b}) does not shift your stride-2 output by "
            f"({a // 2}, {b // 2})" + (f": {why or why_even}." if why or why_even else ".")
        )
    odd_ok = False
    if base is not None and odd is not None:
        rolls = [(i, j) for i in range(base.shape[-2]) for j in range(base.shape[-1])]
        odd_ok = base.shape == odd.shape and not any(_rolled(base, odd, t, BROKEN) for t in rolls)
        if not odd_ok:
            notes.append(
                f"Your stride-2 output follows the odd shift {odd_shift} of the input: a strided "
                "layer samples every other position, so an odd shift falls between the samples."
            )
    else:
        notes.append(f"Odd shift {odd_shift}: {why or why_odd}.")
    if even_ok and odd_ok:
        return 1.0, (
            f"A shift by ({a}, {b}) moves your stride-2 output by ({a // 2}, {b // 2}), and no "
            f"shift of the output reproduces the odd shift {odd_shift} (Ex. 8(c))."
        )
    return 0.5 * even_ok + 0.5 * odd_ok, " ".join(notes) + (
        " The stride-2 output at (i, j) is the stride-1 output at (2i, 2j): an even shift "
        "2t moves it by t, an odd one has no counterpart (Ex. 8(c))."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Compare with the circular cross-correlation and test the shift (non-)equivariance."""
    r, c = Result(result), cases(seed)
    return [value(r, c), channels(r, c), roll(r, c), stride(r, c), shifts(r, c)]
