"""Checks of the REINFORCE-with-baseline code part (001 §7.2, example 7.6, Exercise 10).

``probe`` runs in the probe process, beside the student's: it calls the student's
``reinforce_estimates`` with generators seeded from the grading seed (and the global
generators seeded too, so that the same code always gets the same grade) and returns, for
each (θ, b), the count, sum and sum of squares of the estimates; the extreme estimates at
b* = 1 − σ; and two runs with generators seeded alike. ``grade`` runs in the trusted
process: it redraws (θ, b) from the seed and tests the mean against σ(1 − σ) and the
variance against Ex. 10(a), each with a z-test at the false-fail rate FALSE_FAIL."""

from __future__ import annotations

import math

import numpy as np

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

N_ROLLOUTS = 20_000  # per (θ, b): the mean to ±1 % of its spread's scale
FALSE_FAIL = 1e-4  # per statistical test
N_OPTIMAL, N_REPEAT = 1_000, 200  # rollouts at b* and in each reproducibility run
OPTIMAL_RTOL = 1e-6  # at b*, every estimate is σ(1 − σ) up to rounding (float32 is fine)

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def _theta(sigma: float) -> float:
    return math.log(sigma / (1 - sigma))


def cases(seed: int) -> dict:
    """(θ, b) of the statistical runs, θ of the runs at b*, and the generator streams."""
    rng = np.random.default_rng([seed, 40])
    high = float(rng.uniform(0.75, 0.95))  # a well-trained policy, b = J(θ) = σ (Ex. 10(b))
    low = float(rng.uniform(0.1, 0.3))  # b = 0: no baseline
    mid = float(rng.uniform(0.65, 0.9))
    while True:  # any other baseline, far from 0, from b* = 1 − σ and from 2(1 − σ)
        b = float(rng.uniform(-1.0, 2.0))
        if min(abs(b), abs(b - (1 - mid)), abs(b - 2 * (1 - mid))) >= 0.4:
            break
    stats = [
        {"theta": _theta(high), "b": high},
        {"theta": _theta(low), "b": 0.0},
        {"theta": _theta(mid), "b": b},
    ]
    optimal = [_theta(float(rng.uniform(0.55, 0.95))), _theta(float(rng.uniform(0.05, 0.45)))]
    return {
        "stats": stats,
        "optimal": optimal,
        "streams": [int(v) for v in rng.integers(2**62, size=len(stats) + len(optimal) + 1)],
    }


def sigmoid(theta: float) -> float:
    return 1 / (1 + math.exp(-theta))


# --- probe (sandbox) -------------------------------------------------------------------------


def _call(student, theta: float, b: float, n: int, stream: int) -> np.ndarray | str:
    """The student's n estimates as a float64 array, or why there are none."""
    try:
        out = student(theta, b, n, np.random.default_rng(stream))
        if hasattr(out, "detach"):
            out = out.detach().cpu().numpy()
        g = np.asarray(out, dtype=np.float64)
    except BaseException as err:  # noqa: BLE001 - anything the student raises
        return f"{type(err).__name__}: {err}"[:300]
    if g.shape != (n,):
        return f"returned shape {list(g.shape)} for n = {n}: return one estimate per rollout"
    if not np.all(np.isfinite(g)):
        return "the estimates are not finite (nan or inf)"
    return g


def probe(student, seed: int, params: dict) -> dict:
    """Call reinforce_estimates on the seed's (θ, b); return sums and extremes (plain data)."""
    c = cases(seed)
    streams = iter(c["streams"])
    stats = []
    for case in c["stats"]:
        stream = next(streams)
        student.seed(stream)
        g = _call(student, case["theta"], case["b"], N_ROLLOUTS, stream)
        if isinstance(g, str):
            stats.append({"error": g})
        else:
            stats.append(
                {"error": None, "n": g.size, "sum": float(g.sum()), "sum_sq": float(g @ g)}
            )
    optimal = []
    for theta in c["optimal"]:
        stream = next(streams)
        student.seed(stream)
        g = _call(student, theta, 1 - sigmoid(theta), N_OPTIMAL, stream)
        if isinstance(g, str):
            optimal.append({"error": g})
        else:
            optimal.append({"error": None, "min": float(g.min()), "max": float(g.max())})
    stream = next(streams)
    runs = []
    for k in range(2):  # the same seed for rng, other seeds for the global generators
        student.seed(stream + 1 + k)
        g = _call(student, c["stats"][2]["theta"], c["stats"][2]["b"], N_REPEAT, stream)
        runs.append(g if isinstance(g, str) else [float(v) for v in g])
    return {"stats": stats, "optimal": optimal, "repeat": runs}


# --- grade (trusted) ---------------------------------------------------------------------

NAMES = {
    "mean": ("unbiased: mean σ(1 − σ) for any baseline", 2.0),
    "variance": ("variance σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)]", 2.0),
    "optimal": ("b* = 1 − σ: every estimate equals σ(1 − σ)", 1.0),
    "rng": ("rollouts drawn from rng", 1.0),
}


def _z_ok(z: float) -> bool:
    return math.erfc(abs(z) / math.sqrt(2)) >= FALSE_FAIL  # two-sided p-value


def grade(result: dict, seed: int, params: dict) -> list[dict]:
    """Test the estimates' moments against Ex. 10(a), recomputed from the seed."""
    from autograder.checktools import prop
    from costmodel.rl import reinforce_variance

    c = cases(seed)
    r = result if isinstance(result, dict) else {}
    recs = r.get("stats") if isinstance(r.get("stats"), list) else []
    recs = (recs + [None] * len(c["stats"]))[: len(c["stats"])]
    mean_ok, var_ok, mean_notes, var_notes = [], [], [], []
    for case, rec in zip(c["stats"], recs, strict=True):
        sigma, b = sigmoid(case["theta"]), case["b"]
        where = f"σ = {sigma:.3f}, b = {b:.3f}"
        usable = (
            isinstance(rec, dict)
            and not rec.get("error")
            and rec.get("n") == N_ROLLOUTS
            and all(type(rec.get(k)) is float and math.isfinite(rec[k]) for k in ("sum", "sum_sq"))
        )
        if not usable:
            why = rec.get("error") if isinstance(rec, dict) else None
            note = f"{where}: {why or 'no usable estimates'}."
            mean_ok.append(False)
            var_ok.append(False)
            mean_notes.append(note)
            var_notes.append(note)
            continue
        n = N_ROLLOUTS
        mu = sigma * (1 - sigma)
        var = reinforce_variance(sigma=sigma, b=b)  # = σ(1 − σ)(1 − σ − b)²
        mean = rec["sum"] / n
        sample_var = max(rec["sum_sq"] / n - mean**2, 0.0)
        mean_ok.append(_z_ok((mean - mu) / math.sqrt(var / n)))
        mean_notes.append(f"{where}: mean {mean:.4f}.")
        pq, d4 = mu, (1 - sigma - b) ** 4  # the estimate takes two values, d = 1 − σ − b apart
        var_ok.append(_z_ok((sample_var - var) / math.sqrt(pq * (1 - 4 * pq) * d4 / n)))
        var_notes.append(f"{where}: variance {sample_var:.4g}.")
    props = []
    msg = " ".join(mean_notes)
    if all(mean_ok):
        msg = f"Over {N_ROLLOUTS} rollouts each, the mean matches ∇J = σ(1 − σ): {msg}"
    else:
        msg += (
            f" The mean must be ∇J = σ(1 − σ) for every constant b (two-sided z-test, "
            f"false-fail rate {FALSE_FAIL:g}): E[b ∂_θ log π] = 0, so the estimate is "
            "(R − b)(a − σ), the baseline subtracted from the reward (example 7.6)."
        )
    props.append(prop(*NAMES["mean"], sum(mean_ok) / len(mean_ok), msg))

    msg = " ".join(var_notes)
    if all(var_ok):
        msg = f"The variance follows b as in Ex. 10(a): {msg}"
    else:
        msg += (
            " The estimate is (1 − b)(1 − σ) with probability σ and bσ otherwise; its variance "
            "σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)] depends on b (Ex. 10(a)): subtract b "
            "from the reward R, and use the score ∂_θ log π(a) = a − σ."
        )
    props.append(prop(*NAMES["variance"], sum(var_ok) / len(var_ok), msg))

    recs = r.get("optimal") if isinstance(r.get("optimal"), list) else []
    recs = (recs + [None] * len(c["optimal"]))[: len(c["optimal"])]
    oks, notes = [], []
    for theta, rec in zip(c["optimal"], recs, strict=True):
        sigma = sigmoid(theta)
        mu = sigma * (1 - sigma)
        where = f"σ = {sigma:.3f}, b* = {1 - sigma:.3f}"
        if not isinstance(rec, dict) or rec.get("error"):
            oks.append(False)
            notes.append(f"{where}: {rec.get('error') if isinstance(rec, dict) else 'no result'}.")
            continue
        lo, hi = rec.get("min"), rec.get("max")
        if not (type(lo) is float and type(hi) is float):
            oks.append(False)
            notes.append(f"{where}: no usable estimates.")
            continue
        oks.append(abs(lo - mu) <= OPTIMAL_RTOL * mu and abs(hi - mu) <= OPTIMAL_RTOL * mu)
        if not oks[-1]:
            notes.append(f"{where}: the estimates range over [{lo:.4g}, {hi:.4g}].")
    msg = (
        "At b* = 1 − σ every estimate is σ(1 − σ): zero variance, one rollout suffices."
        if all(oks)
        else " ".join(notes) + " With b* = 1 − σ both outcomes give (1 − b*)(1 − σ) = b*σ = "
        "σ(1 − σ): the estimator is constant (Ex. 10(b))."
    )
    props.append(prop(*NAMES["optimal"], sum(oks) / len(oks), msg))

    runs = r.get("repeat") if isinstance(r.get("repeat"), list) else []
    if len(runs) != 2 or not all(isinstance(x, list) for x in runs):
        why = next((x for x in runs if isinstance(x, str)), "no result")
        props.append(prop(*NAMES["rng"], 0, f"Reproducibility run: {why}."))
    elif runs[0] == runs[1]:
        props.append(prop(*NAMES["rng"], 1, "Generators seeded alike give the same rollouts."))
    else:
        props.append(
            prop(
                *NAMES["rng"],
                0,
                "Two calls with generators seeded alike returned different estimates: draw the "
                "actions from rng (rng.random(n) < σ), not from np.random or random.",
            )
        )
    return props
