"""Checks of the gossip code part (000 §4.4, Proposition 4.14, Example 4.15, Exercise 10).

λ and the rounds are judged against the student's own W, and x_out as Wᵗ x: row weights
1/(deg_i + 1) where degrees differ cost the matrix and the mean (and λ when eigvalsh is
applied to that non-symmetric W), a signed second eigenvalue costs only λ, and the bound of
Proposition 4.14 returned instead of a simulation costs only the rounds."""

import math

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, per_case

TOL = 1e-9  # W, the mean: float64 arithmetic on p ≤ 25 values
LAM_TOL = 1e-6
MAX_ROUNDS = 20_000  # a W that mixes slower than this is not a gossip matrix here
MARGIN = 1e-6  # start values whose stopping round sits this close to ε are redrawn
ROW_WEIGHTS = (
    " (its rows sum to 1, but 1/(deg_i + 1) on row i differs from 1/(deg_j + 1) on "
    "row j when the degrees differ: use the Metropolis weights 1/(1 + max(deg_i, deg_j)))"
)
LAMBDA_HINTS = (  # λ is 1, the signed second eigenvalue, the gap 1 − λ; W is not symmetric
    " (that is the eigenvalue 1 of the consensus, not the second)",
    " (the second-largest eigenvalue, not modulus: a negative one can dominate)",
    " (that is the spectral gap 1 − λ)",
    " (eigvalsh assumes a symmetric matrix)",
)


def ring(p: int) -> np.ndarray:
    return np.roll(np.eye(p), 1, axis=1) + np.roll(np.eye(p), -1, axis=1)


def torus(q: int) -> np.ndarray:
    return np.kron(ring(q), np.eye(q)) + np.kron(np.eye(q), ring(q))


def random_graph(rng: np.random.Generator, p: int) -> np.ndarray:
    """A random spanning tree plus a few chords: connected, degrees that differ."""
    while True:
        adj, order = np.zeros((p, p)), rng.permutation(p)
        edges = [(order[k], order[int(rng.integers(0, k))]) for k in range(1, p)]
        edges += [rng.choice(p, 2, replace=False) for _ in range(p // 3)]
        for i, j in edges:
            adj[i, j] = adj[j, i] = 1
        deg = adj.sum(axis=1)
        if deg.max() >= deg.min() + 2:
            return adj


def metropolis(adj: np.ndarray) -> np.ndarray:
    deg = adj.sum(axis=1)
    W = adj / (1 + np.maximum.outer(deg, deg))
    W[np.diag_indices_from(W)] = 1 - W.sum(axis=1)
    return W


def simulate(W: np.ndarray, x: np.ndarray, eps: float) -> tuple[int | None, float, float]:
    """Rounds until ‖x − x̄‖ ≤ ε‖x₀ − x̄₀‖ (x̄ the current mean), None past MAX_ROUNDS;
    with the ratios of the disagreement to the target at the last two rounds."""
    with np.errstate(all="ignore"):
        target, before = eps * np.linalg.norm(x - x.mean()), math.inf
        for t in range(MAX_ROUNDS + 1):
            now = np.linalg.norm(x - x.mean()) / target
            if now <= 1 or not np.isfinite(now):
                return (t if now <= 1 else None), before, now
            x, before = W @ x, now
    return None, before, now


def cases(seed: int) -> list[dict]:
    """Four graphs with start values whose stopping round is far from a tie at ε."""
    rng = np.random.default_rng([seed, 50])
    q, n = int(rng.integers(3, 6)), int(rng.integers(8, 17))
    graphs = [(f"ring of {n}", ring(n), 1e-3), (f"{q} × {q} torus", torus(q), 1e-3)]
    graphs.append(("random graph", random_graph(rng, int(rng.integers(9, 15))), 1e-4))
    m = int(rng.integers(3, 6))
    bipartite = np.kron([[0, 1], [1, 0]], np.ones((m, m)))  # K_{m,m}: −(m − 1)/(m + 1) dominates
    graphs.append((f"complete bipartite K_{{{m},{m}}}", bipartite, 1e-3))
    out = []
    for name, adj, eps in graphs:
        W = metropolis(adj)
        bound = math.ceil(math.log(1 / eps) / math.log(1 / _second_modulus(W)))
        for _ in range(100):
            x = rng.standard_normal(adj.shape[0])
            rounds, before, now = simulate(W, x, eps)
            apart = before > 1 + MARGIN and now < 1 - MARGIN
            if apart and (rounds < bound or "bipartite" in name):  # simulation beats the bound
                break
        out.append({"name": name, "adj": adj, "x": x, "eps": eps})
    return out


def probe(student, seed: int, params: dict) -> dict:
    return {"graphs": [student.call(c["adj"], c["x"], c["eps"]) for c in cases(seed)]}


def _second_modulus(W: np.ndarray) -> float:
    symmetric = np.allclose(W, W.T, atol=TOL)
    return float(np.sort(np.abs(np.linalg.eigvalsh(W) if symmetric else np.linalg.eigvals(W)))[-2])


def _matrix_why(W, adj: np.ndarray) -> str:
    """Why W is not a gossip matrix of the graph; "" when it is."""
    if W is None or not np.all(np.isfinite(W)):
        return "W is not a p × p matrix of numbers" if W is None else "W is not finite"
    if np.any(np.abs(W[(adj == 0) & ~np.eye(adj.shape[0], dtype=bool)]) > TOL):
        return "W has weights between workers that are not neighbours"
    if np.any(W[adj == 1] <= TOL) or np.any(W < -TOL):
        return "W needs positive weights on every edge and no negative weight"
    rows = np.allclose(W.sum(axis=1), 1, atol=TOL)
    if not np.allclose(W, W.T, atol=TOL):
        return "W is not symmetric" + (ROW_WEIGHTS if rows else "")
    if not rows:
        return "the rows of W do not sum to 1"
    deg = adj.sum(axis=1)
    regular = (adj + np.eye(deg.size)) / (deg[0] + 1)
    if np.all(deg == deg[0]) and not np.allclose(W, regular, atol=TOL):
        return "on this regular graph W must put 1/(degree + 1) on each worker and neighbour"
    return ""


def _lambda_why(lam: float | None, own: np.ndarray, expected: float, usable: bool) -> str:
    """Why λ is not the second-largest |eigenvalue| of W, and what it is instead if known."""
    if lam is not None and np.isfinite(lam) and abs(lam - expected) <= LAM_TOL:
        return ""
    signed = np.sort(np.linalg.eigvals(own).real)[-2]
    hits = [lam is not None and abs(lam - v) <= LAM_TOL for v in (1, signed, 1 - expected)]
    hits.append(not np.allclose(own, own.T, atol=TOL))
    hint = next((h for h, hit in zip(LAMBDA_HINTS, hits, strict=True) if hit), "")
    return f"λ is not the second-largest |eigenvalue| of {'your W' if usable else 'W'}{hint}"


def _rounds_why(rounds: int | None, steps: int | None, lam: float, eps: float) -> str:
    """Why the rounds are not ``steps``, those of a simulation with the student's W."""
    if rounds is None:
        return "the rounds are not a whole number"
    if rounds == steps:
        return ""
    if steps is None:
        return f"your W does not mix in {MAX_ROUNDS} rounds"
    if 0 < lam < 1 and rounds == math.ceil(math.log(1 / eps) / math.log(1 / lam)):
        return "that is the bound of Proposition 4.14; simulate x ← W x and count"
    return f"{rounds} rounds do not match a simulation with your W"


def _mean_why(x_out, own: np.ndarray, x: np.ndarray, eps: float, rounds: tuple) -> str:
    """Why x_out is not Wᵗ x (t one of ``rounds``), of the mean of x and within ε of it."""
    scale = np.abs(x).max()
    if x_out is None or not np.all(np.isfinite(x_out)):
        return f"x_out is not {x.size} finite numbers"
    with np.errstate(all="ignore"):
        ts = [t for t in rounds if t is not None and 0 <= t <= MAX_ROUNDS]
        if not any(
            np.all(np.abs(x_out - np.linalg.matrix_power(own, t) @ x) <= TOL * scale) for t in ts
        ):
            return (
                "x_out is not Wᵗ x, the values that t rounds x ← W x with your W reach (t your "
                "rounds, or a simulation's)"
            )
    if abs(x_out.mean() - x.mean()) > TOL * scale:
        return "the mean of x_out is not the mean of x"
    if np.linalg.norm(x_out - x.mean()) > eps * np.linalg.norm(x - x.mean()) * (1 + 1e-9):
        return "x_out is not within ε of the consensus"
    return ""


def _verdicts(c: dict, rec: Record) -> list[Verdict]:
    """W, λ, the rounds and x_out on one graph; the last three judged with the student's own
    W (the reference W if theirs is unusable)."""
    where, adj, x, eps = c["name"], c["adj"], c["x"], c["eps"]
    if not rec.ok or rec.items is None or len(rec.items) != 4:
        why = rec.error if not rec.ok else f"returned {rec.type}, not (W, lam, rounds, x_out)"
        return [Verdict(False, f"{where}: {why}.")] * 4
    W, t, x_out = rec.items[0].array(), rec.items[2].as_float(), rec.items[3].array()
    W = W if W is not None and W.shape == adj.shape else None
    rounds = int(t) if t is not None and math.isfinite(t) and t == int(t) else None
    x_out = x_out.reshape(-1) if x_out is not None and x_out.size == x.size else None
    usable = W is not None and np.all(np.isfinite(W))
    own = W if usable else metropolis(adj)
    expected, steps = _second_modulus(own), simulate(own, x, eps)[0]
    whys = [
        _matrix_why(W, adj),
        _lambda_why(rec.items[1].number(), own, expected, usable),
        _rounds_why(rounds, steps, expected, eps),
        _mean_why(x_out, own, x, eps, (steps, rounds)),
    ]
    wheres = [where, where, f"{where} (ε = {eps:g})", where]
    return [Verdict(not why, f"{at}: {why}.") for at, why in zip(wheres, whys, strict=True)]


matrix_ok = per_case(
    "W is symmetric, doubly stochastic, 1/(degree + 1) on regular graphs",
    2.0,
    "W is a symmetric, doubly stochastic gossip matrix of each graph.",
    " Proposition 4.14 needs W symmetric and doubly stochastic, with weights on the graph's "
    "edges only; on the ring and the torus, 1/(degree + 1) (Example 4.15, Exercise 10).",
)
lambda_ok = per_case(
    "λ is the second-largest eigenvalue modulus of W",
    1.0,
    "λ is the second-largest |eigenvalue| of W.",
    " λ = max |μ| over the eigenvalues μ of W other than the eigenvalue 1 of the consensus "
    "(Proposition 4.14).",
)
rounds_ok = per_case(
    "rounds to divide the disagreement by 1/ε",
    2.0,
    "The rounds match a simulation of x ← W x, within the bound of Proposition 4.14.",
    " Count the rounds x ← W x, from 0, until ‖x − x̄‖ ≤ ε‖x₀ − x̄‖; Proposition 4.14 only "
    "bounds them by ⌈ln(1/ε)/ln(1/λ)⌉ (Exercise 10).",
)
mean_ok = per_case(
    "gossip keeps the mean and reaches it within ε",
    1.0,
    "x_out keeps the mean of x and is within ε of the consensus.",
    " A doubly stochastic W keeps the mean: 1ᵀW x = 1ᵀx, so gossip converges to the average "
    "x̄ (Proposition 4.14).",
)


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    cs = cases(seed)
    verdicts = map(_verdicts, cs, Result(result).records("graphs", len(cs)))
    w, lam, rounds, mean = map(list, zip(*verdicts, strict=True))
    return [matrix_ok(w), lambda_ok(lam), rounds_ok(rounds), mean_ok(mean)]
