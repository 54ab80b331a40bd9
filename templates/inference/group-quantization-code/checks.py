"""Checks of the group-wise quantization code part (000 §6.3).

The round trip is measured with the student's own scales, so that a wrong range (2^b − 1
levels, say) costs the codes and the scales, not the rounding.
"""

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, check, per_case

SCALE_RTOL = 1e-5  # a float32 computation of the scales passes
STEP_SLACK = 1e-4  # |w − s·q| may exceed s/2 by this fraction (float32 rounding)
CHECKED = ("main", "eight", "small_groups", "one_group_per_row")
ONE_PER_GROUP = "one scale per group of g consecutive weights of a row"


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
    return {name: student.call(w.copy(), bits, g) for name, (w, bits, g) in cases(seed).items()}


def _finite(*arrays: np.ndarray) -> bool:
    return all(np.all(np.isfinite(a)) for a in arrays)


def _read(rec: Record, w: np.ndarray, group: int):
    """(codes in w's shape, scales, q's dtype kind, why the scales are misshapen), or why not."""
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
    q, s, n = q.array().reshape(w.shape), s.array().reshape(-1), w.size // group
    if s.size == n:
        return q, s.reshape(w.shape[0], -1), kind, None
    return q, s, kind, f"{s.size} scales for {n} groups of {group} weights: {ONE_PER_GROUP}"


def _codes_why(read, w: np.ndarray, bits: int, group: int) -> str | None:
    """The codes alone, whatever the scales."""
    q, _, kind, _ = read
    if kind not in ("i", "u"):
        return f"q has dtype kind {kind!r}; store integer codes"
    if not np.abs(q).max() <= 2 ** (bits - 1) - 1:  # nan and inf are outside too
        return (
            f"codes reach {np.abs(q).max():g}, outside the symmetric signed range of {bits} "
            "bits: |q| ≤ 2^(b−1) − 1 (§6.3)"
        )
    return None


def _scales_why(read, w: np.ndarray, bits: int, group: int) -> str | None:
    _, s, _, layout = read
    absmax = np.abs(w.reshape(w.shape[0], -1, group)).max(axis=-1) / (2 ** (bits - 1) - 1)
    if layout or np.allclose(s, absmax, rtol=SCALE_RTOL, atol=1e-15):
        return layout
    return (
        "the scales are not max|w| over the group divided by 2^(b−1) − 1 (symmetric absmax, §6.3)"
    )


def _round_trip_why(read, w: np.ndarray, bits: int, group: int) -> str | None:
    q, s, _, layout = read
    if layout or not _finite(q, s):
        return layout or "codes or scales are not finite"
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


def _verdicts(why, reads: dict, c: dict) -> list[Verdict]:
    """One verdict per checked call: why it cannot be read, or ``why(read, w, bits, group)``."""
    verdicts = []
    for name in CHECKED:
        (w, bits, g), read = c[name], reads[name]
        note = read if isinstance(read, str) else why(read, w, bits, g)
        verdicts.append(Verdict(note is None, f"{bits} bits, groups of {g}: {note}."))
    return verdicts


codes = per_case("integer codes within ±(2^(b−1) − 1)", 1.0, "Integer codes within ±(2^(b−1) − 1).")
scales = per_case(
    "one absmax scale per group", 2.0, "One absmax scale per group: s = max|w|/(2^(b−1) − 1)."
)
round_trip = per_case(
    "round trip within half a step: |w − s·q| ≤ s/2", 2.0, "Every weight is within s/2 of s·q."
)


@check("a group of zeros gives codes 0, no NaN", 1.0)
def zero_group(read, w: np.ndarray, bits: int, g: int):
    """The codes and the finiteness of the scales, whatever their layout."""
    zeros = np.repeat(np.abs(w.reshape(w.shape[0], -1, g)).max(axis=-1) == 0, g, axis=1)
    fix = "max|w| = 0 gives s = 0 and w/s = 0/0; give that group codes 0 (divide by a safe scale)"
    if isinstance(read, str):
        return False, f"With a group of zeros: {read}."
    if not _finite(read[0], read[1]):
        return False, f"With a group of zeros, codes or scales are NaN or infinite: {fix}."
    if np.any(read[0][zeros] != 0):
        return False, f"A group of zeros gets nonzero codes: {fix}."
    return True, "A group of zeros gets codes 0, with finite scales."


@check("smaller groups, smaller error with outliers", 1.0)
def smaller_groups(reads: dict, c: dict):
    w, errors = c["small_groups"][0], []
    for name in ("small_groups", "one_group_per_row"):
        read = reads[name]
        why = read if isinstance(read, str) else read[3]
        if why or not _finite(read[0], read[1]):
            why = why or "codes or scales are not finite"
            return False, f"Cannot compare the errors of groups of 32 and 256: {why}."
        w_hat = read[0] * np.repeat(read[1], c[name][2], axis=1)
        errors.append(np.linalg.norm(w_hat - w) / np.linalg.norm(w))
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
    r, c = Result(result), cases(seed)
    reads = {name: _read(r.record(name), w, g) for name, (w, _, g) in c.items()}
    return [
        codes(_verdicts(_codes_why, reads, c)),
        scales(_verdicts(_scales_why, reads, c)),
        round_trip(_verdicts(_round_trip_why, reads, c)),
        zero_group(reads["zero"], *c["zero"]),
        smaller_groups(reads, c),
    ]
