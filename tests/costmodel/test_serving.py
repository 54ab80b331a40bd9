"""Speculative decoding, quantized weights, the decode ceiling and prefix caching."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import serving
from costmodel.arguments import ArgumentError

GB = 1e9


def distributions(size: int):
    """Probability vectors of `size` tokens with every entry ≥ 0.01 before normalizing."""
    return st.lists(st.floats(0.01, 1.0), min_size=size, max_size=size).map(
        lambda w: [x / sum(w) for x in w]
    )


# --- speculative decoding ------------------------------------------------------------


def test_tokens_per_pass_and_speedup_of_000_section_6_4():
    # 000 §6.4: α = 0.8, γ = 4 → 3.36 tokens per pass; c = 0.05 → +20 %, speed-up ≈ 2.8
    assert serving.speculative_tokens_per_pass(alpha=0.8, gamma=4) == pytest.approx(3.3616)
    assert serving.speculative_draft_overhead(gamma=4, draft_cost=0.05) == pytest.approx(0.2)
    assert serving.speculative_speedup(alpha=0.8, gamma=4, draft_cost=0.05) == pytest.approx(
        3.3616 / 1.2
    )


def test_exercise_12_acceptance_residual_and_best_gamma():
    # 000 Exercise 12: α = 0.9, residual all on the second token, γ = 10 gives ≈ 3.43
    p, q = [0.5, 0.3, 0.2], [0.6, 0.2, 0.2]
    assert serving.speculative_acceptance(p=p, q=q) == pytest.approx(0.9)
    assert serving.speculative_residual(p=p, q=q) == pytest.approx((0.0, 1.0, 0.0))
    assert serving.speculative_optimal_gamma(alpha=0.9, draft_cost=0.1) == 10
    speedup = serving.speculative_speedup(alpha=0.9, gamma=10, draft_cost=0.1)
    assert round(speedup, 2) == 3.43


def test_tokens_per_pass_at_alpha_one_is_gamma_plus_one():
    # 000 Prop 6.12, the limit α → 1: every draft token is accepted, plus the bonus token
    assert serving.speculative_tokens_per_pass(alpha=1.0, gamma=4) == 5
    near = serving.speculative_tokens_per_pass(alpha=1 - 1e-9, gamma=4)
    assert near == pytest.approx(5, rel=1e-6)


@settings(max_examples=100)
@given(p=distributions(5), q=distributions(5))
def test_acceptance_is_one_minus_total_variation(p, q):
    # 000 Thm 6.11: Σ min(p, q) = 1 − ½ Σ |p − q|
    tv = 0.5 * sum(abs(a - b) for a, b in zip(p, q, strict=True))
    assert serving.speculative_acceptance(p=p, q=q) == pytest.approx(1 - tv, abs=1e-12)


@settings(max_examples=100)
@given(p=distributions(4), q=distributions(4))
def test_speculative_sampling_outputs_the_target_distribution(p, q):
    # 000 Thm 6.11: P(x) = q(x)·min(1, p(x)/q(x)) + (1 − α)·residual(x) = p(x)
    alpha = serving.speculative_acceptance(p=p, q=q)
    if alpha > 1 - 1e-9:
        return  # p = q: nothing is ever rejected
    residual = serving.speculative_residual(p=p, q=q)
    for x in range(4):
        out = q[x] * min(1, p[x] / q[x]) + (1 - alpha) * residual[x]
        assert out == pytest.approx(p[x], abs=1e-12)


@settings(max_examples=100)
@given(alpha=st.floats(0.0, 0.999), gamma=st.integers(0, 30))
def test_tokens_per_pass_grows_with_gamma_towards_one_over_one_minus_alpha(alpha, gamma):
    tokens = serving.speculative_tokens_per_pass(alpha=alpha, gamma=gamma)
    assert 1 <= tokens <= serving.speculative_tokens_per_pass(alpha=alpha, gamma=gamma + 1)
    assert tokens <= 1 / (1 - alpha) + 1e-9


@settings(max_examples=100)
@given(alpha=st.floats(0.05, 0.98), c=st.floats(0.005, 1.0))
def test_optimal_gamma_is_the_argmax_over_a_long_range(alpha, c):
    best = serving.speculative_optimal_gamma(alpha=alpha, draft_cost=c)
    speedups = [serving.speculative_speedup(alpha=alpha, gamma=g, draft_cost=c) for g in range(400)]
    assert speedups[best] == pytest.approx(max(speedups), rel=1e-12)


def test_speculative_bad_inputs_name_the_argument():
    with pytest.raises(ArgumentError, match="q"):
        serving.speculative_acceptance(p=[0.5, 0.5], q=[0.2, 0.3, 0.5])
    with pytest.raises(ArgumentError, match="p = "):
        serving.speculative_acceptance(p=[0.5, 0.6], q=[0.5, 0.5])
    with pytest.raises(ArgumentError, match="residual"):
        serving.speculative_residual(p=[0.5, 0.5], q=[0.5, 0.5])
    with pytest.raises(ArgumentError, match="gamma"):
        serving.speculative_tokens_per_pass(alpha=0.8, gamma=-1)
    with pytest.raises(ArgumentError, match="alpha"):
        serving.speculative_optimal_gamma(alpha=1.0, draft_cost=0.1)
    with pytest.raises(ArgumentError, match="draft_cost"):
        serving.speculative_optimal_gamma(alpha=0.8, draft_cost=0.0)


# --- quantization and the decode ceiling ----------------------------------------------


def test_bits_per_weight_and_7b_size_of_000_section_6_3():
    # 000 §6.3: 4 bits in groups of 128 with a 16-bit scale → 4.125 bits, 7B ≈ 3.6 GB
    assert serving.bits_per_weight(bits=4, group_size=128) == 4.125
    size = serving.quantized_weight_bytes(n_params=7e9, bits_per_weight=4.125)
    assert size / GB == pytest.approx(3.609375)


def test_qlora_65b_in_4_bits_fits_a_48_gb_gpu():
    # 000 §5.2: 65B weights in 4 bits take 32.5 GB; in bf16 (130 GB) they do not fit
    assert serving.quantized_weight_bytes(n_params=65e9, bits_per_weight=4) / GB == 32.5
    assert serving.weights_fit(n_params=65e9, bits_per_weight=4, memory_bytes=48 * GB)
    assert not serving.weights_fit(n_params=65e9, bits_per_weight=16, memory_bytes=48 * GB)


def test_decode_ceiling_of_001_exercise_3():
    # 001 Ex. 3(b): 13B fp16 on 2 TB/s ≈ 77 tok/s, on 1 TB/s ≈ 38; (c) int8 ×2, int4 ×4
    weights = serving.quantized_weight_bytes(n_params=13e9, bits_per_weight=16)
    assert serving.decode_tokens_per_second_bound(weights, bandwidth=2e12) == pytest.approx(
        76.923, rel=1e-4
    )
    assert serving.decode_tokens_per_second_bound(weights, bandwidth=1e12) == pytest.approx(
        38.462, rel=1e-4
    )
    assert serving.decode_ceiling_gain(bits=8) == 2
    assert serving.decode_ceiling_gain(bits=4) == 4


@settings(max_examples=100)
@given(n=st.floats(1e8, 1e12), bits=st.floats(2, 16), bw=st.floats(1e11, 1e13))
def test_ceiling_gain_is_the_ratio_of_two_ceilings(n, bits, bw):
    def ceiling(b):
        return serving.decode_tokens_per_second_bound(
            serving.quantized_weight_bytes(n_params=n, bits_per_weight=b), bandwidth=bw
        )

    assert ceiling(bits) / ceiling(16) == pytest.approx(serving.decode_ceiling_gain(bits=bits))


def test_quantization_bad_inputs_name_the_argument():
    with pytest.raises(ArgumentError, match="group_size"):
        serving.bits_per_weight(bits=4, group_size=0)
    with pytest.raises(ArgumentError, match="bandwidth"):
        serving.decode_tokens_per_second_bound(weight_bytes=1e9, bandwidth=0)
    with pytest.raises(ArgumentError, match="n_params"):
        serving.quantized_weight_bytes(n_params=-1, bits_per_weight=4)


# --- prefix cache -----------------------------------------------------------------------


def test_prefix_cache_of_000_section_7_4():
    # 000 §7.4: m = 500, T = 30 → 232 500 against 15 000 prefilled tokens, 15.5× fewer
    assert serving.prefill_tokens_without_cache(tokens_per_turn=500, n_turns=30) == 232_500
    assert serving.prefill_tokens_with_cache(tokens_per_turn=500, n_turns=30) == 15_000
    assert serving.prefix_cache_saving(n_turns=30) == 15.5


@settings(max_examples=100)
@given(m=st.integers(1, 5000), turns=st.integers(1, 200))
def test_prefill_without_cache_sums_the_history_of_every_turn(m, turns):
    without = serving.prefill_tokens_without_cache(tokens_per_turn=m, n_turns=turns)
    with_cache = serving.prefill_tokens_with_cache(tokens_per_turn=m, n_turns=turns)
    assert without == sum(m * t for t in range(1, turns + 1))
    assert math.isclose(without / with_cache, serving.prefix_cache_saving(n_turns=turns))


def test_prefix_cache_bad_inputs_name_the_argument():
    with pytest.raises(ArgumentError, match="n_turns"):
        serving.prefill_tokens_without_cache(tokens_per_turn=500, n_turns=0)
    with pytest.raises(ArgumentError, match="tokens_per_turn"):
        serving.prefill_tokens_with_cache(tokens_per_turn=2.5, n_turns=3)
