"""Checks of the ring all-reduce code part (000 §3.1, Theorem 3.3): the algorithm, not the sum.

``probe`` runs in the probe process, beside the student's.  It runs the p ranks as
processes forked from the student's (Student.ranks), each calling the student's
``ring_allreduce(x, rank, world, comm)`` on its own buffer only, sent to that rank alone;
this process is the router: it carries every ``comm.send_recv`` message from rank r to
rank r + 1 and logs it (step, source rank, size, values), and adds to what it delivers an
offset of its own (:func:`offset`, drawn from the grading seed, which the student's
processes never hold).  Then a real run: p ranks joined by ``torch.distributed`` with the
gloo backend, the student's function over isend/irecv, against the sum of the buffers.

``grade`` runs in the trusted process: it recomputes every rank's buffer and every offset
from the seed and scores the outputs and the log, one weighted property at a time.  The
ranks are processes of the student's and can reach each other outside the comm (files,
memory shared from an earlier cell, a thread of the student's process): so every message
and result is judged against what the comm DELIVERED to that rank, offsets included.
Each reduce-scatter message must be the chunk received one step before plus the rank's
own copy of it, each all-gather message the chunk just received, and each result the
chunks the all-gather delivered: a value worked out from data that came another way lacks
the offsets, and the gloo run counts only for a ring whose messages came through the comm.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from autograder.checklib import (
    Property,
    Record,
    Result,
    check,
    close,
    count,
    plain,
    slice_at,
    vector,
)

ISOLATED = True  # probe() runs in the probe process; ring_allreduce, in the student's ranks
PRELOAD = ("torch",)  # the gloo run's ranks join a torch.distributed group
SIM_SECONDS = 20.0  # the simulated ring, all ranks together
GLOO_SECONDS = 20.0  # the gloo run, start-up included
MAX_CALLS_FACTOR = 4  # send_recv calls allowed per rank: 4p (a ring needs 2(p - 1))
MESSAGE_MAX = 1 << 40  # elements: a logged size beyond it is no message
RTOL, ATOL = 1e-9, 1e-9

# --- inputs: the same functions in the sandbox (probe) and the trusted process (grade) ---


def sizes(seed: int, run: str) -> tuple[int, int]:
    """(p, n) of a run: "sim" (p in 3..8) or "gloo" (p in 2..4); n = p * k, k in 2..5."""
    rng = np.random.default_rng([seed, 0 if run == "sim" else 1])
    p = int(rng.integers(3, 9)) if run == "sim" else int(rng.integers(2, 5))
    return p, p * int(rng.integers(2, 6))


def rank_input(seed: int, run: str, rank: int, n: int) -> np.ndarray:
    """The buffer of one rank: n standard normal float64 values (drawn in that rank only)."""
    return np.random.default_rng([seed, 2 if run == "sim" else 3, rank]).standard_normal(n)


def offset(seed: int, rank: int, step: int, size: int) -> np.ndarray:
    """What the router adds to rank r's message of call ``step`` as it delivers it to
    rank r + 1: ``size`` standard normal values."""
    return np.random.default_rng([seed, 4, rank, step]).standard_normal(size)


def _as_vector(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64).reshape(-1))


def _error(rec: Record, p: int, n: int, timeout: float | None = None) -> str | None:
    """What a rank's run said went wrong, for the messages: what it raised (past
    ``timeout``, that it timed out), or a result of more than p·n elements."""
    if timeout is not None and rec.raised == "TimeoutError":
        return f"timed out after {timeout:g} s"
    if not rec.ok:
        return rec.error
    if rec.size is not None and rec.size > p * n:
        return f"ValueError: ring_allreduce returned {rec.size} elements for n = {n}"
    return None


# --- the simulated ring: this process is the router -------------------------------------


def _router(student, p: int, n: int, log: list, seed: int):
    """Each rank's comm: its k-th ``send_recv`` is logged here (step, source rank, size,
    values) and answered, once rank − 1 has made its k-th call, with what that rank sent
    plus :func:`offset`."""
    max_calls = MAX_CALLS_FACTOR * p
    sent: list[list[np.ndarray]] = [[] for _ in range(p)]  # sent[r][k]: rank r's k-th message

    class Comm:
        def __init__(self, rank: int):
            self._rank = rank

        def send_recv(self, chunk):
            """Send ``chunk`` to rank (rank + 1) % world; return what rank − 1 sent."""
            r, k = self._rank, len(sent[self._rank])
            values = _as_vector(chunk)
            if k >= max_calls:
                raise RuntimeError(f"more than {max_calls} calls to send_recv")
            if values.size > p * n:
                raise RuntimeError(f"a message of {values.size} elements (n = {n})")
            log.append([k, r, values.size, plain(values.tolist()) if values.size <= n else None])
            sent[r].append(values)
            src = (r - 1) % p
            return student.later(
                lambda: len(sent[src]) > k,
                lambda: sent[src][k] + offset(seed, src, k, sent[src][k].size),
                lambda: (
                    f"deadlock: rank {r} waits for message {k + 1} of rank {src}, which "
                    f"made {len(sent[src])} calls to send_recv"
                ),
            )

    return [Comm(r) for r in range(p)]


def _simulate(student, seed: int) -> dict:
    """Run the p ranks, each a process of the student's, around this process's router.
    ``errors`` and ``timed_out`` say what the ranks' outputs say, for a reader."""
    p, n = sizes(seed, "sim")
    log: list = []  # [step, source rank, size, values or None]
    comms = _router(student, p, n, log, seed)
    calls = [(rank_input(seed, "sim", r, n), r, p, comms[r]) for r in range(p)]
    outputs = [Record.of(o, keep=p * n) for o in student.ranks(calls, seconds=SIM_SECONDS)]
    return {
        "p": p,
        "n": n,
        "outputs": outputs,
        "errors": [_error(rec, p, n, SIM_SECONDS) for rec in outputs],
        "log": log,
        "timed_out": any(rec.raised == "TimeoutError" for rec in outputs),
    }


# --- the real run: torch.distributed, gloo -----------------------------------------------


def _gloo(student, seed: int) -> dict:
    """The p ranks as processes joined by a gloo group; comm.send_recv is isend/irecv.  A
    rank that could not start (NotStarted: the grading machine's gloo, not the student's)
    says so apart from the ranks that ran the student's code."""
    p, n = sizes(seed, "gloo")
    calls = [(rank_input(seed, "gloo", r, n), r, p, student.gloo_ring()) for r in range(p)]
    ranks = []
    for out in student.ranks(calls, seconds=GLOO_SECONDS, gloo=True):
        if isinstance(out, student.NotStarted):
            ranks.append({"stage": "start", "error": str(out)[:300]})
        else:
            ranks.append({"stage": "student", "output": Record.of(out, keep=p * n)})
    return {"p": p, "n": n, "ranks": ranks}


def probe(student, seed: int, params: dict) -> dict:
    """Run the student's ring on the simulated ring, then for real over gloo."""
    return {"sim": _simulate(student, seed), "gloo": _gloo(student, seed)}


# --- grade (trusted) ---------------------------------------------------------------------


def _output(rec: Record, n: int) -> np.ndarray | None:
    """A rank's result as n numbers, or None."""
    a = rec.array()
    return None if a is None or a.size != n else a.reshape(-1)


def _first_errors(errors: list, limit: int = 2) -> str:
    shown = [f"rank {r}: {e}" for r, e in enumerate(errors) if e][:limit]
    return ("; ".join(shown) + ".") if shown else ""


@dataclass
class _Sim:
    """The simulated ring's result, read against the seed: the buffers, each rank's
    output and error, its messages in call order, and the ring the router carried."""

    p: int
    n: int
    xs: list
    outs: list
    errors: list
    per_rank: list
    flow: _Flow

    @classmethod
    def read(cls, sim: Result, seed: int) -> _Sim | None:
        p, n = sizes(seed, "sim")
        recs, log = sim.records("outputs"), sim.get("log")
        if sim.get("p") != p or sim.get("n") != n or len(recs) != p or not isinstance(log, list):
            return None
        xs = [rank_input(seed, "sim", r, n) for r in range(p)]
        per_rank: list[list[np.ndarray]] = [[] for _ in range(p)]  # messages in call order
        for entry in log:
            if not (isinstance(entry, list) and len(entry) == 4):
                continue
            k, src, size, values = entry
            if count(src, p - 1) is None or count(size, MESSAGE_MAX) is None:
                continue  # no message has that size: the entry is not readable
            vec = vector(values, size) if values is not None else None
            # a message logged without its values: its size, and nothing to compare (nan),
            # as a view of one number, so that a large size takes no memory here
            per_rank[src].append(vec if vec is not None else np.broadcast_to(np.nan, (size,)))
        outs = [_output(rec, n) for rec in recs]
        errors = [_error(rec, p, n, SIM_SECONDS) for rec in recs]
        return cls(p, n, xs, outs, errors, per_rank, _flow(per_rank, xs, seed, p, n))


@check("every rank ends with the sum", 2.0)
def result_sum(s: _Sim):
    """The result: the chunks the all-gather delivered and the rank's own completed one
    (or, not by a ring but through the comm all the same, the whole buffers delivered)."""
    p, flow = s.p, s.flow
    good = [
        close(o, flow.result[r], RTOL, ATOL) or close(o, flow.gathered[r], RTOL, ATOL)
        for r, o in enumerate(s.outs)
    ]
    if all(good):
        return 1.0, f"All {p} ranks return the sum of the {p} buffers, as the ring carried it."
    bad = [r for r in range(p) if not good[r]]
    true = [r for r in bad if close(s.outs[r], np.sum(s.xs, axis=0), RTOL, ATOL)]
    return sum(good) / p, (
        f"{len(bad)} of {p} ranks do not return the sum of the buffers as the ring "
        f"delivered it (ranks {', '.join(map(str, bad[:6]))}{', …' if len(bad) > 6 else ''})."
        + (
            f" Ranks {', '.join(map(str, true[:6]))} return the exact sum, which the ring "
            "cannot give: the grader's router adds an offset of its own to every message it "
            "carries, so only a result put together from what send_recv returned, chunk by "
            "chunk along the ring, counts."
            if true
            else " A rank's result is its completed chunk (the last reduce-scatter chunk it "
            "received plus its own copy) and the p − 1 chunks the all-gather delivered to it."
        )
        + (" " + _first_errors(s.errors) if _first_errors(s.errors) else "")
    )


@check("2(p − 1) calls to send_recv per rank", 1.0)
def steps(s: _Sim):
    need, calls = 2 * (s.p - 1), [len(m) for m in s.per_rank]
    right = [c == need for c in calls]
    if all(right):
        return 1.0, f"Every rank made 2(p − 1) = {need} calls to comm.send_recv for p = {s.p}."
    return sum(right) / s.p, (
        f"Calls to comm.send_recv per rank for p = {s.p}: {calls}; a ring all-reduce makes "
        f"p − 1 for the reduce-scatter and p − 1 for the all-gather."
    )


@check("2(p − 1)n/p elements sent per rank", 1.0)
def elements(s: _Sim):
    p, n = s.p, s.n
    need = 2 * (p - 1) * n // p
    elems = [int(sum(m.size for m in msgs)) for msgs in s.per_rank]
    right = [e == need for e in elems]
    if all(right):
        return 1.0, f"Every rank sent 2(p − 1)n/p = {need} elements (n = {n}, p = {p})."
    return sum(right) / p, (
        f"Elements sent per rank (n = {n}, p = {p}): {elems}; a ring sends 2(p − 1)n/p, "
        "one chunk per step (Theorem 3.3)."
    )


@check("each message is one chunk of n/p elements", 1.0)
def chunk(s: _Sim):
    c = s.n // s.p
    sizes_sent = [m.size for msgs in s.per_rank for m in msgs]
    if not sizes_sent:
        return 0.0, "No message was sent through comm."
    right = sum(x == c for x in sizes_sent)
    if right == len(sizes_sent):
        return 1.0, f"Every message is one chunk of n/p = {c} elements."
    other = sorted({x for x in sizes_sent if x != c})
    return right / len(sizes_sent), (
        f"{len(sizes_sent) - right} of {len(sizes_sent)} messages are not chunks of "
        f"n/p = {c} elements (sizes {other[:5]}): split the buffer into p equal chunks."
    )


@check("reduce-scatter messages are partial sums of one chunk", 1.5)
def reduce_scatter(s: _Sim):
    """Message s is the chunk received at s − 1 plus the rank's own copy."""
    p, total = s.p, s.p * (s.p - 1)
    hits = sum(s.flow.chunk[r][k] is not None for r in range(p) for k in range(p - 1))
    whole = sum(m.size >= s.n for msgs in s.per_rank for m in msgs[: p - 1])
    if hits == total:
        msg = (
            "Each reduce-scatter message of step s is the chunk received at step s − 1 plus the "
            "rank's own copy of that chunk (at step 0, a chunk of its own)."
        )
    elif whole:
        msg = (
            f"{whole} of the {total} reduce-scatter messages (the first p − 1 of each rank) carry "
            "the whole buffer: the reduce-scatter sends one chunk per step, the running sum of "
            "that chunk."
        )
    else:
        msg = (
            f"{total - hits} of the {total} reduce-scatter messages (the first p − 1 of each rank) "
            "are not the chunk received one step before plus the rank's own copy of it: at step "
            "s rank i sends the chunk it received at step s − 1 plus its own copy (what "
            "send_recv returned: the grader's router offsets every message, so a partial sum "
            "worked out another way does not match)."
        )
    return hits / total, msg


@check("all-gather messages are completed chunks", 1.0)
def all_gather(s: _Sim):
    """The completed chunk, then each chunk just received, passed on."""
    p, total = s.p, s.p * (s.p - 1)
    hits = sum(s.flow.chunk[r][k] is not None for r in range(p) for k in range(p - 1, 2 * (p - 1)))
    if hits == total:
        return 1.0, (
            "Each all-gather message carries a completed chunk: first the rank's own, then "
            "each chunk it has just received."
        )
    return hits / total, (
        f"{total - hits} of the {total} all-gather messages (calls p to 2(p − 1) of each rank) "
        "are missing or are not a completed chunk: after the reduce-scatter, send the chunk "
        "you completed, then pass on each chunk as send_recv returned it, p − 1 messages in "
        "all."
    )


SIM = (result_sum, steps, elements, chunk, reduce_scatter, all_gather)


class _Flow:
    """What the simulated ring carried, as the router delivered it: ``chunk[r][k]``, the
    offset in the buffer of the chunk that rank r's message k carries when that message is
    the ring's (None when it is not); ``result[r]``, what rank r ends with in a ring;
    ``gathered[r]``, its buffer plus every whole buffer delivered to it (what passing whole
    buffers around and adding them gives: the sum through the comm, not by a ring)."""

    def __init__(self, p: int, n: int):
        self.chunk: list[list[int | None]] = [[None] * (2 * (p - 1)) for _ in range(p)]
        self.result: list[np.ndarray] = [np.full(n, np.nan) for _ in range(p)]
        self.gathered: list[np.ndarray] = [np.full(n, np.nan) for _ in range(p)]


def _flow(sent: list, xs: list, seed: int, p: int, n: int) -> _Flow:
    """Follow the ring through the log: each message judged on what its rank had been
    delivered (the predecessor's message plus the router's :func:`offset`)."""
    flow = _Flow(p, n)

    def delivered(r: int, k: int) -> np.ndarray | None:
        src = (r - 1) % p
        if k >= len(sent[src]) or not np.all(np.isfinite(sent[src][k])):
            return None
        return sent[src][k] + offset(seed, src, k, sent[src][k].size)

    for k in range(2 * (p - 1)):
        for r in range(p):
            m = sent[r][k] if k < len(sent[r]) else None
            got = delivered(r, k - 1) if k else None
            before = flow.chunk[(r - 1) % p][k - 1] if k else None
            if m is None or (k and (got is None or before is None or got.size != m.size)):
                continue
            if k < p:  # reduce-scatter, then the chunk completed: received + own copy
                at = slice_at(m - got if k else m, xs[r], RTOL, ATOL)
                flow.chunk[r][k] = at if at is not None and (k == 0 or at == before) else None
            elif close(m, got, RTOL, ATOL):  # all-gather: the chunk just received, passed on
                flow.chunk[r][k] = before
    for r in range(p):
        pieces = [(flow.chunk[r][p - 1], sent[r][p - 1] if len(sent[r]) >= p else None)]
        pieces += [(flow.chunk[(r - 1) % p][k], delivered(r, k)) for k in range(p - 1, 2 * (p - 1))]
        for at, values in pieces:
            if at is None or values is None or at + values.size > n:
                break
            if not np.all(np.isnan(flow.result[r][at : at + values.size])):
                break  # two chunks at one place: some other is missing
            flow.result[r][at : at + values.size] = values
        else:
            continue
        flow.result[r][:] = np.nan  # the ring did not deliver this rank a whole result
    for r in range(p):
        whole = [delivered(r, k) for k in range(len(sent[(r - 1) % p]))]
        if whole and all(d is not None and d.size == n for d in whole):
            flow.gathered[r] = xs[r] + np.sum(whole, axis=0)
    return flow


def gloo(g: Result, seed: int, carried: float) -> Property:
    """The gloo run against dist.all_reduce, counted only as far as the simulated ring's
    results came through its comm (``carried``, property 1's score): its ranks could
    otherwise sum their buffers another way (files, shared memory) on both runs alike."""
    name, weight = "gloo run matches dist.all_reduce", 1.5
    p, n = sizes(seed, "gloo")
    ranks = g.parts("ranks")
    if g.get("p") != p or g.get("n") != n or len(ranks) != p or not all(x.data for x in ranks):
        return Property(name, weight, 0, "The gloo run returned no usable result.")
    setup = [x.get("error") for x in ranks if x.get("stage") == "start"]
    if setup and not any(x.get("stage") == "student" for x in ranks):
        # the grading machine could not start gloo: no fault of the student, no weight.
        # A rank's own word that it could not start is the student's to give (its process
        # is forked from theirs): it reaches here as NotStarted only when the probe
        # process's own gloo group did not form either (prober.whose_start)
        return Property(
            name,
            0.0,
            0,
            f"Not run: gloo could not start on the grading machine ({setup[0]}); this check "
            "does not count.",
        )
    total = np.sum([rank_input(seed, "gloo", r, n) for r in range(p)], axis=0)
    good = [close(_output(x.record("output"), n), total, RTOL, ATOL) for x in ranks]
    if all(good):
        msg = f"Over gloo with {p} processes, every rank's result equals dist.all_reduce's."
    else:
        bad = [r for r in range(p) if not good[r]]
        errs = [
            x.get("error") if x.get("stage") == "start" else _error(x.record("output"), p, n)
            for x in ranks
        ]
        msg = (
            f"Over gloo with {p} processes, ranks {', '.join(map(str, bad))} do not return "
            f"what dist.all_reduce returns on the same buffers. " + _first_errors(errs)
        ).strip()
    if carried < sum(good) / p:
        msg += (
            " Counted only as far as the simulated ring's results came from what send_recv "
            f"delivered ({carried:.0%}): see the first property."
        )
    return Property(name, weight, min(carried, sum(good) / p), msg)


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score the probe's result against buffers recomputed from the seed."""
    r = Result(result)
    s = _Sim.read(r.part("sim"), seed)
    none = "The simulated ring returned no usable result."
    props = [f(s) if s else Property(f.name, f.weight, 0, none) for f in SIM]
    return [*props, gloo(r.part("gloo"), seed, props[0].score)]
