"""Checks of the ring all-reduce code part (000 §3.1, Theorem 3.3): the algorithm, not the sum.
The ranks are fresh processes that share nothing but the comm; where they are forked from the
student's process instead (the process sandbox) they could reach each other outside it (files,
shared memory), so the router offsets each message it delivers (:func:`offset`) and every
message and result is judged on what the comm DELIVERED (:func:`_flow`): a value worked out
another way lacks the offsets, and the gloo run, whose ranks share a loopback, counts only as
far as the simulated ring's results came through it."""

from functools import partial
from typing import NamedTuple

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

PRELOAD = ("torch",)  # the gloo run's ranks join a torch.distributed group
SIM_SECONDS = 20.0  # the simulated ring, all ranks together
GLOO_SECONDS = 20.0  # the gloo run, start-up included
MAX_CALLS_FACTOR = 4  # send_recv calls allowed per rank: 4p (a ring needs 2(p - 1))
MESSAGE_MAX = 1 << 40  # elements: a logged size beyond it is no message
RTOL, ATOL = 1e-9, 1e-9
_near = partial(close, rtol=RTOL, atol=ATOL)


def sizes(seed: int, run: str) -> tuple[int, int]:
    """(p, n) of a run: "sim" (p in 3..8) or "gloo" (p in 2..4); n = p * k, k in 2..5."""
    rng = np.random.default_rng([seed, 0 if run == "sim" else 1])
    p = int(rng.integers(3, 9)) if run == "sim" else int(rng.integers(2, 5))
    return p, p * int(rng.integers(2, 6))


def rank_input(seed: int, run: str, rank: int, n: int) -> np.ndarray:
    return np.random.default_rng([seed, 2 if run == "sim" else 3, rank]).standard_normal(n)


def offset(seed: int, rank: int, step: int, size: int) -> np.ndarray:
    """What the router adds to rank r's message ``step`` as it delivers it to rank r + 1."""
    return np.random.default_rng([seed, 4, rank, step]).standard_normal(size)


def _error(rec: Record, p: int, n: int, timeout: float | None = None) -> str | None:
    """What a rank's run raised (past ``timeout``: that it timed out), or a result too large."""
    if timeout is not None and rec.raised == "TimeoutError":
        return f"timed out after {timeout:g} s"
    if rec.ok and rec.size is not None and rec.size > p * n:
        return f"ValueError: ring_allreduce returned {rec.size} elements for n = {n}"
    return None if rec.ok else rec.error


def _simulate(student, seed: int) -> dict:
    """The p ranks, processes of the student's, around this process's router: a rank's k-th
    ``send_recv`` is logged (step, source rank, size, values) and answered, once rank − 1 has
    made its k-th call, with what that rank sent plus :func:`offset`."""
    p, n = sizes(seed, "sim")
    log: list = []  # [step, source rank, size, values or None]
    sent: list[list[np.ndarray]] = [[] for _ in range(p)]  # sent[r][k]: rank r's k-th message

    class Comm:
        def __init__(self, rank: int):
            self._rank = rank

        def send_recv(self, chunk):
            """Send ``chunk`` to rank (rank + 1) % world; return what rank − 1 sent."""
            r, k = self._rank, len(sent[self._rank])
            values = np.ascontiguousarray(np.asarray(chunk, dtype=np.float64).reshape(-1))
            if k >= MAX_CALLS_FACTOR * p:
                raise RuntimeError(f"more than {MAX_CALLS_FACTOR * p} calls to send_recv")
            if values.size > p * n:
                raise RuntimeError(f"a message of {values.size} elements (n = {n})")
            log.append([k, r, values.size, plain(values.tolist()) if values.size <= n else None])
            sent[r].append(values)
            src = (r - 1) % p
            return student.later(
                lambda: len(sent[src]) > k,
                lambda: sent[src][k] + offset(seed, src, k, sent[src][k].size),
                lambda: (
                    f"deadlock: rank {r} waits for message {k + 1} of rank {src}, which made "
                    f"{len(sent[src])} calls to send_recv"
                ),
            )

    calls = [(rank_input(seed, "sim", r, n), r, p, Comm(r)) for r in range(p)]
    # fresh ranks (nothing shared but the comm), and what a rank sent and returned is judged
    # on what the router delivered (where ranks are forked from S: the process sandbox)
    runs = student.ranks(calls, seconds=SIM_SECONDS)
    out = [Record.of(o, keep=p * n) for o in runs]
    errors = [_error(r, p, n, SIM_SECONDS) for r in out]
    timed_out = any(r.raised == "TimeoutError" for r in out)
    return dict(p=p, n=n, outputs=out, errors=errors, log=log, timed_out=timed_out)


def probe(student, seed: int, params: dict) -> dict:
    """The simulated ring, then a real run: p ranks joined by a gloo group, send_recv over
    isend/irecv (a rank that could not start says NotStarted: the machine's, not the student's)."""
    sim = _simulate(student, seed)
    p, n = sizes(seed, "gloo")
    calls = [(rank_input(seed, "gloo", r, n), r, p, student.gloo_ring()) for r in range(p)]
    ranks = []
    # a gloo set of fresh ranks shares its loopback, where gloo meets: the gloo property
    # counts only as far as the simulated ring's data flow went
    for out in student.ranks(calls, seconds=GLOO_SECONDS, gloo=True):
        if isinstance(out, student.NotStarted):
            ranks.append({"stage": "start", "error": str(out)[:300]})
        else:
            ranks.append({"stage": "student", "output": Record.of(out, keep=p * n)})
    return {"sim": sim, "gloo": {"p": p, "n": n, "ranks": ranks}}


def _first_errors(errors: list) -> str:
    shown = [f"rank {r}: {e}" for r, e in enumerate(errors) if e][:2]
    return (" " + "; ".join(shown) + ".") if shown else ""


class Flow(NamedTuple):
    """What the comm carried, by :func:`_flow`."""

    chunk: list  # [r][k]: the offset of the chunk rank r's message k carries, if the ring's
    result: list  # [r]: what rank r ends with in a ring (nan until it has one)
    gathered: list  # [r]: its buffer plus every whole buffer delivered (the sum, not by a ring)


class Sim(NamedTuple):
    """The simulated ring's run, read against the seed by :func:`_read`."""

    p: int
    n: int
    xs: list  # each rank's buffer
    outs: list  # each rank's output, or None
    errors: list  # why each rank's output is unusable, or None
    sent: list  # sent[r]: rank r's messages, in call order
    flow: Flow


def _read(sim: Result, seed: int) -> Sim | None:
    """The simulated ring against the seed: buffers, outputs, errors, each rank's messages in
    call order (a message logged without its values: its size, and nan, a view of one number)."""
    p, n = sizes(seed, "sim")
    recs, log = sim.records("outputs"), sim.get("log")
    if sim.get("p") != p or sim.get("n") != n or len(recs) != p or not isinstance(log, list):
        return None
    xs = [rank_input(seed, "sim", r, n) for r in range(p)]
    sent: list[list[np.ndarray]] = [[] for _ in range(p)]
    for _, src, size, values in [e for e in log if isinstance(e, list) and len(e) == 4]:
        if count(src, p - 1) is not None and count(size, MESSAGE_MAX) is not None:
            vec = vector(values, size)
            sent[src].append(vec if vec is not None else np.broadcast_to(np.nan, (size,)))
    outs, errors = [r.array((n,)) for r in recs], [_error(r, p, n, SIM_SECONDS) for r in recs]
    flow = _flow(sent, xs, seed, p, n)
    return Sim(p, n, xs, outs, errors, sent, flow)


def _flow(sent: list, xs: list, seed: int, p: int, n: int) -> Flow:
    """Follow the ring through the log, each message judged on what its rank had been delivered
    (the predecessor's message plus :func:`offset`), never on what it could know otherwise."""
    chunk: list[list[int | None]] = [[None] * (2 * (p - 1)) for _ in range(p)]
    nan = np.full(n, np.nan)  # a rank's result and gathered sum until the ring gives one
    result, gathered = [nan] * p, [nan] * p

    def delivered(r: int, k: int) -> np.ndarray | None:
        src = (r - 1) % p
        if k >= len(sent[src]) or not np.all(np.isfinite(sent[src][k])):
            return None
        return sent[src][k] + offset(seed, src, k, sent[src][k].size)

    for k in range(2 * (p - 1)):
        for r in range(p):
            m = sent[r][k] if k < len(sent[r]) else None
            got = delivered(r, k - 1) if k else None
            before = chunk[(r - 1) % p][k - 1] if k else None
            if m is None or (k and (got is None or before is None or got.size != m.size)):
                continue
            if k < p:  # reduce-scatter, then the chunk completed: received + own copy
                at = slice_at(m - got if k else m, xs[r], RTOL, ATOL)
                chunk[r][k] = at if at is not None and (k == 0 or at == before) else None
            elif _near(m, got):  # all-gather: the chunk just received, passed on
                chunk[r][k] = before
    for r in range(p):
        pieces = [(chunk[r][p - 1], sent[r][p - 1] if len(sent[r]) >= p else None)]
        pieces += [(chunk[(r - 1) % p][k], delivered(r, k)) for k in range(p - 1, 2 * (p - 1))]
        whole = np.full(n, np.nan)
        for at, values in pieces:
            if at is None or values is None or at + values.size > n:
                break
            if not np.all(np.isnan(whole[at : at + values.size])):
                break  # two chunks at one place: some other is missing
            whole[at : at + values.size] = values
        else:  # the ring delivered this rank a whole result
            result[r] = whole
        buffers = [delivered(r, k) for k in range(len(sent[(r - 1) % p]))]
        if buffers and all(d is not None and d.size == n for d in buffers):
            gathered[r] = xs[r] + np.sum(buffers, axis=0)
    return Flow(chunk, result, gathered)


@check("every rank ends with the sum", 2.0)
def result_sum(s: Sim):
    """The chunks the all-gather delivered and the rank's own (or the whole buffers delivered)."""
    p, f = s.p, s.flow
    good = [_near(o, f.result[r]) or _near(o, f.gathered[r]) for r, o in enumerate(s.outs)]
    if all(good):
        return 1.0, f"All {p} ranks return the sum of the {p} buffers, as the ring carried it."
    bad = [r for r in range(p) if not good[r]]
    true = [r for r in bad if _near(s.outs[r], np.sum(s.xs, axis=0))]
    return sum(good) / p, (
        f"{len(bad)} of {p} ranks do not return the sum of the buffers as the ring delivered it "
        f"(ranks {', '.join(map(str, bad[:6]))}{', …' if len(bad) > 6 else ''})."
        + (
            f" Ranks {', '.join(map(str, true[:6]))} return the exact sum, which the ring cannot "
            "give: the grader's router adds an offset of its own to every message it carries, so "
            "only a result put together from what send_recv returned, chunk by chunk along the "
            "ring, counts."
            if true
            else " A rank's result is its completed chunk (the last reduce-scatter chunk it "
            "received plus its own copy) and the p − 1 chunks the all-gather delivered to it."
        )
        + _first_errors(s.errors)
    )


@check("2(p − 1) calls to send_recv per rank", 1.0)
def steps(s: Sim):
    need, calls = 2 * (s.p - 1), [len(m) for m in s.sent]
    if all(c == need for c in calls):
        return 1.0, f"Every rank made 2(p − 1) = {need} calls to comm.send_recv for p = {s.p}."
    return sum(c == need for c in calls) / s.p, (
        f"Calls to comm.send_recv per rank for p = {s.p}: {calls}; a ring all-reduce makes p − 1 "
        "for the reduce-scatter and p − 1 for the all-gather."
    )


@check("2(p − 1)n/p elements sent per rank", 1.0)
def elements(s: Sim):
    p, n, need = s.p, s.n, 2 * (s.p - 1) * s.n // s.p
    elems = [int(sum(m.size for m in msgs)) for msgs in s.sent]
    if all(e == need for e in elems):
        return 1.0, f"Every rank sent 2(p − 1)n/p = {need} elements (n = {n}, p = {p})."
    return sum(e == need for e in elems) / p, (
        f"Elements sent per rank (n = {n}, p = {p}): {elems}; a ring sends 2(p − 1)n/p, one "
        "chunk per step (Theorem 3.3)."
    )


@check("each message is one chunk of n/p elements", 1.0)
def chunk(s: Sim):
    c, got = s.n // s.p, [m.size for msgs in s.sent for m in msgs]
    right, other = sum(x == c for x in got), sorted({x for x in got if x != c})
    if not got:
        return 0.0, "No message was sent through comm."
    if not other:
        return 1.0, f"Every message is one chunk of n/p = {c} elements."
    return right / len(got), (
        f"{len(got) - right} of {len(got)} messages are not chunks of n/p = {c} elements (sizes "
        f"{other[:5]}): split the buffer into p equal chunks."
    )


@check("reduce-scatter messages are partial sums of one chunk", 1.5)
def reduce_scatter(s: Sim):
    """Message s is the chunk received at s − 1 plus the rank's own copy."""
    p, total = s.p, s.p * (s.p - 1)
    hits = sum(at is not None for row in s.flow.chunk for at in row[: p - 1])
    whole = sum(m.size >= s.n for msgs in s.sent for m in msgs[: p - 1])
    if hits == total:
        return 1.0, (
            "Each reduce-scatter message of step s is the chunk received at step s − 1 plus the "
            "rank's own copy of that chunk (at step 0, a chunk of its own)."
        )
    if whole:
        return hits / total, (
            f"{whole} of the {total} reduce-scatter messages (the first p − 1 of each rank) carry "
            "the whole buffer: the reduce-scatter sends one chunk per step, the running sum of "
            "that chunk."
        )
    return hits / total, (
        f"{total - hits} of the {total} reduce-scatter messages (the first p − 1 of each rank) are "
        "not the chunk received one step before plus the rank's own copy of it: at step s rank i "
        "sends the chunk it received at step s − 1 plus its own copy (what send_recv returned: "
        "the grader's router offsets every message, so a partial sum worked out another way does "
        "not match)."
    )


@check("all-gather messages are completed chunks", 1.0)
def all_gather(s: Sim):
    """The completed chunk, then each chunk just received, passed on."""
    total = s.p * (s.p - 1)
    hits = sum(at is not None for row in s.flow.chunk for at in row[s.p - 1 :])
    if hits == total:
        return 1.0, (
            "Each all-gather message carries a completed chunk: first the rank's own, then each "
            "chunk it has just received."
        )
    return hits / total, (
        f"{total - hits} of the {total} all-gather messages (calls p to 2(p − 1) of each rank) are "
        "missing or are not a completed chunk: after the reduce-scatter, send the chunk you "
        "completed, then pass on each chunk as send_recv returned it, p − 1 messages in all."
    )


def gloo(g: Result, seed: int, carried: float) -> Property:
    """The gloo run against dist.all_reduce, counted only as far as the simulated ring's results
    came through its comm (``carried``, property 1's score): its ranks could otherwise sum their
    buffers another way (files, shared memory) on both runs alike."""
    name, weight = "gloo run matches dist.all_reduce", 1.5
    p, n = sizes(seed, "gloo")
    ranks = g.parts("ranks")
    if g.get("p") != p or g.get("n") != n or len(ranks) != p or not all(x.data for x in ranks):
        return Property(name, weight, 0, "The gloo run returned no usable result.")
    setup = [x.get("error") for x in ranks if x.get("stage") == "start"]
    if setup and not any(x.get("stage") == "student" for x in ranks):
        # the grading machine's gloo did not start: no weight.  A rank's own word that it could
        # not is the student's (its process is forked from theirs): it reaches here as
        # NotStarted only when the probe process's own group did not form either
        why = (
            f"gloo could not start on the grading machine ({setup[0]}); this check does not count."
        )
        return Property(name, 0.0, 0, "Not run: " + why)
    total = np.sum([rank_input(seed, "gloo", r, n) for r in range(p)], axis=0)
    good = [_near(x.record("output").array((n,)), total) for x in ranks]
    msg = f"Over gloo with {p} processes, every rank's result equals dist.all_reduce's."
    if not all(good):
        errs = [
            x.get("error") if x.get("stage") == "start" else _error(x.record("output"), p, n)
            for x in ranks
        ]
        failed = ", ".join(str(r) for r, ok in enumerate(good) if not ok)
        msg = (
            f"Over gloo with {p} processes, ranks {failed} do not return what dist.all_reduce "
            "returns on the same buffers." + _first_errors(errs)
        )
    if carried < sum(good) / p:
        msg += (
            " Counted only as far as the simulated ring's results came from what send_recv "
            f"delivered ({carried:.0%}): see the first property."
        )
    return Property(name, weight, min(carried, sum(good) / p), msg)


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    r, none = Result(result), "The simulated ring returned no usable result."
    s = _read(r.part("sim"), seed)
    sim = (result_sum, steps, elements, chunk, reduce_scatter, all_gather)
    props = [f(s) if s else Property(f.name, f.weight, 0, none) for f in sim]
    return [*props, gloo(r.part("gloo"), seed, props[0].score)]
