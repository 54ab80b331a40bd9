"""Checks of the DDPM sampler code part (001 §7.3, def. 7.10 and 7.13, Exercise 9).

``probe`` runs in the probe process, beside the student's. It calls the student's
``optimal_eps`` (defined in the same cell as ``ddpm_sample``, found in the notebook's
namespace) on arrays drawn from the seed; runs ``ddpm_sample`` for a few steps with a test
predictor ε̂(x, t) = tanh(w_t x + c_t) that records every x_t it is called with, so that
each reverse step can be checked without knowing the student's noise draws; and runs
``ddpm_sample`` with ε* on the notes' schedule for two data scales s drawn from the seed
(one below 1, one above: the std to expect is no constant of the notes), returning the
sums needed for the samples' variance and, step by step, those of the residual
x_{t−1} − k_t x_t of the chain that ε* saw (k_t: the reverse step's gain with ε*).

``grade`` runs in the trusted process.  For each recorded step it computes the residual
r = x_{t−1} − (x_t − β_t/√(1 − ᾱ_t) ε̂)/√α_t and regresses it on (1, x_t, ε̂): a correct
step leaves pure noise N(0, β_t) (no noise at t = 1), a wrong mean leaves a component
that the regression finds (Wald test), and the regression's residual variance tests the
noise whatever the mean.  The std runs' samples must have the std that the exact variance
recursion gives for the drawn s (χ² test), and be the end of the chain ε* saw: at every
step x_{t−1} is k_t x_t plus something independent of x_t, and at t = 1 exactly k_1 x_1, so
samples rescaled on the way out (or at any one step) are not the sampler's.  Every
statistical test has a false-fail rate of FALSE_FAIL.
"""

from __future__ import annotations

import math
import operator
import sys

import numpy as np

from autograder.checklib import (
    FALSE_FAIL,
    Property,
    Record,
    Result,
    check,
    chi2_sf,
    close,
    plain,
    two_sided_p,
    vector,
)

ISOLATED = True  # probe() runs in the probe process; the student's code, in theirs

# FALSE_FAIL (1e-4): per statistical test
EPS_RTOL, EPS_ATOL = 1e-5, 1e-8  # optimal_eps: loose enough for a float32 computation
TRAJ_STEPS, TRAJ_POINTS = 5, 400  # the recorded run: T steps of n points in 2-D
STD_POINTS = 20_000  # points of each run with ε* (40 000 values: the std to ±0.4 %)
# the data stds s of the two runs with ε*, drawn from the seed, one below 1 and one above as
# in Ex. 9(b) (s = 0.5 and 2, whose stds 0.51 and 1.98 the notes print): far from those, and
# where σ_t² = β̃_t moves the std by 2.5 % or more (the χ² test resolves 1.4 %)
STD_RANGES = ((0.6, 0.9), (1.25, 1.75))
NOTES_BETAS = np.linspace(0.001, 0.2, 100)  # Ex. 9(b): 100 steps, β_t linear
NOTES_ALPHA_BARS = np.cumprod(1 - NOTES_BETAS)
NOISELESS = 1e-4  # a step whose residual spread is below this adds no noise
EXACT = 1e-5  # relative tolerance of a noiseless step's mean (float32 is fine)

# --- inputs: the same functions in the sandbox (probe) and the trusted process (grade) ----


def cases(seed: int) -> dict:
    """The ε* inputs, the recorded run's schedule and its test predictor, for one seed."""
    rng = np.random.default_rng([seed, 30])
    eps = []
    for low, high in ((0.01, 0.05), (0.2, 0.8), (0.95, 0.995)):  # ᾱ_t: late, middle, early
        eps.append(
            {
                "x_t": rng.normal(0.0, 2.0, (6, 2)),
                "alpha_bar": float(rng.uniform(low, high)),
                "s": float(rng.uniform(0.3, 3.0)),
            }
        )
    return {
        "eps": eps,
        "betas": np.sort(rng.uniform(0.08, 0.3, TRAJ_STEPS)),  # large steps: ᾱ_t far from α_t
        "weights": rng.uniform(0.6, 1.4, TRAJ_STEPS),
        "shifts": rng.uniform(-0.5, 0.5, TRAJ_STEPS),
        "streams": [int(v) for v in rng.integers(2**62, size=1 + len(STD_RANGES))],
        "data_stds": [float(rng.uniform(low, high)) for low, high in STD_RANGES],
    }


def test_eps(x: np.ndarray, t: int, c: dict) -> np.ndarray:
    """The recorded run's predictor ε̂(x, t) = tanh(w_t x + c_t): not linear in x, so a
    wrong mean cannot hide in the regression on (1, x_t, ε̂)."""
    i = min(max(t, 1), TRAJ_STEPS) - 1
    return np.tanh(c["weights"][i] * x + c["shifts"][i])


def eps_star(x: np.ndarray, t: int, s: float) -> np.ndarray:
    """ε*(x_t, t) for data N(0, s² I) on the notes' schedule (Ex. 9(a))."""
    alpha_bar = float(NOTES_ALPHA_BARS[min(max(t, 1), len(NOTES_BETAS)) - 1])
    return math.sqrt(1 - alpha_bar) * x / (alpha_bar * s**2 + 1 - alpha_bar)


def gain(t: int, s: float) -> float:
    """k_t: with ε* on the notes' schedule, the reverse mean of step t is k_t x_t."""
    beta, alpha_bar = float(NOTES_BETAS[t - 1]), float(NOTES_ALPHA_BARS[t - 1])
    return (1 - beta / (alpha_bar * s**2 + 1 - alpha_bar)) / math.sqrt(1 - beta)


# --- probe (sandbox) -------------------------------------------------------------------------


def _array(x) -> np.ndarray:
    """What the student passed or returned as a float64 array (a CPU tensor is fine)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def _step(t) -> int | None:
    """The step t as an int, or None when it is not a whole number."""
    try:
        return operator.index(t)
    except TypeError:
        try:
            return int(t) if float(t).is_integer() else None
        except (TypeError, ValueError):
            return None


class _Recorder:
    """The ε̂ handed to the student's sampler: records (t, x_t), returns ``predict(x_t, t)``."""

    def __init__(self, predict, max_calls: int, keep_x: bool = True):
        self.predict, self.max_calls, self.keep_x, self.calls = predict, max_calls, keep_x, []

    def __call__(self, x_t, t):
        if len(self.calls) >= self.max_calls:
            raise RuntimeError(
                f"eps_fn called more than {self.max_calls} times: call it once per step, "
                "on the whole (n, 2) batch"
            )
        x = _array(x_t)
        step = _step(t)
        self.calls.append(
            (step if step is not None else repr(t)[:20], x.copy() if self.keep_x else None)
        )
        eps = self.predict(x, step if step is not None else 1)
        if hasattr(x_t, "detach"):  # a torch sampler gets a tensor back
            return sys.modules["torch"].as_tensor(eps, dtype=x_t.dtype, device=x_t.device)
        return eps


class _Chain:
    """The ε* handed to the sampler in a std run: returns ε*(x_t, t) and keeps, for each
    step, the sums of the residual r = x_{t−1} − k_t x_t (x_{t−1} the next call's x, or the
    samples after the last), the step being the chain's k-th from t = T; only the last x_t
    is held."""

    def __init__(self, s: float):
        self.s, self.calls, self.steps, self.last = s, 0, [], None

    def __call__(self, x_t, t):
        if self.calls >= 2 * len(NOTES_BETAS):
            raise RuntimeError(
                f"eps_fn called more than {2 * len(NOTES_BETAS)} times: call it once per "
                "step, on the whole (n, 2) batch"
            )
        self.calls += 1
        x, step = _array(x_t), _step(t)
        passed = step if step is not None else repr(t)[:20]
        repeated = self.last is not None and self.last[0] == passed
        if not (repeated and np.array_equal(self.last[1], x)):  # the same x_t is one step
            self._end_step(x)
            self.last = (passed, x.copy())
        eps = eps_star(x, step if step is not None else 1, self.s)
        if hasattr(x_t, "detach"):  # a torch sampler gets a tensor back
            return sys.modules["torch"].as_tensor(eps, dtype=x_t.dtype, device=x_t.device)
        return eps

    def _end_step(self, x_next: np.ndarray) -> None:
        """End the step of the last x_t, whose successor is ``x_next``."""
        if self.last is None:
            return
        passed, x = self.last
        t = len(NOTES_BETAS) - len(self.steps)
        if t < 1 or x.shape != x_next.shape or x.size == 0:
            self.steps.append({"t": passed, "shape": [list(x.shape), list(x_next.shape)]})
            return
        with np.errstate(all="ignore"):
            r = (x_next - gain(t, self.s) * x).reshape(-1)
            flat = x.reshape(-1)
            sums = [flat @ flat, flat @ r, r @ r, np.abs(r).max(), np.abs(x_next).max()]
        keys = ("sxx", "sxr", "srr", "rmax", "xmax")
        self.steps.append({"t": passed, **dict(zip(keys, plain(sums), strict=True))})

    def finish(self, x0: np.ndarray) -> list[dict]:
        self._end_step(x0)
        self.last = None
        return self.steps


def _probe_eps(student, c: dict) -> dict:
    fn = student.sibling("optimal_eps")
    out = []
    for case in c["eps"]:
        rec = fn.call(case["x_t"].copy(), case["alpha_bar"], case["s"], keep=64)
        if rec.raised == "NameError":
            return {"error": "no function optimal_eps is defined next to ddpm_sample"}
        out.append(rec)
    return {"error": None, "cases": out}


def _sample(student, eps_fn, betas: np.ndarray, n: int, stream: int) -> Record:
    """``ddpm_sample`` with the global generators and ``rng`` seeded from ``stream``."""
    student.seed(stream)
    return student.call(eps_fn, betas.copy(), n, np.random.default_rng(stream))


def _probe_trajectory(student, c: dict) -> dict:
    recorder = _Recorder(lambda x, t: test_eps(x, t, c), 4 * TRAJ_STEPS)
    rec = _sample(student, recorder, c["betas"], TRAJ_POINTS, c["streams"][0])
    if not rec.ok:
        return {"error": rec.error}
    calls, x0 = [], rec.array()
    for step, x in recorder.calls:  # a repeated call on the same x_t is one step
        if calls and calls[-1][0] == step and np.array_equal(calls[-1][1], x):
            continue
        calls.append((step, x))
    return {
        "error": None,
        "calls": [{"t": s, "shape": list(x.shape), "x": plain(x.reshape(-1))} for s, x in calls],
        "shape": list(rec.shape or ()),
        "output": [] if x0 is None else plain(x0.reshape(-1)[: 2 * TRAJ_POINTS]),
    }


def _probe_std(student, c: dict) -> list[dict]:
    out = []
    for s, stream in zip(c["data_stds"], c["streams"][1:], strict=True):
        chain = _Chain(s)
        rec = _sample(student, chain, NOTES_BETAS, STD_POINTS, stream)
        if not rec.ok:
            out.append({"error": rec.error})
            continue
        x0 = rec.array()
        finite = x0 is not None and bool(np.all(np.isfinite(x0)))
        out.append(
            {
                "error": None,
                "shape": list(rec.shape or ()),
                "finite": finite,
                "sum": float(x0.sum()) if finite else 0.0,
                "sum_sq": float((x0**2).sum()) if finite else 0.0,
                "chain": chain.finish(x0) if finite else [],
            }
        )
    return out


def probe(student, seed: int, params: dict) -> dict:
    """Call optimal_eps and ddpm_sample on the seed's inputs; return plain data."""
    c = cases(seed)
    return {
        "eps": _probe_eps(student, c),
        "trajectory": _probe_trajectory(student, c),
        "std": _probe_std(student, c),
    }


# --- grade (trusted) ---------------------------------------------------------------------


@check("ε* = √(1 − ᾱ_t) x_t / (ᾱ_t s² + 1 − ᾱ_t)", 1.0)
def optimal(r: Result, c: dict):
    probed = r.part("eps")
    if probed.get("error") or not isinstance(probed.get("cases"), list):
        return 0, f"optimal_eps: {probed.get('error') or 'no result'}."
    notes = []
    for case, rec in zip(c["eps"], probed.records("cases", len(c["eps"])), strict=True):
        x, ab, s = case["x_t"], case["alpha_bar"], case["s"]
        where = f"ᾱ_t = {ab:.3f}, s = {s:.2f}"
        expected = np.sqrt(1 - ab) * x / (ab * s**2 + 1 - ab)
        if not rec.ok:
            notes.append(f"{where}: {rec.error}.")
        elif rec.shape != x.shape or rec.array() is None:
            shape = list(rec.shape or ())
            notes.append(f"{where}: returned shape {shape} for x_t of shape {x.shape}.")
        elif not close(rec.array(), expected, EPS_RTOL, EPS_ATOL):
            notes.append(f"{where}: wrong value.")
    if not notes:
        return 1, "optimal_eps matches E[ε | x_t] at early, middle and late t."
    return 1 - len(notes) / len(c["eps"]), " ".join(notes) + (
        " For x_0 ~ N(0, s²), x_t = √ᾱ_t x_0 + √(1 − ᾱ_t) ε is Gaussian with "
        "Cov(ε, x_t) = √(1 − ᾱ_t) and Var x_t = ᾱ_t s² + 1 − ᾱ_t; ε* = E[ε | x_t] is their "
        "ratio times x_t (Ex. 9(a))."
    )


def _steps(rec: Result) -> list[tuple] | str:
    """(t passed, x_t, x_{t−1}) of the recorded run, T down to 1; or why they cannot be read."""
    if not rec.data:
        return "no result"
    if rec.get("error"):
        return f"ddpm_sample raised {rec.get('error')}"
    calls = rec.parts("calls")
    if len(calls) != TRAJ_STEPS:
        return (
            f"with T = {TRAJ_STEPS} steps, eps_fn was called {len(calls)} times: call it once per "
            "step, t = T, …, 1, on the whole (n, 2) batch"
        )
    shape = [TRAJ_POINTS, 2]
    xs = []
    for call in calls:
        x = vector(call.get("x"), TRAJ_POINTS * 2)
        if x is None or call.get("shape") != shape:
            return f"eps_fn must receive x_t as an array of shape (n, 2) = ({TRAJ_POINTS}, 2)"
        xs.append(x.reshape(TRAJ_POINTS, 2))
    out = vector(rec.get("output"), TRAJ_POINTS * 2)
    if out is None or rec.get("shape") != shape:
        return f"ddpm_sample must return an array of shape (n, 2), not {rec.get('shape')}"
    xs.append(out.reshape(TRAJ_POINTS, 2))
    if not all(np.all(np.isfinite(x)) for x in xs):
        return "the trajectory is not finite (nan or inf)"
    return [(calls[k].get("t"), xs[k], xs[k + 1]) for k in range(TRAJ_STEPS)]


def _residual_fit(x_t: np.ndarray, eps: np.ndarray, resid: np.ndarray) -> dict:
    """Regress the residual on (1, x_t, ε̂): Wald statistic of the fit, spread left over."""
    design = np.column_stack([np.ones(x_t.size), x_t.reshape(-1), eps.reshape(-1)])
    r = resid.reshape(-1)
    coef, *_ = np.linalg.lstsq(design, r, rcond=None)
    fitted = design @ coef
    rss = float(np.sum((r - fitted) ** 2))
    dof = r.size - design.shape[1]
    spread = math.sqrt(rss / dof)
    wald = float(np.sum(fitted**2)) / (rss / dof) if spread >= NOISELESS else math.inf
    return {"rss": rss, "dof": dof, "spread": spread, "wald": wald, "max": float(np.abs(r).max())}


# a two-sided chi-square test (a spread too small fails, as too large)
def _two_sided(stat: float, dof: int) -> float:
    """P-value of a two-sided test of a χ²_dof statistic."""
    upper = chi2_sf(stat, dof)
    return 2 * min(upper, 1 - upper)


def _trajectory(r: Result, c: dict) -> dict | str:
    """The recorded run's steps, each regressed on (1, x_t, ε̂); or why there are none."""
    steps = _steps(r.part("trajectory"))
    if isinstance(steps, str):
        return f"Recorded run: {steps}."
    betas = c["betas"]
    alpha_bars = np.cumprod(1 - betas)
    fits, exact_misses = {}, []
    for _, x_t, x_prev in steps:
        t = TRAJ_STEPS - len(fits)
        beta, alpha_bar = betas[t - 1], alpha_bars[t - 1]
        eps = test_eps(x_t, t, c)
        mean = (x_t - beta / math.sqrt(1 - alpha_bar) * eps) / math.sqrt(1 - beta)
        fits[t] = _residual_fit(x_t, eps, x_prev - mean)
        if fits[t]["spread"] < NOISELESS and fits[t]["max"] > EXACT * (1 + np.abs(x_prev).max()):
            exact_misses.append(t)
    return {"steps": steps, "fits": fits, "misses": exact_misses, "betas": betas}


@check("reverse-step mean (x_t − β_t ε̂/√(1 − ᾱ_t))/√α_t", 2.0)
def reverse_mean(run: dict | str):
    if isinstance(run, str):
        return 0, run
    fits, exact_misses = run["fits"], run["misses"]
    passed_ts = [s for s, _, _ in run["steps"]]
    noisy = [f for f in fits.values() if f["spread"] >= NOISELESS]
    wald = sum(f["wald"] for f in noisy)
    dof = 3 * len(noisy)
    pval = chi2_sf(wald, dof) if dof else 1.0
    # σ_t is estimated, not known: test at half the rate to keep the false-fail rate
    if passed_ts == list(range(TRAJ_STEPS, 0, -1)) and not exact_misses and pval >= FALSE_FAIL / 2:
        return True, (
            f"Over {TRAJ_STEPS} recorded steps, x_{{t−1}} minus the reverse mean leaves no trace "
            f"of x_t or ε̂ (Wald χ² = {wald:.1f} on {dof} degrees of freedom)."
        )
    if passed_ts != list(range(TRAJ_STEPS, 0, -1)):
        return False, (
            f"eps_fn was called at t = {', '.join(map(str, passed_ts))}: the steps run "
            f"t = T, …, 1 (here {TRAJ_STEPS} to 1), and betas[t − 1] is β_t."
        )
    worst = (t for t, f in fits.items() if f in noisy and chi2_sf(f["wald"], 3) < FALSE_FAIL)
    bad = sorted({*exact_misses, *worst}, reverse=True)
    return False, (
        f"x_{{t−1}} is not the reverse mean plus independent noise (Wald χ² = "
        f"{wald:.1f} on {dof} degrees of freedom, p-value {pval:.2g}"
        + (f"; worst at t = {', '.join(map(str, bad))}" if bad else "")
        + "): the mean is (x_t − β_t/√(1 − ᾱ_t) ε̂)/√α_t with ᾱ_t = α_1⋯α_t, the product "
        "of all α_s up to t, not α_t (def. 7.13)."
    )


@check("x_T ~ N(0, I) and step noise of variance σ_t² = β_t", 1.0)
def step_noise(run: dict | str):
    """x_T ~ N(0, I) and noise of variance β_t at t ≥ 2."""
    if isinstance(run, str):
        return 0, run
    fits, betas, x_T = run["fits"], run["betas"], run["steps"][0][1]
    start_p = min(
        _two_sided(float(np.sum(x_T**2)), x_T.size),
        two_sided_p(float(x_T.sum()) / math.sqrt(x_T.size)),
    )
    silent = [t for t in range(2, TRAJ_STEPS + 1) if fits[t]["spread"] < NOISELESS]
    stat = sum(fits[t]["rss"] / betas[t - 1] for t in range(2, TRAJ_STEPS + 1))
    dof = sum(fits[t]["dof"] for t in range(2, TRAJ_STEPS + 1))
    noise_p = _two_sided(stat, dof)
    spreads = ", ".join(
        f"t = {t}: {fits[t]['spread'] ** 2 / betas[t - 1]:.2f}" for t in range(TRAJ_STEPS, 1, -1)
    )
    parts = []
    if start_p < FALSE_FAIL:
        parts.append(
            f"x_T is not N(0, I) (p-value {start_p:.2g}): draw it with rng.standard_normal((n, 2))."
        )
    if silent:
        parts.append(f"No noise is added at t = {', '.join(map(str, silent))}.")
    elif noise_p < FALSE_FAIL:
        parts.append(
            f"The noise variance over β_t is {spreads} (χ² p-value {noise_p:.2g} < "
            f"{FALSE_FAIL:g}): add σ_t z with σ_t = √β_t, z ~ N(0, I) (def. 7.13, Ex. 9(b))."
        )
    if parts:
        return False, " ".join(parts)
    return True, f"x_T ~ N(0, I), and the noise of steps T, …, 2 has variance β_t ({spreads})."


@check("no noise at the last step (t = 1)", 0.5)
def last_step(run: dict | str):
    """The last step returns the mean."""
    if isinstance(run, str):
        return 0, run
    if run["fits"][1]["spread"] < NOISELESS:
        return 1, "The last step returns its mean, x_0 = μ_1(x_1)."
    return 0, (
        f"At t = 1 your step adds noise of variance {run['fits'][1]['spread'] ** 2:.3g}: the last "
        "step returns the mean, z = 0 at t = 1 (def. 7.13)."
    )


def _chain_break(steps: list[Result]) -> str | None:
    """Why the std run's samples are not the end of the chain ε* saw, or None when every
    step is x_{t−1} = k_t x_t plus something independent of x_t, exactly k_1 x_1 at t = 1."""
    n_steps = len(NOTES_BETAS)
    if len(steps) != n_steps or not all(st.data for st in steps):
        return (
            f"with T = {n_steps} steps eps_fn saw {len(steps)} distinct x_t: call it once per "
            "step, t = T, …, 1, on the whole (n, 2) batch"
        )
    passed = [st.get("t") for st in steps]
    if passed != list(range(n_steps, 0, -1)):
        return "eps_fn was not called at t = T, …, 1 in turn (betas[t − 1] is β_t)"
    size = 2 * STD_POINTS
    wald, dof, misses = 0.0, 0, []
    for st in steps:
        sums = [st.get(k) for k in ("sxx", "sxr", "srr", "rmax", "xmax")]
        if not all(type(v) is float and math.isfinite(v) for v in sums) or sums[0] <= 0:
            return f"at t = {st.get('t')} the chain is not a finite ({STD_POINTS}, 2) array"
        sxx, sxr, srr, rmax, xmax = sums
        rss = max(srr - sxr**2 / sxx, 0.0)
        if math.sqrt(rss / (size - 1)) < NOISELESS:  # no noise: the step is its mean
            if rmax > EXACT * (1 + xmax):
                misses.append(st.get("t"))
        else:  # noise: independent of x_t, so the residual has no slope on x_t
            wald += sxr**2 / sxx / (rss / (size - 1))
            dof += 1
    pval = chi2_sf(wald, dof) if dof else 1.0
    if misses:
        where = ", ".join(map(str, misses[:5]))
        return (
            f"at t = {where} x_{{t−1}} is not the reverse mean k_t x_t of the x_t that eps_fn "
            "saw (a step without noise returns its mean as it is: do not rescale the samples)"
        )
    if pval < FALSE_FAIL:
        return (
            f"x_{{t−1}} − k_t x_t depends on x_t (Wald χ² = {wald:.1f} on {dof} degrees of "
            f"freedom, p-value {pval:.2g}): each step is the reverse mean of the x_t that eps_fn "
            "saw plus independent noise (do not rescale x_t or the samples)"
        )
    return None


def _std_run(rec: Result, s: float) -> tuple[bool, str]:
    """Whether a std run's samples have the std of Ex. 9(b) for ``s`` and are the end of
    the chain ε* saw; the run's note."""
    from costmodel.diffusion import ddpm_sample_std

    where, sum_sq = f"s = {s:.3f}", rec.get("sum_sq")
    if not rec.data or rec.get("error"):
        return False, f"{where}: {rec.get('error') or 'no result'}."
    if rec.get("shape") != [STD_POINTS, 2] or rec.get("finite") is not True:
        return False, (
            f"{where}: the samples are not a finite ({STD_POINTS}, 2) array "
            f"(shape {rec.get('shape')})."
        )
    if type(sum_sq) is not float or not math.isfinite(sum_sq) or sum_sq < 0:
        return False, f"{where}: no usable samples."
    count = 2 * STD_POINTS
    expected = ddpm_sample_std(s)
    pval = _two_sided(sum_sq / expected**2, count)
    std = math.sqrt(sum_sq / count)
    broken = _chain_break(rec.parts("chain"))
    note = f"{where}: std {std:.3f}, expected {expected:.3f}"
    note += "" if pval >= FALSE_FAIL else f" (p-value {pval:.2g})"
    return pval >= FALSE_FAIL and broken is None, note + ("." if broken is None else f"; {broken}.")


@check("samples with ε* have the std of Ex. 9(b)", 1.5)
def sample_std(r: Result, c: dict):
    recs = r.parts("std", len(c["data_stds"]))
    runs = [_std_run(rec, s) for s, rec in zip(c["data_stds"], recs, strict=True)]
    msg = " ".join(note for _, note in runs)
    if all(ok for ok, _ in runs):
        return 1, (
            f"With ε* and 100 steps of β_t linear from 0.001 to 0.2, {2 * STD_POINTS} sampled "
            f"values each, the end of the chain ε* saw: {msg} Close to s, as in Ex. 9(b)."
        )
    return sum(ok for ok, _ in runs) / len(runs), msg + (
        f" With ε* on the schedule of Ex. 9(b) the samples' std is close to s (σ_t² = β_t; "
        f"the χ² test on {2 * STD_POINTS} values has a false-fail rate of {FALSE_FAIL:g})."
    )


def grade(result: dict, seed: int, params: dict) -> list[Property]:
    """Score the probe's records against ε*, the reverse step and the std of Ex. 9(b)."""
    r, c = Result(result), cases(seed)
    run = _trajectory(r, c)
    return [optimal(r, c), reverse_mean(run), step_noise(run), last_step(run), sample_std(r, c)]
