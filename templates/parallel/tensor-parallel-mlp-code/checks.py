"""Checks of the tensor-parallel MLP code part (000 §3.3, Shoeybi et al. 2019).

``probe`` runs in the probe process, beside the student's: for t = 2, 4 and 8 it runs the
student's ``tp_mlp_forward(x, w1, w2, rank, t, all_reduce)`` on t ranks, each a process
forked from the student's that gets its own matrices only, with an all_reduce held here
that sums what the ranks pass in the same call and logs every message.  Each t runs twice:
with every rank's copy of W₁ and W₂ filled with NaN outside its own columns and rows, then
with the real matrices (8 processes serve all six rounds).  ``grade`` runs in the trusted
process: it redraws X, W₁, W₂ and recomputes GeLU(X W₁) W₂ in NumPy.

The three properties are separated on purpose: the value (every rank ends with the MLP
output), the communication (one all-reduce of a b × d tensor) and the locality (a rank's
messages and result depend only on its own shards, compared with its own clean run), so
that a wrong value costs only the first and a rank that reads other ranks' weights only
the last.
"""

from __future__ import annotations

import math

import numpy as np

ISOLATED = True  # probe() runs in the probe process; tp_mlp_forward, in the student's
DEGREES = (2, 4, 8)
RTOL, ATOL = 1e-6, 1e-9
WAIT_S = 5.0  # a rank waits this long in all_reduce for the other ranks
MAX_VALUES = 4096  # values of one message returned to the grader

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def cases(seed: int) -> list[dict]:
    """X (b × d), W₁ (d × 4d), W₂ (4d × d) for each degree t."""
    rng = np.random.default_rng([seed, 50])
    out = []
    for t in DEGREES:
        b, d = int(rng.integers(3, 6)), int(rng.choice([8, 16]))
        out.append(
            {
                "t": t,
                "x": rng.standard_normal((b, d)),
                "w1": rng.standard_normal((d, 4 * d)) / math.sqrt(d),
                "w2": rng.standard_normal((4 * d, d)) / math.sqrt(4 * d),
            }
        )
    return out


def shard(h: int, t: int, rank: int) -> slice:
    """The hidden units of rank r: the r-th of t contiguous chunks (tensor.chunk(t))."""
    return slice(rank * h // t, (rank + 1) * h // t)


def poisoned(case: dict, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """W₁ and W₂ as rank r holds them: NaN outside its columns of W₁ and rows of W₂."""
    own = shard(case["w1"].shape[1], case["t"], rank)
    w1, w2 = np.full_like(case["w1"], np.nan), np.full_like(case["w2"], np.nan)
    w1[:, own], w2[own, :] = case["w1"][:, own], case["w2"][own, :]
    return w1, w2


def _plain(values) -> list:
    return [float(v) if math.isfinite(v) else str(float(v)) for v in values]


def _record(a) -> dict:
    """A tensor as plain data: its shape and (if not too large) its values."""
    import torch

    try:
        arr = torch.as_tensor(a).detach().to("cpu", torch.float64)
    except Exception as err:  # noqa: BLE001 - whatever the student passed or returned
        return {"error": f"not a tensor: {type(err).__name__}: {err}"[:200]}
    rec: dict = {"shape": [int(s) for s in arr.shape]}
    if arr.numel() <= MAX_VALUES:
        rec["values"] = _plain(arr.reshape(-1).tolist())
    return rec


def _all_reduce(student, t: int, messages: list[list]):
    """The t ranks' all_reduce, held in this process: rank r's k-th call waits for the
    k-th call of every rank, then each gets their sum.  Every message is logged here."""
    import torch

    from_ranks: dict[int, list] = {}  # step -> the tensor each rank passed

    def all_reduce_for(rank: int):
        def all_reduce(tensor):
            step = len(messages[rank])
            messages[rank].append(_record(tensor))
            parts = from_ranks.setdefault(step, [None] * t)
            parts[rank] = torch.as_tensor(tensor).detach().to(torch.float64)

            def total():
                if len({tuple(p.shape) for p in parts}) != 1:
                    raise RuntimeError(
                        f"all_reduce call {step + 1}: the ranks sent different shapes"
                    )
                return sum(parts[1:], parts[0].clone())

            def stuck() -> str:
                missing = [r for r in range(t) if parts[r] is None]
                return f"all_reduce call {step + 1}: ranks {missing} never made that call"

            return student.later(lambda: all(p is not None for p in parts), total, stuck)

        return all_reduce

    return all_reduce_for


def _simulate(student, cs: list[dict]) -> list[tuple[list[dict], list[dict]]]:
    """Run every case on its t ranks, in one set of processes of the student's (as many
    as the largest t; ranks 0 … t − 1 serve each case): every case poisoned, then every
    case clean.  Poisoned first, so that no rank can have kept the other ranks' clean
    blocks from a clean run (the ranks share the student's files); each case draws its
    own matrices, so a clean run tells nothing about another case.  Per case, round and
    rank: error, result and the messages it sent."""
    import torch

    rounds, logs = [], []
    for poison in (True, False):
        for case in cs:
            t = case["t"]
            messages: list[list] = [[] for _ in range(t)]
            all_reduce_for = _all_reduce(student, t, messages)  # each round its own all-reduce
            calls = []
            for rank in range(t):
                w1, w2 = poisoned(case, rank) if poison else (case["w1"], case["w2"])
                args = [torch.tensor(a, dtype=torch.float64) for a in (case["x"], w1, w2)]
                calls.append((*args, rank, t, all_reduce_for(rank)))
            rounds.append(calls)
            logs.append(messages)
    runs = []
    for outs, messages in zip(student.rounds(rounds, seconds=WAIT_S), logs, strict=True):
        ranks = []
        for rank, out in enumerate(outs):
            rec: dict = {"error": None, "messages": messages[rank]}
            if isinstance(out, BaseException):
                rec["error"] = f"{type(out).__name__}: {out}"[:300]
            else:
                rec["result"] = _record(out)
            ranks.append(rec)
        runs.append(ranks)
    return list(zip(runs[: len(cs)], runs[len(cs) :], strict=True))


def probe(student, seed: int, params: dict) -> dict:
    """Run ``tp_mlp_forward`` on t ranks for each degree, poisoned then clean (one set of
    processes for all of it: :func:`_simulate`)."""
    cs = cases(seed)
    return {
        "runs": [
            {"t": c["t"], "clean": clean, "nan": nan}
            for c, (nan, clean) in zip(cs, _simulate(student, cs), strict=True)
        ]
    }


# --- grade (trusted) ---------------------------------------------------------------------


def gelu(z: np.ndarray) -> np.ndarray:
    """GeLU(z) = z Φ(z), the exact form (torch.nn.functional.gelu's default)."""
    return 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))


def mlp(case: dict) -> np.ndarray:
    return gelu(case["x"] @ case["w1"]) @ case["w2"]


def _array(rec) -> np.ndarray | None:
    """A recorded tensor as an array of its shape, or None."""
    from autograder.checktools import vector

    if not isinstance(rec, dict) or not isinstance(rec.get("shape"), list):
        return None
    v = vector(rec.get("values"))
    try:
        return None if v is None else v.reshape(rec["shape"])
    except (ValueError, TypeError):
        return None


def _ranks(run, key: str, t: int) -> list[dict]:
    ranks = run.get(key) if isinstance(run, dict) else None
    if not isinstance(ranks, list) or len(ranks) != t:
        return [{"error": "no result"} for _ in range(t)]
    return [r if isinstance(r, dict) else {"error": "no result"} for r in ranks]


def _messages(rank: dict) -> list:
    m = rank.get("messages")
    return m if isinstance(m, list) else []


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Score the value, the all-reduce and the locality of every rank, for t = 2, 4, 8."""
    from autograder.checktools import close, prop

    cs = cases(seed)
    r = result if isinstance(result, dict) else {}
    runs = r.get("runs") if isinstance(r.get("runs"), list) else []
    runs = (runs + [None] * len(cs))[: len(cs)]
    value, comm, local = [], [], []
    value_notes, comm_notes, local_notes = [], [], []
    for c, run in zip(cs, runs, strict=True):
        t, shape = c["t"], c["x"].shape
        clean, nan = _ranks(run, "clean", t), _ranks(run, "nan", t)
        errors = [f"rank {i}: {x['error']}" for i, x in enumerate(clean) if x.get("error")]

        # 1. every rank returns the MLP output
        exp = mlp(c)
        results = [_array(x.get("result")) for x in clean]
        wrong = [i for i, y in enumerate(results) if not close(y, exp, RTOL, ATOL)]
        value.append(not wrong)
        if errors:
            value_notes.append(f"t = {t}: {errors[0]}.")
        elif wrong:
            who = "no rank" if len(wrong) == t else f"ranks {wrong} do not"
            value_notes.append(
                f"t = {t}: {who} end{'s' if len(wrong) == t else ''} with GeLU(X W₁) W₂."
            )

        # 2. one all-reduce of a (b, d) tensor per rank
        counts = [len(_messages(x)) for x in clean]
        shapes = [
            [m.get("shape") if isinstance(m, dict) else None for m in _messages(x)] for x in clean
        ]
        ok = all(n == 1 for n in counts) and all(s == [list(shape)] for s in shapes)
        comm.append(ok)
        if not ok:
            i = next(i for i in range(t) if counts[i] != 1 or shapes[i] != [list(shape)])
            if counts[i] == 0:
                comm_notes.append(f"t = {t}: rank {i} never calls all_reduce.")
            else:
                listed = ", ".join(str(tuple(s)) if isinstance(s, list) else "?" for s in shapes[i])
                comm_notes.append(
                    f"t = {t}: rank {i} calls all_reduce {counts[i]} times, with {listed}."
                )

        # 3. a rank's messages and result depend only on its own shards
        if errors:
            local.append(False)
            local_notes.append(f"t = {t} (cannot tell: the clean run fails, {errors[0]})")
            continue
        leaks = []
        for i, (a, b) in enumerate(zip(clean, nan, strict=True)):
            mine = [*_messages(a), a.get("result")]
            theirs = [*_messages(b), b.get("result")]
            if b.get("error") or len(mine) != len(theirs):
                leaks.append(i)
                continue
            for x, y in zip(mine, theirs, strict=True):
                xa, ya = _array(x), _array(y)
                if xa is None or not close(ya, xa, RTOL, ATOL):
                    leaks.append(i)
                    break
        local.append(not leaks)
        if leaks:
            who = "every rank" if len(leaks) == t else f"ranks {leaks}"
            local_notes.append(f"t = {t}: {who}")

    props = []
    msg = (
        "For t = 2, 4 and 8 every rank ends with GeLU(X W₁) W₂."
        if all(value)
        else " ".join(value_notes) + " Rank r computes GeLU(X A_r) B_r, of shape (b, d), with "
        "A_r = w1.chunk(t, dim=1)[r] and B_r = w2.chunk(t, dim=0)[r], and returns what "
        "all_reduce gives back: the sum of the t partial outputs. GeLU is not additive, which "
        "is why W₁ is split by columns and not by rows (§3.3)."
    )
    props.append(prop("every rank ends with GeLU(XW₁)W₂", 2.0, sum(value) / len(value), msg))
    msg = (
        "Each rank makes exactly one all-reduce, of its (b, d) partial output."
        if all(comm)
        else " ".join(comm_notes) + " The column split of W₁ lets every rank apply GeLU to "
        "its own slice of the hidden layer, so nothing is exchanged between the two matrix "
        "products: one all-reduce of the (b, d) partial outputs per forward pass (§3.3)."
    )
    props.append(
        prop("one all-reduce of the b × d partial outputs", 1.0, sum(comm) / len(comm), msg)
    )
    msg = (
        "With the other ranks' columns of W₁ and rows of W₂ set to NaN, every rank sends and "
        "returns exactly what it did with the real matrices."
        if all(local)
        else "Set the columns of W₁ and the rows of W₂ of the other ranks to NaN and the "
        f"messages or results change, for {'; '.join(local_notes)}. A rank may only read "
        "A_r = w1.chunk(t, dim=1)[r] and B_r = w2.chunk(t, dim=0)[r], the r-th contiguous "
        "blocks, 1/t of each matrix (multiplying the other blocks by zero reads them too)."
    )
    props.append(
        prop("rank r uses only its shards of W₁ and W₂", 2.0, sum(local) / len(local), msg)
    )
    return props
