"""Checks of the local SGD code part (000 §4.3, local SGD and DiLoCo).

``probe`` runs in the probe process, beside the student's: it calls the student's
``local_sgd`` three times on a noisy quadratic with different data on each worker (H = 1,
and two values of H > 1, one of which does not divide T), with gradient functions that log
the point of every call and an ``average`` that logs when it is called and what it was
given. ``grade`` runs in the trusted process: it redraws the problem and the gradient noise
from the seed and replays local SGD.

A round is judged on what it averaged, not only counted (issue 36): at round k the models
given to ``average`` must be the workers' models after their step kH, each x − η g at the
point x of that worker's gradient call kH and the gradient g served there, which ``grade``
recomputes from the logged points and the seed.  Zeros, stale models, a subset of the
workers or dummies with the right mean, with the true mean taken locally, are no round.

The properties are separated on purpose: averaging with ``np.mean`` instead of ``average``
costs only the rounds, averaging every step whatever H costs the rounds and the
trajectory, and workers that share one array after averaging cost the restart (their
round averages the one array they all hold: p copies of the last worker's model).
"""

from __future__ import annotations

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, matrix, per_case, plain

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

WORKERS, DIM, LR, NOISE = 4, 6, 0.1, 0.5
RTOL, ATOL = 1e-5, 1e-7  # a float32 computation inside passes
SAME_RTOL, SAME_ATOL = 1e-9, 1e-12  # copies of one average are equal
ROUNDS = "⌊T/H⌋ rounds, each averaging the models after H local steps"
MAX_CALLS = 400  # gradient calls logged per worker
MAX_ROUNDS = 100  # the models given to average, logged per run (the runs have at most 34)

# --- inputs: the same functions in the sandbox (probe) and the trusted process (grade) ----


def problem(seed: int) -> dict:
    """f_i(x) = ½ (x − c_i)ᵀ diag(a_i) (x − c_i): a different optimum c_i on each worker."""
    rng = np.random.default_rng([seed, 40])
    h_short = int(rng.integers(3, 6))
    h_long = int(rng.integers(6, 9))
    return {
        "curv": rng.uniform(0.5, 2.0, (WORKERS, DIM)),
        "center": rng.normal(0.0, 1.0, (WORKERS, DIM)),
        "x0": rng.normal(0.0, 1.0, DIM),
        # (H, T): mini-batch SGD; T not a multiple of H (a last segment without averaging);
        # T a multiple of H (the run ends with an averaging)
        "runs": [
            (1, int(rng.integers(8, 13))),
            (h_short, h_short * int(rng.integers(4, 7)) + int(rng.integers(1, h_short))),
            (h_long, 3 * h_long),
        ],
    }


def _noise(seed: int, run: int, worker: int) -> np.random.Generator:
    """Worker ``worker``'s minibatch stream in run ``run``: one draw per gradient call."""
    return np.random.default_rng([seed, 41, run, worker])


def _grad(prob: dict, i: int, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return prob["curv"][i] * (x - prob["center"][i]) + NOISE * rng.standard_normal(DIM)


class _Run:
    """The gradient functions and the communication round of one run, with their logs."""

    def __init__(self, prob: dict, seed: int, run: int):
        self.prob = prob
        self.rngs = [_noise(seed, run, i) for i in range(WORKERS)]
        self.points = [[] for _ in range(WORKERS)]  # x of every gradient call, per worker
        self.calls = [0] * WORKERS
        self.rounds = []  # gradient calls of each worker when average was called
        self.sent = []  # the models average was given, round by round

    def grad_fn(self, i: int):
        def grad(x):
            x = np.array(x, dtype=np.float64).reshape(-1)
            if x.shape != (DIM,):
                raise ValueError(f"grads[{i}] expects a model of {DIM} elements, got {x.size}")
            self.calls[i] += 1
            if len(self.points[i]) < MAX_CALLS:
                self.points[i].append(plain(x))
            return _grad(self.prob, i, x, self.rngs[i])

        return grad

    def average(self, models):
        stacked = np.array([np.array(m, dtype=np.float64).reshape(-1) for m in models])
        if stacked.shape != (WORKERS, DIM):
            raise ValueError(
                f"average expects the list of the {WORKERS} models of {DIM} elements, "
                f"got an array of shape {stacked.shape}"
            )
        self.rounds.append(list(self.calls))
        if len(self.sent) < MAX_ROUNDS:
            self.sent.append([plain(row) for row in stacked])
        return stacked.mean(axis=0)


def probe(student, seed: int, params: dict) -> dict:
    """Three runs of ``local_sgd`` with logging gradients and a logging ``average``."""
    prob = problem(seed)
    runs = []
    for r, (h, t) in enumerate(prob["runs"]):
        log = _Run(prob, seed, r)
        grads = [log.grad_fn(i) for i in range(WORKERS)]
        models = student.call(grads, prob["x0"], LR, t, h, log.average)
        runs.append({"models": models, "rounds": log.rounds, "sent": log.sent})
        runs[-1].update(calls=log.calls, points=log.points)
    return {"runs": runs}


# --- grade (trusted) ---------------------------------------------------------------------


def reference(seed: int, run: int) -> np.ndarray:
    """The p models after local SGD with the run's (H, T), replayed from the seed."""
    prob = problem(seed)
    h, t = prob["runs"][run]
    rngs = [_noise(seed, run, i) for i in range(WORKERS)]
    xs = np.tile(prob["x0"], (WORKERS, 1))
    for step in range(1, t + 1):
        xs = np.array([x - LR * _grad(prob, i, x, rngs[i]) for i, x in enumerate(xs)])
        if step % h == 0:
            xs[:] = xs.mean(axis=0)
    return xs


def _matrix(x, shape: tuple[int, int]) -> np.ndarray | None:
    m = matrix(x)
    return m if m is not None and m.shape == shape and np.all(np.isfinite(m)) else None


def _models(rec: Record) -> tuple[np.ndarray | None, str | None]:
    """The p models returned (None unless finite), and why the call returned none."""
    if not rec.ok:
        return None, rec.error
    if rec.shape is None:
        return None, f"the result is not a list of models ({rec.returned()})"
    if rec.shape != (WORKERS, DIM):
        asked = f"return the list of the {WORKERS} models ({DIM} each)"
        return None, f"returned shape {rec.shape}; {asked}"
    a = rec.array()
    return (a if a is not None and np.all(np.isfinite(a)) else None), None


def _stepped(seed: int, run: int, rec: Result, k: int) -> np.ndarray | None:
    """The workers' models after their step k: x − η g at the point x of each worker's
    gradient call k and the gradient g served there (the k-th draw of its noise)."""
    prob, points = problem(seed), rec.get("points")
    out = []
    for i in range(WORKERS):
        p = points[i] if isinstance(points, list) and len(points) == WORKERS else None
        x = _matrix(p[k - 1 : k], (1, DIM)) if isinstance(p, list) else None
        if x is None:
            return None
        noise = _noise(seed, run, i).standard_normal((k, DIM))[-1]
        g = prob["curv"][i] * (x[0] - prob["center"][i]) + NOISE * noise
        out.append(x[0] - LR * g)
    return np.array(out)


def _averaged_ok(seed: int, run: int, rec: Result, h: int) -> tuple[bool, str]:
    """Each round was given the workers' models after their step kH, in any order; or,
    where the workers step one shared array in turn (each gradient call at the model the
    previous worker stepped to), p copies of that array."""
    sent = rec.get("sent")
    if not isinstance(sent, list):
        return False, "no log of what average was given"
    for k, models in enumerate(sent, start=1):
        got, want = _matrix(models, (WORKERS, DIM)), _stepped(seed, run, rec, k * h)
        if got is None or want is None:
            return False, f"round {k}: no usable models or gradient calls"
        same = np.isclose(got[:, None, :], want[None, :, :], rtol=RTOL, atol=ATOL).all(axis=2)
        if any(len(m) == WORKERS for m in _matchings(same)):
            continue
        points = _matrix([p[k * h - 1] for p in rec.get("points")], (WORKERS, DIM))
        chained = points is not None and np.allclose(points[1:], want[:-1], rtol=RTOL, atol=ATOL)
        if chained and same[:, -1].all():
            continue
        return False, (
            f"at round {k} average was not given the workers' models after their step {k * h} "
            "(x − η·g at each worker's last gradient call)"
        )
    return True, ""


def _matchings(same: np.ndarray) -> list[list[int]]:
    """Every assignment of the given models to workers whose models they equal."""
    out: list[list[int]] = [[]]
    for row in same:
        out = [m + [j] for m in out for j in np.flatnonzero(row) if j not in m]
    return out


def _rounds_ok(rec: Result, h: int, t: int, seed: int, run: int) -> tuple[bool, str]:
    rounds = rec.get("rounds")
    if not isinstance(rounds, list):
        return False, "no log of the rounds"
    expected = [[k * h] * WORKERS for k in range(1, t // h + 1)]
    if rounds == expected:
        return _averaged_ok(seed, run, rec, h)
    if not rounds:
        return False, "average was never called (averaging with np.mean is not communicating)"
    if len(rounds) != len(expected):
        return False, f"average was called {len(rounds)} times"
    for r in rounds:
        if not (isinstance(r, list) and r and type(r[0]) is int and r == r[:1] * WORKERS):
            return False, "the workers had not all taken the same number of steps at a round"
        if r[0] % h:
            return False, f"average was called after {r} local steps of the {WORKERS} workers"
    return False, "average was called at the wrong steps"


def _restarts_ok(rec: Result, models: np.ndarray | None, h: int, t: int) -> tuple[bool, str]:
    """At each worker's call kH + 1, and at the end when H divides T, one common model."""
    points = rec.get("points")
    if not (isinstance(points, list) and len(points) == WORKERS):
        return False, "no log of the gradient calls"
    for k in range(1, (t - 1) // h + 1):
        xs = [
            _matrix(p[k * h : k * h + 1], (1, DIM)) if isinstance(p, list) else None for p in points
        ]
        if any(x is None for x in xs):
            return False, f"a worker made fewer than {k * h + 1} gradient calls"
        if not all(np.allclose(x, xs[0], rtol=SAME_RTOL, atol=SAME_ATOL) for x in xs):
            return False, f"after step {k * h} the workers do not all continue from the same model"
    if t % h == 0:
        if models is None:
            return False, "no returned models"
        if not np.allclose(models, models[0], rtol=SAME_RTOL, atol=SAME_ATOL):
            return (
                False,
                f"the run ends with an averaging (T = {t}), but the returned models differ",
            )
    return True, ""


synchronous = per_case(
    "H = 1 is mini-batch SGD",
    1.0,
    "With H = 1, every worker ends at the point of mini-batch SGD, x ← x − η·mean of the p "
    "gradients.",
    " With H = 1, local SGD averages after every step, which is mini-batch SGD: x ← x − "
    "η·mean of the p gradients, each at the common model (§4.3).",
)


rounds = per_case(
    ROUNDS,
    2.0,
    "average is called ⌊T/H⌋ times, after local steps H, 2H, … of every worker, on the "
    "workers' models.",
    " Local SGD communicates once after every H local steps (t mod H = 0), ⌊T/H⌋ times "
    "in all, through average, given the p models the workers have just reached (§4.3).",
)


restarts = per_case(
    "every worker restarts from the average",
    1.0,
    "After each averaging all workers continue from the same model.",
    " After a round every worker continues from its own copy of the average: "
    "[avg.copy() for _ in range(p)], not [avg] * p updated in place (§4.3).",
)


trajectory = per_case(
    "matches local SGD on a quadratic",
    2.0,
    "With H > 1 the models after T steps match local SGD on the noisy quadratic.",
    " Each worker steps with its own gradient at its own model, H steps between two "
    "averagings, and a last incomplete segment ends without averaging (§4.3).",
)


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Replay local SGD from the seed and compare the runs' logs and models."""
    prob = problem(seed)
    same, counted, restarted = [], [], []
    runs = Result(result).parts("runs", 3)
    for i, (run, (h, t)) in enumerate(zip(runs, prob["runs"], strict=True)):
        got, why = _models(run.record("models"))
        ok = got is not None and np.allclose(got, reference(seed, i), rtol=RTOL, atol=ATOL)
        why = why or ("no usable models" if got is None else "the models differ")
        checks = (ok, why), _rounds_ok(run, h, t, seed, i), _restarts_ok(run, got, h, t)
        for verdicts, (ok, why) in zip((same, counted, restarted), checks, strict=True):
            verdicts.append(Verdict(ok, f"run {i + 1} (H = {h}, T = {t}): {why}."))
    return [synchronous(same[:1]), rounds(counted), restarts(restarted), trajectory(same[1:])]
