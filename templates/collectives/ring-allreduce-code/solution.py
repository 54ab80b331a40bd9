"""Reference ring all-reduce over the simulated ring of starter.py (000 §3.1, Theorem 3.3)."""

from __future__ import annotations

import numpy as np


class Ring:
    """A simulated ring of p workers: worker i sends only to worker (i + 1) % p."""

    def __init__(self, p: int):
        self.p = p
        self.steps = 0
        self.sent = np.zeros(p, dtype=int)

    def step(self, sends: list[np.ndarray]) -> list[np.ndarray]:
        """One synchronous step: worker i sends sends[i] to worker (i + 1) % p."""
        if len(sends) != self.p:
            raise ValueError(f"one array per worker: got {len(sends)} for p = {self.p}")
        self.steps += 1
        for i, data in enumerate(sends):
            self.sent[i] += np.asarray(data).size
        return [np.array(sends[(i - 1) % self.p], copy=True) for i in range(self.p)]


def ring_allreduce(buffers: list[np.ndarray], ring: Ring) -> list[np.ndarray]:
    """Sum the p buffers with a ring all-reduce; return one copy of the sum per worker.

    2(p - 1) steps; in each, every worker sends one chunk of n/p elements.
    """
    p = len(buffers)
    # chunks[i][c]: worker i's copy of chunk c (copies: the inputs are left untouched)
    chunks = [[c.copy() for c in np.array_split(np.asarray(b, dtype=float), p)] for b in buffers]
    # Reduce-scatter: after step s, the chunk worker i receives holds s + 2 summands;
    # after p - 1 steps worker i holds the complete sum of chunk (i + 1) % p.
    for s in range(p - 1):
        idx = [(i - s) % p for i in range(p)]
        received = ring.step([chunks[i][idx[i]] for i in range(p)])
        for i in range(p):
            c = idx[(i - 1) % p]  # the chunk worker i - 1 sent
            chunks[i][c] = chunks[i][c] + received[i]
    # All-gather: pass the complete chunks around the ring, overwriting.
    for s in range(p - 1):
        idx = [(i + 1 - s) % p for i in range(p)]
        received = ring.step([chunks[i][idx[i]] for i in range(p)])
        for i in range(p):
            chunks[i][idx[(i - 1) % p]] = received[i]
    return [np.concatenate(chunks[i]) for i in range(p)]


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    p, n = 4, 12
    x = [rng.standard_normal(n) for _ in range(p)]
    ring = Ring(p)
    out = ring_allreduce(x, ring)
    print(all(np.allclose(o, sum(x)) for o in out))  # True
    print(ring.steps, 2 * (p - 1))  # 6 6
    print(ring.sent, 2 * (p - 1) * n // p)  # [18 18 18 18] 18
