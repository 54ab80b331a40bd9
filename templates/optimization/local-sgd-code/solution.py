"""Local SGD (000 §4.3, local SGD and DiLoCo).

p workers start from the same model x0.  Each takes local SGD steps on its own data,
x_i ← x_i − η g_i(x_i), and every H steps they average their models in one communication
round (an all-reduce) and all continue from the average.  With H = 1 this is mini-batch
SGD; with H > 1 it communicates H times less, at the price of a drift between the local
models of order η²H².

Your function
-------------
``local_sgd(grads, x0, lr, steps, H, average)`` receives

- ``grads``: a list of p functions; ``grads[i](x)`` returns a stochastic gradient of
  worker i's loss at x (a 1-D float array); every call draws worker i's next minibatch;
- ``x0``: the initial model, a 1-D float array (every worker starts from a copy);
- ``lr``: the step size η; ``steps``: the number T of local steps of each worker;
- ``H``: the number of local steps between two averagings;
- ``average``: the communication round; ``average(models)`` takes the list of the p
  models and returns their mean (one 1-D array).  Average only through it: the
  autograder counts its calls and reads what each was given.

It runs T steps: at each step every worker i takes one step with ``grads[i]`` at its
own model; after steps H, 2H, ... (t mod H = 0, as in the code of §4.3) the models are
averaged with ``average`` and every worker continues from (a copy of) the mean.  A last
incomplete segment ends without averaging.  It returns the list of the p models.

The autograder checks that H = 1 gives mini-batch SGD, that ``average`` is called
⌊T/H⌋ times, once after every H local steps, on the p models the workers have just
reached (x − η g at their last gradient call), that all workers restart from the same
model after each averaging, and that the models after T steps match local SGD on a
noisy quadratic with different data on each worker.
"""

from __future__ import annotations

import numpy as np


def local_sgd(grads, x0, lr: float, steps: int, H: int, average) -> list[np.ndarray]:
    """T local steps on every worker, with one averaging round after every H of them."""
    ### BEGIN SOLUTION your local SGD here
    xs = [np.array(x0, dtype=np.float64) for _ in grads]  # one copy per worker
    for t in range(1, steps + 1):
        xs = [x - lr * np.asarray(g(x), dtype=np.float64) for x, g in zip(xs, grads, strict=True)]
        if t % H == 0:  # communication round
            avg = np.asarray(average(xs), dtype=np.float64)
            xs = [avg.copy() for _ in grads]
    return xs
    ### END SOLUTION


if __name__ == "__main__":  # the example of §4.3: 8 workers, least squares, d = 20
    d, p, T, eta, bsz = 20, 8, 2000, 0.02, 4
    rng = np.random.default_rng(1)
    x_true = np.random.default_rng(0).standard_normal(d)

    def worker_grad(x):
        X = rng.standard_normal((bsz, d))
        y = X @ x_true + 0.5 * rng.standard_normal(bsz)
        return X.T @ (X @ x - y) / bsz

    rounds = []

    def average(models):
        rounds.append(1)
        return np.mean(models, axis=0)

    for H in [1, 10, 100]:  # H = 1 is mini-batch SGD
        rounds.clear()
        xs = local_sgd([worker_grad] * p, np.zeros(d), eta, T, H, average)
        err = np.sum((np.mean(xs, axis=0) - x_true) ** 2)
        print(f"H = {H:3d}: {len(rounds):4d} rounds, squared error {err:.1e}")  # all about 3e-3
