"""Checks of the error-feedback code part (000 §4.2, Theorem 4.8, Code 4.9, Exercise 9(c)).

Count, choice, memory and convergence are apart, so that k + 1 entries cost the count alone and
a memory that forgets costs the memory and the convergence.  The run shuffles each step's
workers and makes an earlier call again: it converges only through the memory passed in, so a
memory kept elsewhere (globals, the function object) explains none of its calls.
"""

import functools
import math

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, check, per_case, plain, vector

TOL = 1e-6  # relative to |grad| + |memory|: a float32 computation inside passes
WORKERS, DIM, ROWS, KEEP, ETA, STEPS = 4, 50, 200, 5, 0.05, 300  # Code 4.9, 300 steps
CALLS = WORKERS * STEPS  # the run's calls, besides the STEPS − 1 made again
RUN = (
    f"the least-squares run of Code 4.9 ({WORKERS} workers with different data, "
    f"k = {KEEP} of d = {DIM}, η = {ETA}, {STEPS} steps)"
)


def cases(seed: int) -> list[dict]:
    """Single calls: (grad, memory, k); memory 0 (the first step) once, then large memories."""
    rng = np.random.default_rng([seed, 30])
    out = [{"grad": rng.standard_normal(32), "memory": np.zeros(32), "k": 4}]
    for d, k in ((48, 6), (64, 1), (100, 10)):
        while True:  # the memory changes the choice, and so does the sign of the entries
            grad, memory = rng.standard_normal(d), 2.0 * rng.standard_normal(d)
            v = grad + memory
            top = set(np.argsort(np.abs(v))[-k:].tolist())
            if top != set(np.argsort(np.abs(grad))[-k:].tolist()) and np.any(v[list(top)] < 0):
                break
        out.append({"grad": grad, "memory": memory, "k": k})
    return out


def problem(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Code 4.9's least squares, 4 workers with different data: ∇f_i(x) = hess_i x − lin_i."""
    rng = np.random.default_rng([seed, 31])
    A = [rng.standard_normal((ROWS, DIM)) for _ in range(WORKERS)]
    b = [a @ rng.standard_normal(DIM) + rng.standard_normal(ROWS) for a in A]
    hess = np.stack([a.T @ a / ROWS for a in A])
    lin = np.stack([a.T @ y / ROWS for a, y in zip(A, b, strict=True)])
    return hess, lin, np.linalg.solve(sum(hess), sum(lin))


def _pair(rec: Record, n: int):
    """A call's (compressed, new_memory) float64 arrays, or why not."""
    if not rec.ok:
        return rec.error
    if rec.items is None or len(rec.items) != 2:
        return f"returned {rec.type}, not a (compressed, new_memory) pair"
    for name, item in zip(("compressed", "new_memory"), rec.items, strict=True):
        if item.shape is not None and item.shape != (n,):
            return f"{name}: shape {item.shape}, expected ({n},)"
        if item.array() is None:
            return f"{name}: not an array of numbers ({item.error or item.returned()})"[:300]
    return rec.items[0].array(), rec.items[1].array()


def _unexplained(grads: np.ndarray, memories: np.ndarray, sent: np.ndarray) -> list[str]:
    """Per call (a row), why ``sent`` is not the largest |v| of v = grad + memory, any count."""
    v, kept = grads + memories, sent != 0
    scale = TOL * (np.abs(grads) + np.abs(memories)) + 1e-12  # rounding of v
    with np.errstate(all="ignore"):
        values = np.all((np.abs(sent - v) <= scale) | ~kept, axis=1)
        low = np.where(kept, np.abs(v), np.inf).min(axis=1)  # the smallest sent
        high = np.where(kept, -np.inf, np.abs(v)).max(axis=1)  # the largest dropped
        largest = low + scale.max(axis=1) >= high
    why = np.where(values, "", "the values sent are not those of grad + memory")
    why = np.where(values & ~largest, "a dropped entry has a larger |grad + memory|", why)
    return np.where(kept.any(axis=1), why, "nothing is sent").tolist()


def probe(student, seed: int, params: dict) -> dict:
    """Single calls, then the run of Code 4.9: each step's workers in an order drawn from the
    seed, an earlier call of the run made again among them, every call judged on its inputs."""
    calls = [student.call(c["grad"], c["memory"], c["k"]) for c in cases(seed)]
    hess, lin, _ = problem(seed)
    order = np.random.default_rng([seed, 32])  # the workers' order and the calls made again
    x, memories, error = np.zeros(DIM), np.zeros((WORKERS, DIM)), None
    given, outs, again, odd = [], [], [], []  # call t·WORKERS + i: worker i at step t + 1
    for step in range(STEPS):
        rows, grads = range(step * WORKERS, (step + 1) * WORKERS), ETA * (hess @ x - lin)
        given += zip(grads, memories, strict=True)
        jobs = list(rows) + ([int(order.integers(rows[0]))] if step else [])
        jobs = [jobs[j] for j in order.permutation(len(jobs))]
        recs = student.calls([(*given[j], KEEP) for j in jobs])  # one round trip
        res = {j: _pair(rec, DIM) for j, rec in zip(jobs, recs, strict=True)}
        again += [(j, res[j], step + 1) for j in jobs if j < rows[0]]
        bad = [f"worker {j - rows[0]}: {res[j]}" for j in jobs if j in rows and type(res[j]) is str]
        if bad:
            error = f"step {step + 1}, {bad[0]}"
            break
        outs += [res[j] for j in rows]
        sent, new = (np.array([res[j][n] for j in rows]) for n in (0, 1))
        why = _unexplained(grads, memories, sent)
        odd += [f"step {step + 1}, worker {i}: {w}" for i, w in enumerate(why) if w]
        memories = new
        with np.errstate(all="ignore"):
            x = x - sent.mean(axis=0)
    differ = [
        f"step {j // WORKERS + 1}, worker {j % WORKERS}, made again at step {t}"
        for j, res, t in again
        if type(res) is str or not np.array_equal(res, outs[j], equal_nan=True)
    ]
    train = {"x": plain(x), "steps": len(outs) // WORKERS, "error": error, "calls": len(outs)}
    train.update(replays=len(again), unexplained=len(odd), differ=len(differ))
    train.update(first_unexplained=(odd or [None])[0], first_differ=(differ or [None])[0])
    return {"calls": calls, "train": train}


def _gap(seed: int, x: np.ndarray) -> float:
    """f(x) − f* = ½ (x − x*)ᵀ H (x − x*) for least squares, H the mean Hessian."""
    hess, _, x_star = problem(seed)
    with np.errstate(all="ignore"):
        value = 0.5 * (x - x_star) @ (sum(hess) / WORKERS) @ (x - x_star)
    return float(value) if np.isfinite(value) else math.inf


@functools.lru_cache(maxsize=8)
def reference_gaps(seed: int) -> tuple[float, float]:
    """f − f* after STEPS steps with error feedback, and with top-k without memory."""
    hess, lin, _ = problem(seed)
    out = []
    for feedback in (True, False):
        x, memories = np.zeros(DIM), np.zeros((WORKERS, DIM))
        for _ in range(STEPS):
            v = ETA * (hess @ x - lin) + memories  # one row per worker
            idx = np.argpartition(np.abs(v), -KEEP, axis=1)[:, -KEEP:]
            msgs = np.zeros_like(v)
            msgs[np.arange(WORKERS)[:, None], idx] = v[np.arange(WORKERS)[:, None], idx]
            memories = v - msgs if feedback else memories
            x = x - msgs.mean(axis=0)
        out.append(_gap(seed, x))
    return out[0], out[1]


def _verdicts(i: int, c: dict, rec: Record) -> tuple[Verdict, Verdict, Verdict]:
    """One single call: (exactly k sent, the k largest sent, nothing lost)."""
    where, v = f"call {i + 1} (d = {c['grad'].size}, k = {c['k']})", c["grad"] + c["memory"]
    res = _pair(rec, v.size)
    if not isinstance(res, str) and not np.all(np.isfinite(res[0])):
        res = f"the output is not {v.size} finite numbers"
    if isinstance(res, str):
        return (Verdict(False, f"{where}: {res}."),) * 3
    (sent, mem), kept = res, res[0] != 0
    scale, why, nnz = TOL * (np.abs(c["grad"]) + np.abs(c["memory"])) + 1e-12, None, int(kept.sum())
    if not nnz:
        why = "nothing is sent"
    elif not (kept.all() or np.abs(v[kept]).min() >= np.abs(v[~kept]).max()):
        why = "a dropped entry has a larger |grad + memory|"
    elif not np.all(np.abs(sent - v)[kept] <= scale[kept]):
        why = "the values sent are not those of grad + memory"
    nothing_lost = bool(np.all(np.abs(sent + mem - v) <= scale))
    return (
        Verdict(nnz == c["k"], f"{where}: {nnz} nonzero entries sent."),
        Verdict(why is None, f"{where}: {why}."),
        Verdict(nothing_lost, f"{where}: new_memory ≠ grad + memory − compressed."),
    )


count_sent = per_case(
    "exactly k entries sent",
    1.0,
    "Each call sends exactly k nonzero entries.",
    " Top-k sends exactly k of the d coordinates (§4.2).",
)
largest_sent = per_case(
    "the k largest |grad + memory| are sent",
    2.0,
    "The entries sent are the k largest |grad + memory|, with their values.",
    " Compress v = grad + memory, not grad alone, and rank the entries by magnitude |v_i|:"
    " negative entries count too (Code 4.9).",
)
memory_kept = per_case(
    "the memory keeps what was not sent",
    2.0,
    "new_memory = grad + memory − compressed: nothing is lost.",
    " Error feedback remembers exactly what it did not send, e ← v − C(v), so that"
    " compressed + new_memory = grad + memory (Theorem 4.8).",
)


@check("converges where top-k without memory stalls", 3.0)
def converges(run: Result, seed: int):
    x, error, made = vector(run.get("x"), DIM), run.get("error"), STEPS - 1
    if error or x is None or run.get("steps") != STEPS:
        return 0, f"In {RUN}: {error if isinstance(error, str) else 'no usable iterate'}."
    counts = [run.get(k) for k in ("calls", "replays", "unexplained", "differ")]
    if not all(type(v) is int and v >= 0 for v in counts) or counts[:2] != [CALLS, made]:
        return 0, f"In {RUN}: no usable record of the run's calls."
    unexplained, differ = counts[2:]
    if unexplained or differ:
        why = (
            f"{unexplained} of the {CALLS} calls sent what the memory passed in does not explain"
            if unexplained
            else f"{differ} of the {made} calls made again with the same (grad, memory, k) "
            "returned something else"
        )
        first = str(run.get("first_unexplained" if unexplained else "first_differ"))[:200]
        return 0, (
            f"In {RUN}, {why} (the first: {first}). The run converges only through the memory "
            "passed in and returned: topk_ef_step must be a function of (grad, memory, k), "
            "keeping nothing between calls (the workers' calls come in any order), and send the "
            "k largest |grad + memory| (Code 4.9)."
        )
    gap, (with_memory, without) = _gap(seed, x), reference_gaps(seed)
    if gap <= math.sqrt(with_memory * without):  # the geometric middle of the two behaviours
        return 1.0, (
            f"In {RUN}, f − f* = {gap:.2g}: error feedback converges where top-k without "
            "memory stalls (Theorem 4.8)."
        )
    state = "stalls like top-k without memory" if gap < 10 * without else "diverges"
    return 0.0, (
        f"In {RUN}, f − f* = {gap:.2g}: the run {state}. Error feedback sends C(v) of v = e + g "
        "and keeps e ← v − C(v): the coordinates that are never among the k largest accumulate "
        "in the memory until they are sent (Theorem 4.8, Code 4.9)."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    r, cs = Result(result), cases(seed)
    recs = zip(cs, r.records("calls", len(cs)), strict=True)
    single = [_verdicts(i, c, rec) for i, (c, rec) in enumerate(recs)]
    count, choice, memory = map(list, zip(*single, strict=True))
    train = converges(r.part("train"), seed)
    return [count_sent(count), largest_sent(choice), memory_kept(memory), train]
