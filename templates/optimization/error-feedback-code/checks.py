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

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

TOL = 1e-6  # relative to |grad| + |memory|: a float32 computation inside passes
WORKERS, DIM, ROWS, KEEP, ETA, STEPS = 4, 50, 200, 5, 0.05, 300  # Code 4.9, 300 steps

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


def _vector(x, d: int) -> np.ndarray | str:
    """A float64 copy of a returned array of d elements, or why it is not one."""
    try:
        if hasattr(x, "detach"):  # a torch tensor
            x = x.detach().cpu().numpy()
        a = np.array(x, dtype=np.float64)
    except Exception as err:  # noqa: BLE001
        return f"not an array of numbers ({type(x).__name__}: {err})"[:300]
    if a.shape != (d,):
        return f"shape {a.shape}, expected ({d},)"
    return a


def _call(student, grad: np.ndarray, memory: np.ndarray, k: int):
    """(compressed, new_memory) as float64 arrays, or a string that says what went wrong."""
    try:
        res = student(grad.copy(), memory.copy(), k)
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return f"{type(err).__name__}: {err}"[:300]
    return _pair(res, grad.size)


def _pair(res, n: int):
    """What one call returned, as (compressed, new_memory) float64 arrays, or why not."""
    if isinstance(res, BaseException):  # raised in the student's process
        return f"{type(res).__name__}: {res}"[:300]
    if not isinstance(res, tuple | list) or len(res) != 2:
        return f"returned {type(res).__name__}, not a (compressed, new_memory) pair"
    sent, memory = (_vector(r, n) for r in res)
    if isinstance(sent, str):
        return f"compressed: {sent}"
    if isinstance(memory, str):
        return f"new_memory: {memory}"
    return sent, memory


def _plain(values) -> list:
    return [float(v) if math.isfinite(v) else str(float(v)) for v in values]


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
    calls = []
    for c in cases(seed):
        res = _call(student, c["grad"], c["memory"], c["k"])
        if isinstance(res, str):
            calls.append({"error": res})
        else:
            calls.append({"error": None, "sent": _plain(res[0]), "memory": _plain(res[1])})
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
        try:  # the step's calls, in one round trip
            answers = student.map([(given[0, j], given[1, j], KEEP) for j in jobs])
        except Exception as err:  # noqa: BLE001 - the student's process stopped answering
            answers = [err] * len(jobs)
        for j, answer in zip(jobs, answers, strict=True):
            res = _pair(answer, DIM)
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
    train = {"x": _plain(x), "steps": steps, "error": error, "calls": done}
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


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score the single calls against top_k(grad + memory) and the run against the reference."""
    from autograder.checktools import prop, vector

    r = result if isinstance(result, dict) else {}
    calls = r.get("calls") if isinstance(r.get("calls"), list) else []
    cs = cases(seed)
    calls = (calls + [None] * len(cs))[: len(cs)]
    count_ok, choice_ok, memory_ok = [], [], []
    count_notes, choice_notes, memory_notes = [], [], []
    for i, (c, rec) in enumerate(zip(cs, calls, strict=True)):
        where = f"call {i + 1} (d = {c['grad'].size}, k = {c['k']})"
        v = c["grad"] + c["memory"]
        if not isinstance(rec, dict) or rec.get("error"):
            why = rec.get("error") if isinstance(rec, dict) else "no result"
            for oks, notes in ((count_ok, count_notes), (choice_ok, choice_notes)):
                oks.append(False)
                notes.append(f"{where}: {why}.")
            memory_ok.append(False)
            memory_notes.append(f"{where}: {why}.")
            continue
        sent, mem = vector(rec.get("sent"), v.size), vector(rec.get("memory"), v.size)
        if sent is None or mem is None or not np.all(np.isfinite(sent)):
            for oks, notes in ((count_ok, count_notes), (choice_ok, choice_notes)):
                oks.append(False)
                notes.append(f"{where}: the output is not {v.size} finite numbers.")
            memory_ok.append(False)
            memory_notes.append(f"{where}: the output is not {v.size} finite numbers.")
            continue
        kept = sent != 0
        scale = TOL * (np.abs(c["grad"]) + np.abs(c["memory"])) + 1e-12  # rounding of v
        nnz = int(kept.sum())
        count_ok.append(nnz == c["k"])
        if nnz != c["k"]:
            count_notes.append(f"{where}: {nnz} nonzero entries sent.")
        if nnz == 0:
            choice_ok.append(False)
            choice_notes.append(f"{where}: nothing is sent.")
        else:
            values = np.all(np.abs(sent - v)[kept] <= scale[kept])
            largest = nnz == v.size or np.abs(v[kept]).min() >= np.abs(v[~kept]).max()
            choice_ok.append(bool(values and largest))
            if not largest:
                choice_notes.append(f"{where}: a dropped entry has a larger |grad + memory|.")
            elif not values:
                choice_notes.append(f"{where}: the values sent are not those of grad + memory.")
        ok = bool(np.all(np.abs(sent + mem - v) <= scale))  # nothing lost
        memory_ok.append(ok)
        if not ok:
            memory_notes.append(f"{where}: new_memory ≠ grad + memory − compressed.")

    n = len(cs)
    props = [
        prop(
            "exactly k entries sent",
            1.0,
            sum(count_ok) / n,
            "Each call sends exactly k nonzero entries."
            if all(count_ok)
            else " ".join(count_notes) + " Top-k sends exactly k of the d coordinates (§4.2).",
        ),
        prop(
            "the k largest |grad + memory| are sent",
            2.0,
            sum(choice_ok) / n,
            "The entries sent are the k largest |grad + memory|, with their values."
            if all(choice_ok)
            else " ".join(choice_notes) + " Compress v = grad + memory, not grad alone, and "
            "rank the entries by magnitude |v_i|: negative entries count too (Code 4.9).",
        ),
        prop(
            "the memory keeps what was not sent",
            2.0,
            sum(memory_ok) / n,
            "new_memory = grad + memory − compressed: nothing is lost."
            if all(memory_ok)
            else " ".join(memory_notes) + " Error feedback remembers exactly what it did not "
            "send, e ← v − C(v), so that compressed + new_memory = grad + memory (Theorem 4.8).",
        ),
    ]

    run = r.get("train") if isinstance(r.get("train"), dict) else {}
    x = vector(run.get("x"), DIM)
    what = (
        f"the least-squares run of Code 4.9 ({WORKERS} workers with different data, "
        f"k = {KEEP} of d = {DIM}, η = {ETA}, {STEPS} steps)"
    )
    if run.get("error") or x is None or run.get("steps") != STEPS:
        why = run.get("error") if isinstance(run.get("error"), str) else "no usable iterate"
        props.append(
            prop("converges where top-k without memory stalls", 3.0, 0, f"In {what}: {why}.")
        )
        return props
    counts = [run.get(k) for k in ("calls", "replays", "unexplained", "differ")]
    if not all(type(v) is int and v >= 0 for v in counts) or counts[:2] != [
        WORKERS * STEPS,
        STEPS - 1,
    ]:
        props.append(
            prop(
                "converges where top-k without memory stalls",
                3.0,
                0,
                f"In {what}: no usable record of the run's calls.",
            )
        )
        return props
    unexplained, differ = counts[2:]
    if unexplained or differ:
        if unexplained:
            first = str(run.get("first_unexplained"))[:200]
            why = (
                f"{unexplained} of the {WORKERS * STEPS} calls sent what the memory passed in "
                f"does not explain (the first: {first})"
            )
        else:
            first = str(run.get("first_differ"))[:200]
            why = (
                f"{differ} of the {STEPS - 1} calls made again with the same (grad, memory, "
                f"k) returned something else (the first: {first})"
            )
        props.append(
            prop(
                "converges where top-k without memory stalls",
                3.0,
                0,
                f"In {what}, {why}. The run converges only through the memory passed in and "
                "returned: topk_ef_step must be a function of (grad, memory, k), keeping "
                "nothing between calls (the workers' calls come in any order), and send the "
                "k largest |grad + memory| (Code 4.9).",
            )
        )
        return props
    prob = problem(seed)
    gap = _gap(prob, x)
    with_memory, without = reference_gaps(seed)
    threshold = math.sqrt(with_memory * without)  # geometric middle of the two behaviours
    if gap <= threshold:
        msg = (
            f"In {what}, f − f* = {gap:.2g}: error feedback converges where top-k without "
            "memory stalls (Theorem 4.8)."
        )
    else:
        state = "stalls like top-k without memory" if gap < 10 * without else "diverges"
        msg = (
            f"In {what}, f − f* = {gap:.2g}: the run {state}. Error feedback sends C(v) of "
            "v = e + g and keeps e ← v − C(v): the coordinates that are never among the k "
            "largest accumulate in the memory until they are sent (Theorem 4.8, Code 4.9)."
        )
    props.append(prop("converges where top-k without memory stalls", 3.0, gap <= threshold, msg))
    return props
