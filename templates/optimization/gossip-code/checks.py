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


def _plain(values) -> list:
    return [float(v) if math.isfinite(v) else str(float(v)) for v in values]


def _array(x):
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.array(x, dtype=np.float64)


def _call(student, c: dict) -> dict:
    p = c["x"].size
    try:
        res = student(c["adj"].copy(), c["x"].copy(), c["eps"])
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return {"error": f"{type(err).__name__}: {err}"[:300]}
    if not isinstance(res, tuple | list) or len(res) != 4:
        return {"error": f"returned {type(res).__name__}, not (W, lam, rounds, x_out)"}
    rec: dict = {"error": None}
    try:
        W = _array(res[0])
        rec["W"] = [_plain(row) for row in W] if W.shape == (p, p) else None
    except Exception as err:  # noqa: BLE001
        rec["W"] = None
        rec["W_error"] = f"{type(err).__name__}: {err}"[:300]
    try:
        lam = _array(res[1]).reshape(-1)
        rec["lam"] = _plain(lam[:1])[0] if lam.size == 1 else None
    except Exception:  # noqa: BLE001
        rec["lam"] = None
    rounds = res[2]
    try:
        rec["rounds"] = int(rounds) if float(rounds) == int(rounds) else None
    except Exception:  # noqa: BLE001
        rec["rounds"] = None
    try:
        x_out = _array(res[3]).reshape(-1)
        rec["x_out"] = _plain(x_out) if x_out.size == p else None
    except Exception:  # noqa: BLE001
        rec["x_out"] = None
    return rec


def probe(student, seed: int, params: dict) -> dict:
    """Call ``gossip`` on the seed's four graphs; return W, λ, the rounds and x_out."""
    return {"graphs": [_call(student, c) for c in cases(seed)]}


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


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Check W, λ of the student's W, the rounds with the student's W, and x_out."""
    from autograder.checktools import matrix, prop, vector

    cs = cases(seed)
    r = result if isinstance(result, dict) else {}
    recs = r.get("graphs") if isinstance(r.get("graphs"), list) else []
    recs = [x if isinstance(x, dict) else {} for x in (recs + [None] * len(cs))[: len(cs)]]
    w_ok, lam_ok, rounds_ok, mean_ok = [], [], [], []
    w_notes, lam_notes, rounds_notes, mean_notes = [], [], [], []
    for c, rec in zip(cs, recs, strict=True):
        where = c["name"]
        p = c["x"].size
        if rec.get("error") or not rec:
            why = f"{where}: {rec.get('error') or 'no result'}."
            for oks, notes in (
                (w_ok, w_notes),
                (lam_ok, lam_notes),
                (rounds_ok, rounds_notes),
                (mean_ok, mean_notes),
            ):
                oks.append(False)
                notes.append(why)
            continue
        W = matrix(rec.get("W"))
        W = W if W is not None and W.shape == (p, p) else None
        verdict = _matrix_verdict(W, c["adj"])
        w_ok.append(verdict is None)
        if verdict:
            w_notes.append(f"{where}: {verdict}.")
        # λ of the student's own W (the reference W if theirs is unusable)
        usable = W is not None and np.all(np.isfinite(W))
        own = W if usable else metropolis(c["adj"])
        lam = vector([rec.get("lam")], 1) if rec.get("lam") is not None else None
        expected = _second_modulus(own)
        ok = lam is not None and np.isfinite(lam[0]) and abs(lam[0] - expected) <= LAM_TOL
        lam_ok.append(bool(ok))
        if not ok:
            eig = np.linalg.eigvals(own)
            hint = ""
            if lam is not None and abs(lam[0] - 1) <= LAM_TOL:
                hint = " (that is the eigenvalue 1 of the consensus, not the second)"
            elif lam is not None and abs(lam[0] - np.sort(eig.real)[-2]) <= LAM_TOL:
                hint = " (the second-largest eigenvalue, not modulus: a negative one can dominate)"
            elif lam is not None and abs(lam[0] - (1 - expected)) <= LAM_TOL:
                hint = " (that is the spectral gap 1 − λ)"
            elif usable and not np.allclose(W, W.T, atol=TOL):
                hint = " (eigvalsh assumes a symmetric matrix)"
            w_name = "your W" if usable else "W"
            lam_notes.append(
                f"{where}: λ is not the second-largest |eigenvalue| of {w_name}{hint}."
            )
        # rounds, simulated with the student's W
        expected_rounds = simulate(own, c["x"].copy(), c["eps"])[0]
        got = rec.get("rounds")
        ok = type(got) is int and got == expected_rounds
        rounds_ok.append(ok)
        if not ok:
            lam_own = _second_modulus(own)
            bound = (
                math.ceil(math.log(1 / c["eps"]) / math.log(1 / lam_own))
                if 0 < lam_own < 1
                else None
            )
            if type(got) is not int:
                why = "the rounds are not a whole number"
            elif expected_rounds is None:
                why = f"your W does not mix in {MAX_ROUNDS} rounds"
            elif got == bound:
                why = "that is the bound of Proposition 4.14; simulate x ← W x and count"
            else:
                why = f"{got} rounds do not match a simulation with your W"
            rounds_notes.append(f"{where} (ε = {c['eps']:g}): {why}.")
        # x_out: what the gossip with the student's W gave, the mean kept, within ε of it
        x_out = vector(rec.get("x_out"), p)
        x = c["x"]
        scale = np.abs(x).max()
        steps = {t for t in (expected_rounds, got) if type(t) is int and 0 <= t <= MAX_ROUNDS}
        if x_out is None or not np.all(np.isfinite(x_out)):
            mean_ok.append(False)
            mean_notes.append(f"{where}: x_out is not {p} finite numbers.")
        elif not any(_after(own, x, t, x_out, scale) for t in steps):
            mean_ok.append(False)
            mean_notes.append(
                f"{where}: x_out is not Wᵗ x, the values that t rounds x ← W x with your W "
                "reach (t your rounds, or a simulation's)."
            )
        elif abs(x_out.mean() - x.mean()) > TOL * scale:
            mean_ok.append(False)
            mean_notes.append(f"{where}: the mean of x_out is not the mean of x.")
        elif np.linalg.norm(x_out - x.mean()) > c["eps"] * np.linalg.norm(x - x.mean()) * (
            1 + 1e-9
        ):
            mean_ok.append(False)
            mean_notes.append(f"{where}: x_out is not within ε of the consensus.")
        else:
            mean_ok.append(True)

    n = len(cs)
    return [
        prop(
            "W is symmetric, doubly stochastic, 1/(degree + 1) on regular graphs",
            2.0,
            sum(w_ok) / n,
            "W is a symmetric, doubly stochastic gossip matrix of each graph."
            if all(w_ok)
            else " ".join(w_notes) + " Proposition 4.14 needs W symmetric and doubly stochastic, "
            "with weights on the graph's edges only; on the ring and the torus, 1/(degree + 1) "
            "(Example 4.15, Exercise 10).",
        ),
        prop(
            "λ is the second-largest eigenvalue modulus of W",
            1.0,
            sum(lam_ok) / n,
            "λ is the second-largest |eigenvalue| of W."
            if all(lam_ok)
            else " ".join(lam_notes) + " λ = max |μ| over the eigenvalues μ of W other than the "
            "eigenvalue 1 of the consensus (Proposition 4.14).",
        ),
        prop(
            "rounds to divide the disagreement by 1/ε",
            2.0,
            sum(rounds_ok) / n,
            "The rounds match a simulation of x ← W x, within the bound of Proposition 4.14."
            if all(rounds_ok)
            else " ".join(rounds_notes) + " Count the rounds x ← W x, from 0, until "
            "‖x − x̄‖ ≤ ε‖x₀ − x̄‖; Proposition 4.14 only bounds them by ⌈ln(1/ε)/ln(1/λ)⌉ "
            "(Exercise 10).",
        ),
        prop(
            "gossip keeps the mean and reaches it within ε",
            1.0,
            sum(mean_ok) / n,
            "x_out keeps the mean of x and is within ε of the consensus."
            if all(mean_ok)
            else " ".join(mean_notes) + " A doubly stochastic W keeps the mean: 1ᵀW x = 1ᵀx, "
            "so gossip converges to the average x̄ (Proposition 4.14).",
        ),
    ]
