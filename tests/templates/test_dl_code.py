"""Code questions of the dl course (notes 001): the DDPM sampler (Ex. 9), REINFORCE with a
baseline (Ex. 10) and circular convolution (Ex. 8).

Each check grades the algorithm: the reference scores full marks, the starter 0, and each
realistic mistake loses exactly the properties it breaks.  Real runs, no mocks; the
statistical checks use a fixed grading seed, so every grade here is reproducible.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autograder.grading.checks import grade_result, load_checks
from costmodel.diffusion import ddpm_sample_std
from tests.templates.codecheck import (
    TEMPLATES,
    define,
    fraction,
    function,
    grade,
    lost,
    names,
    probed,
    sources,
    starter,
)

DDPM = TEMPLATES / "diffusion" / "ddpm-sampler-code"
BANDIT = TEMPLATES / "rl" / "bandit-baseline-code"
CONV = TEMPLATES / "vision" / "circular-conv-code"

GARBAGE = [
    None,
    {},
    [],
    "x",
    {"eps": 3, "trajectory": "x", "std": [1, None]},
    {"stats": [{"n": 20_000, "sum": "nan", "sum_sq": 1}], "optimal": {}, "repeat": [1, 1]},
    {"single": [{"plain": {"shape": [1, 2], "value": [1.0]}}], "multi": [], "stride2": 4},
]


def cell(folder, name: str, old: str = "", new: str = ""):
    """The function ``name`` of the reference with ``old`` replaced by ``new``, defined as a
    notebook cell defines it: in a fresh namespace, next to the cell's other functions."""
    source = sources(folder).solution
    if old:
        assert source.count(old) == 1, old
    return define(source.replace(old, new, 1), str(folder / "solution.py"), name)


def messages(props: list[dict]) -> str:
    return " ".join(p["message"] for p in props if p["score"] < 1)


@pytest.mark.parametrize("folder", [DDPM, BANDIT, CONV])
@pytest.mark.parametrize("garbage", GARBAGE)
def test_grade_on_garbage_scores_zero_without_crashing(folder, garbage):
    props = grade_result(load_checks(folder, "checks.py").grade, garbage, 5, {})
    assert props and all(p["score"] == 0 for p in props)


# --- DDPM sampler (Ex. 9) --------------------------------------------------------------------

DDPM_PROPS = {
    "eps": "ε* = √(1 − ᾱ_t) x_t / (ᾱ_t s² + 1 − ᾱ_t)",
    "mean": "reverse-step mean (x_t − β_t ε̂/√(1 − ᾱ_t))/√α_t",
    "noise": "x_T ~ N(0, I) and step noise of variance σ_t² = β_t",
    "last": "no noise at the last step (t = 1)",
    "std": "samples with ε* have the std of Ex. 9(b)",
}


@pytest.mark.parametrize("seed", [3, 2024])
def test_ddpm_reference_scores_full_marks_and_the_same_twice(seed):
    fn = cell(DDPM, "ddpm_sample")
    first = grade(DDPM, fn, seed)
    assert names(first) == set(DDPM_PROPS.values())
    assert fraction(first) == 1, messages(first)
    assert grade(DDPM, fn, seed) == first


def test_ddpm_starter_scores_zero():
    assert fraction(grade(DDPM, starter(DDPM, "ddpm_sample"), 3)) == 0


@pytest.mark.parametrize(
    ("old", "new", "broken", "hint"),
    [
        (  # Var x_t with the data's std instead of its variance
            "(alpha_bar_t * s**2 + 1 - alpha_bar_t)",
            "(alpha_bar_t * s + 1 - alpha_bar_t)",
            {"eps"},
            "Var x_t",
        ),
        (  # the step's own α_t in place of the cumulative ᾱ_t
            "beta / np.sqrt(1 - alpha_bar) * eps",
            "beta / np.sqrt(1 - alpha) * eps",
            {"mean", "std"},
            "not α_t",
        ),
        (  # σ_t² = β̃_t, the posterior variance, instead of β_t
            "x = x + np.sqrt(beta) * rng",
            "x = x + np.sqrt(beta * (1 - alpha_bars[t - 2]) / (1 - alpha_bar)) * rng",
            {"noise", "std"},
            "σ_t = √β_t",
        ),
        ("if t > 1:", "if t > 0:", {"last"}, "z = 0 at t = 1"),  # noise at the last step too
        (  # the mean not divided by √α_t
            ") / np.sqrt(alpha)  # the reverse mean",
            ")  # the reverse mean",
            {"mean", "std"},
            "def. 7.13",
        ),
    ],
)
def test_ddpm_mistakes_lose_exactly_what_they_break(old, new, broken, hint):
    props = grade(DDPM, cell(DDPM, "ddpm_sample", old, new), 3)
    assert lost(props) == {DDPM_PROPS[k] for k in broken}
    assert hint in messages(props)


def test_ddpm_without_optimal_eps_loses_only_that_property():
    """optimal_eps is read from the cell's namespace; a sampler alone still earns the rest."""
    sampler = cell(DDPM, "ddpm_sample", "def optimal_eps(", "def my_eps(")
    props = grade(DDPM, sampler, 3)
    assert lost(props) == {DDPM_PROPS["eps"]}
    assert "no function optimal_eps" in messages(props)


def test_ddpm_probe_measures_the_notes_std_and_is_plain_json():
    """Ex. 9(b): about 0.51 for s = 0.5 and 1.98 for s = 2 with σ_t² = β_t; the check's runs
    draw their s from the seed (one below 1, one above) and expect the same recursion's std."""
    module = load_checks(DDPM, "checks.py").module
    result = probed(module, cell(DDPM, "ddpm_sample"), 3)
    json.dumps(result, allow_nan=False)
    stds = [math.sqrt(r["sum_sq"] / (2 * module.STD_POINTS)) for r in result["std"]]
    data_stds = module.cases(3)["data_stds"]
    assert data_stds[0] < 1 < data_stds[1]
    assert stds == pytest.approx([ddpm_sample_std(s) for s in data_stds], rel=0.01)
    assert [len(r["chain"]) for r in result["std"]] == [len(module.NOTES_BETAS)] * 2
    assert [ddpm_sample_std(s) for s in (0.5, 2.0)] == pytest.approx([0.51, 1.98], abs=0.01)

    def diverging(eps_fn, betas, n, rng):
        return np.full((n, 2), np.nan)

    json.dumps(probed(module, diverging, 3), allow_nan=False)


BETA_TILDE = (  # σ_t² = β̃_t, the posterior variance, instead of β_t
    "x = x + np.sqrt(beta) * rng",
    "x = x + np.sqrt(beta * (1 - alpha_bars[t - 2]) / (1 - alpha_bar)) * rng",
)


def _rescaled(where: str):
    """The sampler with σ_t² = β̃_t, its std runs' samples (or x_1, before the last step)
    rescaled to the std the check expects for the s it solves from ε*(x_T, T)."""
    source = sources(DDPM).solution.replace(*BETA_TILDE)
    step, end = "        eps = eps_fn(x, t)\n", "    return x\n"
    assert source.count(step) == source.count(end) == 1
    rescale = "x = x * (target / x.std()) if len(betas) == 100 else x\n"
    infer = (  # ε*(x_T, T) = √(1 − ᾱ_T) x_T / (ᾱ_T s² + 1 − ᾱ_T), solved for s
        "        if t == len(betas):\n"
        "            var = np.sqrt(1 - alpha_bar) * x[0, 0] / eps_fn(x, t)[0, 0]\n"
        "            target = ddpm_sample_std(np.sqrt((var - 1 + alpha_bar) / alpha_bar))\n"
    )
    if where == "x_1":
        source = source.replace(step, infer + "        if t == 1:\n            " + rescale + step)
    else:
        source = source.replace(step, infer + step).replace(end, "    " + rescale + end)
    source = source.replace(
        "import numpy as np\n",
        "import numpy as np\n\nfrom costmodel.diffusion import ddpm_sample_std\n",
    )
    return define(source, str(DDPM / "solution.py"), "ddpm_sample")


@pytest.mark.parametrize("where", ["samples", "x_1"])
def test_ddpm_samples_rescaled_to_the_expected_std_still_lose_the_std(where):
    """A sampler with the wrong variance whose std runs' samples are brought to the std the
    check expects (s solved from ε*) loses what it loses without: they are not the end of
    the chain ε* saw."""
    props = grade(DDPM, _rescaled(where), 3)
    plain = grade(DDPM, cell(DDPM, "ddpm_sample", *BETA_TILDE), 3)
    assert lost(props) == lost(plain) == {DDPM_PROPS["noise"], DDPM_PROPS["std"]}
    assert fraction(props) == fraction(plain)
    assert "do not rescale" in messages(props)


# --- REINFORCE with a baseline (Ex. 10) ------------------------------------------------------

BANDIT_PROPS = {
    "mean": "unbiased: mean σ(1 − σ) for any baseline",
    "variance": "variance σ(1 − σ)[(1 − σ)(1 − b)² + σb² − σ(1 − σ)]",
    "optimal": "b* = 1 − σ: every estimate equals σ(1 − σ)",
    "rng": "rollouts drawn from rng",
}


def _sigma(theta):
    return 1 / (1 + math.exp(-theta))


def bandit_baseline_ignored(theta, b, n, rng):
    a = (rng.random(n) < _sigma(theta)).astype(float)
    return a * (a - _sigma(theta))


def bandit_baseline_after_the_product(theta, b, n, rng):
    a = (rng.random(n) < _sigma(theta)).astype(float)
    return a * (a - _sigma(theta)) - b


def bandit_grad_of_pi_not_log_pi(theta, b, n, rng):
    sigma = _sigma(theta)
    a = (rng.random(n) < sigma).astype(float)
    return (a - b) * (2 * a - 1) * sigma * (1 - sigma)  # ∂π(a), not ∂ log π(a)


def bandit_rewarded_action_flipped(theta, b, n, rng):
    a = (rng.random(n) > _sigma(theta)).astype(float)  # plays a = 1 with probability 1 − σ
    return (a - b) * (a - _sigma(theta))


def bandit_global_generator(theta, b, n, rng):
    a = (np.random.random(n) < _sigma(theta)).astype(float)
    return (a - b) * (a - _sigma(theta))


@pytest.mark.parametrize("seed", [3, 2024])
def test_bandit_reference_scores_full_marks_and_the_same_twice(seed):
    fn = function(BANDIT, "solution.py", "reinforce_estimates")
    first = grade(BANDIT, fn, seed)
    assert names(first) == set(BANDIT_PROPS.values())
    assert fraction(first) == 1, messages(first)
    assert grade(BANDIT, fn, seed) == first


def test_bandit_starter_scores_zero():
    assert fraction(grade(BANDIT, starter(BANDIT, "reinforce_estimates"), 3)) == 0


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (bandit_baseline_ignored, {"variance", "optimal"}, "subtract b"),
        (bandit_baseline_after_the_product, {"mean", "variance", "optimal"}, "from the reward"),
        (bandit_grad_of_pi_not_log_pi, {"mean", "variance", "optimal"}, "a − σ"),
        (bandit_rewarded_action_flipped, {"mean"}, "σ(1 − σ)"),
        (bandit_global_generator, {"rng"}, "from rng"),
    ],
)
def test_bandit_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(BANDIT, fn, 3)
    assert lost(props) == {BANDIT_PROPS[k] for k in broken}
    assert hint in messages(props)


def bandit_moments_matched(theta, b, n, rng):
    """The baseline ignored, the estimates then moved and scaled to the mean σ(1 − σ) and
    the variance of Ex. 10(a) (at b* = 1 − σ: the constant σ(1 − σ))."""
    sigma = _sigma(theta)
    g = bandit_baseline_ignored(theta, b, n, rng)
    mu = sigma * (1 - sigma)
    var = mu * ((1 - sigma) * (1 - b) ** 2 + sigma * b**2 - mu)
    return mu + (g - g.mean()) * math.sqrt(max(var, 0.0)) / g.std()


def test_bandit_moments_matched_lose_what_the_ignored_baseline_loses():
    """Moments can be matched, the estimates' values cannot: (1 − b)(1 − σ) or bσ."""
    props = grade(BANDIT, bandit_moments_matched, 3)
    plain = grade(BANDIT, bandit_baseline_ignored, 3)
    assert lost(props) == lost(plain) == {BANDIT_PROPS["variance"], BANDIT_PROPS["optimal"]}
    assert fraction(props) == fraction(plain)
    assert "not (1 − b)(1 − σ)" in messages(props)


def bandit_binomial(theta, b, n, rng):
    a = rng.binomial(1, _sigma(theta), size=n).astype(float)
    return (a - b) * (a - _sigma(theta))


def bandit_choice(theta, b, n, rng):
    sigma = _sigma(theta)
    a = rng.choice(np.array([0, 1]), n, p=[1 - sigma, sigma]).astype(float)
    return (a - b) * (a - sigma)


def bandit_uniform_above(theta, b, n, rng):
    a = (rng.uniform(0.0, 1.0, size=(n,)) >= 1 - _sigma(theta)).astype(np.float32)
    return (a - np.float32(b)) * (a - np.float32(_sigma(theta)))  # float32 is fine too


@pytest.mark.parametrize("fn", [bandit_binomial, bandit_choice, bandit_uniform_above])
def test_bandit_other_draws_of_rng_score_full_marks(fn):
    """rng serves NumPy's random, uniform, binomial and choice: a = 1 where u < σ, where
    u ≥ 1 − σ, or a Bernoulli(σ) drawn as such, is each rollout following its draw."""
    props = grade(BANDIT, fn, 3)
    assert fraction(props) == 1, messages(props)


def bandit_draws_thrown_away(theta, b, n, rng):
    rng.random(n)  # drawn, then the global generator decides
    return bandit_global_generator(theta, b, n, rng)


def bandit_stratified(theta, b, n, rng):
    """Exactly round(σ n) rewarded rollouts, the smallest draws: no sampling error at all."""
    a = np.zeros(n)
    a[np.argsort(rng.random(n))[: round(_sigma(theta) * n)]] = 1.0
    return (a - b) * (a - _sigma(theta))


def bandit_generator_state_copied(theta, b, n, rng):
    """rng read ahead where it can be (a NumPy Generator), never drawn from."""
    try:
        made = np.random.Generator(np.random.PCG64())
        made.bit_generator.state = rng.bit_generator.state
    except AttributeError:  # the autograder's rng has no state to read
        return bandit_global_generator(theta, b, n, rng)
    a = (made.random(n) < _sigma(theta)).astype(float)
    return (a - b) * (a - _sigma(theta))


@pytest.mark.parametrize(
    ("fn", "why"),
    [
        (bandit_draws_thrown_away, "do not follow rng's draws"),
        (bandit_stratified, "do not follow rng's draws"),
        (bandit_generator_state_copied, "0 draws of rng"),
    ],
)
def test_bandit_rollouts_not_decided_by_rngs_draws_lose_what_the_global_generator_loses(fn, why):
    """Issue 36: the probe serves rng's draws; each rollout must follow its own draw."""
    props = grade(BANDIT, fn, 3)
    assert lost(props) == {BANDIT_PROPS["rng"]}
    assert fraction(props) == fraction(grade(BANDIT, bandit_global_generator, 3))
    assert why in messages(props)


def test_bandit_rng_serves_draws_and_keeps_its_state():
    """The rng handed over has methods only (a data attribute would be copied to the
    student's process), caps what it serves, and logs every draw in order."""
    module = load_checks(BANDIT, "checks.py").module
    draws = module.Draws([1, 41, 0], 10)
    public = {name for name in dir(draws) if not name.startswith("_")}
    assert public == {"random", "uniform", "binomial", "choice"}
    assert all(callable(getattr(draws, name)) for name in public)
    first, second = draws.random(3), draws.uniform(size=(2, 2))
    assert np.array_equal(draws._drawn(), np.concatenate([first, second.ravel()]))
    with pytest.raises(ValueError, match="at most"):
        draws.random(4)  # 7 served of 10
    with pytest.raises(TypeError):
        draws.choice(list(range(100)))


def test_bandit_reference_reproduces_the_notes_variances_and_is_plain_json():
    """Ex. 10(b) at σ = 0.9: variance 0.0009 without baseline, 0.0576 with b = J, 0 with b*."""
    fn = function(BANDIT, "solution.py", "reinforce_estimates")
    rng = np.random.default_rng(10)
    theta = math.log(9)
    variances = [fn(theta, b, 200_000, rng).var() for b in (0.0, 0.9, 0.1)]
    assert variances == pytest.approx([0.0009, 0.0576, 0.0], rel=0.03, abs=1e-12)
    module = load_checks(BANDIT, "checks.py").module
    json.dumps(probed(module, fn, 3), allow_nan=False)


# --- circular convolution (Ex. 8) ------------------------------------------------------------

CONV_PROPS = {
    "value": 'matches conv2d with padding_mode="circular" (stride 1)',
    "channels": "c_in → c_out channels, w[o, c, u, v]",
    "roll": "commutes with torch.roll at stride 1 (prop. 1.8)",
    "stride": "stride 2 keeps the stride-1 outputs at (2i, 2j)",
    "shifts": "stride 2: a shift by 2t moves the output by t, an odd shift by nothing",
}


def conv_pad_and_conv2d(x, w, stride=1):
    """The library route: wrap the borders with F.pad, then F.conv2d."""
    p = (w.shape[-1] - 1) // 2
    return F.conv2d(F.pad(x[None], (p, p, p, p), mode="circular"), w, stride=stride)[0]


def conv_zero_padding(x, w, stride=1):
    return F.conv2d(x[None], w, stride=stride, padding=(w.shape[-1] - 1) // 2)[0]


def conv_flipped_kernel(x, w, stride=1):
    """A true convolution (kernel flipped) instead of conv2d's cross-correlation."""
    return conv_pad_and_conv2d(x, torch.flip(w, dims=(2, 3)), stride)


def conv_odd_phase(x, w, stride=1):
    """Strided outputs kept at (2i + 1, 2j + 1) instead of (2i, 2j)."""
    return conv_pad_and_conv2d(x, w)[:, stride - 1 :: stride, stride - 1 :: stride]


def conv_stride_ignored(x, w, stride=1):
    return conv_pad_and_conv2d(x, w)


def conv_first_channel_only(x, w, stride=1):
    return conv_pad_and_conv2d(x[:1], w[:, :1], stride)


@pytest.mark.parametrize("seed", [3, 2024])
def test_conv_reference_scores_full_marks_and_the_same_twice(seed):
    for fn in (function(CONV, "solution.py", "circular_conv2d"), conv_pad_and_conv2d):
        first = grade(CONV, fn, seed)
        assert names(first) == set(CONV_PROPS.values())
        assert fraction(first) == 1, messages(first)
        assert grade(CONV, fn, seed) == first


def test_conv_grader_reference_is_torch_circular_conv2d():
    """The grade's reference equals nn.Conv2d(padding_mode="circular") (def. 1.7)."""
    module = load_checks(CONV, "checks.py").module
    rng = np.random.default_rng(8)
    for k, stride, c_in, c_out in ((3, 1, 1, 1), (5, 2, 3, 2), (7, 2, 2, 4)):
        x, w = rng.normal(size=(c_in, 9, 12)), rng.normal(size=(c_out, c_in, k, k))
        layer = torch.nn.Conv2d(
            c_in, c_out, k, stride, padding=k // 2, padding_mode="circular", bias=False
        )
        layer = layer.double()
        with torch.no_grad():
            layer.weight.copy_(torch.tensor(w))
            expected = layer(torch.tensor(x)[None])[0].numpy()
        assert np.allclose(module.reference(x, w, stride), expected, rtol=1e-12, atol=1e-12)


def test_conv_starter_scores_zero():
    assert fraction(grade(CONV, starter(CONV, "circular_conv2d"), 3)) == 0


@pytest.mark.parametrize(
    ("fn", "broken", "hint"),
    [
        (conv_zero_padding, set(CONV_PROPS), "zero padding"),
        (conv_flipped_kernel, {"value", "channels", "stride"}, "no kernel flip"),
        (conv_odd_phase, {"stride"}, "starting at (0, 0)"),
        (conv_stride_ignored, {"stride", "shifts"}, "odd shift"),
        (conv_first_channel_only, {"channels"}, "every input channel"),
    ],
)
def test_conv_mistakes_lose_exactly_what_they_break(fn, broken, hint):
    props = grade(CONV, fn, 3)
    assert lost(props) == {CONV_PROPS[k] for k in broken}
    assert hint in messages(props)


def test_conv_probe_is_plain_json():
    module = load_checks(CONV, "checks.py").module

    def exploding(x, w, stride=1):
        return conv_pad_and_conv2d(x, w, stride) / 0.0  # inf and nan

    for fn in (conv_pad_and_conv2d, exploding):
        json.dumps(probed(module, fn, 3), allow_nan=False)
