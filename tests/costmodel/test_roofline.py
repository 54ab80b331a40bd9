"""costmodel.roofline: intensities, the ridge and the attainable throughput."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, roofline

PI, BETA = 1e15, 3e12  # 000 Exercise 3
A100 = {"peak_flops": 312e12, "bandwidth": 2e12}  # 001 example 6.2, exam Q1


def test_exercise_3_places_three_kernels():
    # 000 Exercise 3: ridge 333; (a) 4096³ bf16 GEMM at 1365, compute-bound at 10^15
    assert roofline.ridge_intensity(peak_flops=PI, bandwidth=BETA) == pytest.approx(333.33, 1e-4)
    square = roofline.square_gemm_intensity(n=4096)
    assert square == pytest.approx(1365.33, 1e-5)
    assert roofline.attainable_flops(intensity=square, peak_flops=PI, bandwidth=BETA) == PI
    # (b) batch-8 decode: I ≈ 8 (7.97 exactly), 2.4e13 FLOP/s, 2.4 % of the peak
    exact = roofline.gemm_intensity(m=8, n=4096, k=4096)
    assert exact == pytest.approx(7.9689, 1e-4)
    assert roofline.decode_intensity(batch=8) == 8
    assert roofline.attainable_flops(intensity=8, peak_flops=PI, bandwidth=BETA) == 2.4e13
    assert roofline.fraction_of_peak(intensity=8, peak_flops=PI, bandwidth=BETA) == 0.024
    # (c) a bf16 layer norm at 8 FLOPs per element: I = 2, 6e12 FLOP/s
    norm = roofline.elementwise_intensity(flops_per_element=8)
    assert norm == 2
    assert roofline.attainable_flops(intensity=norm, peak_flops=PI, bandwidth=BETA) == 6e12


def test_decode_and_prefill_on_an_a100():
    # 001 exam Q1: decode at batch 1 has I = 1, the A100 ridge is 156, prefill is
    # compute-bound beyond about 150 tokens
    assert roofline.decode_intensity() == 1
    assert roofline.ridge_intensity(**A100) == 156
    assert roofline.compute_bound_tokens(**A100) == 156


def test_gemv_of_001_exercise_4_is_always_memory_bound():
    # 001 Exercise 4: fp32 GEMV, I(m) → 2n/(4(n + 1)) < 1/2 as m → ∞, far below 156
    big = roofline.gemv_intensity(m=10**9, n=4096)
    assert big == pytest.approx(2 * 4096 / (4 * 4097), rel=1e-5)
    assert big < roofline.ridge_intensity(**A100)


def test_intensity_is_flops_over_bytes():
    assert roofline.arithmetic_intensity(flops=8e9, bytes_moved=4e9) == 2


@settings(max_examples=100)
@given(intensity=st.floats(1e-3, 1e5), pi=st.floats(1e12, 2e15), beta=st.floats(1e11, 1e13))
def test_attainable_is_the_lower_roof(intensity, pi, beta):
    got = roofline.attainable_flops(intensity=intensity, peak_flops=pi, bandwidth=beta)
    assert got <= pi and got <= beta * intensity * (1 + 1e-12)
    ridge = roofline.ridge_intensity(peak_flops=pi, bandwidth=beta)
    if intensity >= ridge:
        assert got == pi


@settings(max_examples=100)
@given(m=st.integers(1, 10**6), n=st.integers(1, 10**5))
def test_gemv_intensity_grows_with_m_but_stays_under_half(m, n):
    here = roofline.gemv_intensity(m=m, n=n)
    assert here <= roofline.gemv_intensity(m=m + 1, n=n) + 1e-15
    assert here < 0.5


@settings(max_examples=100)
@given(batch=st.integers(1, 512), d=st.integers(1024, 65536))
def test_skinny_gemm_tends_to_the_batch(batch, d):
    exact = roofline.gemm_intensity(m=batch, n=d, k=d)
    assert exact <= roofline.decode_intensity(batch=batch)


def test_bad_inputs_name_the_argument():
    with pytest.raises(ArgumentError, match="bandwidth"):
        roofline.ridge_intensity(peak_flops=PI, bandwidth=0)
    with pytest.raises(ArgumentError, match="intensity"):
        roofline.attainable_flops(intensity=-1, peak_flops=PI, bandwidth=BETA)
    with pytest.raises(ArgumentError, match="m"):
        roofline.gemm_intensity(m=0, n=4, k=4)
