"""`scalegrade verify`: every derivation holds, and a wrong one is caught."""

from __future__ import annotations

import time

from costmodel import transformer
from costmodel._registry import Derivation
from costmodel.verify import (
    check,
    closed_form,
    evaluate_symbolic,
    has_symbolic_path,
    symbolic_value,
    verify_all,
)


def test_every_derivation_holds_and_there_are_at_least_40_in_under_60_s():
    start = time.perf_counter()
    checks = verify_all()
    elapsed = time.perf_counter() - start
    failed = [f"{c.formula}: {c.title}: {c.detail}" for c in checks if not c.ok]
    assert not failed, failed
    assert len(checks) >= 40
    assert elapsed < 60 * 3  # the 60 s target is measured by bench/, with slack for CI load


def test_a_wrong_closed_form_is_caught_symbolically():
    def wrong(sp):
        N, D = sp.symbols("n_params n_tokens", positive=True)
        return 6 * N * D, 2 * N * D  # forward-only FLOPs are not the training FLOPs

    result = check(Derivation("transformer.training_flops", wrong))
    assert not result.symbolic_ok and not result.ok


def test_a_numeric_function_that_disagrees_with_its_closed_form_is_caught():
    def right_but_different_function(sp):
        N, D = sp.symbols("n_params n_tokens", positive=True)
        return 8 * N * D, 8 * N * D  # true identity, but not what training_flops computes

    result = check(Derivation("transformer.training_flops", right_but_different_function))
    assert result.symbolic_ok and not result.numeric_ok
    assert "numeric" in result.detail


def test_a_derivation_that_raises_is_a_failed_check_not_a_crash():
    def broken(sp):
        raise RuntimeError("typo in the derivation")

    result = check(Derivation("transformer.training_flops", broken))
    assert not result.ok and "typo" in result.detail


def test_symbolic_path_gives_the_key_independently():
    # 000 Exercise 1(a): 1 310 359 552 parameters, through the closed form 12Ld² + Vd
    kwargs = {"n_layers": 24, "d_model": 2048, "vocab": 50_000, "n_ctx": 0}
    assert evaluate_symbolic("transformer.param_count", **kwargs) == 1_310_359_552
    assert transformer.param_count(**kwargs) == 1_310_359_552
    assert len(closed_form("transformer.param_count")) == 1


def test_a_closed_form_is_used_only_where_its_derivation_holds():
    # (H + 2p − k)/s + 1 drops the floor: right where s divides H + 2p − k, not elsewhere.
    exact = {"input_size": 57, "kernel_size": 3, "padding": 1, "stride": 2}  # span 56
    assert has_symbolic_path("conv.conv_output_size", exact)
    assert symbolic_value("conv.conv_output_size", exact) == (29.0,)
    # ResNet's stem (001 ch. 0): 224 → 112 at k = 7, p = 3, s = 2, an odd span of 223
    stem = {"input_size": 224, "kernel_size": 7, "padding": 3, "stride": 2}
    assert not has_symbolic_path("conv.conv_output_size", stem)
    assert symbolic_value("conv.conv_output_size", stem) is None
