"""Checks of the tensor-parallel MLP code part (000 §3.3, Shoeybi et al. 2019).

``probe`` runs in the probe process, beside the student's: for t = 2, 4 and 8 it runs the
student's ``tp_mlp_forward(x, w1, w2, rank, t, all_reduce)`` on t ranks, each a process
forked from the student's that gets its own matrices only, with an all_reduce held here
that logs every message and answers the sum of what the ranks passed in the same call,
plus, when that sum has the output's shape (b, d), an offset of its own drawn here from
the grading seed (:func:`offset`).  Each t runs a poisoned round, every rank's copy of W₁
and W₂ filled with NaN outside its own columns and rows, then 2, 3 or 4 clean rounds, the
real matrices in every copy except that some ranks' blocks are redrawn, in every copy
(:func:`codes`, :func:`cases`).  The poisoned rounds come first, so that no rank holds
clean blocks from an earlier round; the clean rounds follow in an order drawn from the
seed (8 processes serve the twelve rounds).  ``grade`` runs in the trusted process: it
redraws X, W₁, W₂, the redrawn blocks and the offsets, and recomputes GeLU(X W₁) W₂ in
NumPy.

The ranks are the student's processes, forked from the student's: they can reach each
other outside the all_reduce (files in the working folder, /tmp or /dev/shm, memory or
pipes shared from an earlier cell, a thread of the student's process, sockets), which
nothing in the student's process can forbid; so the check is built for that to give
nothing.  The value is what came through the all_reduce: in every clean round the
messages of the last call sum to that round's GeLU(X W₁) W₂ and every rank returns the
answer it was given, offset included (a result worked out another way lacks it).  The
locality is judged on a rank's messages while the other ranks' blocks really change: a
rank sends the same messages in every round where its own blocks are the same, and for
any other rank two of those rounds hold different blocks of it, so a rank that reads
another's blocks, from its arguments or through a side channel, sees them change.  What is
left to a rank is its own blocks' messages plus a constant that the other ranks'
constants cancel (a sum learnt once from another rank, say): it still does its own share.
The poisoned round catches a rank that multiplies the other blocks by zero (NaN · 0 is
NaN); not one that first makes them finite, from a side channel or by ``nan_to_num``,
which computes what the honest rank computes (tests/autograder/test_forgeries_ranks_tp.py).

The three properties are separated on purpose: the value (every rank ends with the MLP
output, through the all-reduce), the communication (one all-reduce of a b × d tensor) and
the locality (a rank's messages depend only on its own blocks), so that a wrong value
costs only the first and a rank that reads other ranks' weights only the last.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from autograder.checklib import Property, Record, Result, check, close, share

ISOLATED = True  # probe() runs in the probe process; tp_mlp_forward, in the student's
DEGREES = (2, 4, 8)
RTOL, ATOL = 1e-6, 1e-9
WAIT_S = 20.0  # all the rounds together (honest ranks take 0.1 s; slack for a loaded machine)
MAX_VALUES = 4096  # values of one message returned to the grader

# --- inputs: the same functions in the sandbox (probe) and the trusted process (grade) ---


def shard(h: int, t: int, rank: int) -> slice:
    """The hidden units of rank r: the r-th of t contiguous chunks (tensor.chunk(t))."""
    return slice(rank * h // t, (rank + 1) * h // t)


def codes(t: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Which version of its blocks rank r holds in each clean round: ``codes[r][s]`` is 0
    for the real blocks (those of the poisoned round), 1 for blocks redrawn once for the
    rank.  A rank must send the same messages in every round where its blocks are the
    same, so its messages are compared across the rounds its code puts together; the
    codes are distinct and none constant, so that for any two ranks i ≠ j two such rounds
    of i hold different blocks of j (i is judged against every other block), and every
    rank holds its real blocks in some clean round (its poisoned round is judged).  The
    fewest rounds with t such codes (2^n − 2 ≥ t): 2 for t = 2, 3 for t = 4, 4 for t = 8;
    which code goes to which rank is drawn from the seed."""
    n = next(n for n in range(2, t + 2) if 2**n - 2 >= t)
    every = list(itertools.product((0, 1), repeat=n))[1:-1]  # not all 0, not all 1
    return [every[int(j)] for j in rng.permutation(len(every))[:t]]


def cases(seed: int) -> list[dict]:
    """X (b × d), W₁ (d × 4d), W₂ (4d × d) for each degree t, and its clean rounds: in
    round s, the blocks of the ranks ``moved`` (those whose code, :func:`codes`, says 1)
    are their redrawn ones, in every rank's W₁ and W₂."""
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
    more = np.random.default_rng([seed, 52])
    for c in out:
        t, (d, h) = c["t"], c["w1"].shape
        c["codes"] = codes(t, more)
        new1 = more.standard_normal((d, h)) / math.sqrt(d)  # every rank's redrawn blocks
        new2 = more.standard_normal((h, d)) / math.sqrt(h)
        c["clean"] = []
        for s in range(len(c["codes"][0])):
            moved = [r for r in range(t) if c["codes"][r][s]]
            w1, w2 = c["w1"].copy(), c["w2"].copy()
            for r in moved:
                own = shard(h, t, r)
                w1[:, own], w2[own, :] = new1[:, own], new2[own, :]
            c["clean"].append({"moved": moved, "w1": w1, "w2": w2})
    return out


def schedule(cs: list[dict], seed: int) -> list[tuple[int, int]]:
    """The rounds in the order they run, as (case, k): k = -1 the poisoned round of the
    case, k >= 0 its k-th clean round.  Every poisoned round first, then the clean rounds
    in an order drawn from the seed."""
    clean = [(i, k) for i, c in enumerate(cs) for k in range(len(c["clean"]))]
    order = np.random.default_rng([seed, 53]).permutation(len(clean))
    return [(i, -1) for i in range(len(DEGREES))] + [clean[int(j)] for j in order]


def offset(seed: int, rnd: int, step: int, shape: tuple) -> np.ndarray:
    """What the all_reduce adds to the sum of the ``step``-th call of round ``rnd`` when that
    sum has the output's shape (b, d): drawn here and in the grader, never in the student's
    processes, so that only a result that came through the all_reduce carries it."""
    return np.random.default_rng([seed, 51, rnd, step]).standard_normal(shape)


def poisoned(case: dict, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """W₁ and W₂ as rank r holds them: NaN outside its columns of W₁ and rows of W₂."""
    own = shard(case["w1"].shape[1], case["t"], rank)
    w1, w2 = np.full_like(case["w1"], np.nan), np.full_like(case["w2"], np.nan)
    w1[:, own], w2[own, :] = case["w1"][:, own], case["w2"][own, :]
    return w1, w2


def _all_reduce(student, t: int, messages: list[list], mark):
    """The t ranks' all_reduce, held in this process: rank r's k-th call waits for the
    k-th call of every rank, then each gets their sum, plus ``mark(k, shape)``.  Every
    message is logged here."""
    import torch

    from_ranks: dict[int, list] = {}  # step -> the tensor each rank passed
    totals: dict[int, object] = {}  # step -> the answer, worked out once for every rank

    def all_reduce_for(rank: int):
        def all_reduce(tensor):
            step = len(messages[rank])
            messages[rank].append(Record.of(tensor, keep=MAX_VALUES))
            parts = from_ranks.setdefault(step, [None] * t)
            parts[rank] = torch.as_tensor(tensor).detach().to(torch.float64)

            def total():
                if len({tuple(p.shape) for p in parts}) != 1:
                    raise RuntimeError(
                        f"all_reduce call {step + 1}: the ranks sent different shapes"
                    )
                if step not in totals:
                    totals[step] = mark(step, sum(parts[1:], parts[0].clone()))
                return totals[step]

            def stuck() -> str:
                missing = [r for r in range(t) if parts[r] is None]
                return f"all_reduce call {step + 1}: ranks {missing} never made that call"

            return student.later(lambda: all(p is not None for p in parts), total, stuck)

        return all_reduce

    return all_reduce_for


def probe(student, seed: int, params: dict) -> dict:
    """Run ``tp_mlp_forward`` on t ranks in every round of :func:`schedule`, in one set of
    processes of the student's (as many as the largest t; ranks 0 … t − 1 serve each
    round), each round with an all_reduce of its own.  Per round and rank: the error, the
    result and the messages it sent."""
    import torch

    cs = cases(seed)
    rounds, logs = [], []
    for rnd, (i, k) in enumerate(schedule(cs, seed)):
        c, t = cs[i], cs[i]["t"]
        shape = tuple(c["x"].shape)

        def mark(step, total, rnd=rnd, shape=shape):
            if tuple(total.shape) != shape:
                return total
            return total + torch.from_numpy(offset(seed, rnd, step, shape))

        messages: list[list] = [[] for _ in range(t)]
        all_reduce_for = _all_reduce(student, t, messages, mark)
        x = torch.from_numpy(c["x"])
        if k >= 0:
            w1, w2 = (torch.from_numpy(c["clean"][k][w]) for w in ("w1", "w2"))
        calls = []
        for rank in range(t):
            if k < 0:
                w1, w2 = (torch.from_numpy(w) for w in poisoned(c, rank))
            calls.append((x, w1, w2, rank, t, all_reduce_for(rank)))
        rounds.append(calls)
        logs.append(messages)
    out = []
    for outs, messages in zip(student.rounds(rounds, seconds=WAIT_S), logs, strict=True):
        results = [Record.of(got, keep=MAX_VALUES) for got in outs]
        ranks = [{"result": x, "messages": m} for x, m in zip(results, messages, strict=False)]
        out.append({"ranks": ranks})
    return {"rounds": out}


# --- grade (trusted) ---------------------------------------------------------------------


def gelu(z: np.ndarray) -> np.ndarray:
    """GeLU(z) = z Φ(z), the exact form (torch.nn.functional.gelu's default)."""
    return 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))


def mlp(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    return gelu(x @ w1) @ w2


def _error(rank: Result) -> str | None:
    """What a rank raised (or that there is no result of it): what it returned otherwise,
    numbers or not, is judged by the properties."""
    rec = rank.record("result")
    return rec.error if rec.raised or rec.missing else None


def _errors(ranks: list[Result]) -> list[str]:
    return [f"rank {i}: {_error(x)}" for i, x in enumerate(ranks) if _error(x)]


def _value(ranks: list[Result], exp: np.ndarray, seed: int, rnd: int) -> list[str]:
    """What is wrong with a clean round's value, if anything: the messages of the ranks'
    last all_reduce must sum to ``exp``, and every rank return the answer that call gave
    it (the sum plus the round's offset)."""
    t, shape = len(ranks), exp.shape
    steps = [len(x.records("messages")) - 1 for x in ranks]
    if min(steps) < 0:
        return ["a rank never calls all_reduce, whose answer it should return"]
    if len(set(steps)) != 1:
        return ["the ranks make different numbers of all_reduce calls"]
    total = np.zeros(shape)
    for x in ranks:
        m = x.records("messages")[steps[0]].array()
        if m is None or m.shape != shape:
            return ["the ranks do not pass all_reduce their (b, d) partial outputs"]
        total = total + m
    notes = []
    if not close(total, exp, RTOL, ATOL):
        notes.append("the partial outputs passed to all_reduce do not sum to GeLU(X W₁) W₂")
    answer = total + offset(seed, rnd, steps[0], shape)
    wrong = [i for i, x in enumerate(ranks) if not close(x.record("result").array(), answer, RTOL)]
    if wrong:
        who = "no rank returns" if len(wrong) == t else f"ranks {wrong} do not return"
        notes.append(f"{who} what all_reduce gave back")
    return notes


def _local(reference: Result, clean: Result) -> bool:
    """Whether a rank sent in a clean round exactly what it sent in an earlier round where
    it held the same blocks (its poisoned round or a clean one): some message, as many,
    each the same."""
    mine, theirs = clean.records("messages"), reference.records("messages")
    if _error(reference) or not mine or len(mine) != len(theirs):
        return False
    return all(
        x.array() is not None and close(y.array(), x.array(), RTOL, ATOL)
        for x, y in zip(mine, theirs, strict=True)
    )


class _Runs(NamedTuple):
    """The probe's rounds per case of :func:`cases`: ``nan[i]``, the ranks of its poisoned
    round; ``clean[i][k]``, (round number, ranks) of its k-th clean round."""

    cs: list
    nan: dict
    clean: dict
    seed: int

    @classmethod
    def read(cls, r: Result, seed: int) -> _Runs:
        cs = cases(seed)
        plan = schedule(cs, seed)
        nan, clean = {}, {i: [None] * len(c["clean"]) for i, c in enumerate(cs)}
        for rnd, ((i, k), run) in enumerate(zip(plan, r.parts("rounds", len(plan)), strict=True)):
            ranks = run.parts("ranks", cs[i]["t"])
            if k < 0:
                nan[i] = ranks
            else:
                clean[i][k] = (rnd, ranks)
        return cls(cs, nan, clean, seed)

    def errors(self, i: int) -> list[str]:
        """The errors of case i's clean rounds."""
        return [e for _, ranks in self.clean[i] for e in _errors(ranks)]


@check("every rank ends with GeLU(XW₁)W₂", 2.0)
def value(runs: _Runs):
    """Every rank returns what its all_reduce gave, and the messages sum to the MLP."""
    oks, whys = [], []
    for i, c in enumerate(runs.cs):
        errors, notes = runs.errors(i), []
        for k, (rnd, ranks) in enumerate(runs.clean[i]):
            w = c["clean"][k]
            exp = mlp(c["x"], w["w1"], w["w2"])
            notes += [n for n in _value(ranks, exp, runs.seed, rnd) if n not in notes]
        oks.append(not notes and not errors)
        if errors:
            whys.append(f"t = {c['t']}: {errors[0]}.")
        elif notes:
            whys.append(f"t = {c['t']}: {'; '.join(notes)}.")
    if all(oks):
        return (
            1.0,
            "For t = 2, 4 and 8 every rank ends with GeLU(X W₁) W₂, as all_reduce gave it back.",
        )
    return share(oks), " ".join(whys) + (
        " Rank r computes GeLU(X A_r) B_r, of shape (b, d), with "
        "A_r = w1.chunk(t, dim=1)[r] and B_r = w2.chunk(t, dim=0)[r], and returns what "
        "all_reduce gives back, unchanged: the sum of the t partial outputs (the grader's "
        "all_reduce adds an offset of its own to that sum, so only a result that came "
        "through it counts). GeLU is not additive, which is why W₁ is split by columns and "
        "not by rows (§3.3)."
    )


@check("one all-reduce of the b × d partial outputs", 1.0)
def comm(runs: _Runs):
    """One all-reduce of a (b, d) tensor per rank, in every clean round."""
    oks, whys = [], []
    for i, c in enumerate(runs.cs):
        bad = []
        for _, ranks in runs.clean[i]:
            for j, x in enumerate(ranks):
                shapes = [m.shape for m in x.records("messages")]
                if shapes != [c["x"].shape]:
                    bad.append((j, shapes))
        oks.append(not bad)
        if bad:
            j, shapes = bad[0]
            if not shapes:
                whys.append(f"t = {c['t']}: rank {j} never calls all_reduce.")
            else:
                listed = ", ".join("?" if s is None else str(s) for s in shapes)
                whys.append(
                    f"t = {c['t']}: rank {j} calls all_reduce {len(shapes)} times, with {listed}."
                )
    if all(oks):
        return 1.0, "Each rank makes exactly one all-reduce, of its (b, d) partial output."
    return share(oks), " ".join(whys) + (
        " The column split of W₁ lets every rank apply GeLU to "
        "its own slice of the hidden layer, so nothing is exchanged between the two matrix "
        "products: one all-reduce of the (b, d) partial outputs per forward pass (§3.3)."
    )


@check("rank r uses only its shards of W₁ and W₂", 2.0)
def local(runs: _Runs):
    """A rank's messages depend only on its own blocks: the same in every round where its
    blocks are the same (its poisoned round and the clean rounds that keep its real
    blocks; the clean rounds that give it its redrawn blocks)."""
    oks, whys = [], []
    for i, c in enumerate(runs.cs):
        errors = runs.errors(i)
        if errors:
            oks.append(False)
            whys.append(f"t = {c['t']} (cannot tell: a clean round fails, {errors[0]})")
            continue
        leaks = []
        for rank, code in enumerate(c["codes"]):
            clean = runs.clean[i]
            real = [runs.nan[i][rank]] + [clean[k][1][rank] for k, v in enumerate(code) if not v]
            redrawn = [clean[k][1][rank] for k, v in enumerate(code) if v]
            if not all(_local(same[0], x) for same in (real, redrawn) for x in same[1:]):
                leaks.append(rank)
        oks.append(not leaks)
        if leaks:
            who = "every rank" if len(leaks) == c["t"] else f"ranks {leaks}"
            whys.append(f"t = {c['t']}: {who}")
    if all(oks):
        return 1.0, (
            "With the other ranks' columns of W₁ and rows of W₂ set to NaN in its copy, or "
            "redrawn in every rank's, every rank sends exactly what it sent before."
        )
    return share(oks), (
        "Set the other ranks' columns of W₁ and rows of W₂ to NaN in a rank's copy, or "
        "redraw them in every rank's, and its messages to all_reduce change (or it sends "
        f"none), for {'; '.join(whys)}. A rank may only read A_r = "
        "w1.chunk(t, dim=1)[r] and B_r = w2.chunk(t, dim=0)[r], the r-th contiguous blocks, "
        "1/t of each matrix (multiplying the other blocks by zero reads them too), and "
        "reaches the other ranks only through all_reduce: blocks read from the other ranks "
        "in any other way change when they are redrawn."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score the value, the all-reduce and the locality of every rank, for t = 2, 4, 8."""
    runs = _Runs.read(Result(result), seed)
    return [value(runs), comm(runs), local(runs)]
