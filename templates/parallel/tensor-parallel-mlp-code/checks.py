"""Checks of the tensor-parallel MLP code part (000 §3.3, Shoeybi et al. 2019).

Value, communication and locality are separate: a wrong value costs only the first, a rank
that reads other ranks' blocks only the last. The ranks are fresh processes that share nothing
but all_reduce; forked from the student's process (the process sandbox) they could talk outside
it, so a rank's messages must repeat in rounds that redraw the others' blocks, and all_reduce
adds a seeded offset; NaN blocks catch NaN · 0, not nan_to_num first
(test_forgeries_ranks_tp.py).
"""

import itertools
import math

import numpy as np

from autograder.checklib import Record, Result, Verdict, check, close, notes, per_case, share

DEGREES = (2, 4, 8)
WAIT_S = 20.0  # all the rounds together (honest ranks take 0.1 s; slack for a loaded machine)
MAX_VALUES = 4096  # values of one message returned to the grader


def swapped(w1, w2, new1, new2, ranks: list[int], t: int) -> tuple[np.ndarray, np.ndarray]:
    """W₁, W₂ with the blocks of ``ranks`` (contiguous, as tensor.chunk(t)) from new1, new2."""
    w1, w2, h = w1.copy(), w2.copy(), w1.shape[1]
    for r in ranks:
        own = slice(r * h // t, (r + 1) * h // t)
        w1[:, own], w2[own, :] = new1[:, own], new2[own, :]
    return w1, w2


def cases(seed: int) -> list[dict]:
    """X, W₁, W₂ per degree t, each rank's code and (W₁, W₂) of each clean round."""
    rng, more = np.random.default_rng([seed, 50]), np.random.default_rng([seed, 52])
    out = []
    for t in DEGREES:
        b, d = int(rng.integers(3, 6)), int(rng.choice([8, 16]))
        x, w1 = rng.standard_normal((b, d)), rng.standard_normal((d, 4 * d)) / math.sqrt(d)
        w2 = rng.standard_normal((4 * d, d)) / math.sqrt(4 * d)
        # codes[r][s]: rank r's blocks redrawn (1) in clean round s, or not; codes distinct
        # and none constant, so two rounds that keep r's blocks differ in any other rank's
        n = next(n for n in range(2, t + 2) if 2**n - 2 >= t)  # the fewest rounds
        every = list(itertools.product((0, 1), repeat=n))[1:-1]
        codes = [every[int(j)] for j in more.permutation(len(every))[:t]]
        new1 = more.standard_normal((d, 4 * d)) / math.sqrt(d)  # every rank's redrawn blocks
        new2 = more.standard_normal((4 * d, d)) / math.sqrt(4 * d)
        moved = [[r for r in range(t) if codes[r][s]] for s in range(n)]
        clean = [swapped(w1, w2, new1, new2, m, t) for m in moved]
        out.append({"t": t, "x": x, "w1": w1, "w2": w2, "codes": codes, "clean": clean})
    return out


def schedule(cs: list[dict], seed: int) -> list[tuple[int, int]]:
    """The rounds as (case, k), k = -1 poisoned: those first, then the clean ones shuffled."""
    clean = [(i, k) for i, c in enumerate(cs) for k in range(len(c["clean"]))]
    order = np.random.default_rng([seed, 53]).permutation(len(clean))
    return [(i, -1) for i in range(len(cs))] + [clean[int(j)] for j in order]


def offset(seed: int, rnd: int, step: int, shape: tuple) -> np.ndarray:
    """What all_reduce adds to a (b, d) sum: drawn where the student's processes cannot."""
    return np.random.default_rng([seed, 51, rnd, step]).standard_normal(shape)


def _all_reduce(student, seed: int, rnd: int, shape: tuple, messages: list[list]) -> list:
    """Round ``rnd``'s all_reduce per rank: call k logs the message, waits for every rank's
    k-th and answers their sum, plus the offset when it has the output's shape (b, d)."""
    import torch

    t, sent, totals = len(messages), {}, {}  # per step: each rank's tensor; the answer, once

    def for_rank(rank: int):
        def all_reduce(tensor):
            step = len(messages[rank])
            messages[rank].append(Record.of(tensor, keep=MAX_VALUES))
            parts = sent.setdefault(step, [None] * t)
            parts[rank] = torch.as_tensor(tensor).detach().to(torch.float64)
            call = f"all_reduce call {step + 1}"

            def total():
                if len({tuple(p.shape) for p in parts}) != 1:
                    raise RuntimeError(f"{call}: the ranks sent different shapes")
                if step not in totals:
                    s = sum(parts[1:], parts[0].clone())
                    off = torch.from_numpy(offset(seed, rnd, step, shape))
                    totals[step] = s + off if tuple(s.shape) == shape else s
                return totals[step]

            def stuck() -> str:
                missing = [r for r in range(t) if parts[r] is None]
                return f"{call}: ranks {missing} never made that call"

            return student.later(lambda: all(p is not None for p in parts), total, stuck)

        return all_reduce

    return [for_rank(rank) for rank in range(t)]


def probe(student, seed: int, params: dict) -> dict:
    """Every round of :func:`schedule` on ranks 0 … t − 1 of one set of the student's
    processes; in a poisoned round, W₁ and W₂ are NaN outside the rank's own blocks."""
    import torch

    cs, rounds, logs = cases(seed), [], []
    for rnd, (i, k) in enumerate(schedule(cs, seed)):
        c, t = cs[i], cs[i]["t"]
        logs.append([[] for _ in range(t)])
        reduce = _all_reduce(student, seed, rnd, c["x"].shape, logs[-1])
        x, nan = torch.from_numpy(c["x"]), [np.full_like(c[w], np.nan) for w in ("w1", "w2")]
        poisoned = [swapped(*nan, c["w1"], c["w2"], [r], t) for r in range(t)]
        held = [c["clean"][k]] * t if k >= 0 else poisoned
        rounds.append([(x, *map(torch.from_numpy, w), r, t, reduce[r]) for r, w in enumerate(held)])
    out = []
    # fresh ranks, as the ring's; where ranks are forked from S (the process sandbox),
    # all_reduce's offset and the redrawn blocks judge what the comm delivered
    runs = student.rounds(rounds, seconds=WAIT_S)
    for outs, sent in zip(runs, logs, strict=True):
        recs = [Record.of(y, keep=MAX_VALUES) for y in outs]
        ranks = [{"result": y, "messages": m} for y, m in zip(recs, sent, strict=False)]
        out.append({"ranks": ranks})
    return {"rounds": out}


def mlp(x: np.ndarray, w1: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """GeLU(X W₁) W₂, GeLU's exact form z Φ(z) (torch.nn.functional.gelu's default)."""
    z = x @ w1
    return 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2))) @ w2


def _error(rank: Result) -> str | None:
    rec = rank.record("result")
    return rec.error if rec.raised or rec.missing else None


def _wrong(ranks: list[Result], exp: np.ndarray, seed: int, rnd: int) -> list[str]:
    """What is wrong with a clean round: its last all_reduce's messages must sum to ``exp``,
    and every rank return that call's answer (the sum plus the round's offset)."""
    steps = {len(x.records("messages")) - 1 for x in ranks}
    if min(steps) < 0:
        return ["a rank never calls all_reduce, whose answer it should return"]
    if len(steps) != 1:
        return ["the ranks make different numbers of all_reduce calls"]
    step = steps.pop()
    sent = [x.records("messages")[step].array() for x in ranks]
    if any(m is None or m.shape != exp.shape for m in sent):
        return ["the ranks do not pass all_reduce their (b, d) partial outputs"]
    total, out = sum(sent, np.zeros(exp.shape)), []
    if not close(total, exp):
        out.append("the partial outputs passed to all_reduce do not sum to GeLU(X W₁) W₂")
    answer = total + offset(seed, rnd, step, exp.shape)
    wrong = [i for i, x in enumerate(ranks) if not close(x.record("result").array(), answer)]
    if wrong:
        who = "no rank returns" if len(wrong) == len(ranks) else f"ranks {wrong} do not return"
        out.append(f"{who} what all_reduce gave back")
    return out


def _same(reference: Result, clean: Result) -> bool:
    """A rank sent in a clean round what it sent in a round where it held the same blocks."""
    mine, theirs = clean.records("messages"), reference.records("messages")
    if _error(reference) or not mine or len(mine) != len(theirs):
        return False
    return all(
        x.array() is not None and close(y.array(), x.array())
        for x, y in zip(mine, theirs, strict=True)
    )


def _judged(c: dict, nan: list[Result], clean: list[tuple], seed: int) -> list[Verdict]:
    """One case's verdicts: the value, the one all-reduce, the locality."""
    t, ranks = f"t = {c['t']}", [(j, x) for _, xs in clean for j, x in enumerate(xs)]
    errors = [f"rank {j}: {_error(x)}" for j, x in ranks if _error(x)]
    rounds = zip(clean, c["clean"], strict=True)
    wrong = [n for (rnd, xs), w in rounds for n in _wrong(xs, mlp(c["x"], *w), seed, rnd)]
    why = errors[:1] or list(dict.fromkeys(wrong))
    verdicts = [Verdict(not why, f"{t}: {'; '.join(why)}."), Verdict(True)]
    for j, s in [(j, [m.shape for m in x.records("messages")]) for j, x in ranks]:
        if s != [c["x"].shape]:
            seen = ", ".join("?" if x is None else str(x) for x in s)
            calls = (
                f"calls all_reduce {len(s)} times, with {seen}" if s else "never calls all_reduce"
            )
            verdicts[1] = Verdict(False, f"{t}: rank {j} {calls}.")
            break
    if errors:
        return [*verdicts, Verdict(False, f"{t} (cannot tell: a clean round fails, {errors[0]})")]
    leaks = []
    for rank, code in enumerate(c["codes"]):
        same = ([nan[rank]], [])  # the rounds where it holds its real blocks; its redrawn ones
        for (_, xs), v in zip(clean, code, strict=True):
            same[v].append(xs[rank])
        if not all(_same(group[0], x) for group in same for x in group[1:]):
            leaks.append(rank)
    who = "every rank" if len(leaks) == c["t"] else f"ranks {leaks}"
    return [*verdicts, Verdict(not leaks, f"{t}: {who}")]


value = per_case(
    "every rank ends with GeLU(XW₁)W₂",
    2.0,
    "For t = 2, 4 and 8 every rank ends with GeLU(X W₁) W₂, as all_reduce gave it back.",
    " Rank r computes GeLU(X A_r) B_r, of shape (b, d), with A_r = w1.chunk(t, dim=1)[r] and "
    "B_r = w2.chunk(t, dim=0)[r], and returns what all_reduce gives back, unchanged: the sum of "
    "the t partial outputs (the grader's all_reduce adds an offset of its own to that sum, so "
    "only a result that came through it counts). GeLU is not additive, which is why W₁ is "
    "split by columns and not by rows (§3.3).",
)
comm = per_case(
    "one all-reduce of the b × d partial outputs",
    1.0,
    "Each rank makes exactly one all-reduce, of its (b, d) partial output.",
    " The column split of W₁ lets every rank apply GeLU to its own slice of the hidden layer, "
    "so nothing is exchanged between the two matrix products: one all-reduce of the (b, d) "
    "partial outputs per forward pass (§3.3).",
)


@check("rank r uses only its shards of W₁ and W₂", 2.0)
def local(verdicts: list[Verdict]):
    if all(verdicts):
        return 1.0, (
            "With the other ranks' columns of W₁ and rows of W₂ set to NaN in its copy, or "
            "redrawn in every rank's, every rank sends exactly what it sent before."
        )
    return share(verdicts), (
        "Set the other ranks' columns of W₁ and rows of W₂ to NaN in a rank's copy, or redraw "
        "them in every rank's, and its messages to all_reduce change (or it sends none), for "
        f"{notes(verdicts, sep='; ')}. A rank may only read A_r = w1.chunk(t, dim=1)[r] and "
        "B_r = w2.chunk(t, dim=0)[r], the r-th contiguous blocks, 1/t of each matrix "
        "(multiplying the other blocks by zero reads them too), and reaches the other ranks "
        "only through all_reduce: blocks read from the other ranks in any other way change "
        "when they are redrawn."
    )


def grade(result: dict, seed: int, params: dict) -> list:
    cs = cases(seed)
    plan = schedule(cs, seed)
    got = Result(result).parts("rounds", len(plan))
    at = {p: (rnd, got[rnd].parts("ranks", cs[p[0]]["t"])) for rnd, p in enumerate(plan)}
    runs = [(c, at[i, -1][1], [at[i, k] for k in range(len(c["clean"]))]) for i, c in enumerate(cs)]
    verdicts = [_judged(*run, seed) for run in runs]
    return [p([v[n] for v in verdicts]) for n, p in enumerate((value, comm, local))]
