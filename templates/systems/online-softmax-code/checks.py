"""Checks of the online-softmax attention code part (000 §2.3, Proposition 2.4).

``probe`` runs in the probe process, beside the student's: it calls the student's
``online_softmax_attention(q, k, v, block)`` on float64 tensors drawn from the seed and
returns the outputs as plain data.  One call runs with m and n between 2048 and 2560
(drawn from the seed, so the notebook cannot know them before the call): the probe process
measures the memory of the student's process over that call from outside it, through the
job's memory cgroup (``student.measured``), which holds the student's process and its
children and which only the probe process can reset and read.  A full m × n score matrix
of float64 (34-52 MB) shows as that much more memory (80-90 MB measured for torch's
softmax); blocks of keys (m × block) stay far below (0.3-4.5 MB measured, the noise of the
process included).  Patching tracemalloc, disabling torch's function modes, computing in
NumPy or in a child process, or resetting the process's own VmHWM changes nothing the
cgroup records.  Where the sandbox can make no cgroup, the probe process reads the
process's VmHWM instead (which misses children, and which the process can reset); with
no meter at all, the property says that it cannot tell.
``grade`` runs in the trusted process: it redraws the inputs and recomputes
softmax(q kᵀ/√d) v directly.

What the memory measure cannot see: memory the student's process made resident before the
call (a buffer filled in an earlier cell and reused through ``out=``, or freed memory its
allocator keeps): only the growth during the call is measured.  The drawn sizes only mean
that such a buffer must be sized for the largest m × n the seed may draw.

The properties are separated on purpose: the block-size and stability checks compare the
student's function with itself (block = n; the same inputs without the shift of the
scores), so that a wrong scale costs only the value, a missing running maximum only the
stability, and a dropped last block only the block-size property.  The memory call's
output must be the exact attention only when the small inputs were (so that a function
that computes something else at large sizes gains nothing); and a result that is the same
bit for bit for every block size (a fused attention kernel, which ignores the blocks) does
not count as block by block.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from autograder.checklib import Property, Record, Result, check, close

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

RTOL, ATOL = 1e-6, 1e-8  # float64 computations agree to ~1e-15
SHIFT = 1.0e4  # the scores of the stability test are shifted by ±(1 to 2)·SHIFT per query
# The memory call: m and n drawn in [MEM_LOW, MEM_HIGH] (n a multiple of the block), so that
# the float64 score matrix (34-52 MB) dwarfs what blocks of keys take (m × block × 8 bytes)
# and the noise of the process (a few MB), and a naive call stays fast (~0.1 s).
MEM_LOW, MEM_HIGH, MEM_D, MEM_DV, MEM_BLOCKS = 2048, 2560, 8, 4, (16, 32)
MEM_ROWS = 32  # rows of the memory call's output sent back and compared

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


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
    """The large call, its memory measured from outside the student's process: the record
    of its output, without its numbers but those of the rows ``case["rows"]`` (and whether
    all are finite)."""
    try:
        out, peak = student.measured(*_tensors(case), case["block"])
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return {"call": Record.of(err)}
    rec = Record.of(out, keep=MEM_HIGH * MEM_DV)
    a = rec.array()
    sampled = a is not None and a.ndim == 2 and a.shape[0] == case["q"].shape[0]
    return {
        "call": replace(rec, values=None),
        "finite": sampled and bool(np.all(np.isfinite(a))),
        "rows": Record.of(a[case["rows"]]) if sampled else None,
        "peak_bytes": peak,
        "meter": str(student.meter)[:300],
    }


def probe(student, seed: int, params: dict) -> dict:
    """Call ``online_softmax_attention`` on the seed's inputs; return the outputs, and the
    memory the student's process took during the large call."""
    c = cases(seed)
    small = [case | {"use": case["block"]} for case in c["value"]]
    small += [c["blocks"] | {"use": b} for b in c["blocks"]["blocks"]]
    small += [c["base"] | {"use": c["base"]["block"]}]
    small += [c["shifted"] | {"use": c["shifted"]["block"]}]
    recs = student.calls([(*_tensors(case), case["use"]) for case in small], keep=10_000)
    return {
        "value": recs[0:2],
        "blocks": recs[2:6],
        "base": recs[6],
        "shifted": recs[7],
        "memory": _measured_call(student, c["memory"]),
    }


# --- grade (trusted) ---------------------------------------------------------------------


def attention(case: dict) -> np.ndarray:
    """softmax(q kᵀ/√d) v, computed directly (the whole score matrix)."""
    s = case["q"] @ case["k"].T / math.sqrt(case["q"].shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ case["v"]


def _shape_note(rec: Record, shape: tuple[int, int]) -> str:
    """Why the record is not an array of ``shape`` (None reads as nan, of shape ()), or ""."""
    if rec.shape is None and rec.type != "NoneType":
        return f"the result is not an array of numbers ({rec.returned()})"
    got = list(rec.shape or ())
    return "" if got == list(shape) else f"the result has shape {got}, expected (m, d_v) = {shape}"


def _out(rec: Record, shape: tuple[int, int]) -> tuple[np.ndarray | None, str]:
    """The student's output as an array of ``shape``, or None and why not."""
    if not rec.ok or _shape_note(rec, shape):
        return None, rec.error or _shape_note(rec, shape)
    a = rec.array(shape)
    if a is None:
        return None, "the result is not a matrix of numbers"
    if not np.all(np.isfinite(a)):
        return None, "the result is not finite (inf or nan)"
    return a, ""


def _usable(rec: Record, shape: tuple[int, int]) -> tuple[np.ndarray | None, str]:
    """An output that can serve as the student's own reference: finite, and not one row
    repeated (a constant result would agree with anything)."""
    a, why = _out(rec, shape)
    if a is not None and np.allclose(a, a[:1], rtol=0, atol=1e-12):
        return None, "every row of the result is the same: it does not depend on the queries"
    return a, why


def _shape(case: dict) -> tuple[int, int]:
    return case["q"].shape[0], case["v"].shape[1]


@check("matches softmax(QKᵀ/√d)V", 2.0)
def value(r: Result, c: dict):
    """With a block that divides n."""
    oks, notes = [], []
    for i, (case, rec) in enumerate(zip(c["value"], r.records("value", 2), strict=True)):
        a, why = _out(rec, _shape(case))
        exp = attention(case)
        oks.append(close(a, exp, RTOL, ATOL))
        if a is not None and not oks[-1]:
            err = float(np.max(np.abs(a - exp)) / np.max(np.abs(exp)))
            why = f"off by a relative error of {err:.2g}"
        if not oks[-1]:
            m, n, d = case["q"].shape[0], case["k"].shape[0], case["q"].shape[1]
            notes.append(
                f"input {i + 1} (m = {m}, n = {n}, d = {d}, block {case['block']}): {why}."
            )
    if all(oks):
        return 1.0, "The output matches softmax(q kᵀ/√d) v on both random inputs."
    return sum(oks) / 2, " ".join(notes) + (
        " The output is softmax(q kᵀ/√d) v with d the width of q and k, "
        "the online softmax giving the same numbers as the direct one (Proposition 2.4)."
    )


@check("attention weights sum to one", 1.0)
def weights(r: Result, c: dict):
    """The all-ones column of v comes out as ones."""
    recs = zip(c["value"], r.records("value", 2), strict=True)
    outs = [_out(rec, _shape(case))[0] for case, rec in recs]
    outs += [_out(rec, _shape(c["blocks"]))[0] for rec in r.records("blocks", 4)]
    ones = [a is not None and bool(np.allclose(a[:, -1], 1.0, rtol=0, atol=1e-9)) for a in outs]
    if all(ones):
        msg = "The attention weights of every query sum to one."
    elif not any(a is not None for a in outs):
        msg = "Cannot tell: your function returned no usable result."
    else:
        msg = (
            "The last column of v is all ones, so its output column should be all ones; yours "
            "is not: the weights exp(s − m) must be divided by their running sum ℓ, and ℓ "
            "rescaled by exp(m_old − m_new) like o (Proposition 2.4)."
        )
    return sum(ones) / len(ones), msg


@check("independent of the block size", 2.0)
def block_size(r: Result, c: dict):
    """The same result for any block size, against the student's own block = n."""
    case, recs = c["blocks"], r.records("blocks", 4)
    n, blocks = case["k"].shape[0], case["blocks"]
    ref, why = _usable(recs[0], _shape(case))
    if ref is None:
        return 0, (
            f"Cannot tell: with one block of all n = {n} keys your function gives no usable "
            f"result ({why})."
        )
    bad = []
    for b, rec in zip(blocks[1:], recs[1:], strict=True):
        a, why = _out(rec, _shape(case))
        if not close(a, ref, RTOL, ATOL):
            bad.append((b, why))
    if not bad:
        return 1.0, (
            f"Blocks of 1, {blocks[2]} and {blocks[3]} keys give the result of one block "
            f"of n = {n}."
        )
    listed = ", ".join(f"block = {b}" + (f" ({why})" if why else "") for b, why in bad)
    verb = "gives" if len(bad) == 1 else "give"
    msg = f"With n = {n} keys, {listed} {verb} another result than one block of all keys."
    if [b for b, _ in bad] == [blocks[3]]:
        msg += (
            " Only the block size that does not divide n fails: keep the last, shorter "
            "block (range(0, n, block) and k[j : j + block])."
        )
    else:
        msg += (
            " When a block raises the maximum from m_old to m_new, what ℓ and o summed "
            "under m_old must be multiplied by exp(m_old − m_new) (Proposition 2.4)."
        )
    return 1 - len(bad) / 3, msg


@check("stable with scores of ±10⁴", 2.0)
def stable(r: Result, c: dict):
    """Scores of ±1e4: finite, and what the same inputs give without the shift."""
    base, why = _usable(r.record("base"), _shape(c["base"]))
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


def _sampled(mem: Result, case: dict) -> tuple[np.ndarray | None, str]:
    """The memory call's sampled rows as an array, or None and why not."""
    rec, shape = mem.record("call"), _shape(case)
    if not rec.ok or _shape_note(rec, shape):
        return None, rec.error or _shape_note(rec, shape)
    a = mem.record("rows").array((len(case["rows"]), shape[1]))
    if a is None or mem.get("finite") is not True:
        return None, "the result is not a finite matrix of numbers"
    if np.allclose(a, a[:1], rtol=0, atol=1e-12):
        return None, "every row of the result is the same: it does not depend on the queries"
    return a, ""


def _same_for_every_block(records: list, case: dict) -> bool:
    """Whether the block-size calls gave one result, bit for bit (a function that ignores
    the blocks: the whole matrix, or a fused kernel; honest block sums round differently)."""
    outs = [_out(rec, _shape(case))[0] for rec in records]
    return all(a is not None for a in outs) and all(np.array_equal(a, outs[0]) for a in outs)


@check("never materialises the n × n score matrix", 2.0)
def memory(r: Result, c: dict, value_ok: bool):
    """The memory of the student's process, measured from outside."""
    mem, case = r.part("memory"), c["memory"]
    (m, d), n = case["q"].shape, case["k"].shape[0]
    matrix_bytes = 8 * m * n  # the float64 m × n scores
    where = f"m = {m}, n = {n}, d = {d}, block = {case['block']}"
    a, why = _sampled(mem, case)
    if a is not None and value_ok:
        exp = attention(dict(case, q=case["q"][case["rows"]]))
        if not close(a, exp, RTOL, ATOL):
            err = float(np.max(np.abs(a - exp)) / np.max(np.abs(exp)))
            a = None
            why = f"off by a relative error of {err:.2g}, though right on the small inputs"
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
    if _same_for_every_block(r.records("blocks", 4), c["blocks"]):
        b = c["blocks"]["blocks"]
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
    first = value(r, c)
    rest = [weights(r, c), block_size(r, c), stable(r, c), memory(r, c, first.score == 1)]
    return [first, *rest]
