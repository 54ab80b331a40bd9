"""Parameters and FLOPs of the decoder-only transformer (000 ch. 0–1, 001 ch. 0–1)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, transformer
from costmodel._registry import all_derivations
from costmodel.verify import check


def test_exercise_1a_parameters():
    # 000 Ex. 1(a): 12·24·2048² = 1.21e9 in the blocks, V·d = 0.10e9, N ≈ 1.31e9
    blocks = 24 * transformer.block_param_count(d_model=2048)
    assert blocks == 1_207_959_552
    assert transformer.embedding_param_count(vocab=50_000, d_model=2048) == 102_400_000
    n = transformer.param_count(n_layers=24, d_model=2048, vocab=50_000)
    assert n == 1_310_359_552 == blocks + 102_400_000


def test_gpt2_small_parameters():
    # 001 Ex. 1: GPT-2 small has 124 439 808 parameters (Radford et al. 2019)
    n = transformer.param_count(n_layers=12, d_model=768, vocab=50257, n_ctx=1024, biases=True)
    assert n == 124_439_808
    assert n == 12 * transformer.block_param_count(d_model=768, biases=True) + (
        transformer.embedding_param_count(vocab=50257, d_model=768, n_ctx=1024) + 2 * 768
    )


def test_block_counts():
    # 001 ch. 0: the pre-LN block of width 768 has 7 087 872 parameters; 000 §0.4: 786 432 at d=256
    assert transformer.block_param_count(d_model=768, biases=True) == 7_087_872
    assert transformer.block_param_count(d_model=256) == 786_432
    # 001 Ex. 1: 24d² + 4nd = 17 301 504 FLOPs per token at d = 768, n = 1024
    assert transformer.block_flops_per_token(d_model=768, seq_len=1024) == 17_301_504


def test_attention_params_gqa():
    # 000 §6.1: MHA keeps 4d², multi-query 2d² + 2d²/a
    assert transformer.attention_param_count(d_model=4096, n_heads=32, n_kv_heads=32) == 4 * 4096**2
    mqa = transformer.attention_param_count(d_model=4096, n_heads=32, n_kv_heads=1)
    assert mqa == 2 * 4096**2 + 2 * 4096**2 / 32


def test_attention_params_refuses_uneven_groups():
    with pytest.raises(ArgumentError, match="n_kv_heads"):
        transformer.attention_param_count(d_model=4096, n_heads=32, n_kv_heads=3)


def test_training_flops_examples():
    # 001 ch. 1 code: LLaMA-7B, 6.7e9 × 1e12 tokens → 4.02e22; 000 Ex. 13: 1.65e18 per step
    assert transformer.training_flops(n_params=6.7e9, n_tokens=1e12) == pytest.approx(4.02e22)
    tokens = transformer.tokens_per_batch(batch=768, seq_len=2048)
    assert tokens == 1_572_864
    assert transformer.training_flops(n_params=175e9, n_tokens=tokens) == pytest.approx(
        1.6515072e18
    )


def test_forward_backward_ratio():
    # 000 Thm 0.4: backward = 2 × forward, so a step costs 3 forward units
    per_token = transformer.forward_flops_per_token(n_params=1e9)
    assert transformer.training_flops(n_params=1e9, n_tokens=1) == 3 * per_token
    assert transformer.recomputation_overhead() == pytest.approx(1 / 3)


def test_attention_share_and_score_std():
    # 000 §1.1: at T = d = 4096 attention adds at most about 17 %
    assert round(transformer.attention_flops_share(seq_len=4096, d_model=4096), 2) == 0.17
    # 001 ch. 0: without scaling, scores at d_k = 64 have standard deviation 8
    assert transformer.attention_score_std(d_head=64) == 8


def test_chinchilla_ratio():
    # 000 §1.4: Chinchilla, 70B parameters on 1.4T tokens, 20 tokens per parameter
    assert transformer.tokens_per_param(n_params=70e9, n_tokens=1.4e12) == pytest.approx(20)


@pytest.mark.parametrize("bad", [{"d_model": 0}, {"d_model": 2.5}, {"n_layers": -1}])
def test_bad_shapes_are_refused_by_name(bad):
    args = {"n_layers": 24, "d_model": 2048, "vocab": 50_000, **bad}
    with pytest.raises(ArgumentError, match=next(iter(bad))):
        transformer.param_count(**args)


@settings(max_examples=100)
@given(L=st.integers(1, 128), d=st.integers(64, 8192), V=st.integers(1000, 256_000))
def test_params_grow_with_depth_and_match_the_sum_of_parts(L, d, V):
    n = transformer.param_count(n_layers=L, d_model=d, vocab=V)
    assert transformer.param_count(n_layers=L + 1, d_model=d, vocab=V) > n
    assert n == L * transformer.block_param_count(d_model=d) + transformer.embedding_param_count(
        vocab=V, d_model=d
    )


@settings(max_examples=100)
@given(T=st.integers(128, 32768), d=st.integers(64, 16384))
def test_attention_share_is_the_ratio_of_the_block_terms(T, d):
    share = transformer.attention_flops_share(seq_len=T, d_model=d)
    total = transformer.block_flops_per_token(d_model=d, seq_len=T)
    assert total == pytest.approx(24 * d**2 * (1 + share))
    assert math.isclose(transformer.attention_score_std(d_head=d) ** 2, d)


@pytest.mark.parametrize(
    "derivation",
    [d for d in all_derivations() if d.formula.startswith("transformer.")],
    ids=lambda d: d.formula,
)
def test_derivations(derivation):
    result = check(derivation)
    assert result.ok, result.detail
