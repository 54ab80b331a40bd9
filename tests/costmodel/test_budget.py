"""Time budget: seconds, GPU-hours, MFU, accelerators, Amdahl (000 §1.3, Ex. 2; 001 ch. 1, 6)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, budget, transformer
from costmodel._registry import all_derivations
from costmodel.verify import check

HOUR, DAY = 3600, 86400
A100, H100 = 312e12, 990e12  # bf16 dense peak FLOP/s


def test_exercise_2_accelerators():
    # 000 Ex. 2: C ≈ 2.06e20; one accelerator delivers 1.04e19 per day; 19.9 accelerator-days → 20
    n = transformer.param_count(n_layers=24, d_model=2048, vocab=50_000)
    c = transformer.training_flops(n_params=n, n_tokens=20 * n)
    per_day = budget.delivered_flops(peak_flops=3e14, mfu=0.4)
    assert per_day == pytest.approx(1.0368e19)
    assert round(budget.gpu_hours(total_flops=c, peak_flops=3e14, mfu=0.4) / 24, 1) == 19.9
    assert budget.accelerators_needed(total_flops=c, peak_flops=3e14, mfu=0.4, seconds=DAY) == 20


def test_exam_000_q2a_duration():
    # 000 exam Q2(a): 7.8e22 FLOPs on 256 accelerators at 1e15 and 40 % → 7.6e5 s ≈ 8.8 days
    t = budget.training_seconds(total_flops=7.8e22, n_gpus=256, peak_flops=1e15, mfu=0.4)
    assert t == pytest.approx(761_718.75)
    assert round(t / DAY, 1) == 8.8


def test_llama_7b_gpu_hours():
    # 001 ch. 1: 4.02e22 FLOPs on A100 at 45 % MFU → 79 535 GPU-hours (~80 000)
    assert round(budget.gpu_hours(total_flops=4.02e22, peak_flops=A100, mfu=0.45)) == 79_535
    # Touvron et al. (2023) report 82 432 GPU-hours: an MFU of 43.4 %
    tps = 1e12 / (82_432 * HOUR)  # tokens per GPU-second
    assert (
        round(
            budget.mfu(tokens_per_second=tps, flops_per_token=6 * 6.7e9, n_gpus=1, peak_flops=A100),
            3,
        )
        == 0.434
    )


def test_exercise_1_and_7():
    # 001 Ex. 1: GPT-2 small on 3B tokens, about 4.4 A100-hours at 45 %
    assert round(budget.gpu_hours(total_flops=6 * 124e6 * 3e9, peak_flops=A100, mfu=0.45), 1) == 4.4
    # 001 Ex. 7: 2.34e22 FLOPs on 64 H100 at 40 %: ≈ 16 414 GPU-h (notes: ≈ 16 500), ≈ 11 days
    c = transformer.training_flops(n_params=13e9, n_tokens=300e9)
    assert round(budget.gpu_hours(total_flops=c, peak_flops=H100, mfu=0.4)) == 16_414
    days = budget.training_seconds(total_flops=c, n_gpus=64, peak_flops=H100, mfu=0.4) / DAY
    assert round(days) == 11


def test_exam_001_q2():
    # 001 exam Q2(b): 1.248e14 FLOP/s per GPU, 8.7e6 GPU-s, 2 400 GPU-h, 75 h, 3.1 days on 32 GPUs
    assert budget.sustained_flops(peak_flops=A100, mfu=0.4) == pytest.approx(1.248e14)
    c = 1.08e21
    assert (
        round(budget.training_seconds(total_flops=c, n_gpus=1, peak_flops=A100, mfu=0.4), -5)
        == 8.7e6
    )
    assert round(budget.gpu_hours(total_flops=c, peak_flops=A100, mfu=0.4), -2) == 2400
    hours = budget.training_seconds(total_flops=c, n_gpus=32, peak_flops=A100, mfu=0.4) / HOUR
    assert round(hours) == 75
    # (d): one step of 1e6 tokens, 1.8e16 FLOPs, in about 4.5 s
    step = budget.training_seconds(total_flops=1.8e16, n_gpus=32, peak_flops=A100, mfu=0.4)
    assert round(step, 1) == 4.5


def test_exact_fit_is_not_rounded_up():
    per_day = budget.delivered_flops(peak_flops=3e14, mfu=0.4)
    assert (
        budget.accelerators_needed(total_flops=20 * per_day, peak_flops=3e14, mfu=0.4, seconds=DAY)
        == 20
    )


def test_amdahl():
    # 001 prop 6.3: 5 % serial work caps the speed-up at 20; 16 workers give 9.14
    assert budget.amdahl_speedup(serial_fraction=0.05, n_gpus=16) == pytest.approx(
        1 / (0.05 + 0.95 / 16)
    )
    assert budget.amdahl_max_speedup(serial_fraction=0.05) == pytest.approx(20)
    assert budget.amdahl_max_speedup(serial_fraction=0) == math.inf
    assert budget.amdahl_speedup(serial_fraction=0, n_gpus=8) == 8


@pytest.mark.parametrize(
    ("bad", "name"),
    [
        ({"mfu": 1.5}, "mfu"),
        ({"mfu": 0}, "mfu"),
        ({"n_gpus": 0}, "n_gpus"),
        ({"peak_flops": -1}, "peak_flops"),
        ({"total_flops": 0}, "total_flops"),
    ],
)
def test_bad_arguments_are_refused_by_name(bad, name):
    args = {"total_flops": 1e21, "n_gpus": 8, "peak_flops": A100, "mfu": 0.4, **bad}
    with pytest.raises(ArgumentError, match=name):
        budget.training_seconds(**args)


def test_mfu_above_one_is_refused():
    with pytest.raises(ArgumentError, match="tokens_per_second"):
        budget.mfu(tokens_per_second=1e6, flops_per_token=6e9, n_gpus=1, peak_flops=A100)


def test_amdahl_fraction_must_be_a_fraction():
    with pytest.raises(ArgumentError, match="serial_fraction"):
        budget.amdahl_speedup(serial_fraction=1.2, n_gpus=4)


_flops = st.floats(1e15, 1e25)
_peak = st.floats(1e12, 2e15)
_mfu = st.floats(0.05, 1.0)


@settings(max_examples=100)
@given(c=_flops, n=st.integers(1, 4096), peak=_peak, m=_mfu)
def test_seconds_hours_and_mfu_agree(c, n, peak, m):
    t = budget.training_seconds(total_flops=c, n_gpus=n, peak_flops=peak, mfu=m)
    assert n * t / HOUR == pytest.approx(budget.gpu_hours(total_flops=c, peak_flops=peak, mfu=m))
    # measuring tokens/s over the run gives the MFU back (D = c/6N tokens with N = 1e9)
    tokens = c / 6e9
    got = budget.mfu(tokens_per_second=tokens / t, flops_per_token=6e9, n_gpus=n, peak_flops=peak)
    assert got == pytest.approx(m)
    # twice the GPUs, half the time
    half = budget.training_seconds(total_flops=c, n_gpus=2 * n, peak_flops=peak, mfu=m)
    assert half == pytest.approx(t / 2)


@settings(max_examples=100)
@given(c=_flops, peak=_peak, m=_mfu, seconds=st.floats(3600, 1e8))
def test_accelerators_needed_is_the_smallest_sufficient_count(c, peak, m, seconds):
    n = budget.accelerators_needed(total_flops=c, peak_flops=peak, mfu=m, seconds=seconds)
    per_gpu = budget.delivered_flops(peak_flops=peak, mfu=m, seconds=seconds)
    assert n * per_gpu >= c * (1 - 1e-9)
    assert (n - 1) * per_gpu < c


@settings(max_examples=100)
@given(f=st.floats(0.001, 1.0), n=st.integers(1, 100_000))
def test_amdahl_grows_with_workers_towards_one_over_f(f, n):
    s = budget.amdahl_speedup(serial_fraction=f, n_gpus=n)
    assert 1 - 1e-12 <= s <= min(n, 1 / f) * (1 + 1e-12)
    assert budget.amdahl_speedup(serial_fraction=f, n_gpus=n + 1) >= s * (1 - 1e-12)


@pytest.mark.parametrize(
    "derivation",
    [d for d in all_derivations() if d.formula.startswith("budget.")],
    ids=lambda d: d.formula,
)
def test_derivations(derivation):
    result = check(derivation)
    assert result.ok, result.detail
