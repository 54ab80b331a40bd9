"""Checks of the DDPM sampler code part (001 §7.3, def. 7.10 and 7.13, Exercise 9).

The sampler runs with a test ε̂(x, t) = tanh(w_t x + c_t) that records each x_t: a step's
residual, regressed on (1, x_t, ε̂), tells a wrong mean (Wald test) from a wrong noise (the
variance left), so each costs only its own property.  The std runs, with ε* for two data stds
s, also check that the samples end the chain ε* saw: rescaled samples are not the sampler's.
"""

import math
import operator
import sys

import numpy as np

from autograder.checklib import (
    FALSE_FAIL,
    Property,
    Result,
    check,
    chi2_sf,
    close,
    plain,
    two_sided_p,
    vector,
)

EPS_RTOL, EPS_ATOL = 1e-5, 1e-8  # optimal_eps: loose enough for a float32 computation
TRAJ_STEPS, TRAJ_POINTS = 5, 400  # the recorded run: T steps of n points in 2-D
STD_POINTS = 20_000  # points of each run with ε* (40 000 values: the std to ±0.4 %)
# the data stds s of the two runs with ε*, one below 1 and one above as in Ex. 9(b), far
# from its 0.5 and 2, where σ_t² = β̃_t moves the std by 2.5 % or more (χ² resolves 1.4 %)
STD_RANGES = ((0.6, 0.9), (1.25, 1.75))
NOTES_BETAS = np.linspace(0.001, 0.2, 100)  # Ex. 9(b): 100 steps, β_t linear
NOTES_ALPHA_BARS = np.cumprod(1 - NOTES_BETAS)
NOISELESS = 1e-4  # a step whose residual spread is below this adds no noise
EXACT = 1e-5  # relative tolerance of a noiseless step's mean (float32 is fine)
SUMS = ("sxx", "sxr", "srr", "rmax", "xmax")  # of a std run's step: x_t·x_t, x_t·r, r·r, ...


def cases(seed: int) -> dict:
    """The ε* inputs, the recorded run's schedule and its test predictor, for one seed."""
    rng = np.random.default_rng([seed, 30])
    eps = []
    for low, high in ((0.01, 0.05), (0.2, 0.8), (0.95, 0.995)):  # ᾱ_t: late, middle, early
        x_t, alpha_bar = rng.normal(0.0, 2.0, (6, 2)), float(rng.uniform(low, high))
        eps.append({"x_t": x_t, "alpha_bar": alpha_bar, "s": float(rng.uniform(0.3, 3.0))})
    return {
        "eps": eps,
        "betas": np.sort(rng.uniform(0.08, 0.3, TRAJ_STEPS)),  # large steps: ᾱ_t far from α_t
        "weights": rng.uniform(0.6, 1.4, TRAJ_STEPS),
        "shifts": rng.uniform(-0.5, 0.5, TRAJ_STEPS),
        "streams": [int(v) for v in rng.integers(2**62, size=1 + len(STD_RANGES))],
        "data_stds": [float(rng.uniform(low, high)) for low, high in STD_RANGES],
    }


def test_eps(x: np.ndarray, t: int, c: dict) -> np.ndarray:
    """ε̂(x, t) = tanh(w_t x + c_t): not linear in x, so the regression finds a wrong mean."""
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
    """The ε̂ handed to the sampler: returns ``predict(x_t, t)``; ``steps`` gets each step's
    (t passed, x_t), or with ``s`` (ε*) the sums of its residual r = x_{t−1} − k_t x_t, the
    step the chain's k-th from t = T (only the last x_t is held).  A repeat is one step.
    Its methods are private: the student's stub of it can only call it."""

    def __init__(self, predict, max_calls: int, s: float | None = None):
        self._predict, self.max_calls, self.s = predict, max_calls, s
        self.calls, self.steps, self.last = 0, [], None

    def __call__(self, x_t, t):
        if self.calls >= self.max_calls:
            raise RuntimeError(
                f"eps_fn called more than {self.max_calls} times: call it once per step, "
                "on the whole (n, 2) batch"
            )
        self.calls += 1
        x = x_t.detach().cpu().numpy() if hasattr(x_t, "detach") else x_t  # a CPU tensor is fine
        x, step = np.asarray(x, dtype=np.float64), _step(t)
        passed = step if step is not None else repr(t)[:20]
        if self.last is None or self.last[0] != passed or not np.array_equal(self.last[1], x):
            self._end(x)
            self.last = (passed, x.copy())
        eps = self._predict(x, step if step is not None else 1)
        if hasattr(x_t, "detach"):  # a torch sampler gets a tensor back
            return sys.modules["torch"].as_tensor(eps, dtype=x_t.dtype, device=x_t.device)
        return eps

    def _end(self, x_next: np.ndarray | None) -> list:
        """End the step of the last x_t, whose successor is ``x_next``; the steps so far."""
        if self.last is not None:
            self.steps.append(self.last if self.s is None else self._sums(*self.last, x_next))
        return self.steps

    def _sums(self, passed, x: np.ndarray, x_next: np.ndarray) -> dict:
        t = len(NOTES_BETAS) - len(self.steps)
        if t < 1 or x.shape != x_next.shape or x.size == 0:
            return {"t": passed, "shape": [list(x.shape), list(x_next.shape)]}
        with np.errstate(all="ignore"):
            r = (x_next - gain(t, self.s) * x).reshape(-1)
            flat = x.reshape(-1)
            sums = [flat @ flat, flat @ r, r @ r, np.abs(r).max(), np.abs(x_next).max()]
        return {"t": passed, **dict(zip(SUMS, plain(sums), strict=True))}


def _sample(student, eps_fn, betas: np.ndarray, n: int, stream: int):
    """``ddpm_sample`` with the global generators and ``rng`` seeded from ``stream``."""
    student.seed(stream)
    return student.call(eps_fn, betas.copy(), n, np.random.default_rng(stream))


def probe(student, seed: int, params: dict) -> dict:
    """Call optimal_eps and ddpm_sample on the seed's inputs; return plain data."""
    c = cases(seed)
    fn, eps = student.sibling("optimal_eps"), {"error": None, "cases": []}
    for case in c["eps"]:
        rec = fn.call(case["x_t"].copy(), case["alpha_bar"], case["s"], keep=64)
        if rec.raised == "NameError":
            eps = {"error": "no function optimal_eps is defined next to ddpm_sample"}
            break
        eps["cases"].append(rec)
    recorder = _Recorder(lambda x, t: test_eps(x, t, c), 4 * TRAJ_STEPS)
    rec = _sample(student, recorder, c["betas"], TRAJ_POINTS, c["streams"][0])
    trajectory = {"error": rec.error}
    if rec.ok:
        x0, steps = rec.array(), recorder._end(None)
        calls = [{"t": s, "shape": list(x.shape), "x": plain(x.reshape(-1))} for s, x in steps]
        output = [] if x0 is None else plain(x0.reshape(-1)[: 2 * TRAJ_POINTS])
        trajectory = dict(error=None, calls=calls, shape=list(rec.shape or ()), output=output)
    std = []
    for s, stream in zip(c["data_stds"], c["streams"][1:], strict=True):
        chain = _Recorder(lambda x, t, s=s: eps_star(x, t, s), 2 * len(NOTES_BETAS), s)
        rec = _sample(student, chain, NOTES_BETAS, STD_POINTS, stream)
        x0 = rec.array()
        finite = x0 is not None and bool(np.all(np.isfinite(x0)))
        sum_sq, steps = (float((x0**2).sum()), chain._end(x0)) if finite else (0.0, [])
        run = dict(shape=list(rec.shape or ()), finite=finite, sum_sq=sum_sq, chain=steps)
        std.append({"error": None, **run} if rec.ok else {"error": rec.error})
    return {"eps": eps, "trajectory": trajectory, "std": std}


@check("ε* = √(1 − ᾱ_t) x_t / (ᾱ_t s² + 1 − ᾱ_t)", 1.0)
def optimal(r: Result, c: dict):
    probed = r.part("eps")
    if probed.get("error") or not isinstance(probed.get("cases"), list):
        return 0, f"optimal_eps: {probed.get('error') or 'no result'}."
    notes = []
    for case, rec in zip(c["eps"], probed.records("cases", len(c["eps"])), strict=True):
        x, ab, s = case["x_t"], case["alpha_bar"], case["s"]
        where = f"ᾱ_t = {ab:.3f}, s = {s:.2f}"
        if not rec.ok:
            notes.append(f"{where}: {rec.error}.")
        elif rec.shape != x.shape or rec.array() is None:
            shape = list(rec.shape or ())
            notes.append(f"{where}: returned shape {shape} for x_t of shape {x.shape}.")
        elif not close(rec.array(), np.sqrt(1 - ab) * x / (ab * s**2 + 1 - ab), EPS_RTOL, EPS_ATOL):
            notes.append(f"{where}: wrong value.")
    if not notes:
        return 1, "optimal_eps matches E[ε | x_t] at early, middle and late t."
    return 1 - len(notes) / len(c["eps"]), " ".join(notes) + (
        " For x_0 ~ N(0, s²), x_t = √ᾱ_t x_0 + √(1 − ᾱ_t) ε is Gaussian with "
        "Cov(ε, x_t) = √(1 − ᾱ_t) and Var x_t = ᾱ_t s² + 1 − ᾱ_t; ε* = E[ε | x_t] is their "
        "ratio times x_t (Ex. 9(a))."
    )


def _two_sided(stat: float, dof: int) -> float:
    """P-value of a two-sided test of a χ²_dof statistic (too small fails, as too large)."""
    upper = chi2_sf(stat, dof)
    return 2 * min(upper, 1 - upper)


def _trajectory(r: Result, c: dict) -> dict | str:
    """The recorded run's steps, each residual regressed on (1, x_t, ε̂); or why not."""
    rec = r.part("trajectory")
    calls = rec.parts("calls")
    got = [(call.get("x"), call.get("shape")) for call in calls]
    got.append((rec.get("output"), rec.get("shape")))  # x_0
    xs = [vector(x, 2 * TRAJ_POINTS) if s == [TRAJ_POINTS, 2] else None for x, s in got]
    why = None
    if not rec.data:
        why = "no result"
    elif rec.get("error"):
        why = f"ddpm_sample raised {rec.get('error')}"
    elif len(calls) != TRAJ_STEPS:
        why = (
            f"with T = {TRAJ_STEPS} steps, eps_fn was called {len(calls)} times: call it once per "
            "step, t = T, …, 1, on the whole (n, 2) batch"
        )
    elif any(x is None for x in xs[:-1]):
        why = f"eps_fn must receive x_t as an array of shape (n, 2) = ({TRAJ_POINTS}, 2)"
    elif xs[-1] is None:
        why = f"ddpm_sample must return an array of shape (n, 2), not {rec.get('shape')}"
    elif not all(np.all(np.isfinite(x)) for x in xs):
        why = "the trajectory is not finite (nan or inf)"
    if why:
        return f"Recorded run: {why}."
    xs = [x.reshape(TRAJ_POINTS, 2) for x in xs]
    betas, alpha_bars = c["betas"], np.cumprod(1 - c["betas"])
    fits, misses = {}, []
    for t, x_t, x_prev in zip(range(TRAJ_STEPS, 0, -1), xs[:-1], xs[1:], strict=True):
        beta, alpha_bar, eps = betas[t - 1], alpha_bars[t - 1], test_eps(x_t, t, c)
        mean = (x_t - beta / math.sqrt(1 - alpha_bar) * eps) / math.sqrt(1 - beta)
        design = np.column_stack([np.ones(x_t.size), x_t.reshape(-1), eps.reshape(-1)])
        resid = (x_prev - mean).reshape(-1)
        coef, *_ = np.linalg.lstsq(design, resid, rcond=None)
        fitted = design @ coef
        rss = float(np.sum((resid - fitted) ** 2))
        dof = resid.size - design.shape[1]
        spread = math.sqrt(rss / dof)
        wald = float(np.sum(fitted**2)) / (rss / dof) if spread >= NOISELESS else math.inf
        fits[t] = {"rss": rss, "dof": dof, "spread": spread, "wald": wald}
        if spread < NOISELESS and float(np.abs(resid).max()) > EXACT * (1 + np.abs(x_prev).max()):
            misses.append(t)
    ts = [call.get("t") for call in calls]
    return {"ts": ts, "x_T": xs[0], "fits": fits, "misses": misses, "betas": betas}


@check("reverse-step mean (x_t − β_t ε̂/√(1 − ᾱ_t))/√α_t", 2.0)
def reverse_mean(run: dict):
    fits, misses = run["fits"], run["misses"]
    noisy = [f for f in fits.values() if f["spread"] >= NOISELESS]
    wald, dof = sum(f["wald"] for f in noisy), 3 * len(noisy)
    pval = chi2_sf(wald, dof) if dof else 1.0
    if run["ts"] != list(range(TRAJ_STEPS, 0, -1)):
        return False, (
            f"eps_fn was called at t = {', '.join(map(str, run['ts']))}: the steps run "
            f"t = T, …, 1 (here {TRAJ_STEPS} to 1), and betas[t − 1] is β_t."
        )
    # σ_t is estimated, not known: test at half the rate to keep the false-fail rate
    if not misses and pval >= FALSE_FAIL / 2:
        return True, (
            f"Over {TRAJ_STEPS} recorded steps, x_{{t−1}} minus the reverse mean leaves no trace "
            f"of x_t or ε̂ (Wald χ² = {wald:.1f} on {dof} degrees of freedom)."
        )
    worst = (t for t, f in fits.items() if f in noisy and chi2_sf(f["wald"], 3) < FALSE_FAIL)
    bad = sorted({*misses, *worst}, reverse=True)
    return False, (
        f"x_{{t−1}} is not the reverse mean plus independent noise (Wald χ² = "
        f"{wald:.1f} on {dof} degrees of freedom, p-value {pval:.2g}"
        + (f"; worst at t = {', '.join(map(str, bad))}" if bad else "")
        + "): the mean is (x_t − β_t/√(1 − ᾱ_t) ε̂)/√α_t with ᾱ_t = α_1⋯α_t, the product "
        "of all α_s up to t, not α_t (def. 7.13)."
    )


@check("x_T ~ N(0, I) and step noise of variance σ_t² = β_t", 1.0)
def step_noise(run: dict):
    fits, betas, x_T, noisy = run["fits"], run["betas"], run["x_T"], range(2, TRAJ_STEPS + 1)
    start_p = min(
        _two_sided(float(np.sum(x_T**2)), x_T.size),
        two_sided_p(float(x_T.sum()) / math.sqrt(x_T.size)),
    )
    silent = [t for t in noisy if fits[t]["spread"] < NOISELESS]
    stat = sum(fits[t]["rss"] / betas[t - 1] for t in noisy)
    noise_p = _two_sided(stat, sum(fits[t]["dof"] for t in noisy))
    spreads = ", ".join(
        f"t = {t}: {fits[t]['spread'] ** 2 / betas[t - 1]:.2f}" for t in reversed(noisy)
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
def last_step(run: dict):
    if run["fits"][1]["spread"] < NOISELESS:
        return 1, "The last step returns its mean, x_0 = μ_1(x_1)."
    return 0, (
        f"At t = 1 your step adds noise of variance {run['fits'][1]['spread'] ** 2:.3g}: the last "
        "step returns the mean, z = 0 at t = 1 (def. 7.13)."
    )


def _chain_break(steps: list[Result]) -> str | None:
    """Why the std run's samples are not the end of the chain ε* saw, or None when every
    step is x_{t−1} = k_t x_t plus something independent of x_t, exactly k_1 x_1 at t = 1."""
    n_steps, size = len(NOTES_BETAS), 2 * STD_POINTS
    if len(steps) != n_steps or not all(st.data for st in steps):
        return (
            f"with T = {n_steps} steps eps_fn saw {len(steps)} distinct x_t: call it once per "
            "step, t = T, …, 1, on the whole (n, 2) batch"
        )
    if [st.get("t") for st in steps] != list(range(n_steps, 0, -1)):
        return "eps_fn was not called at t = T, …, 1 in turn (betas[t − 1] is β_t)"
    wald, dof, misses = 0.0, 0, []
    for st in steps:
        sums = [st.get(k) for k in SUMS]
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
        return (
            f"at t = {', '.join(map(str, misses[:5]))} x_{{t−1}} is not the reverse mean k_t x_t "
            "of the x_t that eps_fn saw (a step without noise returns its mean as it is: do not "
            "rescale the samples)"
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
    expected = ddpm_sample_std(s)
    pval = _two_sided(sum_sq / expected**2, 2 * STD_POINTS)
    broken = _chain_break(rec.parts("chain"))
    note = f"{where}: std {math.sqrt(sum_sq / (2 * STD_POINTS)):.3f}, expected {expected:.3f}"
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
    if isinstance(run, str):  # no steps to judge: each of their properties says why
        steps = [Property(p.name, p.weight, 0, run) for p in (reverse_mean, step_noise, last_step)]
    else:
        steps = [reverse_mean(run), step_noise(run), last_step(run)]
    return [optimal(r, c), *steps, sample_std(r, c)]
