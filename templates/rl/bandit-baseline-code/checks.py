"""Checks of the REINFORCE-with-baseline code part (001 §7.2, example 7.6, Exercise 10).

Moments alone can be forged (estimates moved and scaled to those of Ex. 10(a)), so the
variance property also asks that each estimate be (1 − b)(1 − σ) or bσ, and the optimal one
that the constant at b* be the two values at b* ± δ meeting. rng is the probe's (issue 36):
each rollout must follow its own draw, split at σ or 1 − σ, a property of its own."""

import math

import numpy as np

from autograder.checklib import FALSE_FAIL, Draws, Result, check, share, shown, two_sided_p, vector

N_ROLLOUTS = 20_000  # per (θ, b): the mean to ±1 % of its spread's scale
N_OPTIMAL = 1_000  # rollouts at b* and at b* ± δ
MOST_DRAWS = 4  # draws a call may ask of rng, per rollout (the probe's memory, not a rule)
OPTIMAL_RTOL = 1e-6  # at b*, every estimate is σ(1 − σ) up to rounding (float32 is fine)
VALUE_RTOL = 1e-6  # each estimate is (1 − b)(1 − σ) or bσ up to rounding, relative to the larger
MAX_VALUES = 64  # distinct values a run reports (rounding may split each of the two)


def _theta(sigma: float) -> float:
    return math.log(sigma / (1 - sigma))


def sigmoid(theta: float) -> float:
    return 1 / (1 + math.exp(-theta))


def cases(seed: int) -> dict:
    """(θ, b) of the statistical runs, θ of the runs at b* and the baselines b* ± δ beside
    them, and the seeds of the global generators (a student who draws from them instead
    of rng still gets the same grade twice)."""
    rng = np.random.default_rng([seed, 40])
    high = float(rng.uniform(0.75, 0.95))  # a well-trained policy, b = J(θ) = σ (Ex. 10(b))
    low = float(rng.uniform(0.1, 0.3))  # a poorly trained one, b = J(θ): not 0 (b ignored)
    mid = float(rng.uniform(0.65, 0.9))
    while True:  # any other baseline, far from 0, from b* = 1 − σ and from 2(1 − σ)
        b = float(rng.uniform(-1.0, 2.0))
        if min(abs(b), abs(b - (1 - mid)), abs(b - 2 * (1 - mid))) >= 0.4:
            break
    stats = [{"theta": _theta(s), "b": base} for s, base in ((high, high), (low, low), (mid, b))]
    optimal = [_theta(float(rng.uniform(0.55, 0.95))), _theta(float(rng.uniform(0.05, 0.45)))]
    streams = [int(v) for v in rng.integers(2**62, size=len(stats) + 2 * len(optimal))]
    beside = [  # b* ± δ: the two values δ apart
        1 - sigmoid(theta) + float(rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 0.5))
        for theta in optimal
    ]
    return {"stats": stats, "optimal": optimal, "beside": beside, "streams": streams}


def _estimates(rec, n: int) -> np.ndarray | str:
    """The n estimates of a call as a float64 array, or why there are none."""
    if not rec.ok:
        hint = " (rng offers random, uniform, binomial and choice, as NumPy's Generator)"
        return rec.error + (hint if rec.raised == "AttributeError" else "")
    if rec.shape != (n,):
        shape = list(rec.shape or ())
        return f"returned shape {shape} for n = {n}: return one estimate per rollout"
    g = rec.array()
    return g if np.all(np.isfinite(g)) else "the estimates are not finite (nan or inf)"


def _undrawn(g: np.ndarray, served: np.ndarray, sigma: float) -> str | None:
    """Why rollout i is not decided by draw i, one outcome below σ (or 1 − σ) and the other
    above; None when it is."""
    if served.size != g.size:
        return f"{served.size} draws of rng for {g.size} rollouts"
    tol = VALUE_RTOL * float(np.abs(g).max())
    for tau in (sigma, 1 - sigma):  # u < σ rewarded, or u ≥ 1 − σ; the mean tells which
        below = served < tau
        if all(np.ptp(g[side]) <= tol for side in (below, ~below) if side.any()):
            return None
    return "the estimates do not follow rng's draws (rollout i: a = 1 where draw i < σ)"


def _values(g: np.ndarray) -> dict:
    """The distinct estimates, the most frequent first (MAX_VALUES of them), with counts."""
    values, counts = np.unique(g, return_counts=True)
    order = np.argsort(-counts, kind="stable")[:MAX_VALUES]
    kept = {"values": [float(v) for v in values[order]], "counts": [int(k) for k in counts[order]]}
    return {**kept, "distinct": int(values.size)}


def probe(student, seed: int, params: dict) -> dict:
    """Call reinforce_estimates on the seed's (θ, b), rng serving the draws: the sums,
    distinct values and extremes of the estimates, and whether the draws decided them."""
    c = cases(seed)
    streams, calls = iter(c["streams"]), iter(range(len(c["streams"])))

    def run(theta: float, b: float, n: int) -> tuple[np.ndarray | str, np.ndarray]:
        student.seed(next(streams))
        draws = Draws([seed, 41, next(calls)], MOST_DRAWS * n, f"{MOST_DRAWS} draws per rollout")
        return _estimates(student.call(theta, b, n, draws), n), draws._drawn()

    stats, optimal = [], []
    for case in c["stats"]:
        g, served = run(case["theta"], case["b"], N_ROLLOUTS)
        if isinstance(g, str):
            stats.append({"error": g})
            continue
        rng = _undrawn(g, served, sigmoid(case["theta"]))
        sums = {"n": g.size, "sum": float(g.sum()), "sum_sq": float(g @ g), "rng": rng}
        stats.append({"error": None, **sums, **_values(g)})
    for theta, b in zip(c["optimal"], c["beside"], strict=True):
        ends = [run(theta, baseline, N_OPTIMAL)[0] for baseline in (1 - sigmoid(theta), b)]
        ends = [
            {"error": g}
            if isinstance(g, str)
            else {"error": None, "min": float(g.min()), "max": float(g.max()), **_values(g)}
            for g in ends
        ]
        optimal.append({**ends[0], "beside": ends[1]})
    return {"stats": stats, "optimal": optimal}


def _off_outcomes(rec: Result, sigma: float, b: float) -> str | None:
    """Why the run's estimates are not each (1 − b)(1 − σ) or bσ; None when they are."""
    values, distinct = vector(rec.get("values")), rec.get("distinct")
    if values is None or values.size == 0 or type(distinct) is not int or distinct != values.size:
        count = distinct if type(distinct) is int else "no readable"
        return f"the estimates take {count} distinct values"
    v1, v0 = (1 - b) * (1 - sigma), b * sigma  # (R − b)(a − σ) rewarded (a = 1), or not
    if all(min(abs(v - v1), abs(v - v0)) <= VALUE_RTOL * max(abs(v1), abs(v0)) for v in values):
        return None
    counts = rec.get("counts")  # the run's most frequent values, with their counts
    seen = "?"
    if isinstance(rec.get("values"), list) and isinstance(counts, list):
        pairs = zip(rec.get("values")[:4], counts[:4], strict=False)
        seen = ", ".join(f"{shown(v)} (×{k})" for v, k in pairs) + (
            f" and {distinct - 4} more" if distinct > 4 else ""
        )
    return (
        f"the estimates are {seen}, not (1 − b)(1 − σ) = {v1:.4g} (rewarded) and "
        f"bσ = {v0:.4g} (not rewarded)"
    )


def _run(case: dict, rec: Result) -> dict:
    """A statistical run's (ok, note) for its draws, its mean, and its values and variance."""
    from costmodel.rl import reinforce_variance

    sigma, b, n = sigmoid(case["theta"]), case["b"], N_ROLLOUTS
    where = f"σ = {sigma:.3f}, b = {b:.3f}"
    unusable = (False, f"{where}: {rec.get('error') or 'no usable estimates'}.")
    undrawn = rec.get("rng")  # why the draws did not decide the rollouts, or None
    note = "" if undrawn is None else f"{where}: {str(undrawn)[:200]}."
    run = {"rng": unusable if rec.get("error") or "rng" not in rec.data else (not note, note)}
    sums = [rec.get(k) for k in ("sum", "sum_sq")]
    finite = all(type(v) is float and math.isfinite(v) for v in sums)
    if rec.get("error") or rec.get("n") != n or not finite:
        return {**run, "mean": unusable, "variance": unusable}
    mu, var = sigma * (1 - sigma), reinforce_variance(sigma=sigma, b=b)  # σ(1 − σ)(1 − σ − b)²
    mean = sums[0] / n
    sample_var = max(sums[1] / n - mean**2, 0.0)
    z_mean = (mean - mu) / math.sqrt(var / n)
    run["mean"] = (two_sided_p(z_mean) >= FALSE_FAIL, f"{where}: mean {mean:.4f}.")
    d4 = (1 - sigma - b) ** 4  # the estimate takes two values, d = 1 − σ − b apart
    off = _off_outcomes(rec, sigma, b)  # moments can be matched; the values cannot
    z_var = (sample_var - var) / math.sqrt(mu * (1 - 4 * mu) * d4 / n)
    run["variance"] = (
        off is None and two_sided_p(z_var) >= FALSE_FAIL,
        f"{where}: variance {sample_var:.4g}" + (f"; {off}." if off else "."),
    )
    return run


def _over_runs(key: str, name: str, weight: float, good: str, advice: str):
    """A property of the statistical runs' (ok, note) under ``key``: ``good`` and the notes
    when all pass; else the share that pass, the notes and ``advice``."""

    @check(name, weight)
    def graded(runs: list[dict]):
        notes = " ".join(run[key][1] for run in runs if run[key][1])
        oks = [run[key][0] for run in runs]
        return (1.0, good + notes) if all(oks) else (share(oks), notes + advice)

    return graded


unbiased = _over_runs(
    "mean",
    "unbiased: mean σ(1 − σ) for any baseline",
    2.0,
    f"Over {N_ROLLOUTS} rollouts each, the mean matches ∇J = σ(1 − σ): ",
    f" The mean must be ∇J = σ(1 − σ) for every constant b (two-sided z-test, false-fail rate "
    f"{FALSE_FAIL:g}): E[b ∂_θ log π] = 0, so the estimate is (R − b)(a − σ), the baseline "
    "subtracted from the reward (example 7.6).",
)
variance = _over_runs(
    "variance",
    "variance σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)]",
    2.0,
    "Every estimate is (1 − b)(1 − σ) or bσ, and the variance follows b as in Ex. 10(a): ",
    " The estimate is (1 − b)(1 − σ) with probability σ and bσ otherwise; its variance "
    "σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)] depends on b (Ex. 10(a)): subtract b from the "
    "reward R, and use the score ∂_θ log π(a) = a − σ.",
)
drawn = _over_runs(
    "rng",
    "rollouts drawn from rng",
    1.0,
    f"Each of the {N_ROLLOUTS} rollouts of a run is decided by its draw of rng.",
    " Draw the actions from rng, one draw per rollout, in order (rng.random(n) < σ), not from "
    "np.random or random: rng is the autograder's generator, and each rollout must follow its "
    "draw.",
)


def _optimal_miss(rec: Result, sigma: float, beside: float) -> str | None:
    """Why a run at b* is not the constant σ(1 − σ) at which the two values at b* ± δ
    meet; None when it is."""
    mu, lo, hi = sigma * (1 - sigma), rec.get("min"), rec.get("max")
    if not rec.data or rec.get("error"):
        return f"{rec.get('error') or 'no result'}."
    if not (type(lo) is float and type(hi) is float):
        return "no usable estimates."
    if not (abs(lo - mu) <= OPTIMAL_RTOL * mu and abs(hi - mu) <= OPTIMAL_RTOL * mu):
        return f"the estimates range over [{lo:.4g}, {hi:.4g}]."
    near = rec.part("beside")  # constant at b* as the meeting point of the two values
    if not near.data or near.get("error"):
        off = ": " + str(near.get("error") or "no result")
    else:
        off = _off_outcomes(near, sigma, beside)
        off = off and " " + off
    return off and (
        f"every estimate is σ(1 − σ), but at b = {beside:.3f}{off}: the "
        "estimator is not (R − b)(a − σ), whose two values meet at b*."
    )


@check("b* = 1 − σ: every estimate equals σ(1 − σ)", 1.0)
def optimal(r: Result, c: dict):
    recs, notes = r.parts("optimal", len(c["optimal"])), []
    for theta, beside, rec in zip(c["optimal"], c["beside"], recs, strict=True):
        sigma = sigmoid(theta)
        if miss := _optimal_miss(rec, sigma, beside):
            notes.append(f"σ = {sigma:.3f}, b* = {1 - sigma:.3f}: {miss}")
    if not notes:
        return 1.0, "At b* = 1 − σ every estimate is σ(1 − σ): zero variance, one rollout suffices."
    return 1 - len(notes) / len(recs), " ".join(notes) + (
        " With b* = 1 − σ both outcomes give (1 − b*)(1 − σ) = b*σ = "
        "σ(1 − σ): the estimator is constant (Ex. 10(b))."
    )


def grade(result: dict, seed: int, params: dict) -> list:
    r, c = Result(result), cases(seed)
    recs = r.parts("stats", len(c["stats"]))
    runs = [_run(case, rec) for case, rec in zip(c["stats"], recs, strict=True)]
    return [unbiased(runs), variance(runs), optimal(r, c), drawn(runs)]
