"""Gossip averaging (000 §4.4, Proposition 4.14, Example 4.15, Exercise 10).

p workers hold one number each (the vector x, x[i] on worker i) and average them without
an all-reduce: each round, every worker replaces its value by a weighted average of its
own and its neighbours' in a communication graph, x ← W x.  When W is symmetric and
doubly stochastic, the mean of x never changes, and the disagreement ‖x − x̄‖ shrinks at
least by the factor λ per round, the second-largest eigenvalue modulus of W
(Proposition 4.14): ⌈ln(1/ε)/ln(1/λ)⌉ rounds divide it by 1/ε.

The gossip matrix
-----------------
On the ring and the torus of Exercise 10 every worker has the same degree, and W puts
the weight 1/(degree + 1) on itself and on each neighbour.  When the degrees differ,
1/(degree + 1) on each row is not symmetric, and the consensus is no longer the mean;
the Metropolis weights are:

    W[i, j] = 1 / (1 + max(deg_i, deg_j))     for every edge {i, j}
    W[i, i] = 1 − Σ_j W[i, j]                 (the rest on the worker itself)

They are 1/(degree + 1) on a regular graph.  (The autograder accepts any symmetric,
doubly stochastic W with positive weights on the edges only, where the degrees differ.)

Your function
-------------
``gossip(adjacency, x, eps)`` receives the symmetric 0/1 adjacency matrix of a connected
graph on p workers (p × p, zero diagonal), the workers' values x (p floats) and the
target ratio ε, and returns ``(W, lam, rounds, x_out)``:

- ``W``: the p × p gossip matrix;
- ``lam``: the second-largest eigenvalue modulus of W (the largest is 1);
- ``rounds``: the number of gossip rounds x ← W x, simulated, until the disagreement
  ‖x − x̄‖ is at most ε times its initial value (x̄: the mean of the values);
- ``x_out``: the values after those rounds.

The autograder checks W on a ring, a torus, a random graph whose degrees differ and a
complete bipartite graph; λ against the eigenvalues of your W; the rounds against a
simulation with your W, starting from its own random values; and that x_out keeps the
mean of x and is within ε of the consensus.
"""

from __future__ import annotations

import numpy as np


def gossip(adjacency, x, eps: float):
    """Metropolis gossip matrix, its λ, and the rounds x ← W x to shrink ‖x − x̄‖ by 1/ε."""
    ### BEGIN SOLUTION your gossip here
    adj = np.asarray(adjacency, dtype=np.float64)
    deg = adj.sum(axis=1)
    W = adj / (1 + np.maximum.outer(deg, deg))  # 1/(1 + max(deg_i, deg_j)) on each edge
    W[np.diag_indices_from(W)] = 1 - W.sum(axis=1)  # the rest on the worker itself
    lam = float(np.sort(np.abs(np.linalg.eigvalsh(W)))[-2])  # W is symmetric
    x = np.array(x, dtype=np.float64)
    start = np.linalg.norm(x - x.mean())
    rounds = 0
    while np.linalg.norm(x - x.mean()) > eps * start:
        x, rounds = W @ x, rounds + 1
    return W, lam, rounds, x
    ### END SOLUTION


if __name__ == "__main__":  # Exercise 10: p = 16, ring against 4 × 4 torus
    p = 16
    ring, torus = np.zeros((p, p)), np.zeros((p, p))
    for i in range(p):
        ring[i, (i + 1) % p] = ring[(i + 1) % p, i] = 1
    for i in range(4):
        for j in range(4):  # node 4i + j of a 4 × 4 torus
            for v in [4 * ((i + 1) % 4) + j, 4 * i + (j + 1) % 4]:
                torus[4 * i + j, v] = torus[v, 4 * i + j] = 1
    rng = np.random.default_rng(0)
    for name, adj in [("ring", ring), ("torus", torus)]:
        W, lam, rounds, _ = gossip(adj, rng.standard_normal(p), 1e-3)
        bound = int(np.ceil(np.log(1e3) / -np.log(lam)))
        print(f"{name}: lambda = {lam:.3f}, bound {bound} rounds, observed {rounds}")
        # ring: lambda = 0.949, bound 133 rounds, observed 124
        # torus: lambda = 0.600, bound 14 rounds, observed 13
