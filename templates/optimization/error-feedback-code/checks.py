"""Checks of the error-feedback code part (000 §4.2, Theorem 4.8, Code 4.9, Exercise 9(c)).

``probe`` runs in the probe process, beside the student's: it calls the student's
``topk_ef_step(grad, memory, k)`` on single random inputs, then inside the distributed
least-squares run of Code 4.9 (4 workers with different data, k = 5 of d = 50), feeding
each worker's returned memory back to it, and returns the outputs and the final iterate.
``grade`` runs in the trusted process: it redraws the inputs from the seed, compares with
top_k(grad + memory), and measures f − f* of the student's final iterate against the same
run with error feedback and without memory.

The properties are separated on purpose: the count of entries sent, which entries, the
memory update and the convergence, so that keeping k + 1 entries costs only the count and
a memory that forgets costs the memory update and the convergence.

The memory is state passed in and read back out: the function must keep none of its own.
A top-k that ignored the memory passed in and kept each worker's in module globals (the
worker told by the call count), in a file or on the function object ran error feedback
all the same while the workers came in a fixed order.  So the run calls each step's
workers in an order drawn from the seed, makes an earlier call of the run again among
them (the same (grad, memory, k) must give the same outputs, bit for bit), and judges each
of its calls on what was passed in: the entries sent are entries of grad + memory, the
largest (any count: k + 1 costs the count alone).  The convergence counts only for a run
every call of which that explains.  Shuffling alone would not do: error feedback with the
memories exchanged among the workers still converges (the virtual iterate x − ē does
not see the exchange).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, check, per_case, plain, vector

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

TOL = 1e-6  # relative to |grad| + |memory|: a float32 computation inside passes
WORKERS, DIM, ROWS, KEEP, ETA, STEPS = 4, 50, 200, 5, 0.05, 300  # Code 4.9, 300 steps
CALLS = WORKERS * STEPS  # the run's calls, besides the STEPS − 1 made again

# --- inputs: the same functions in the sandbox (probe) and the trusted process (grade) ----


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


def problem(seed: int) -> dict:
    """The least-squares problem of Code 4.9, drawn from the seed: 4 workers, different data."""
    rng = np.random.default_rng([seed, 31])
    A = [rng.standard_normal((ROWS, DIM)) for _ in range(WORKERS)]
    b = [a @ rng.standard_normal(DIM) + rng.standard_normal(ROWS) for a in A]
    hess = [a.T @ a / ROWS for a in A]  # ∇f_i(x) = hess_i x − lin_i
    lin = [a.T @ y / ROWS for a, y in zip(A, b, strict=True)]
    return {"hess": hess, "lin": lin, "x_star": np.linalg.solve(sum(hess), sum(lin))}


def _pair(rec: Record, n: int):
    """What one call returned, as (compressed, new_memory) float64 arrays, or why not (both
    sides: the run's calls in the probe, the single calls' records in grade)."""
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
    """For each call (a row), why ``sent`` is not entries of v = grad + memory, the largest
    |v| (any count), with the memory passed in ('' when it is)."""
    v = grads + memories
    kept = sent != 0
    scale = TOL * (np.abs(grads) + np.abs(memories)) + 1e-12  # rounding of v
    with np.errstate(all="ignore"):
        values = np.all((np.abs(sent - v) <= scale) | ~kept, axis=1)
        low = np.where(kept, np.abs(v), np.inf).min(axis=1)  # the smallest sent
        high = np.where(kept, -np.inf, np.abs(v)).max(axis=1)  # the largest dropped
        largest = low + scale.max(axis=1) >= high
    why = np.where(values, "", "the values sent are not those of grad + memory")
    why = np.where(values & ~largest, "a dropped entry has a larger |grad + memory|", why)
    return np.where(kept.any(axis=1), why, "nothing is sent").tolist()


def _alike(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(a, b, equal_nan=True)


def probe(student, seed: int, params: dict) -> dict:
    """Single calls on random inputs, then the distributed run of Code 4.9 with the memory:
    the workers of each step in a shuffled order, an earlier call of the run made again
    among them; every call of the run is judged on the memory passed in."""
    calls = [student.call(c["grad"], c["memory"], c["k"]) for c in cases(seed)]
    prob = problem(seed)
    hess, lin = np.stack(prob["hess"]), np.stack(prob["lin"])
    order = np.random.default_rng([seed, 32])  # the workers' order and the calls made again
    # the run's calls, row t·WORKERS + i for worker i at step t + 1: inputs and outputs
    given = np.zeros((2, STEPS * WORKERS, DIM))  # grad, memory
    got = np.zeros((2, STEPS * WORKERS, DIM))  # compressed, new_memory
    again = []  # (the row made again, its outputs then, the step)
    x, memories = np.zeros(DIM), np.zeros((WORKERS, DIM))
    error, steps = None, 0
    for steps in range(1, STEPS + 1):  # noqa: B007 - steps is read after the loop
        rows = range((steps - 1) * WORKERS, steps * WORKERS)
        given[0, rows], given[1, rows] = ETA * (hess @ x - lin), memories
        jobs = list(rows)
        if steps > 1:  # an earlier call, made again: the same inputs must give the same outputs
            jobs.append(int(order.integers(rows[0])))
        jobs = [jobs[j] for j in order.permutation(len(jobs))]
        recs = student.calls([(given[0, j], given[1, j], KEEP) for j in jobs])  # one round trip
        for j, rec in zip(jobs, recs, strict=True):
            res = _pair(rec, DIM)
            if j < rows[0]:
                again.append((j, res, steps))
            elif isinstance(res, str):
                error = f"step {steps}, worker {j - rows[0]}: {res}"
                break
            else:
                got[0, j], got[1, j] = res
        if error:
            steps -= 1
            break
        memories = got[1, rows]
        with np.errstate(all="ignore"):
            x = x - got[0, rows].mean(axis=0)
    done = steps * WORKERS
    why = _unexplained(given[0, :done], given[1, :done], got[0, :done])
    odd = [f"step {j // WORKERS + 1}, worker {j % WORKERS}: {w}" for j, w in enumerate(why) if w]
    differ = [
        f"step {j // WORKERS + 1}, worker {j % WORKERS}, made again at step {t}"
        for j, res, t in again
        if isinstance(res, str) or not all(map(_alike, res, got[:, j]))
    ]
    train = {"x": plain(x), "steps": steps, "error": error, "calls": done}
    train.update(replays=len(again), unexplained=len(odd), differ=len(differ))
    train.update(first_unexplained=(odd or [None])[0], first_differ=(differ or [None])[0])
    return {"calls": calls, "train": train}


# --- grade (trusted) ---------------------------------------------------------------------


def _gap(prob: dict, x: np.ndarray) -> float:
    """f(x) − f* = ½ (x − x*)ᵀ H (x − x*) for least squares, H the mean Hessian."""
    e = x - prob["x_star"]
    with np.errstate(all="ignore"):
        value = 0.5 * e @ (sum(prob["hess"]) / WORKERS) @ e
    return float(value) if np.isfinite(value) else math.inf


@functools.lru_cache(maxsize=8)
def reference_gaps(seed: int) -> tuple[float, float]:
    """f − f* after STEPS steps with error feedback, and with top-k without memory."""
    prob = problem(seed)
    hess, lin = np.stack(prob["hess"]), np.stack(prob["lin"])
    rows = np.arange(WORKERS)[:, None]
    out = []
    for feedback in (True, False):
        x, memories = np.zeros(DIM), np.zeros((WORKERS, DIM))
        for _ in range(STEPS):
            v = ETA * (hess @ x - lin) + memories  # one row per worker
            idx = np.argpartition(np.abs(v), -KEEP, axis=1)[:, -KEEP:]
            msgs = np.zeros_like(v)
            msgs[rows, idx] = v[rows, idx]  # top-k of each row
            if feedback:
                memories = v - msgs
            x = x - msgs.mean(axis=0)
        out.append(_gap(prob, x))
    return out[0], out[1]


def _verdicts(i: int, c: dict, rec: Record) -> tuple[Verdict, Verdict, Verdict]:
    """One single call: (exactly k sent, the k largest sent, nothing lost), each with why not."""
    where, v = f"call {i + 1} (d = {c['grad'].size}, k = {c['k']})", c["grad"] + c["memory"]
    res = _pair(rec, v.size)
    if not isinstance(res, str) and not np.all(np.isfinite(res[0])):
        res = f"the output is not {v.size} finite numbers"
    if isinstance(res, str):
        return (Verdict(False, f"{where}: {res}."),) * 3
    sent, mem = res
    kept = sent != 0
    scale = TOL * (np.abs(c["grad"]) + np.abs(c["memory"])) + 1e-12  # rounding of v
    nnz = int(kept.sum())
    count = Verdict(nnz == c["k"], f"{where}: {nnz} nonzero entries sent.")
    if nnz == 0:
        choice = Verdict(False, f"{where}: nothing is sent.")
    elif not (nnz == v.size or np.abs(v[kept]).min() >= np.abs(v[~kept]).max()):
        choice = Verdict(False, f"{where}: a dropped entry has a larger |grad + memory|.")
    else:
        values = bool(np.all(np.abs(sent - v)[kept] <= scale[kept]))
        choice = Verdict(values, f"{where}: the values sent are not those of grad + memory.")
    lost = not np.all(np.abs(sent + mem - v) <= scale)
    memory = Verdict(not lost, f"{where}: new_memory ≠ grad + memory − compressed.")
    return count, choice, memory


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
    x = vector(run.get("x"), DIM)
    what = (
        f"the least-squares run of Code 4.9 ({WORKERS} workers with different data, "
        f"k = {KEEP} of d = {DIM}, η = {ETA}, {STEPS} steps)"
    )
    if run.get("error") or x is None or run.get("steps") != STEPS:
        why = run.get("error") if isinstance(run.get("error"), str) else "no usable iterate"
        return 0, f"In {what}: {why}."
    counts, made = [run.get(k) for k in ("calls", "replays", "unexplained", "differ")], STEPS - 1
    if not all(type(v) is int and v >= 0 for v in counts) or counts[:2] != [CALLS, made]:
        return 0, f"In {what}: no usable record of the run's calls."
    unexplained, differ = counts[2:]
    if unexplained or differ:
        why = (
            f"{unexplained} of the {CALLS} calls sent what the memory passed in does not "
            f"explain (the first: {str(run.get('first_unexplained'))[:200]})"
            if unexplained
            else f"{differ} of the {made} calls made again with the same (grad, memory, k) "
            f"returned something else (the first: {str(run.get('first_differ'))[:200]})"
        )
        return 0, (
            f"In {what}, {why}. The run converges only through the memory passed in and "
            "returned: topk_ef_step must be a function of (grad, memory, k), keeping "
            "nothing between calls (the workers' calls come in any order), and send the "
            "k largest |grad + memory| (Code 4.9)."
        )
    gap = _gap(problem(seed), x)
    with_memory, without = reference_gaps(seed)
    threshold = math.sqrt(with_memory * without)  # geometric middle of the two behaviours
    if gap <= threshold:
        return 1.0, (
            f"In {what}, f − f* = {gap:.2g}: error feedback converges where top-k without "
            "memory stalls (Theorem 4.8)."
        )
    state = "stalls like top-k without memory" if gap < 10 * without else "diverges"
    return 0.0, (
        f"In {what}, f − f* = {gap:.2g}: the run {state}. Error feedback sends C(v) of "
        "v = e + g and keeps e ← v − C(v): the coordinates that are never among the k "
        "largest accumulate in the memory until they are sent (Theorem 4.8, Code 4.9)."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score the single calls against top_k(grad + memory) and the run against the reference."""
    r, cs = Result(result), cases(seed)
    recs = r.records("calls", len(cs))
    single = (_verdicts(i, c, rec) for i, (c, rec) in enumerate(zip(cs, recs, strict=True)))
    count, choice, memory = map(list, zip(*single, strict=True))
    train = converges(r.part("train"), seed)
    return [count_sent(count), largest_sent(choice), memory_kept(memory), train]
