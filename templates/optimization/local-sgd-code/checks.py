"""Checks of the local SGD code part (000 §4.3, local SGD and DiLoCo).

A round is judged on what it averaged (issue 36): the workers' models after their step kH,
recomputed from the logged gradient points and the seed.  Apart on purpose: np.mean instead of
average costs only the rounds, averaging every step the rounds and the trajectory, and workers
that share one array after averaging the restart (their round averages p copies of one model).
"""

import itertools

import numpy as np

from autograder.checklib import Property, Result, Verdict, matrix, per_case, plain

WORKERS, DIM, LR, NOISE = 4, 6, 0.1, 0.5
RTOL, ATOL = 1e-5, 1e-7  # a float32 computation inside passes
SAME = {"rtol": 1e-9, "atol": 1e-12}  # copies of one average are equal
MAX_CALLS, MAX_ROUNDS = 400, 100  # gradient calls per worker, rounds per run, logged


def problem(seed: int) -> dict:
    """f_i(x) = ½ (x − c_i)ᵀ diag(a_i) (x − c_i), and the runs' (H, T): H = 1 (mini-batch SGD);
    T not a multiple of H (a last segment without averaging); T a multiple of H."""
    rng = np.random.default_rng([seed, 40])
    h_short, h_long = int(rng.integers(3, 6)), int(rng.integers(6, 9))
    return {
        "curv": rng.uniform(0.5, 2.0, (WORKERS, DIM)),
        "center": rng.normal(0.0, 1.0, (WORKERS, DIM)),
        "x0": rng.normal(0.0, 1.0, DIM),
        "runs": [
            (1, int(rng.integers(8, 13))),
            (h_short, h_short * int(rng.integers(4, 7)) + int(rng.integers(1, h_short))),
            (h_long, 3 * h_long),
        ],
    }


def _rng(seed: int, run: int, worker: int) -> np.random.Generator:
    """Worker ``worker``'s minibatch stream in run ``run``: one draw per gradient call."""
    return np.random.default_rng([seed, 41, run, worker])


def _grad(prob: dict, x: np.ndarray, noise: np.ndarray, i=slice(None)) -> np.ndarray:
    """Worker i's stochastic gradient at x (every worker's, one row each, by default)."""
    return prob["curv"][i] * (x - prob["center"][i]) + NOISE * noise


class _Run:
    """One run's gradient functions and ``average``, logging the point of every gradient call
    and, at each round, the workers' numbers of calls and the models given."""

    def __init__(self, prob: dict, seed: int, run: int):
        self.prob, self.rngs = prob, [_rng(seed, run, i) for i in range(WORKERS)]
        self.points = [[] for _ in range(WORKERS)]  # x of every gradient call, per worker
        self.calls, self.rounds, self.sent = [0] * WORKERS, [], []

    def grad_fn(self, i: int):
        def grad(x):
            x = np.array(x, dtype=np.float64).reshape(-1)
            if x.shape != (DIM,):
                raise ValueError(f"grads[{i}] expects a model of {DIM} elements, got {x.size}")
            self.calls[i] += 1
            if len(self.points[i]) < MAX_CALLS:
                self.points[i].append(plain(x))
            return _grad(self.prob, x, self.rngs[i].standard_normal(DIM), i)

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
    prob, runs = problem(seed), []
    for r, (h, t) in enumerate(prob["runs"]):
        log = _Run(prob, seed, r)
        grads = [log.grad_fn(i) for i in range(WORKERS)]
        models = student.call(grads, prob["x0"], LR, t, h, log.average)
        runs.append({"models": models, "rounds": log.rounds, "sent": log.sent})
        runs[-1].update(calls=log.calls, points=log.points)
    return {"runs": runs}


def reference(seed: int, run: int) -> np.ndarray:
    """The p models after local SGD with the run's (H, T), replayed from the seed."""
    prob = problem(seed)
    h, t = prob["runs"][run]
    noise = np.stack([_rng(seed, run, i).standard_normal((t, DIM)) for i in range(WORKERS)])
    xs = np.tile(prob["x0"], (WORKERS, 1))
    for step in range(1, t + 1):
        xs = xs - LR * _grad(prob, xs, noise[:, step - 1])
        if step % h == 0:
            xs[:] = xs.mean(axis=0)
    return xs


def _matrix(x) -> np.ndarray | None:
    m = matrix(x)
    return m if m is not None and m.shape == (WORKERS, DIM) and np.all(np.isfinite(m)) else None


def _points(run: Result, k: int) -> np.ndarray | None:
    """The workers' points at their gradient call k, one row each (None unless all finite)."""
    p = run.get("points")
    if not (isinstance(p, list) and len(p) == WORKERS and all(isinstance(q, list) for q in p)):
        return None
    return _matrix([q[k - 1] if k <= len(q) else None for q in p])


def _models(rec) -> tuple[np.ndarray | None, str | None]:
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


def _rounds_ok(run: Result, h: int, t: int, seed: int, r: int) -> tuple[bool, str]:
    """⌊T/H⌋ rounds, after the workers' steps H, 2H, …, each given the workers' models after
    those steps, in any order; or, where the workers step one shared array in turn (each
    gradient call at the model the previous worker stepped to), p copies of that array."""
    rounds, sent = run.get("rounds"), run.get("sent")
    if not isinstance(rounds, list):
        return False, "no log of the rounds"
    expected = [[k * h] * WORKERS for k in range(1, t // h + 1)]
    if rounds == expected:
        if not isinstance(sent, list):
            return False, "no log of what average was given"
        for k, models in enumerate(sent, start=1):
            got, xs = _matrix(models), _points(run, k * h)
            if got is None or xs is None:
                return False, f"round {k}: no usable models or gradient calls"
            noise = [_rng(seed, r, i).standard_normal((k * h, DIM))[-1] for i in range(WORKERS)]
            want = xs - LR * _grad(problem(seed), xs, np.array(noise))  # after step kH
            same = np.isclose(got[:, None], want[None], rtol=RTOL, atol=ATOL).all(axis=2)
            if any(same[range(WORKERS), m].all() for m in itertools.permutations(range(WORKERS))):
                continue  # the workers' models, in some order
            chained = np.allclose(xs[1:], want[:-1], rtol=RTOL, atol=ATOL)
            if not (chained and same[:, -1].all()):
                return False, (
                    f"at round {k} average was not given the workers' models after their step "
                    f"{k * h} (x − η·g at each worker's last gradient call)"
                )
        return True, ""
    if not rounds:
        return False, "average was never called (averaging with np.mean is not communicating)"
    if len(rounds) != len(expected):
        return False, f"average was called {len(rounds)} times"
    for x in rounds:
        if not (isinstance(x, list) and x and type(x[0]) is int and x == x[:1] * WORKERS):
            return False, "the workers had not all taken the same number of steps at a round"
        if x[0] % h:
            return False, f"average was called after {x} local steps of the {WORKERS} workers"
    return False, "average was called at the wrong steps"


def _restarts_ok(run: Result, models: np.ndarray | None, h: int, t: int) -> tuple[bool, str]:
    """At each worker's call kH + 1, and at the end when H divides T, one common model."""
    if not (isinstance(run.get("points"), list) and len(run.get("points")) == WORKERS):
        return False, "no log of the gradient calls"
    for k in range(1, (t - 1) // h + 1):
        xs = _points(run, k * h + 1)
        if xs is None:
            return False, f"a worker made fewer than {k * h + 1} gradient calls"
        if not np.allclose(xs, xs[0], **SAME):
            return False, f"after step {k * h} the workers do not all continue from the same model"
    if t % h == 0 and models is None:
        return False, "no returned models"
    if t % h == 0 and not np.allclose(models, models[0], **SAME):
        return False, f"the run ends with an averaging (T = {t}), but the returned models differ"
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
    "⌊T/H⌋ rounds, each averaging the models after H local steps",
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
    prob, verdicts = problem(seed), []
    for i, (run, (h, t)) in enumerate(
        zip(Result(result).parts("runs", 3), prob["runs"], strict=True)
    ):
        got, why = _models(run.record("models"))
        ok = got is not None and np.allclose(got, reference(seed, i), rtol=RTOL, atol=ATOL)
        why = why or ("no usable models" if got is None else "the models differ")
        checks = (ok, why), _rounds_ok(run, h, t, seed, i), _restarts_ok(run, got, h, t)
        verdicts.append([Verdict(ok, f"run {i + 1} (H = {h}, T = {t}): {y}.") for ok, y in checks])
    same, counted, restarted = map(list, zip(*verdicts, strict=True))
    return [synchronous(same[:1]), rounds(counted), restarts(restarted), trajectory(same[1:])]
