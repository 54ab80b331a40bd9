"""Checks of the group-wise quantization code part (000 §6.3).

``probe`` runs in the probe process, beside the student's: it calls the student's
``quantize_groups(w, bits, group_size)`` on weight matrices drawn from the seed (small
Gaussian weights with a few outliers, a matrix with a group of zeros, and one matrix
quantized with two group sizes) and returns the codes, their dtype and the scales.
``grade`` runs in the trusted process: it redraws the weights and checks the codes against
the signed range, the scales against max|w|/(2^(b−1) − 1) per group, the round trip
against half a step, and the errors of the two group sizes against each other.

The properties are separated on purpose: the round trip is measured with the student's
own scales, so that a wrong range (2^b − 1 levels, say) costs the codes and the scales,
not the rounding.
"""

from __future__ import annotations

import math

import numpy as np

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

SCALE_RTOL = 1e-5  # a float32 computation of the scales passes
STEP_SLACK = 1e-4  # |w − s·q| may exceed s/2 by this fraction (float32 rounding)

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def _weights(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Weights of scale 0.02 with one outlier of 0.2-0.6 in every row (§6.3's code)."""
    w = 0.02 * rng.standard_normal((rows, cols))
    cols_out = rng.integers(0, cols, rows)
    w[np.arange(rows), cols_out] = rng.choice([-1.0, 1.0], rows) * rng.uniform(0.2, 0.6, rows)
    return w


def cases(seed: int) -> dict:
    """The calls of one grading seed: name -> (w, bits, group_size)."""
    rng = np.random.default_rng([seed, 40])
    low_bits, group = int(rng.choice([3, 4])), int(rng.choice([32, 64]))
    zero = 0.02 * rng.standard_normal((2, 128))
    zero[int(rng.integers(2)), 32 * int(rng.integers(4)) + np.arange(32)] = 0.0
    outliers = _weights(rng, 4, 256)
    return {
        "main": (_weights(rng, 4, 256), low_bits, group),
        "eight": (_weights(rng, 4, 256), 8, int(rng.choice([64, 128]))),
        "zero": (zero, 4, 32),
        "small_groups": (outliers, 4, 32),
        "one_group_per_row": (outliers, 4, 256),
    }


def _plain(values) -> list:
    return [float(v) if math.isfinite(v) else str(float(v)) for v in values]


def _array(x, what: str) -> tuple[np.ndarray | None, str | None]:
    try:
        if hasattr(x, "detach"):  # a torch tensor
            x = x.detach().cpu().numpy()
        a = np.asarray(x)
    except BaseException as err:  # noqa: BLE001
        return None, f"{what} is not an array: {type(err).__name__}: {err}"[:300]
    if a.dtype.kind not in "biuf":
        return None, f"{what} is not an array of numbers (dtype {a.dtype})"
    return a, None


def _call(student, w: np.ndarray, bits: int, group: int) -> dict:
    try:
        out = student(w.copy(), bits, group)
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return {"error": f"{type(err).__name__}: {err}"[:300]}
    if not isinstance(out, tuple | list) or len(out) != 2:
        return {"error": f"returned {type(out).__name__}, not a pair (q, scales)"}
    q, why = _array(out[0], "q")
    scales, why_s = _array(out[1], "scales")
    if q is None or scales is None:
        return {"error": why or why_s}
    if q.size != w.size:
        return {"error": f"q has {q.size} elements, not the {w.size} weights"}
    return {
        "error": None,
        "q_kind": q.dtype.kind,
        "q": _plain(q.astype(np.float64).ravel().tolist()),
        "scales": _plain(scales.astype(np.float64).ravel().tolist()),
    }


def probe(student, seed: int, params: dict) -> dict:
    """Call ``quantize_groups`` on the seed's weights; return codes and scales (plain data)."""
    return {name: _call(student, *args) for name, args in cases(seed).items()}


# --- grade (trusted) ---------------------------------------------------------------------


def _qmax(bits: int) -> int:
    return 2 ** (bits - 1) - 1


def _expected_scales(w: np.ndarray, bits: int, group: int) -> np.ndarray:
    rows, cols = w.shape
    return np.abs(w.reshape(rows, cols // group, group)).max(axis=-1) / _qmax(bits)


def _parsed(rec, w: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray] | str:
    """(q, scales) as float arrays of shapes w and (rows, cols/g), or why not."""
    from autograder.checktools import vector

    if not isinstance(rec, dict):
        return "no result"
    if isinstance(rec.get("error"), str):
        return rec["error"]
    rows, cols = w.shape
    q = vector(rec.get("q"), w.size)
    s = vector(rec.get("scales"))
    if q is None or s is None:
        return "no codes or scales"
    if s.size != rows * cols // group:
        return (
            f"{s.size} scales for {rows * cols // group} groups of {group} weights: one scale "
            "per group of g consecutive weights of a row"
        )
    return q.reshape(w.shape), s.reshape(rows, cols // group)


def _dequantized(q: np.ndarray, s: np.ndarray, group: int) -> np.ndarray:
    return q * np.repeat(s, group, axis=1)


def _round_trip(q: np.ndarray, s: np.ndarray, w: np.ndarray, group: int) -> str | None:
    """Why the codes are not the nearest integers to w/s, or None."""
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(s))):
        return "codes or scales are not finite"
    if not np.array_equal(q, np.round(q)):
        return "the codes are not integers: round w/s to the nearest integer"
    step = np.repeat(s, group, axis=1)
    excess = np.abs(w - q * step) - step / 2 * (1 + STEP_SLACK) - 1e-12
    if np.any(excess > 0):
        return (
            f"{int(np.sum(excess > 0))} of {w.size} weights are more than half a step s/2 "
            "from s·q: round w/s to the nearest integer (not down, not toward zero)"
        )
    return None


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score codes, scales and round trip against absmax quantization redrawn from the seed."""
    from autograder.checktools import prop, vector

    c = cases(seed)
    result = result if isinstance(result, dict) else {}
    parsed = {name: _parsed(result.get(name), w, g) for name, (w, _, g) in c.items()}
    checked = ("main", "eight", "small_groups", "one_group_per_row")
    props = []

    # 1. integer codes within ±qmax (the codes alone, whatever the scales)
    notes = []
    for name in checked:
        w, bits, g = c[name]
        rec = result.get(name) if isinstance(result.get(name), dict) else {}
        q = vector(rec.get("q"), w.size)
        label = f"{bits} bits, groups of {g}"
        if q is None:
            notes.append(f"{label}: {rec.get('error') or 'no codes'}.")
        elif rec.get("q_kind") not in ("i", "u"):
            notes.append(f"{label}: q has dtype kind {rec.get('q_kind')!r}; store integer codes.")
        elif not (np.all(np.isfinite(q)) and np.abs(q).max() <= _qmax(bits)):
            notes.append(
                f"{label}: codes reach {np.abs(q).max():g}, outside the symmetric signed range "
                f"of {bits} bits: |q| ≤ 2^(b−1) − 1 (§6.3)."
            )
    msg = "Integer codes within ±(2^(b−1) − 1)." if not notes else " ".join(notes)
    score = 1 - len(notes) / len(checked)
    props.append(prop("integer codes within ±(2^(b−1) − 1)", 1.0, score, msg))

    # 2. one absmax scale per group
    notes = []
    for name in checked:
        w, bits, g = c[name]
        p = parsed[name]
        label = f"{bits} bits, groups of {g}"
        if isinstance(p, str):
            notes.append(f"{label}: {p}.")
        elif not np.allclose(p[1], _expected_scales(w, bits, g), rtol=SCALE_RTOL, atol=1e-15):
            notes.append(
                f"{label}: the scales are not max|w| over the group divided by 2^(b−1) − 1 "
                "(symmetric absmax, §6.3)."
            )
    msg = "One absmax scale per group: s = max|w|/(2^(b−1) − 1)." if not notes else " ".join(notes)
    score = 1 - len(notes) / len(checked)
    props.append(prop("one absmax scale per group", 2.0, score, msg))

    # 3. round trip within half a step
    notes = []
    for name in checked:
        w, bits, g = c[name]
        p = parsed[name]
        why = p if isinstance(p, str) else _round_trip(p[0], p[1], w, g)
        if why:
            notes.append(f"{bits} bits, groups of {g}: {why}.")
    msg = "Every weight is within s/2 of s·q." if not notes else " ".join(notes)
    score = 1 - len(notes) / len(checked)
    props.append(prop("round trip within half a step: |w − s·q| ≤ s/2", 2.0, score, msg))

    # 4. a group of zeros (the codes and the finiteness of the scales, whatever their layout)
    w, bits, g = c["zero"]
    rec = result.get("zero") if isinstance(result.get("zero"), dict) else {}
    q, scales = vector(rec.get("q"), w.size), vector(rec.get("scales"))
    zeros = np.repeat(np.abs(w.reshape(w.shape[0], -1, g)).max(axis=-1) == 0, g, axis=1)
    fix = "max|w| = 0 gives s = 0 and w/s = 0/0; give that group codes 0 (divide by a safe scale)"
    if q is None or scales is None:
        ok, msg = False, f"With a group of zeros: {rec.get('error') or 'no codes or scales'}."
    elif not (np.all(np.isfinite(q)) and np.all(np.isfinite(scales))):
        ok, msg = False, f"With a group of zeros, codes or scales are NaN or infinite: {fix}."
    elif np.any(q.reshape(w.shape)[zeros] != 0):
        ok, msg = False, f"A group of zeros gets nonzero codes: {fix}."
    else:
        ok, msg = True, "A group of zeros gets codes 0, with finite scales."
    props.append(prop("a group of zeros gives codes 0, no NaN", 1.0, ok, msg))

    # 5. smaller groups, smaller error on weights with outliers
    w = c["small_groups"][0]
    errors = []
    for name in ("small_groups", "one_group_per_row"):
        _, _, g = c[name]
        p = parsed[name]
        if isinstance(p, str) or not (np.all(np.isfinite(p[0])) and np.all(np.isfinite(p[1]))):
            break
        errors.append(np.linalg.norm(_dequantized(p[0], p[1], g) - w) / np.linalg.norm(w))
    if len(errors) < 2:
        why = p if isinstance(p, str) else "codes or scales are not finite"
        ok, msg = False, f"Cannot compare the errors of groups of 32 and 256: {why}."
    elif errors[0] < errors[1]:
        ok = True
        msg = (
            f"With one outlier per row, 4-bit groups of 32 give a relative error of "
            f"{errors[0]:.3f}, against {errors[1]:.3f} with groups of 256."
        )
    else:
        ok = False
        msg = (
            f"With one outlier per row, groups of 32 give a relative error of {errors[0]:.3f}, "
            f"no smaller than {errors[1]:.3f} with groups of 256: each group needs its own "
            "scale, so that an outlier flattens only the weights of its own group (§6.3)."
        )
    props.append(prop("smaller groups, smaller error with outliers", 1.0, ok, msg))
    return props
