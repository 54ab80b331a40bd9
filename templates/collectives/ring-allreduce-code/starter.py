"""Ring all-reduce over a simulated ring of p workers (000 §3.1, Theorem 3.3).

The simulated communicator
--------------------------
``Ring(p)`` connects p workers in a ring: worker i can send only to worker
(i + 1) % p, and receives only from worker (i - 1) % p.  Time advances in steps.
One call ``received = ring.step(sends)`` is one step, in which every worker sends
at the same time:

- ``sends`` is a list of p one-dimensional numpy arrays; ``sends[i]`` is what
  worker i sends to worker (i + 1) % p during this step (every worker sends
  something at every step of a ring all-reduce);
- the result ``received`` is a list of p arrays; ``received[i]`` is a copy of
  what worker i got from worker (i - 1) % p, that is ``sends[(i - 1) % p]``.

The ring counts the steps (``ring.steps``) and the number of elements each worker
has sent (``ring.sent[i]``).  The autograder passes its own ``Ring`` with the same
interface, and checks the counts as well as the result.

Your function
-------------
``ring_allreduce(buffers, ring)`` receives the p local buffers (``buffers[i]`` is
worker i's gradient, a 1-D float array of n elements, n a multiple of p) and must
return a list of p arrays, each equal to ``sum(buffers)``.  The contract:

- worker i may use only its own buffer and what it received through ``ring.step``:
  no reading of another worker's buffer, no shortcut such as ``sum(buffers)``;
- do not modify the input buffers (work on copies);
- use exactly 2(p - 1) calls to ``ring.step`` (p - 1 for the reduce-scatter, p - 1
  for the all-gather), in each of which every worker sends one chunk of n/p
  elements, so that each worker sends 2(p - 1)n/p elements in all.
"""

from __future__ import annotations

import numpy as np


class Ring:
    """A simulated ring of p workers, for local testing (the autograder has its own)."""

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

    Split each buffer into p chunks.  Reduce-scatter: at step s (s = 0, ..., p - 2)
    worker i sends chunk (i - s) mod p and adds what it receives to its own copy of
    that chunk.  All-gather: p - 1 more steps pass the completed chunks around.
    """
    raise NotImplementedError("your ring all-reduce here")


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    p, n = 4, 12
    x = [rng.standard_normal(n) for _ in range(p)]
    ring = Ring(p)
    out = ring_allreduce(x, ring)
    print(all(np.allclose(o, sum(x)) for o in out))  # True
    print(ring.steps, 2 * (p - 1))  # 6 6
    print(ring.sent, 2 * (p - 1) * n // p)  # [18 18 18 18] 18
