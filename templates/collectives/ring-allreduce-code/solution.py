"""Ring all-reduce, one rank at a time (000 §3.1, Theorem 3.3).

The communicator
----------------
Your function runs once on every rank, each in its own process, and sees only its own
buffer.  The only way to reach the other ranks is ``comm.send_recv``:

    received = comm.send_recv(chunk)

sends the 1-D array ``chunk`` to rank (rank + 1) % world and returns the 1-D array that
rank (rank - 1) % world sent in the same step, that is, in its own call of the same
number.  Every call is one step of the ring: all ranks call ``send_recv`` the same number
of times, and a rank waits in its k-th call until its predecessor has made its k-th call.
The values travel as float64.

The autograder runs your function with its own communicators: p processes around a ring
that logs every message (step, sender, size and values) and adds an offset of its own to
each message it delivers, so that your result must be put together from what
``send_recv`` returned (as a ring's is); and a real run over ``torch.distributed`` (gloo),
where ``send_recv`` is an isend/irecv pair.

Your function
-------------
``ring_allreduce(x, rank, world, comm)`` receives this rank's buffer ``x`` (a 1-D float
array of n elements, n a multiple of world), its rank and the number of ranks, and
returns the sum of the ``world`` buffers.  The contract:

- split the buffer into p = world chunks of n/p elements;
- reduce-scatter, p - 1 steps: at step s (s = 0, ..., p - 2) send chunk (rank - s) mod p
  and add what you receive (chunk (rank - s - 1) mod p of your predecessor, already
  holding s + 1 summands) to your own copy of that chunk; after these steps the rank
  holds the complete sum of chunk (rank + 1) mod p;
- all-gather, p - 1 steps: pass the completed chunks around the ring, replacing yours;
- one chunk per call, exactly 2(p - 1) calls: each rank sends 2(p - 1)n/p elements.

``simulate(ring_allreduce, buffers)`` below runs your function on one thread per rank,
for testing here; it counts the calls and the elements each rank sends.
"""

from __future__ import annotations

import queue
import threading

import numpy as np


class LocalComm:
    """One rank's end of a ring of threads, for local testing (the autograder has its own)."""

    def __init__(self, outbox: queue.Queue, inbox: queue.Queue):
        self._out, self._in = outbox, inbox
        self.calls = 0  # calls to send_recv so far
        self.sent = 0  # elements sent so far

    def send_recv(self, chunk) -> np.ndarray:
        """Send ``chunk`` to the next rank; return the chunk the previous rank sent."""
        data = np.array(chunk, dtype=np.float64).reshape(-1)
        self.calls += 1
        self.sent += data.size
        self._out.put(data)
        try:
            return self._in.get(timeout=5)
        except queue.Empty:
            raise RuntimeError("deadlock: the previous rank sent nothing for 5 s") from None


def simulate(fn, buffers: list[np.ndarray]) -> tuple[list[np.ndarray], list[LocalComm]]:
    """Run ``fn(x, rank, world, comm)`` on one thread per buffer; return outputs and comms."""
    p = len(buffers)
    links = [queue.Queue() for _ in range(p)]  # links[r]: messages from rank r to rank r + 1
    comms = [LocalComm(links[r], links[(r - 1) % p]) for r in range(p)]
    outputs: list = [None] * p

    def run(r: int) -> None:
        try:
            outputs[r] = fn(np.array(buffers[r], dtype=np.float64), r, p, comms[r])
        except Exception as err:  # noqa: BLE001 - shown below, per rank
            outputs[r] = err

    threads = [threading.Thread(target=run, args=(r,)) for r in range(p)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r, out in enumerate(outputs):
        if isinstance(out, Exception):
            raise RuntimeError(f"rank {r}: {type(out).__name__}: {out}") from out
    return outputs, comms


def ring_allreduce(x: np.ndarray, rank: int, world: int, comm) -> np.ndarray:
    """Return the sum over the ``world`` ranks of their buffers ``x``, by a ring all-reduce.

    Only ``comm.send_recv`` moves data; 2(p - 1) calls of one chunk of n/p elements each.
    """
    ### BEGIN SOLUTION your ring all-reduce here
    p = world
    chunks = [c.copy() for c in np.array_split(np.asarray(x, dtype=np.float64), p)]
    # Reduce-scatter: send chunk (rank - s), receive the predecessor's chunk (rank - s - 1)
    # with s + 1 summands and add ours; afterwards chunk (rank + 1) holds all p summands.
    for s in range(p - 1):
        send, recv = (rank - s) % p, (rank - s - 1) % p
        chunks[recv] = chunks[recv] + comm.send_recv(chunks[send])
    # All-gather: forward the completed chunks, replacing our partial copies.
    for s in range(p - 1):
        send, recv = (rank + 1 - s) % p, (rank - s) % p
        chunks[recv] = comm.send_recv(chunks[send])
    return np.concatenate(chunks)
    ### END SOLUTION


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    p, n = 4, 12
    buffers = [rng.standard_normal(n) for _ in range(p)]
    outputs, comms = simulate(ring_allreduce, buffers)
    print(all(np.allclose(o, np.sum(buffers, axis=0)) for o in outputs))  # True
    print([c.calls for c in comms], 2 * (p - 1))  # [6, 6, 6, 6] 6
    print([c.sent for c in comms], 2 * (p - 1) * n // p)  # [18, 18, 18, 18] 18
