"""Collective communication: ring and tree all-reduce, parameter server (000 §3.1, 001 ch. 3).

The α–β model of the notes: sending a message of m bytes over one link costs α + m/W
(latency α, bandwidth W bytes/s per direction).  p workers each hold a buffer of n bytes
and all must end with the sum.
"""

from __future__ import annotations

from costmodel._registry import derivation, formula

# --- ring all-reduce ---------------------------------------------------------------------


@formula("000 §3.1, Thm 3.3; 001 ch. 3, thm 3.2", "s")
def ring_allreduce_seconds(
    n_bytes: float, n_workers: int, bandwidth: float, latency: float = 0.0
) -> float:
    """Ring all-reduce time: 2(p − 1)(α + n/(pW)).

    p − 1 reduce-scatter steps and p − 1 all-gather steps, each sending one chunk of n/p
    bytes on every link at once.  With ``latency=0`` this is the bandwidth term
    2(p − 1)/p · n/W alone (001 exam Q2(d), 000 Ex. 13).
    """
    steps = ring_allreduce_steps(n_workers=n_workers)
    sent = ring_allreduce_bytes_per_worker(n_bytes=n_bytes, n_workers=n_workers)
    return steps * latency + sent / bandwidth  # every link busy at once: a worker's bytes


@derivation(ring_allreduce_seconds)
def _(sp):
    """2(p − 1)(α + n/(pW)): sum the cost of one chunk over the steps of both phases."""
    n, p, W, alpha = sp.symbols("n_bytes n_workers bandwidth latency", positive=True)
    s = sp.symbols("s", integer=True)
    step = alpha + (n / p) / W  # one chunk of n/p bytes on every link, simultaneously
    reduce_scatter = sp.summation(step, (s, 1, p - 1))
    all_gather = sp.summation(step, (s, 1, p - 1))
    return reduce_scatter + all_gather, 2 * (p - 1) * (alpha + n / (p * W))


@formula("000 §3.1, Thm 3.3; 001 ch. 3, thm 3.2", "")
def ring_allreduce_steps(n_workers: int) -> int:
    """Steps of the ring all-reduce: 2(p − 1) (p − 1 reduce-scatter, p − 1 all-gather)."""
    return 2 * (n_workers - 1)


@derivation(ring_allreduce_steps)
def _(sp):
    """2(p − 1): after s reduce-scatter steps a chunk holds s + 1 of the p summands."""
    p = sp.symbols("n_workers", positive=True, integer=True)
    s = sp.symbols("s", integer=True)
    # reduce-scatter: the chunk finished at step s holds s + 1 summands; complete when = p
    reduce_scatter = sp.solve(sp.Eq(s + 1, p), s)[0]
    # all-gather: each step gives every worker one more complete chunk; it starts with one
    all_gather = sp.solve(sp.Eq(1 + s, p), s)[0]
    return reduce_scatter + all_gather, 2 * (p - 1)


@formula("000 §3.1, Thm 3.3 (ring code)", "byte")
def ring_allreduce_bytes_per_worker(n_bytes: float, n_workers: int) -> float:
    """Bytes each worker sends in a ring all-reduce: 2(p − 1)n/p (≈ 2n, whatever p)."""
    return ring_allreduce_steps(n_workers=n_workers) * n_bytes / n_workers


@derivation(ring_allreduce_bytes_per_worker)
def _(sp):
    """2(p − 1)n/p: one chunk n/p sent per step, in each of the two phases."""
    n, p = sp.symbols("n_bytes n_workers", positive=True)
    s = sp.symbols("s", integer=True)
    sent_reduce_scatter = sp.summation(n / p, (s, 1, p - 1))  # a partial sum onward
    sent_all_gather = sp.summation(n / p, (s, 1, p - 1))  # a complete chunk onward
    return sent_reduce_scatter + sent_all_gather, 2 * (p - 1) * n / p


@formula("000 Ex. 8(b)", "s")
def ring_step_seconds(n_bytes: float, n_workers: int, bandwidth: float) -> float:
    """Transfer time of one ring step: n/(pW) (a chunk of n/p bytes at W bytes/s)."""
    return n_bytes / (n_workers * bandwidth)


@formula("000 Ex. 8(c)", "byte")
def ring_latency_crossover_bytes(n_workers: int, bandwidth: float, latency: float) -> float:
    """Message size where the ring's latency and bandwidth terms are equal: n = αpW.

    Below it the 2(p − 1)α term dominates (why DDP buckets gradients, and NCCL uses trees).
    """
    return latency * n_workers * bandwidth


@derivation(ring_latency_crossover_bytes)
def _(sp):
    """n = αpW: solve 2(p − 1)α = 2(p − 1)·n/(pW) for n."""
    n, p, W, alpha = sp.symbols("n_bytes n_workers bandwidth latency", positive=True)
    latency_term = 2 * (p - 1) * alpha
    bandwidth_term = 2 * (p - 1) * n / (p * W)
    return sp.solve(sp.Eq(latency_term, bandwidth_term), n)[0], alpha * p * W


# --- parameter server --------------------------------------------------------------------


@formula("000 Ex. 8(a)", "s")
def parameter_server_seconds(n_bytes: float, n_workers: int, bandwidth: float) -> float:
    """Parameter server, store and forward: 2pn/W (receive p·n bytes, then send p·n)."""
    return 2 * n_workers * n_bytes / bandwidth


@derivation(parameter_server_seconds)
def _(sp):
    """2pn/W: the server's one link receives every worker's n bytes, then sends n to each."""
    n, p, W = sp.symbols("n_bytes n_workers bandwidth", positive=True)
    i = sp.symbols("i", integer=True)
    receive = sp.summation(n / W, (i, 1, p))
    send = sp.summation(n / W, (i, 1, p))
    return receive + send, 2 * p * n / W  # sequential: sending starts after the last receive


@formula("000 Ex. 8(a)", "s")
def parameter_server_pipelined_seconds(n_bytes: float, n_workers: int, bandwidth: float) -> float:
    """Parameter server, full duplex and pipelined in chunks: at least pn/W."""
    return n_workers * n_bytes / bandwidth


@derivation(parameter_server_pipelined_seconds)
def _(sp):
    """pn/W: full duplex overlaps sending with receiving, so the longer of the two remains."""
    n, p, W = sp.symbols("n_bytes n_workers bandwidth", positive=True)
    i = sp.symbols("i", integer=True)
    receive = sp.summation(n / W, (i, 1, p))
    send = sp.summation(n / W, (i, 1, p))
    return sp.Max(receive, send), p * n / W


# --- tree all-reduce ---------------------------------------------------------------------


def _tree_levels(n_workers: int) -> int:
    """⌈log₂ p⌉, exactly (no floating-point log)."""
    return (n_workers - 1).bit_length()


@formula("001 ch. 3, prop 3.3; Thakur, Rabenseifner & Gropp 2005", "s")
def tree_allreduce_seconds(
    n_bytes: float, n_workers: int, bandwidth: float, latency: float = 0.0
) -> float:
    """Tree all-reduce time: 2⌈log₂ p⌉(α + n/W) (reduce up a binary tree, broadcast down).

    Fewer latency terms than the ring (2⌈log₂ p⌉ against 2(p − 1)), but every level
    sends the whole message.
    """
    return 2 * _tree_levels(n_workers) * (latency + n_bytes / bandwidth)


@derivation(tree_allreduce_seconds)
def _(sp):
    """2⌈log₂ p⌉(α + n/W): the full message crosses each level, up then down."""
    n, p, W, alpha = sp.symbols("n_bytes n_workers bandwidth latency", positive=True)
    level = sp.symbols("level", integer=True)
    depth = sp.ceiling(sp.log(p, 2))  # a binary tree over p leaves
    reduce = sp.summation(alpha + n / W, (level, 1, depth))
    broadcast = sp.summation(alpha + n / W, (level, 1, depth))
    return reduce + broadcast, 2 * sp.ceiling(sp.log(p, 2)) * (alpha + n / W)


@formula("001 Ex. 5 (ring against tree)", "byte")
def ring_tree_crossover_bytes(n_workers: int, bandwidth: float, latency: float) -> float:
    """Message size above which the ring beats the tree: αW(p − 1 − L)/(L − (p − 1)/p).

    L = ⌈log₂ p⌉.  For large p this is ≈ αWp/log₂ p: the ring wins once n/p ≫ αW
    (001 Ex. 5).  Zero for p ≤ 3, where the ring is never slower.
    """
    levels = _tree_levels(n_workers)
    return latency * bandwidth * (n_workers - 1 - levels) / (levels - (n_workers - 1) / n_workers)


@derivation(ring_tree_crossover_bytes)
def _(sp):
    """Solve T_ring(n) = T_tree(n) for n, with L = ⌈log₂ p⌉ levels."""
    n, p, W, alpha, L = sp.symbols("n_bytes n_workers bandwidth latency L", positive=True)
    ring = 2 * (p - 1) * (alpha + n / (p * W))
    tree = 2 * L * (alpha + n / W)
    crossover = sp.solve(sp.Eq(ring, tree), n)[0].subs(L, sp.ceiling(sp.log(p, 2)))
    depth = sp.ceiling(sp.log(p, 2))
    return crossover, alpha * W * (p - 1 - depth) / (depth - (p - 1) / p)
