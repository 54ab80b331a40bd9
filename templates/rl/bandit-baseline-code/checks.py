"""Checks of the REINFORCE-with-baseline code part (001 §7.2, example 7.6, Exercise 10).

``probe`` runs in the probe process, beside the student's: it calls the student's
``reinforce_estimates`` with ``rng`` a generator of the probe's (:class:`Draws`), which
serves every draw from a generator seeded from the grading seed and logs it (the global
generators are seeded too, so that the same code always gets the same grade), and returns,
for each (θ, b), the count, sum and sum of squares of the estimates and their distinct
values with counts, and whether rng's draws decided the rollouts; the extreme estimates at
b* = 1 − σ and the distinct values at a baseline b* ± δ beside it.  ``grade`` runs in the
trusted process: it redraws (θ, b) from the seed and tests the mean against σ(1 − σ) and
the variance against Ex. 10(a), each with a z-test at the false-fail rate FALSE_FAIL.

Moments alone can be forged: estimates moved and scaled to the mean and variance of
Ex. 10(a) (a constant at b*) have them exactly.  So the estimates themselves are judged
too: a rollout's estimate (R − b)(a − σ) is (1 − b)(1 − σ) if it was rewarded and bσ if
not, nothing else, and a rescaled estimator's are not.  The variance property asks for
both, the values and the variance; every baseline of its runs differs from 0, where
ignoring b would be right.  The estimator is constant at b* because its two values meet
there: the optimal property asks for the constant at b* and for the two values at b* ± δ
(a constant that is not two values meeting is not the estimator's).

The randomness is the probe's (issue 36).  rng was a NumPy generator whose state went to
the student's process, and two calls with generators seeded alike had to agree: outputs
remembered across calls (by call count, by input, in a file) agreed without a draw, and so
did a generator made from rng's state (copied, hashed, jumped) that never advanced rng.
Now rng stays here: the student's code gets a stub whose draws come back to the probe, so
nothing can be read ahead, every call gets draws it cannot know before, and the check
reads each rollout's action off its own draw: the n estimates of a statistical run must
follow the n draws served, in order, the two outcomes split at σ (u < σ rewarded) or at
1 − σ (u ≥ 1 − σ).  A stratified stream (exactly round(σn) rewarded, the smallest draws)
splits elsewhere; draws made and thrown away leave the estimates unexplained; the mean
test tells a split on the wrong side (a = 1 with probability 1 − σ)."""

from __future__ import annotations

import math

import numpy as np

from autograder.checklib import (
    FALSE_FAIL,
    Draws,
    Property,
    Result,
    check,
    shown,
    two_sided_p,
    vector,
)

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

N_ROLLOUTS = 20_000  # per (θ, b): the mean to ±1 % of its spread's scale
# FALSE_FAIL (1e-4): per statistical test
N_OPTIMAL = 1_000  # rollouts at b* and at b* ± δ
MOST_DRAWS = 4  # draws a call may ask of rng, per rollout (the probe's memory, not a rule)
OPTIMAL_RTOL = 1e-6  # at b*, every estimate is σ(1 − σ) up to rounding (float32 is fine)
VALUE_RTOL = 1e-6  # each estimate is (1 − b)(1 − σ) or bσ up to rounding, relative to the larger
MAX_VALUES = 64  # distinct values a run reports (rounding may split each of the two)

# --- inputs: the same function in the sandbox (probe) and the trusted process (grade) ----


def _theta(sigma: float) -> float:
    return math.log(sigma / (1 - sigma))


def sigmoid(theta: float) -> float:
    return 1 / (1 + math.exp(-theta))


def outcomes(sigma: float, b: float) -> tuple[float, float]:
    """The estimate (R − b)(a − σ) of a rewarded rollout (a = 1) and of the other (a = 0)."""
    return (1 - b) * (1 - sigma), b * sigma


def cases(seed: int) -> dict:
    """(θ, b) of the statistical runs, θ of the runs at b* and the baselines b* ± δ beside
    them, and the seeds of the global generators (a student who draws from them instead
    of rng still gets the same grade twice)."""
    rng = np.random.default_rng([seed, 40])
    high = float(rng.uniform(0.75, 0.95))  # a well-trained policy, b = J(θ) = σ (Ex. 10(b))
    low = float(rng.uniform(0.1, 0.3))  # a poorly trained one, b = J(θ) too: not 0, where
    # ignoring b is right
    mid = float(rng.uniform(0.65, 0.9))
    while True:  # any other baseline, far from 0, from b* = 1 − σ and from 2(1 − σ)
        b = float(rng.uniform(-1.0, 2.0))
        if min(abs(b), abs(b - (1 - mid)), abs(b - 2 * (1 - mid))) >= 0.4:
            break
    stats = [
        {"theta": _theta(high), "b": high},
        {"theta": _theta(low), "b": low},
        {"theta": _theta(mid), "b": b},
    ]
    optimal = [_theta(float(rng.uniform(0.55, 0.95))), _theta(float(rng.uniform(0.05, 0.45)))]
    size = len(stats) + 2 * len(optimal)
    streams = [int(v) for v in rng.integers(2**62, size=size)]
    beside = [  # b* ± δ: the two values δ apart
        1 - sigmoid(theta) + float(rng.choice([-1.0, 1.0]) * rng.uniform(0.2, 0.5))
        for theta in optimal
    ]
    return {"stats": stats, "optimal": optimal, "beside": beside, "streams": streams}


# --- probe (sandbox) -------------------------------------------------------------------------


def _call(student, theta: float, b: float, n: int, draws: Draws) -> np.ndarray | str:
    """The student's n estimates as a float64 array, or why there are none."""
    rec = student.call(theta, b, n, draws)
    if not rec.ok:
        hint = " (rng offers random, uniform, binomial and choice, as NumPy's Generator)"
        return rec.error + (hint if rec.raised == "AttributeError" else "")
    if rec.shape != (n,):
        shape = list(rec.shape or ())
        return f"returned shape {shape} for n = {n}: return one estimate per rollout"
    g = rec.array()
    if not np.all(np.isfinite(g)):
        return "the estimates are not finite (nan or inf)"
    return g


def _undrawn(g: np.ndarray, served: np.ndarray, sigma: float) -> str | None:
    """Why the estimates are not decided by rng's draws, rollout i by draw i, one outcome
    below the threshold σ (or 1 − σ) and the other above; None when they are."""
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
    return {
        "values": [float(v) for v in values[order]],
        "counts": [int(k) for k in counts[order]],
        "distinct": int(values.size),
    }


def probe(student, seed: int, params: dict) -> dict:
    """Call reinforce_estimates on the seed's (θ, b), rng serving the draws; return sums,
    distinct values and extremes, and whether the draws decided the rollouts (plain
    data)."""
    c = cases(seed)
    streams = iter(c["streams"])
    calls = iter(range(len(c["streams"])))  # the generator of each call: its own stream

    def run(theta: float, b: float, n: int):
        student.seed(next(streams))
        draws = Draws([seed, 41, next(calls)], MOST_DRAWS * n, f"{MOST_DRAWS} draws per rollout")
        g = _call(student, theta, b, n, draws)
        return g, draws._drawn()

    stats = []
    for case in c["stats"]:
        g, served = run(case["theta"], case["b"], N_ROLLOUTS)
        if isinstance(g, str):
            stats.append({"error": g})
        else:
            sums = {"n": g.size, "sum": float(g.sum()), "sum_sq": float(g @ g)}
            rng = _undrawn(g, served, sigmoid(case["theta"]))
            stats.append({"error": None, **sums, **_values(g), "rng": rng})
    optimal = []
    for theta, b in zip(c["optimal"], c["beside"], strict=True):
        runs = []
        for baseline in (1 - sigmoid(theta), b):
            g, _ = run(theta, baseline, N_OPTIMAL)
            runs.append(
                {"error": g}
                if isinstance(g, str)
                else {"error": None, "min": float(g.min()), "max": float(g.max()), **_values(g)}
            )
        optimal.append({**runs[0], "beside": runs[1]})
    return {"stats": stats, "optimal": optimal}


# --- grade (trusted) ---------------------------------------------------------------------


def _show(rec: Result) -> str:
    """A run's most frequent distinct values, with counts."""
    values, counts = rec.get("values"), rec.get("counts")
    if not (isinstance(values, list) and isinstance(counts, list)):
        return "?"
    listed = ", ".join(f"{shown(v)} (×{k})" for v, k in zip(values[:4], counts[:4], strict=False))
    distinct = rec.get("distinct")
    return listed + (f" and {distinct - 4} more" if type(distinct) is int and distinct > 4 else "")


def _off_outcomes(rec: Result, sigma: float, b: float) -> str | None:
    """Why the run's estimates are not each (1 − b)(1 − σ) or bσ; None when they are."""
    values, distinct = vector(rec.get("values")), rec.get("distinct")
    if values is None or values.size == 0 or type(distinct) is not int or distinct != values.size:
        count = distinct if type(distinct) is int else "no readable"
        return f"the estimates take {count} distinct values"
    v1, v0 = outcomes(sigma, b)
    tol = VALUE_RTOL * max(abs(v1), abs(v0))
    if all(min(abs(v - v1), abs(v - v0)) <= tol for v in values):
        return None
    return (
        f"the estimates are {_show(rec)}, not (1 − b)(1 − σ) = {v1:.4g} (rewarded) and "
        f"bσ = {v0:.4g} (not rewarded)"
    )


def _runs(r: Result, c: dict) -> list[dict]:
    """Each statistical run's (ok, note) for the mean's z-test, for its values and the
    variance's z-test, and for its draws."""
    from costmodel.rl import reinforce_variance

    out = []
    for case, rec in zip(c["stats"], r.parts("stats", len(c["stats"])), strict=True):
        sigma, b, n = sigmoid(case["theta"]), case["b"], N_ROLLOUTS
        where = f"σ = {sigma:.3f}, b = {b:.3f}"
        unusable = (False, f"{where}: {rec.get('error') or 'no usable estimates'}.")
        undrawn = rec.get("rng")  # why the draws did not decide the rollouts, or None
        if rec.get("error") or "rng" not in rec.data:
            run = {"rng": unusable}
        else:
            note = "" if undrawn is None else f"{where}: {str(undrawn)[:200]}."
            run = {"rng": (undrawn is None, note)}
        sums = [rec.get(k) for k in ("sum", "sum_sq")]
        if rec.get("error") or rec.get("n") != n or not all(_finite(v) for v in sums):
            out.append({**run, "mean": unusable, "variance": unusable})
            continue
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
        out.append(run)
    return out


def _finite(v) -> bool:
    return type(v) is float and math.isfinite(v)


def _scored(runs: list[dict], key: str, good: str, advice: str) -> tuple[float, str]:
    """1 and ``good`` when every run passes; else the share that pass, their notes and
    ``advice``."""
    oks = [run[key][0] for run in runs]
    notes = " ".join(run[key][1] for run in runs if run[key][1])
    return (1.0, good) if all(oks) else (sum(oks) / len(oks), notes + advice)


@check("unbiased: mean σ(1 − σ) for any baseline", 2.0)
def unbiased(runs: list[dict]):
    notes = " ".join(run["mean"][1] for run in runs)
    return _scored(
        runs,
        "mean",
        f"Over {N_ROLLOUTS} rollouts each, the mean matches ∇J = σ(1 − σ): {notes}",
        f" The mean must be ∇J = σ(1 − σ) for every constant b (two-sided z-test, "
        f"false-fail rate {FALSE_FAIL:g}): E[b ∂_θ log π] = 0, so the estimate is "
        "(R − b)(a − σ), the baseline subtracted from the reward (example 7.6).",
    )


@check("variance σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)]", 2.0)
def variance(runs: list[dict]):
    notes = " ".join(run["variance"][1] for run in runs)
    return _scored(
        runs,
        "variance",
        "Every estimate is (1 − b)(1 − σ) or bσ, and the variance follows b as in "
        f"Ex. 10(a): {notes}",
        " The estimate is (1 − b)(1 − σ) with probability σ and bσ otherwise; its variance "
        "σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)] depends on b (Ex. 10(a)): subtract b "
        "from the reward R, and use the score ∂_θ log π(a) = a − σ.",
    )


@check("rollouts drawn from rng", 1.0)
def drawn(runs: list[dict]):
    return _scored(
        runs,
        "rng",
        f"Each of the {N_ROLLOUTS} rollouts of a run is decided by its draw of rng.",
        " Draw the actions from rng, one draw per rollout, in order "
        "(rng.random(n) < σ), not from np.random or random: rng is the autograder's "
        "generator, and each rollout must follow its draw.",
    )


def _optimal_miss(rec: Result, sigma: float, beside: float) -> str | None:
    """Why a run at b* is not the constant σ(1 − σ) at which the two values at b* ± δ
    meet; None when it is."""
    mu = sigma * (1 - sigma)
    if not rec.data or rec.get("error"):
        return f"{rec.get('error') or 'no result'}."
    lo, hi = rec.get("min"), rec.get("max")
    if not (type(lo) is float and type(hi) is float):
        return "no usable estimates."
    if not (abs(lo - mu) <= OPTIMAL_RTOL * mu and abs(hi - mu) <= OPTIMAL_RTOL * mu):
        return f"the estimates range over [{lo:.4g}, {hi:.4g}]."
    # constant at b* as the meeting point of the two values: apart at b* ± δ
    near = rec.part("beside")
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
        miss = _optimal_miss(rec, sigma, beside)
        if miss:
            notes.append(f"σ = {sigma:.3f}, b* = {1 - sigma:.3f}: {miss}")
    if not notes:
        return 1.0, "At b* = 1 − σ every estimate is σ(1 − σ): zero variance, one rollout suffices."
    return 1 - len(notes) / len(recs), " ".join(notes) + (
        " With b* = 1 − σ both outcomes give (1 − b*)(1 − σ) = b*σ = "
        "σ(1 − σ): the estimator is constant (Ex. 10(b))."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Test the estimates against (R − b)(a − σ) and their moments against Ex. 10(a),
    recomputed from the seed."""
    r, c = Result(result), cases(seed)
    runs = _runs(r, c)
    return [unbiased(runs), variance(runs), optimal(r, c), drawn(runs)]
