"""Checks of the gossip code part (000 §4.4, Proposition 4.14, Example 4.15, Exercise 10).

``probe`` runs in the probe process, beside the student's: it calls the student's
``gossip(adjacency, x, eps)`` on four graphs drawn from the seed (a ring, a torus, a
random graph whose degrees differ and a complete bipartite graph) and returns W, λ, the
rounds and the final values. ``grade`` runs in the trusted process: it redraws the graphs
and the start values, checks W, and recomputes λ and the rounds from the student's own W,
and x_out as Wᵗ x, so that the mean kept and the ε reached are those of the student's own
gossip, never of values moved afterwards (x_out re-centred on the mean of x).

The properties are separated on purpose: λ and the rounds are judged against the
student's W, so that the row weights 1/(deg_i + 1) of a graph whose degrees differ cost
the matrix and the mean (and λ when eigvalsh is applied to that non-symmetric W), a
signed second eigenvalue costs only λ, and the bound of Proposition 4.14 returned instead
of a simulation costs only the rounds.
"""

from __future__ import annotations

import math

import numpy as np

from autograder.checklib import Property, Record, Result, Verdict, per_case

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

TOL = 1e-9  # W, the mean: float64 arithmetic on p ≤ 25 values
LAM_TOL = 1e-6
MAX_ROUNDS = 20_000  # a W that mixes slower than this is not a gossip matrix here
MARGIN = 1e-6  # start values whose stopping round sits this close to ε are redrawn

# --- inputs: the same functions in the sandbox (probe) and the trusted process (grade) ----


def ring(p: int) -> np.ndarray:
    adj = np.zeros((p, p))
    for i in range(p):
        adj[i, (i + 1) % p] = adj[(i + 1) % p, i] = 1
    return adj


def torus(q: int) -> np.ndarray:
    adj = np.zeros((q * q, q * q))
    for i in range(q):
        for j in range(q):  # node qi + j, linked to the next one in each direction
            for v in (q * ((i + 1) % q) + j, q * i + (j + 1) % q):
                adj[q * i + j, v] = adj[v, q * i + j] = 1
    return adj


def random_graph(rng: np.random.Generator, p: int) -> np.ndarray:
    """A random spanning tree plus a few chords: connected, degrees that differ."""
    while True:
        adj = np.zeros((p, p))
        order = rng.permutation(p)
        for k in range(1, p):
            i, j = order[k], order[int(rng.integers(0, k))]
            adj[i, j] = adj[j, i] = 1
        for _ in range(p // 3):
            i, j = rng.choice(p, 2, replace=False)
            adj[i, j] = adj[j, i] = 1
        deg = adj.sum(axis=1)
        if deg.max() >= deg.min() + 2:
            return adj


def bipartite(m: int) -> np.ndarray:
    """K_{m,m}: its gossip matrix has the eigenvalue −(m − 1)/(m + 1), larger than 1/(m + 1)."""
    adj = np.zeros((2 * m, 2 * m))
    adj[:m, m:] = adj[m:, :m] = 1
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
        start = np.linalg.norm(x - x.mean())
        target = eps * start
        before = math.inf
        for t in range(MAX_ROUNDS + 1):
            now = np.linalg.norm(x - x.mean()) / target
            if not np.isfinite(now):
                return None, before, now
            if now <= 1:
                return t, before, now
            x, before = W @ x, now
    return None, before, now


def cases(seed: int) -> list[dict]:
    """Four graphs with start values whose stopping round is far from a tie at ε."""
    rng = np.random.default_rng([seed, 50])
    q = int(rng.integers(3, 6))
    graphs = [
        ("ring", ring(int(rng.integers(8, 17))), 1e-3),
        (f"{q} × {q} torus", torus(q), 1e-3),
        ("random graph", random_graph(rng, int(rng.integers(9, 15))), 1e-4),
        ("bipartite", bipartite(int(rng.integers(3, 6))), 1e-3),
    ]
    out = []
    for name, adj, eps in graphs:
        W = metropolis(adj)
        lam = np.sort(np.abs(np.linalg.eigvalsh(W)))[-2]
        bound = math.ceil(math.log(1 / eps) / math.log(1 / lam))
        for _ in range(100):
            x = rng.standard_normal(adj.shape[0])
            rounds, before, now = simulate(W, x, eps)
            apart = before > 1 + MARGIN and now < 1 - MARGIN
            if apart and (rounds < bound or name == "bipartite"):  # simulation beats the bound
                break
        if name == "bipartite":
            name = f"complete bipartite K_{{{adj.shape[0] // 2},{adj.shape[0] // 2}}}"
        elif name == "ring":
            name = f"ring of {adj.shape[0]}"
        out.append({"name": name, "adj": adj, "x": x, "eps": eps})
    return out


def probe(student, seed: int, params: dict) -> dict:
    """Call ``gossip`` on the seed's four graphs; return W, λ, the rounds and x_out."""
    return {"graphs": [student.call(c["adj"], c["x"], c["eps"]) for c in cases(seed)]}


# --- grade (trusted) ---------------------------------------------------------------------


def _second_modulus(W: np.ndarray) -> float:
    eig = np.linalg.eigvalsh(W) if np.allclose(W, W.T, atol=TOL) else np.linalg.eigvals(W)
    return float(np.sort(np.abs(eig))[-2])


def _matrix_verdict(W, adj: np.ndarray) -> str | None:
    """None if W is a valid gossip matrix of the graph, else why not."""
    if W is None:
        return "W is not a p × p matrix of numbers"
    if not np.all(np.isfinite(W)):
        return "W is not finite"
    off = (adj == 0) & ~np.eye(adj.shape[0], dtype=bool)
    if np.any(np.abs(W[off]) > TOL):
        return "W has weights between workers that are not neighbours"
    if np.any(W[adj == 1] <= TOL) or np.any(W < -TOL):
        return "W needs positive weights on every edge and no negative weight"
    rows = np.allclose(W.sum(axis=1), 1, atol=TOL)
    if not np.allclose(W, W.T, atol=TOL):
        return "W is not symmetric" + (
            " (its rows sum to 1, but 1/(deg_i + 1) on row i differs from 1/(deg_j + 1) on "
            "row j when the degrees differ: use the Metropolis weights 1/(1 + max(deg_i, deg_j)))"
            if rows
            else ""
        )
    if not rows:
        return "the rows of W do not sum to 1"
    deg = adj.sum(axis=1)
    if np.all(deg == deg[0]) and not np.allclose(
        W, (adj + np.eye(deg.size)) / (deg[0] + 1), atol=TOL
    ):
        return "on this regular graph W must put 1/(degree + 1) on each worker and neighbour"
    return None


def _after(W: np.ndarray, x: np.ndarray, t: int, x_out: np.ndarray, scale: float) -> bool:
    """Whether ``x_out`` is W^t x, the values after t rounds x ← W x, up to rounding."""
    with np.errstate(all="ignore"):
        reached = np.linalg.matrix_power(W, t) @ x
        return bool(np.all(np.abs(x_out - reached) <= TOL * scale))


def _read(rec: Record, p: int):
    """(W, λ, rounds, x_out) of one call, each None where unusable; or why there are none."""
    if not rec.ok:
        return rec.error
    if rec.items is None or len(rec.items) != 4:
        return f"returned {rec.type}, not (W, lam, rounds, x_out)"
    W, lam, rounds, x_out = rec.items
    t = rounds.as_float()  # 124, 124.0, a 0-d array or a one-element tensor
    W, x_out = W.array(), x_out.array()
    return (
        W if W is not None and W.shape == (p, p) else None,
        lam.number(),
        int(t) if t is not None and math.isfinite(t) and float(t) == int(t) else None,
        x_out.reshape(-1) if x_out is not None and x_out.size == p else None,
    )


def _verdicts(c: dict, rec: Record) -> list[Verdict]:
    """W, λ, the rounds and x_out on one graph; λ, the rounds and x_out judged with the
    student's own W (the reference W if theirs is unusable)."""
    where, x, eps = c["name"], c["x"], c["eps"]
    got = _read(rec, x.size)
    if isinstance(got, str):
        return [Verdict(False, f"{where}: {got}.")] * 4
    W, lam, rounds, x_out = got
    verdict = _matrix_verdict(W, c["adj"])
    out = [Verdict(verdict is None, f"{where}: {verdict}.")]
    usable = W is not None and np.all(np.isfinite(W))
    own = W if usable else metropolis(c["adj"])
    expected = _second_modulus(own)
    ok = lam is not None and np.isfinite(lam) and abs(lam - expected) <= LAM_TOL
    hint = ""
    if not ok:
        eig = np.linalg.eigvals(own)
        if lam is not None and abs(lam - 1) <= LAM_TOL:
            hint = " (that is the eigenvalue 1 of the consensus, not the second)"
        elif lam is not None and abs(lam - np.sort(eig.real)[-2]) <= LAM_TOL:
            hint = " (the second-largest eigenvalue, not modulus: a negative one can dominate)"
        elif lam is not None and abs(lam - (1 - expected)) <= LAM_TOL:
            hint = " (that is the spectral gap 1 − λ)"
        elif usable and not np.allclose(W, W.T, atol=TOL):
            hint = " (eigvalsh assumes a symmetric matrix)"
    w_name = "your W" if usable else "W"
    why = f"{where}: λ is not the second-largest |eigenvalue| of {w_name}{hint}."
    out.append(Verdict(bool(ok), why))
    # rounds, simulated with the student's W
    expected_rounds = simulate(own, x.copy(), eps)[0]
    if type(rounds) is int and rounds == expected_rounds:
        why = ""
    elif type(rounds) is not int:
        why = "the rounds are not a whole number"
    elif expected_rounds is None:
        why = f"your W does not mix in {MAX_ROUNDS} rounds"
    elif 0 < expected < 1 and rounds == math.ceil(math.log(1 / eps) / math.log(1 / expected)):
        why = "that is the bound of Proposition 4.14; simulate x ← W x and count"
    else:
        why = f"{rounds} rounds do not match a simulation with your W"
    out.append(Verdict(not why, f"{where} (ε = {eps:g}): {why}."))
    # x_out: what the gossip with the student's W gave, the mean kept, within ε of it
    scale = np.abs(x).max()
    steps = {t for t in (expected_rounds, rounds) if type(t) is int and 0 <= t <= MAX_ROUNDS}
    if x_out is None or not np.all(np.isfinite(x_out)):
        why = f"x_out is not {x.size} finite numbers"
    elif not any(_after(own, x, t, x_out, scale) for t in steps):
        why = (
            "x_out is not Wᵗ x, the values that t rounds x ← W x with your W reach (t your "
            "rounds, or a simulation's)"
        )
    elif abs(x_out.mean() - x.mean()) > TOL * scale:
        why = "the mean of x_out is not the mean of x"
    elif np.linalg.norm(x_out - x.mean()) > eps * np.linalg.norm(x - x.mean()) * (1 + 1e-9):
        why = "x_out is not within ε of the consensus"
    else:
        why = ""
    out.append(Verdict(not why, f"{where}: {why}."))
    return out


matrix_ok = per_case(
    "W is symmetric, doubly stochastic, 1/(degree + 1) on regular graphs",
    2.0,
    "W is a symmetric, doubly stochastic gossip matrix of each graph.",
    " Proposition 4.14 needs W symmetric and doubly stochastic, with weights on the "
    "graph's edges only; on the ring and the torus, 1/(degree + 1) (Example 4.15, "
    "Exercise 10).",
)


lambda_ok = per_case(
    "λ is the second-largest eigenvalue modulus of W",
    1.0,
    "λ is the second-largest |eigenvalue| of W.",
    " λ = max |μ| over the eigenvalues μ of W other than the eigenvalue 1 of the "
    "consensus (Proposition 4.14).",
)


rounds_ok = per_case(
    "rounds to divide the disagreement by 1/ε",
    2.0,
    "The rounds match a simulation of x ← W x, within the bound of Proposition 4.14.",
    " Count the rounds x ← W x, from 0, until ‖x − x̄‖ ≤ ε‖x₀ − x̄‖; Proposition 4.14 "
    "only bounds them by ⌈ln(1/ε)/ln(1/λ)⌉ (Exercise 10).",
)


mean_ok = per_case(
    "gossip keeps the mean and reaches it within ε",
    1.0,
    "x_out keeps the mean of x and is within ε of the consensus.",
    " A doubly stochastic W keeps the mean: 1ᵀW x = 1ᵀx, so gossip converges to the "
    "average x̄ (Proposition 4.14).",
)


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Check W, λ of the student's W, the rounds with the student's W, and x_out."""
    cs = cases(seed)
    recs = Result(result).records("graphs", len(cs))
    w, lam, rounds, mean = map(list, zip(*map(_verdicts, cs, recs), strict=True))
    return [matrix_ok(w), lambda_ok(lam), rounds_ok(rounds), mean_ok(mean)]
