"""LoRA adapters (000 §5.2, 001 ch. 0)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, adaptation
from costmodel._registry import all_derivations
from costmodel.verify import check


def test_lora_4096_rank_8():
    # 000 §5.2 and 001 ch. 0: 65 536 trainable parameters instead of 16.8 M, 0.39 %, 256× fewer
    args = {"d_in": 4096, "d_out": 4096, "rank": 8}
    assert adaptation.lora_param_count(**args) == 65_536
    assert adaptation.full_param_count(d_in=4096, d_out=4096) == 16_777_216
    assert round(100 * adaptation.lora_fraction(**args), 2) == 0.39
    assert adaptation.lora_reduction_factor(**args) == 256


def test_lora_notes_code():
    # 000 §5.2 code: d = 64, r = 4 trains 512 parameters instead of 4096
    assert adaptation.lora_param_count(d_in=64, d_out=64, rank=4) == 512
    assert adaptation.full_param_count(d_in=64, d_out=64) == 4096


def test_rectangular_matrix():
    # an MLP up-projection 4096 → 11008 (LLaMA-7B), rank 16: 16·(4096 + 11008)
    assert adaptation.lora_param_count(d_in=4096, d_out=11008, rank=16) == 241_664


@pytest.mark.parametrize("f", [adaptation.lora_param_count, adaptation.lora_fraction])
def test_rank_above_the_matrix_is_refused(f):
    with pytest.raises(ArgumentError, match="rank"):
        f(d_in=64, d_out=4096, rank=128)


def test_zero_rank_is_refused():
    with pytest.raises(ArgumentError, match="rank"):
        adaptation.lora_param_count(d_in=64, d_out=64, rank=0)


@settings(max_examples=100)
@given(d_in=st.integers(1, 16384), d_out=st.integers(1, 16384), r=st.integers(1, 256))
def test_fraction_and_factor_are_inverse_and_grow_with_rank(d_in, d_out, r):
    assume(r + 1 <= min(d_in, d_out))
    f = adaptation.lora_fraction(d_in=d_in, d_out=d_out, rank=r)
    g = adaptation.lora_reduction_factor(d_in=d_in, d_out=d_out, rank=r)
    assert f * g == pytest.approx(1)
    assert adaptation.lora_fraction(d_in=d_in, d_out=d_out, rank=r + 1) > f
    lora = adaptation.lora_param_count(d_in=d_in, d_out=d_out, rank=r)
    assert lora == pytest.approx(f * adaptation.full_param_count(d_in=d_in, d_out=d_out))


@pytest.mark.parametrize(
    "derivation",
    [d for d in all_derivations() if d.formula.startswith("adaptation.")],
    ids=lambda d: d.formula,
)
def test_derivations(derivation):
    result = check(derivation)
    assert result.ok, result.detail
