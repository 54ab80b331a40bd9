"""Checks of the online-softmax attention code part (000 §2.3, Proposition 2.4).

Block size and stability compare the student's function with itself (block = n; unshifted), so
a wrong scale costs only the value, no running max only stability, a dropped last block only
the block size.  One call's memory, at drawn sizes, is measured from outside the student's
process (cgroup); it must be exact if the small ones were, and not bit-identical for all blocks.
"""

import math
from dataclasses import replace

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, check, close, per_case, share

RTOL, ATOL = 1e-6, 1e-8  # float64 computations agree to ~1e-15
SHIFT = 1.0e4  # the scores of the stability test are shifted by ±(1 to 2)·SHIFT per query
# The memory call: m, n in [MEM_LOW, MEM_HIGH] (n a multiple of the block), so that the score
# matrix (34-52 MB) dwarfs blocks of keys and the process's noise, and a naive call stays fast
MEM_LOW, MEM_HIGH, MEM_D, MEM_DV, MEM_BLOCKS = 2048, 2560, 8, 4, (16, 32)
MEM_ROWS = 32  # rows of the memory call's output sent back and compared
SAME_ROWS = "every row of the result is the same: it does not depend on the queries"


def _qkv(rng: np.random.Generator, m: int, n: int, d: int, dv: int) -> dict:
    """Standard normal q (m × d), k (n × d), v (n × dv); the last column of v is all ones."""
    q, k, v = rng.standard_normal((m, d)), rng.standard_normal((n, d)), rng.standard_normal((n, dv))
    v[:, -1] = 1.0  # its attention output is the row sum of the weights: 1
    return {"q": q, "k": k, "v": v}


def cases(seed: int) -> dict:
    """The inputs and block sizes of one grading seed."""
    rng = np.random.default_rng([seed, 30])
    value = []
    for _ in range(2):
        block = int(rng.choice([3, 4, 5, 8]))
        n = block * int(rng.integers(3, 7))
        m, d, dv = int(rng.integers(8, 21)), int(rng.choice([8, 16])), int(rng.choice([4, 8]))
        value.append(_qkv(rng, m, n, d, dv) | {"block": block})
    n = int(rng.choice([24, 30, 36]))
    divisor = int(rng.choice([b for b in (2, 3, 4, 6) if n % b == 0]))
    other = int(rng.choice([b for b in (5, 7, 11) if n % b]))
    blocks = _qkv(rng, int(rng.integers(8, 17)), n, 8, 4) | {"blocks": [n, 1, divisor, other]}
    m, n, d = 12, 20, 8
    base = _qkv(rng, m, n, d, 4) | {"block": int(rng.choice([4, 5]))}
    signs = np.array([1.0, -1.0] * (m // 2))
    rng.shuffle(signs)
    base["q"][:, 0] = signs * rng.uniform(1.0, 2.0, m)  # query i's score shift: q[i, 0]·SHIFT
    shifted = dict(base, k=base["k"].copy())
    shifted["k"][:, 0] += SHIFT * math.sqrt(d)  # adds q[i, 0]·SHIFT to every score of row i
    block = int(rng.choice(MEM_BLOCKS))
    m = int(rng.integers(MEM_LOW, MEM_HIGH + 1))
    n = block * int(rng.integers(MEM_LOW // block, MEM_HIGH // block + 1))  # the last block full
    memory = _qkv(rng, m, n, MEM_D, MEM_DV) | {"block": block}
    memory["rows"] = sorted(int(i) for i in rng.choice(m, MEM_ROWS, replace=False))
    return {"value": value, "blocks": blocks, "base": base, "shifted": shifted, "memory": memory}


def _tensors(case: dict) -> tuple:
    import torch

    return tuple(torch.tensor(case[x], dtype=torch.float64) for x in ("q", "k", "v"))


def _measured_call(student, case: dict) -> dict:
    """The large call, its memory measured from outside the student's process: its record
    without its numbers but those of the rows ``case["rows"]`` (and whether all are finite)."""
    try:
        out, peak = student.measured(*_tensors(case), case["block"])
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return {"call": Record.of(err)}
    rec = Record.of(out, keep=MEM_HIGH * MEM_DV)
    a = rec.array()
    sampled = a is not None and a.ndim == 2 and a.shape[0] == case["q"].shape[0]
    finite = sampled and bool(np.all(np.isfinite(a)))
    rows = Record.of(a[case["rows"]]) if sampled else None
    got = {"call": replace(rec, values=None), "finite": finite, "rows": rows, "peak_bytes": peak}
    return got | {"meter": str(student.meter)[:300]}


def probe(student, seed: int, params: dict) -> dict:
    """The small calls in one round trip, then the large one, its memory measured."""
    c = cases(seed)
    calls = [(case, case["block"]) for case in c["value"]]
    calls += [(c["blocks"], b) for b in c["blocks"]["blocks"]]
    calls += [(c[key], c[key]["block"]) for key in ("base", "shifted")]
    recs = student.calls([(*_tensors(case), b) for case, b in calls], keep=10_000)
    out = {"value": recs[0:2], "blocks": recs[2:6], "base": recs[6], "shifted": recs[7]}
    return out | {"memory": _measured_call(student, c["memory"])}


def attention(case: dict) -> np.ndarray:
    """softmax(q kᵀ/√d) v, computed directly (the whole score matrix)."""
    s = case["q"] @ case["k"].T / math.sqrt(case["q"].shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ case["v"]


def _shape(case: dict) -> tuple[int, int]:
    return case["q"].shape[0], case["v"].shape[1]


def _unshaped(rec: Record, shape: tuple[int, int]) -> str | None:
    """Why the call gave no array of ``shape`` (None reads as nan, of shape ()), or None."""
    note = ""
    if rec.shape is None and rec.type != "NoneType":
        note = f"the result is not an array of numbers ({rec.returned()})"
    elif list(rec.shape or ()) != list(shape):
        note = f"the result has shape {list(rec.shape or ())}, expected (m, d_v) = {shape}"
    return rec.error or note if not rec.ok or note else None


def _out(rec: Record, shape: tuple[int, int]) -> tuple[np.ndarray | None, str]:
    """The student's output as an array of ``shape``, or None and why not."""
    why = _unshaped(rec, shape)
    a = rec.array(shape) if why is None else None
    if why is None and a is None:
        why = "the result is not a matrix of numbers"
    elif a is not None and not np.all(np.isfinite(a)):
        a, why = None, "the result is not finite (inf or nan)"
    return a, why or ""


def _varied(a: np.ndarray | None, why: str) -> tuple[np.ndarray | None, str]:
    """An output fit to be the student's own reference: not one row repeated (a constant
    result would agree with anything)."""
    if a is not None and np.allclose(a, a[:1], rtol=0, atol=1e-12):
        return None, SAME_ROWS
    return a, why


def _off(a: np.ndarray, exp: np.ndarray) -> str:
    return f"off by a relative error of {float(np.max(np.abs(a - exp)) / np.max(np.abs(exp))):.2g}"


def _matches(out: tuple[np.ndarray | None, str], case: dict, i: int) -> Verdict:
    """Input ``i`` (with a block that divides n) gives softmax(q kᵀ/√d) v."""
    (a, why), exp = out, attention(case)
    if close(a, exp, RTOL, ATOL):
        return Verdict(True)
    (m, d), n = case["q"].shape, case["k"].shape[0]
    why = _off(a, exp) if a is not None else why
    where = f"m = {m}, n = {n}, d = {d}, block {case['block']}"
    return Verdict(False, f"input {i + 1} ({where}): {why}.")


value = per_case(
    "matches softmax(QKᵀ/√d)V",
    2.0,
    "The output matches softmax(q kᵀ/√d) v on both random inputs.",
    " The output is softmax(q kᵀ/√d) v with d the width of q and k, "
    "the online softmax giving the same numbers as the direct one (Proposition 2.4).",
)


@check("attention weights sum to one", 1.0)
def weights(outs: list[np.ndarray | None]):
    """The all-ones column of v comes out as ones."""
    ones = [a is not None and bool(np.allclose(a[:, -1], 1.0, rtol=0, atol=1e-9)) for a in outs]
    if all(ones):
        return 1.0, "The attention weights of every query sum to one."
    if all(a is None for a in outs):
        return 0.0, "Cannot tell: your function returned no usable result."
    return share(ones), (
        "The last column of v is all ones, so its output column should be all ones; yours "
        "is not: the weights exp(s − m) must be divided by their running sum ℓ, and ℓ "
        "rescaled by exp(m_old − m_new) like o (Proposition 2.4)."
    )


@check("independent of the block size", 2.0)
def block_size(outs: list, c: dict):
    """The same result for any block size, against the student's own block = n."""
    n, blocks = c["blocks"]["k"].shape[0], c["blocks"]["blocks"]
    ref, why = _varied(*outs[0])
    if ref is None:
        return 0, (
            f"Cannot tell: with one block of all n = {n} keys your function gives no usable "
            f"result ({why})."
        )
    bad = [
        (b, why)
        for b, (a, why) in zip(blocks[1:], outs[1:], strict=True)
        if not close(a, ref, RTOL, ATOL)
    ]
    if not bad:
        return 1.0, (
            f"Blocks of 1, {blocks[2]} and {blocks[3]} keys give the result of one block "
            f"of n = {n}."
        )
    listed = ", ".join(f"block = {b}" + (f" ({why})" if why else "") for b, why in bad)
    verb = "gives" if len(bad) == 1 else "give"
    msg = f"With n = {n} keys, {listed} {verb} another result than one block of all keys."
    if [b for b, _ in bad] == [blocks[3]]:
        return 1 - len(bad) / 3, msg + (
            " Only the block size that does not divide n fails: keep the last, shorter "
            "block (range(0, n, block) and k[j : j + block])."
        )
    return 1 - len(bad) / 3, msg + (
        " When a block raises the maximum from m_old to m_new, what ℓ and o summed "
        "under m_old must be multiplied by exp(m_old − m_new) (Proposition 2.4)."
    )


@check("stable with scores of ±10⁴", 2.0)
def stable(r: Result, c: dict):
    """Scores of ±1e4: finite, and what the same inputs give without the shift."""
    base, why = _varied(*_out(r.record("base"), _shape(c["base"])))
    if base is None:
        return 0, (
            f"Cannot tell: on the unshifted inputs of this test your function gives no "
            f"usable result ({why})."
        )
    a, why = _out(r.record("shifted"), _shape(c["base"]))
    if close(a, attention(c["base"]), RTOL, ATOL) or close(a, base, RTOL, ATOL):
        return True, "Scores of ±10⁴ give a finite result, the same as without the shift."
    if a is None and "not finite" in why:
        return False, (
            "With scores of about ±10⁴ your result is not finite: exp(10⁴) overflows and "
            "exp(−10⁴) underflows to 0. Subtract the running maximum m before taking exp, "
            "and start m at −∞ (not 0), so that exp(s − m) ≤ 1 and ℓ ≥ 1 (Proposition 2.4)."
        )
    return False, (
        f"Adding a constant of about ±10⁴ to each query's scores changes your result "
        f"({why or 'it differs from the unshifted one'}), although softmax is invariant "
        "to it: compute exp(s − m) with the running maximum m (Proposition 2.4)."
    )


def _sampled(mem: Result, case: dict, value_ok: bool) -> tuple[np.ndarray | None, str]:
    """The memory call's sampled rows, exact if the small inputs were; or None and why not."""
    why = _unshaped(mem.record("call"), _shape(case))
    if why is not None:
        return None, why
    a = mem.record("rows").array((len(case["rows"]), _shape(case)[1]))
    if a is None or mem.get("finite") is not True:
        return None, "the result is not a finite matrix of numbers"
    a, why = _varied(a, "")
    exp = attention(dict(case, q=case["q"][case["rows"]]))
    if a is not None and value_ok and not close(a, exp, RTOL, ATOL):
        return None, f"{_off(a, exp)}, though right on the small inputs"
    return a, why


@check("never materialises the n × n score matrix", 2.0)
def memory(mem: Result, c: dict, value_ok: bool, blocks: list):
    """The memory of the student's process, measured from outside."""
    case = c["memory"]
    (m, d), n = case["q"].shape, case["k"].shape[0]
    matrix_bytes = 8 * m * n  # the float64 m × n scores
    where = f"m = {m}, n = {n}, d = {d}, block = {case['block']}"
    a, why = _sampled(mem, case, value_ok)
    if a is None:
        return 0, f"Cannot tell: at {where} your function gives no usable result ({why})."
    peak = mem.get("peak_bytes")
    if type(peak) is not int:
        meter = str(mem.get("meter") or "no memory meter")[:300]
        return 0, f"The sandbox could not measure the memory of your function's process ({meter})."
    # the messages give no measured number: a regrade says the same
    if peak >= matrix_bytes // 2:
        return 0, (
            f"At {where} the memory of your function's process grew during the call by at "
            f"least half the {m} × {n} score matrix ({matrix_bytes / 1e6:.1f} MB in float64): "
            "compute q kᵀ for one block of keys at a time (m × block scores) and fold it into "
            "the running m, ℓ and o, as FlashAttention does (§2.3, Proposition 2.4)."
        )
    if all(a is not None and np.array_equal(a, blocks[0]) for a in blocks):
        b = c["blocks"]["blocks"]  # one result bit for bit: the blocks change nothing
        return 0, (
            f"With n = {b[0]} keys your function gives the same result, bit for bit, for blocks "
            f"of {b[1]}, {b[2]}, {b[3]} and {b[0]} keys: the blocks change nothing, as in a "
            "fused attention kernel (F.scaled_dot_product_attention), which ignores them. "
            "Implement the online softmax of Proposition 2.4 yourself, block by block."
        )
    return 1, (
        f"At {where} the memory of your function's process grew during the call by less than "
        f"half the {m} × {n} score matrix ({matrix_bytes / 2e6:.1f} MB): it is never formed."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score the outputs against softmax(q kᵀ/√d) v and against the student's own outputs."""
    r, c = Result(result), cases(seed)
    small = [_out(rec, _shape(c["value"][i])) for i, rec in enumerate(r.records("value", 2))]
    blocks = [_out(rec, _shape(c["blocks"])) for rec in r.records("blocks", 4)]
    first = value([_matches(out, c["value"][i], i) for i, out in enumerate(small)])
    outs = [a for a, _ in small + blocks]
    rest = [weights(outs), block_size(blocks, c), stable(r, c)]
    return [first, *rest, memory(r.part("memory"), c, first.score == 1, outs[2:])]
