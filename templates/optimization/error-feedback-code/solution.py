"""Top-k sparsification with error feedback (000 §4.2, Theorem 4.8, Code 4.9).

Each worker sends only k of the d coordinates of its update.  Top-k keeps the k entries of
largest magnitude; it is biased, and used alone it stalls.  Error feedback keeps in a memory
e what was not sent and adds it to the next update, so that nothing is ever lost:

    v = e + g              (g: this step's update, η times the gradient in Code 4.9)
    C(v) = top_k(v)        (the k entries of largest |v|, the others set to 0; sent)
    e ← v − C(v)           (what was not sent, sent later)

Your function
-------------
``topk_ef_step(grad, memory, k)`` receives this step's update ``grad`` and the worker's
memory ``memory`` (1-D float arrays of d elements) and the number k of entries to send,
and returns ``(compressed, new_memory)``: two 1-D arrays of d elements, ``compressed``
with exactly k nonzero entries, the k largest |grad + memory|, and ``new_memory`` what
was not sent.  Do not rely on changing the arrays you receive: use what you return.
The memory is the state: it is passed in and returned, and the function keeps none of its
own between calls (the same arguments always give the same result).

The autograder checks, on random inputs: exactly k entries sent, they are the k largest
|grad + memory| with their values, and new_memory = grad + memory − compressed.  Then it
runs your function on every worker of the least-squares problem of Code 4.9 (4 workers
with different data, k = 5 of d = 50, η = 0.05), the workers in any order and some calls
made again, and checks that every call sends the largest |grad + memory| of the memory
passed in, that a call made again returns the same, and that the training loss converges
where top-k without memory stalls.
"""

from __future__ import annotations

import numpy as np


def topk_ef_step(grad: np.ndarray, memory: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Send the k largest |grad + memory|; keep the rest in the memory."""
    ### BEGIN SOLUTION your top-k with error feedback here
    v = np.asarray(memory, dtype=np.float64) + np.asarray(grad, dtype=np.float64)
    compressed = np.zeros_like(v)
    idx = np.argpartition(np.abs(v), -k)[-k:]  # the k largest magnitudes, in any order
    compressed[idx] = v[idx]
    return compressed, v - compressed  # nothing lost: compressed + memory = grad + old memory
    ### END SOLUTION


def train(step, eta: float = 0.05, steps: int = 300, k: int = 5, seed: int = 0) -> float:
    """f − f* after ``steps`` steps of distributed SGD on the example of Code 4.9.

    4 workers, each with its own least-squares data (200 rows, d = 50), send
    ``step(eta * gradient, memory, k)[0]``; the server averages the messages.
    """
    rng = np.random.default_rng(seed)
    p, d, m = 4, 50, 200
    A = [rng.standard_normal((m, d)) for _ in range(p)]
    b = [a @ rng.standard_normal(d) + rng.standard_normal(m) for a in A]  # different data
    A_all, b_all = np.vstack(A), np.concatenate(b)
    x_star = np.linalg.lstsq(A_all, b_all, rcond=None)[0]
    x, memories = np.zeros(d), [np.zeros(d) for _ in range(p)]
    for _ in range(steps):
        msgs = []
        for i in range(p):
            g = A[i].T @ (A[i] @ x - b[i]) / m
            sent, memories[i] = step(eta * g, memories[i], k)
            msgs.append(sent)
        x = x - np.mean(msgs, axis=0)
    r, r_star = A_all @ x - b_all, A_all @ x_star - b_all
    return float((r @ r - r_star @ r_star) / (2 * m * p))  # f(x) − f*


if __name__ == "__main__":
    grad, memory = np.array([0.5, -2.0, 0.1, 1.0]), np.array([0.0, 0.5, 0.0, 1.5])
    sent, memory = topk_ef_step(grad, memory, 2)
    print(sent, memory)  # [ 0.  -1.5  0.   2.5] [0.5 0.  0.1 0. ]

    def forgetful(g, e, k):  # top-k without memory
        return topk_ef_step(g, np.zeros_like(g), k)[0], np.zeros_like(g)

    print(train(forgetful), train(topk_ef_step))  # stalls near 3.5; about 0.06 with memory
