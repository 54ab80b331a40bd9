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

import numpy as np

from autograder.checklib import Property, Record, Result, check

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


def probe(student, seed: int, params: dict) -> dict:
    """Call ``quantize_groups`` on the seed's weights; a record of each call."""
    return {name: student.call(w.copy(), bits, g) for name, (w, bits, g) in cases(seed).items()}


# --- grade (trusted) ---------------------------------------------------------------------


def _qmax(bits: int) -> int:
    return 2 ** (bits - 1) - 1


def _expected_scales(w: np.ndarray, bits: int, group: int) -> np.ndarray:
    rows, cols = w.shape
    return np.abs(w.reshape(rows, cols // group, group)).max(axis=-1) / _qmax(bits)


def _read(rec: Record, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, str | None] | str:
    """The codes and the scales as flat float arrays, and the codes' dtype kind; or why not."""
    if not rec.ok:
        return rec.error
    if rec.items is None or len(rec.items) != 2:
        return f"returned {rec.type}, not a pair (q, scales)"
    for what, item in zip(("q", "scales"), rec.items, strict=True):
        if item.size is None:
            return f"{what} is not an array of numbers ({item.returned()})"
    q, s = rec.items
    if q.size != w.size:
        return f"q has {q.size} elements, not the {w.size} weights"
    if q.array() is None or s.array() is None:
        return "no codes or scales"
    kind = np.dtype(q.dtype).kind if q.dtype in np.sctypeDict else None
    return q.array().reshape(-1), s.array().reshape(-1), kind


def _parsed(read, w: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray] | str:
    """(q, scales) as float arrays of shapes w and (rows, cols/g), or why not."""
    if isinstance(read, str):
        return read
    rows, cols = w.shape
    q, s, _ = read
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


CHECKED = ("main", "eight", "small_groups", "one_group_per_row")


def _label(c: dict, name: str) -> str:
    return f"{c[name][1]} bits, groups of {c[name][2]}"


@check("integer codes within ±(2^(b−1) − 1)", 1.0)
def codes(reads: dict, c: dict):
    """The codes alone, whatever the scales."""
    notes = []
    for name in CHECKED:
        read, bits, label = reads[name], c[name][1], _label(c, name)
        if isinstance(read, str):
            notes.append(f"{label}: {read}.")
        elif read[2] not in ("i", "u"):
            notes.append(f"{label}: q has dtype kind {read[2]!r}; store integer codes.")
        elif not (np.all(np.isfinite(read[0])) and np.abs(read[0]).max() <= _qmax(bits)):
            notes.append(
                f"{label}: codes reach {np.abs(read[0]).max():g}, outside the symmetric signed "
                f"range of {bits} bits: |q| ≤ 2^(b−1) − 1 (§6.3)."
            )
    msg = "Integer codes within ±(2^(b−1) − 1)." if not notes else " ".join(notes)
    return 1 - len(notes) / len(CHECKED), msg


@check("one absmax scale per group", 2.0)
def scales(parsed: dict, c: dict):
    notes = []
    for name in CHECKED:
        (w, bits, g), p = c[name], parsed[name]
        if isinstance(p, str):
            notes.append(f"{_label(c, name)}: {p}.")
        elif not np.allclose(p[1], _expected_scales(w, bits, g), rtol=SCALE_RTOL, atol=1e-15):
            notes.append(
                f"{_label(c, name)}: the scales are not max|w| over the group divided by "
                "2^(b−1) − 1 (symmetric absmax, §6.3)."
            )
    msg = "One absmax scale per group: s = max|w|/(2^(b−1) − 1)." if not notes else " ".join(notes)
    return 1 - len(notes) / len(CHECKED), msg


@check("round trip within half a step: |w − s·q| ≤ s/2", 2.0)
def round_trip(parsed: dict, c: dict):
    notes = []
    for name in CHECKED:
        (w, _, g), p = c[name], parsed[name]
        why = p if isinstance(p, str) else _round_trip(p[0], p[1], w, g)
        if why:
            notes.append(f"{_label(c, name)}: {why}.")
    msg = "Every weight is within s/2 of s·q." if not notes else " ".join(notes)
    return 1 - len(notes) / len(CHECKED), msg


@check("a group of zeros gives codes 0, no NaN", 1.0)
def zero_group(reads: dict, c: dict):
    """The codes and the finiteness of the scales, whatever their layout."""
    (w, _, g), read = c["zero"], reads["zero"]
    zeros = np.repeat(np.abs(w.reshape(w.shape[0], -1, g)).max(axis=-1) == 0, g, axis=1)
    fix = "max|w| = 0 gives s = 0 and w/s = 0/0; give that group codes 0 (divide by a safe scale)"
    if isinstance(read, str):
        return False, f"With a group of zeros: {read}."
    if not (np.all(np.isfinite(read[0])) and np.all(np.isfinite(read[1]))):
        return False, f"With a group of zeros, codes or scales are NaN or infinite: {fix}."
    if np.any(read[0].reshape(w.shape)[zeros] != 0):
        return False, f"A group of zeros gets nonzero codes: {fix}."
    return True, "A group of zeros gets codes 0, with finite scales."


@check("smaller groups, smaller error with outliers", 1.0)
def smaller_groups(parsed: dict, c: dict):
    w, errors = c["small_groups"][0], []
    for name in ("small_groups", "one_group_per_row"):
        p = parsed[name]
        if isinstance(p, str) or not (np.all(np.isfinite(p[0])) and np.all(np.isfinite(p[1]))):
            break
        errors.append(np.linalg.norm(_dequantized(p[0], p[1], c[name][2]) - w) / np.linalg.norm(w))
    if len(errors) < 2:
        why = p if isinstance(p, str) else "codes or scales are not finite"
        return False, f"Cannot compare the errors of groups of 32 and 256: {why}."
    if errors[0] < errors[1]:
        return True, (
            f"With one outlier per row, 4-bit groups of 32 give a relative error of "
            f"{errors[0]:.3f}, against {errors[1]:.3f} with groups of 256."
        )
    return False, (
        f"With one outlier per row, groups of 32 give a relative error of {errors[0]:.3f}, "
        f"no smaller than {errors[1]:.3f} with groups of 256: each group needs its own "
        "scale, so that an outlier flattens only the weights of its own group (§6.3)."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score codes, scales and round trip against absmax quantization redrawn from the seed."""
    r, c = Result(result), cases(seed)
    reads = {name: _read(r.record(name), w) for name, (w, _, _) in c.items()}
    parsed = {name: _parsed(reads[name], w, g) for name, (w, _, g) in c.items()}
    return [
        codes(reads, c),
        scales(parsed, c),
        round_trip(parsed, c),
        zero_group(reads, c),
        smaller_groups(parsed, c),
    ]
