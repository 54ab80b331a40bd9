"""The registry: required names and signatures, evaluate(), formulas(), argument checks."""

from __future__ import annotations

import inspect

import pytest

import costmodel
from costmodel import ArgumentError, UnknownFormula

# The names and keyword arguments templates rely on (issue "Foundation", exactly).
REQUIRED = {
    "transformer.param_count": "(n_layers, d_model, vocab, n_ctx=0, biases=False)",
    "transformer.training_flops": "(n_params, n_tokens)",
    "transformer.forward_flops_per_token": "(n_params)",
    "budget.training_seconds": "(total_flops, n_gpus, peak_flops, mfu)",
    "budget.gpu_hours": "(total_flops, peak_flops, mfu)",
    "budget.mfu": "(tokens_per_second, flops_per_token, n_gpus, peak_flops)",
    "memory.model_state_bytes": "(n_params, bytes_per_param=16)",
    "memory.zero_bytes_per_gpu": "(n_params, n_gpus, stage, optimizer_bytes_per_param=12)",
    "memory.activation_bytes_per_layer": (
        "(seq_len, batch, d_model, n_heads, flash_attention=False)"
    ),
    "memory.kv_cache_bytes_per_token": "(n_layers, n_kv_heads, d_head, bytes_per_value=2)",
    "memory.checkpoint_peak_units": "(n_layers, segment_length)",
    "roofline.arithmetic_intensity": "(flops, bytes_moved)",
    "roofline.ridge_intensity": "(peak_flops, bandwidth)",
    "roofline.attainable_flops": "(intensity, peak_flops, bandwidth)",
    "collectives.ring_allreduce_seconds": "(n_bytes, n_workers, bandwidth, latency=0.0)",
    "parallel.pipeline_bubble_fraction": "(n_stages, n_microbatches, interleave=1)",
    "scaling.compute_optimal": "(compute, E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)",
    "serving.speculative_tokens_per_pass": "(alpha, gamma)",
    "serving.speculative_speedup": "(alpha, gamma, draft_cost)",
    "serving.bits_per_weight": "(bits, group_size, scale_bits=16)",
    "serving.decode_tokens_per_second_bound": "(weight_bytes, bandwidth)",
    "adaptation.lora_param_count": "(d_in, d_out, rank)",
    "energy.energy_kwh": "(gpu_hours, watts, pue=1.0)",
    "agents.pass_at_k": "(n, c, k)",
}


def _plain(params: list[inspect.Parameter]) -> str:
    shown = [
        p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
        for p in params
    ]
    return f"({', '.join(shown)})"


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_required_names_and_keyword_arguments(name):
    """The required arguments come first, exactly; a formula may add optional ones after."""
    params = list(costmodel.formulas()[name].signature.parameters.values())
    required_count = REQUIRED[name].count(",") + 1
    assert _plain(params[:required_count]) == REQUIRED[name]
    extra = params[required_count:]
    assert all(p.default is not inspect.Parameter.empty for p in extra), extra


def test_evaluate_calls_by_name():
    # 000 Exercise 1(a): N = 12·24·2048² + 50 000·2048 = 1 310 359 552
    assert (
        costmodel.evaluate("transformer.param_count", n_layers=24, d_model=2048, vocab=50_000)
        == 1_310_359_552
    )


def test_every_formula_is_documented_cited_and_has_domains():
    for name, f in costmodel.formulas().items():
        assert f.summary, f"{name} has no docstring"
        assert any(ch.isdigit() for ch in f.cite), f"{name} cites no section of the notes"
        assert set(f.domains) == set(f.signature.parameters), name
        assert f.name == name and name.count(".") == 1


def test_formulas_cover_the_inventory():
    assert len(costmodel.formulas()) >= 80
    modules = {name.split(".")[0] for name in costmodel.formulas()}
    assert modules >= {
        "transformer",
        "conv",
        "adaptation",
        "budget",
        "energy",
        "memory",
        "roofline",
        "collectives",
        "parallel",
        "scaling",
        "compression",
        "posttraining",
        "serving",
        "agents",
        "rl",
        "diffusion",
    }


def test_unknown_formula_names_the_fix():
    with pytest.raises(UnknownFormula, match="scalegrade calc --list"):
        costmodel.evaluate("memory.no_such_thing")


@pytest.mark.parametrize(
    ("name", "kwargs", "argument"),
    [
        ("memory.model_state_bytes", {"n_params": -7e9}, "n_params"),
        (
            "budget.training_seconds",
            {"total_flops": 1e21, "n_gpus": 0, "peak_flops": 3e14, "mfu": 0.4},
            "n_gpus",
        ),
        (
            "budget.training_seconds",
            {"total_flops": 1e21, "n_gpus": 8, "peak_flops": 3e14, "mfu": 1.5},
            "mfu",
        ),
        (
            "budget.training_seconds",
            {"total_flops": 1e21, "n_gpus": 8, "peak_flops": 3e14, "mfu": 0.0},
            "mfu",
        ),
        ("transformer.param_count", {"n_layers": 2.5, "d_model": 64, "vocab": 10}, "n_layers"),
        ("memory.zero_bytes_per_gpu", {"n_params": 1e9, "n_gpus": 8, "stage": 4}, "stage"),
        (
            "transformer.param_count",
            {"n_layers": 2, "d_model": 64, "vocab": 10, "biases": "yes"},
            "biases",
        ),
    ],
)
def test_bad_arguments_are_refused_with_their_name(name, kwargs, argument):
    with pytest.raises(ArgumentError, match=rf"{name}: {argument} = "):
        costmodel.evaluate(name, **kwargs)


def test_missing_and_unknown_arguments_are_refused():
    with pytest.raises(ArgumentError, match="missing a required argument: 'n_tokens'"):
        costmodel.evaluate("transformer.training_flops", n_params=1e9)
    with pytest.raises(ArgumentError, match="unexpected keyword argument 'tokens_d'"):
        costmodel.evaluate("transformer.training_flops", n_params=1e9, n_tokens=1, tokens_d=1)


def test_core_does_no_io_and_imports_no_sympy():
    import subprocess
    import sys

    code = "import sys, costmodel; print('sympy' in sys.modules, 'pint' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
