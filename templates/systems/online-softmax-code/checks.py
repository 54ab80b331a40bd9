"""Checks of the online-softmax attention code part (000 §2.3, Proposition 2.4).

``probe`` runs in the sandbox: it calls the student's ``online_softmax_attention(q, k, v,
block)`` on float64 tensors drawn from the seed and returns the outputs as plain data.
One call runs at m = n = MEM_N under a torch function mode that records the size of every
tensor the function creates or passes to torch, and under tracemalloc, which sees NumPy's
arrays: that is how the autograder knows whether the n × n score matrix was formed.
``grade`` runs in the trusted process: it redraws the inputs and recomputes
softmax(q kᵀ/√d) v directly.

The properties are separated on purpose: the block-size and stability checks compare the
student's function with itself (block = n; the same inputs without the shift of the
scores), so that a wrong scale costs only the value, a missing running maximum only the
stability, and a dropped last block only the block-size property.
"""

from __future__ import annotations

import math

import numpy as np

RTOL, ATOL = 1e-6, 1e-8  # float64 computations agree to ~1e-15
MEM_N, MEM_D, MEM_DV, MEM_BLOCK = 384, 8, 4, 16
SHIFT = 1.0e4  # the scores of the stability test are shifted by ±(1 to 2)·SHIFT per query

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

    memory = _qkv(rng, MEM_N, MEM_N, MEM_D, MEM_DV) | {"block": MEM_BLOCK}
    return {"value": value, "blocks": blocks, "base": base, "shifted": shifted, "memory": memory}


def _plain(values) -> list:
    return [float(x) if math.isfinite(x) else str(float(x)) for x in values]


def _output(out) -> dict:
    """The student's result as plain data: its shape and (if 2-D) its rows."""
    import torch

    try:
        if isinstance(out, torch.Tensor):
            a = out.detach().to("cpu", torch.float64).numpy()
        else:
            a = np.asarray(out, dtype=np.float64)
    except Exception as err:  # noqa: BLE001 - whatever the student returned
        return {
            "error": f"the result is not an array of numbers: {type(err).__name__}: {err}"[:300]
        }
    rec: dict = {"error": None, "shape": [int(s) for s in a.shape]}
    if a.ndim == 2 and a.size <= 10_000:
        rec["value"] = [_plain(row) for row in a.tolist()]
    return rec


def _call(student, case: dict, block: int) -> dict:
    import torch

    q, k, v = (torch.tensor(case[x], dtype=torch.float64) for x in ("q", "k", "v"))
    try:
        out = student(q, k, v, block)
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return {"error": f"{type(err).__name__}: {err}"[:300]}
    return _output(out)


def _watched_call(student, case: dict) -> dict:
    """Call once under a torch function mode and tracemalloc; record the largest sizes."""
    import tracemalloc

    import torch
    from torch.overrides import TorchFunctionMode

    class Sizes(TorchFunctionMode):
        """Sees every torch function and tensor method the student calls."""

        def __init__(self):
            super().__init__()
            self.largest = 0  # elements of the largest tensor in or out of a torch call
            self.fused: set[str] = set()

        def _see(self, x, depth: int = 0) -> None:
            if isinstance(x, torch.Tensor):
                self.largest = max(self.largest, int(x.numel()))
            elif isinstance(x, list | tuple) and depth < 3:
                for y in x:
                    self._see(y, depth + 1)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if "scaled_dot_product" in name or "multi_head_attention" in name:
                self.fused.add(name)
            out = func(*args, **kwargs)
            self._see(args)
            self._see(tuple(kwargs.values()))
            self._see(out)
            return out

    q, k, v = (torch.tensor(case[x], dtype=torch.float64) for x in ("q", "k", "v"))
    sizes = Sizes()
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        with sizes:
            out = student(q, k, v, case["block"])
        error = None
    except BaseException as err:  # noqa: BLE001
        error = f"{type(err).__name__}: {err}"[:300]
    finally:
        peak = tracemalloc.get_traced_memory()[1] - before
        if not tracing:
            tracemalloc.stop()
    rec = {"error": error} if error else _output(out)
    return rec | {
        "largest": sizes.largest,
        "python_peak_bytes": int(peak),
        "fused": sorted(sizes.fused),
    }


def probe(student, seed: int, params: dict) -> dict:
    """Call ``online_softmax_attention`` on the seed's inputs; return the outputs."""
    c = cases(seed)
    return {
        "value": [_call(student, case, case["block"]) for case in c["value"]],
        "blocks": [_call(student, c["blocks"], b) for b in c["blocks"]["blocks"]],
        "base": _call(student, c["base"], c["base"]["block"]),
        "shifted": _call(student, c["shifted"], c["shifted"]["block"]),
        "memory": _watched_call(student, c["memory"]),
    }


# --- grade (trusted) ---------------------------------------------------------------------


def attention(case: dict) -> np.ndarray:
    """softmax(q kᵀ/√d) v, computed directly (the whole score matrix)."""
    s = case["q"] @ case["k"].T / math.sqrt(case["q"].shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ case["v"]


def _out(rec, shape: tuple[int, int]) -> tuple[np.ndarray | None, str]:
    """The student's output as an array of ``shape``, or None and why not."""
    from autograder.checktools import matrix

    if not isinstance(rec, dict):
        return None, "no result"
    if rec.get("error"):
        return None, str(rec["error"])
    got = rec.get("shape")
    if got != list(shape):
        return None, f"the result has shape {got}, expected (m, d_v) = {tuple(shape)}"
    a = matrix(rec.get("value"))
    if a is None or a.shape != shape:
        return None, "the result is not a matrix of numbers"
    if not np.all(np.isfinite(a)):
        return None, "the result is not finite (inf or nan)"
    return a, ""


def _usable(rec, shape: tuple[int, int]) -> tuple[np.ndarray | None, str]:
    """An output that can serve as the student's own reference: finite, and not one row
    repeated (a constant result would agree with anything)."""
    a, why = _out(rec, shape)
    if a is not None and np.allclose(a, a[:1], rtol=0, atol=1e-12):
        return None, "every row of the result is the same: it does not depend on the queries"
    return a, why


def _close(a: np.ndarray | None, b: np.ndarray) -> bool:
    from autograder.checktools import close

    return close(a, b, rtol=RTOL, atol=ATOL)


def _shape(case: dict) -> tuple[int, int]:
    return case["q"].shape[0], case["v"].shape[1]


def _list(x, n: int) -> list:
    """The first n records of a probe's list, padded with None."""
    x = x if isinstance(x, list) else []
    return (x + [None] * n)[:n]


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score the outputs against softmax(q kᵀ/√d) v and against the student's own outputs."""
    from autograder.checktools import prop

    c = cases(seed)
    r = result if isinstance(result, dict) else {}
    value_recs = _list(r.get("value"), 2)
    block_recs = _list(r.get("blocks"), 4)
    props = []

    # 1. the value, with a block that divides n
    oks, notes = [], []
    for i, (case, rec) in enumerate(zip(c["value"], value_recs, strict=True)):
        a, why = _out(rec, _shape(case))
        exp = attention(case)
        oks.append(_close(a, exp))
        if a is not None and not oks[-1]:
            err = float(np.max(np.abs(a - exp)) / np.max(np.abs(exp)))
            why = f"off by a relative error of {err:.2g}"
        if not oks[-1]:
            m, n, d = case["q"].shape[0], case["k"].shape[0], case["q"].shape[1]
            notes.append(
                f"input {i + 1} (m = {m}, n = {n}, d = {d}, block {case['block']}): {why}."
            )
    msg = (
        "The output matches softmax(q kᵀ/√d) v on both random inputs."
        if all(oks)
        else " ".join(notes) + " The output is softmax(q kᵀ/√d) v with d the width of q and k, "
        "the online softmax giving the same numbers as the direct one (Proposition 2.4)."
    )
    props.append(prop("matches softmax(QKᵀ/√d)V", 2.0, sum(oks) / 2, msg))

    # 2. the weights sum to one: the all-ones column of v comes out as ones
    outs = [_out(rec, _shape(case))[0] for case, rec in zip(c["value"], value_recs, strict=True)]
    outs += [_out(rec, _shape(c["blocks"]))[0] for rec in block_recs]
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
    props.append(prop("attention weights sum to one", 1.0, sum(ones) / len(ones), msg))

    # 3. the same result for any block size, against the student's own block = n
    case = c["blocks"]
    n = case["k"].shape[0]
    ref, why = _usable(block_recs[0], _shape(case))
    if ref is None:
        props.append(
            prop(
                "independent of the block size",
                2.0,
                0,
                f"Cannot tell: with one block of all n = {n} keys your function gives no usable "
                f"result ({why}).",
            )
        )
    else:
        bad, blocks = [], case["blocks"]
        for b, rec in zip(blocks[1:], block_recs[1:], strict=True):
            a, why = _out(rec, _shape(case))
            if not _close(a, ref):
                bad.append((b, why))
        if not bad:
            msg = (
                f"Blocks of 1, {blocks[2]} and {blocks[3]} keys give the result of one block "
                f"of n = {n}."
            )
        else:
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
        props.append(prop("independent of the block size", 2.0, 1 - len(bad) / 3, msg))

    # 4. scores of ±1e4: finite, and what the same inputs give without the shift
    base, why = _usable(r.get("base"), _shape(c["base"]))
    if base is None:
        props.append(
            prop(
                "stable with scores of ±10⁴",
                2.0,
                0,
                f"Cannot tell: on the unshifted inputs of this test your function gives no "
                f"usable result ({why}).",
            )
        )
    else:
        a, why = _out(r.get("shifted"), _shape(c["base"]))
        ok = _close(a, attention(c["base"])) or _close(a, base)
        if ok:
            msg = "Scores of ±10⁴ give a finite result, the same as without the shift."
        elif a is None and "not finite" in why:
            msg = (
                "With scores of about ±10⁴ your result is not finite: exp(10⁴) overflows and "
                "exp(−10⁴) underflows to 0. Subtract the running maximum m before taking exp, "
                "and start m at −∞ (not 0), so that exp(s − m) ≤ 1 and ℓ ≥ 1 (Proposition 2.4)."
            )
        else:
            msg = (
                f"Adding a constant of about ±10⁴ to each query's scores changes your result "
                f"({why or 'it differs from the unshifted one'}), although softmax is invariant "
                "to it: compute exp(s − m) with the running maximum m (Proposition 2.4)."
            )
        props.append(prop("stable with scores of ±10⁴", 2.0, ok, msg))

    # 5. never the n × n matrix
    rec = r.get("memory") if isinstance(r.get("memory"), dict) else {}
    mem = c["memory"]
    a, why = _usable(rec, _shape(mem))
    limit = MEM_N * MEM_N // 2
    largest, peak = rec.get("largest"), rec.get("python_peak_bytes")
    fused = rec.get("fused") if isinstance(rec.get("fused"), list) else []
    where = f"m = n = {MEM_N}, d = {MEM_D}, block = {MEM_BLOCK}"
    if a is None:
        score, msg = 0, f"Cannot tell: at {where} your function gives no usable result ({why})."
    elif type(largest) is not int or type(peak) is not int:
        score, msg = 0, "The probe could not measure the sizes of your tensors."
    elif fused:
        score = 0
        msg = (
            f"Your function calls {', '.join(str(f)[:60] for f in fused[:3])}, a fused "
            "attention kernel: implement the online softmax of Proposition 2.4 yourself, block "
            "by block."
        )
    elif largest >= limit or peak >= 8 * limit:
        what = (
            f"a tensor of {largest} elements"
            if largest >= limit
            else f"NumPy arrays of more than {8 * limit} bytes at once"
        )
        score = 0
        msg = (
            f"At {where} your function creates {what}, at least half the {MEM_N} × {MEM_N} "
            "score matrix: compute q kᵀ for one block of keys at a time (m × block scores) "
            "and fold it into the running m, ℓ and o, as FlashAttention does (§2.3, "
            "Proposition 2.4)."
        )
    else:
        score = 1
        msg = (
            f"At {where} the largest tensor has {largest} elements, and the arrays stay below "
            f"half the {MEM_N} × {MEM_N} score matrix: it is never formed."
        )
    props.append(prop("never materialises the n × n score matrix", 2.0, score, msg))
    return props
