"""The `scalegrade` command's edges: calc, --list, --gpu, bad input, verify."""

from __future__ import annotations

from click.testing import CliRunner

from scalegrade.cli import main


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_calc_prints_human_units():
    # 000 Ex. 1(b): 16 N for N = 1.31e9 is about 21 GB
    result = run("calc", "memory.model_state_bytes", "n_params=1310359552")
    assert result.exit_code == 0, result.output
    assert "21.0 GB (19.5 GiB)" in result.output
    assert "Prop 1.2" in result.output


def test_calc_reads_units_in_values():
    # 000 Ex. 8: 1 GB over 64 workers at 25 GB/s with 10 us latency: 0.080 s
    result = run(
        "calc",
        "collectives.ring_allreduce_seconds",
        "n_bytes=1GB",
        "n_workers=64",
        "bandwidth=25GB/s",
        "latency=10us",
    )
    assert result.exit_code == 0, result.output
    assert "0.0800 s" in result.output


def test_calc_fills_hardware_from_the_catalog():
    # 001 exam Q1: the A100 ridge is 312e12 / 2e12 = 156 FLOP/byte
    result = run("calc", "roofline.ridge_intensity", "--gpu", "A100")
    assert result.exit_code == 0, result.output
    assert "156" in result.output


def test_calc_list_lists_formulas():
    result = run("calc", "--list")
    assert result.exit_code == 0
    assert "transformer.param_count" in result.output


def test_bad_input_is_one_line_naming_the_argument_and_exit_2():
    cases = [
        (["memory.model_state_bytes", "n_params=-5"], "n_params = -5.0: must be a number > 0"),
        (
            [
                "budget.training_seconds",
                "total_flops=1e21",
                "n_gpus=0",
                "peak_flops=1e15",
                "mfu=0.4",
            ],
            "n_gpus = 0",
        ),
        (
            [
                "budget.training_seconds",
                "total_flops=1e21",
                "n_gpus=8",
                "peak_flops=1e15",
                "mfu=1.5",
            ],
            "mfu = 1.5",
        ),
        (["memory.no_such"], "unknown formula 'memory.no_such'"),
        (["memory.model_state_bytes", "n_param=5"], "unknown argument 'n_param'"),
        (["memory.model_state_bytes", "n_params"], "expected key=value"),
        (
            ["collectives.ring_allreduce_seconds", "n_bytes=1 GP", "n_workers=4", "bandwidth=1e9"],
            "unknown unit 'GP'",
        ),
        (["roofline.ridge_intensity", "--gpu", "T4"], "T4 has no bf16"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(main, ["calc", *args])
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output


def test_verify_exits_zero_and_reports_the_count():
    result = run("verify", "--points", "2")
    assert result.exit_code == 0, result.output
    assert "derivations verified" in result.output
