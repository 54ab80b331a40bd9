"""What each argument of the core means, its SI unit and its valid range.

Arguments are named as the notes name them, and a name means the same thing in every
formula (``n_params`` is always a parameter count, ``bandwidth`` always bytes/s), so one
table serves them all: it validates calls (``mfu=1.5`` is refused), tells the calculator
which unit a bare number is in, and gives ``scalegrade verify`` typical values to test
derivations at.  A formula whose argument means something local (``alpha`` is an
acceptance rate in speculative decoding and an exponent in the scaling law) passes its
own :class:`Domain`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class ArgumentError(ValueError):
    """An argument outside its domain; the message names the formula and the argument."""


@dataclass(frozen=True)
class Domain:
    """Valid values of one argument.

    ``kind``: ``"int"``, ``"real"``, ``"bool"``, ``"choice"`` or ``"distribution"``
    (a probability vector) or ``"reals"`` (a list of reals).  ``sample`` is the range
    random checks draw from (log-uniform when ``log``).  ``unit`` is the SI unit a bare
    number is read in (pint syntax; ``""`` for dimensionless).
    """

    kind: str
    meaning: str
    unit: str = ""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    sample: tuple[float, float] = (1.0, 100.0)
    log: bool = False
    choices: tuple[Any, ...] = ()

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not valid, or None."""
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"must be true or false ({self.meaning})"
        if self.kind == "choice":
            if value in self.choices:
                return None
            return f"must be one of {', '.join(map(str, self.choices))} ({self.meaning})"
        if self.kind in ("distribution", "reals"):
            return self._vector_problem(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"must be a number ({self.meaning})"
        if self.kind == "int" and not float(value).is_integer():
            return f"must be a whole number ({self.meaning})"
        return self._range_problem(float(value))

    def _range_problem(self, x: float) -> str | None:
        if math.isnan(x):
            return f"must be a number, not NaN ({self.meaning})"
        too_low = self.low is not None and (x < self.low or (self.low_open and x == self.low))
        too_high = self.high is not None and (x > self.high or (self.high_open and x == self.high))
        if too_low or too_high:
            return f"must be {self.range_text()} ({self.meaning})"
        if math.isinf(x) and self.high is None:
            return f"must be finite ({self.meaning})"
        return None

    def _vector_problem(self, value: Any) -> str | None:
        if isinstance(value, str | bytes) or not isinstance(value, Sequence | _ndarray_type()):
            return f"must be a list of numbers ({self.meaning})"
        items = list(value)
        if not items:
            return f"must not be empty ({self.meaning})"
        for x in items:
            if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
                return f"must hold finite numbers only ({self.meaning})"
        if self.kind == "distribution":
            if min(items) < 0:
                return f"probabilities must be >= 0 ({self.meaning})"
            if abs(sum(items) - 1.0) > 1e-6:
                return f"probabilities must sum to 1, not {sum(items):.6g} ({self.meaning})"
        return None

    def range_text(self) -> str:
        kind = "a whole number" if self.kind == "int" else "a number"
        if self.low is not None and self.high is not None:
            left = "(" if self.low_open else "["
            right = ")" if self.high_open else "]"
            return f"{kind} in {left}{_g(self.low)}, {_g(self.high)}{right}"
        if self.low is not None:
            return f"{kind} {'>' if self.low_open else '>='} {_g(self.low)}"
        if self.high is not None:
            return f"{kind} {'<' if self.high_open else '<='} {_g(self.high)}"
        return kind


def _g(x: float) -> str:
    return f"{x:g}"


def _ndarray_type() -> type:
    try:
        import numpy

        return numpy.ndarray
    except ImportError:  # pragma: no cover - numpy is a dependency
        return tuple


# Constructors for the common shapes of argument.
def count(meaning: str, low: int = 1, sample: tuple[float, float] = (1, 64), log: bool = False):
    return Domain("int", meaning, low=low, sample=sample, log=log)


def amount(meaning: str, unit: str, sample: tuple[float, float], log: bool = True, low_open=True):
    """A strictly positive real quantity (bytes, FLOP, seconds, ...)."""
    return Domain("real", meaning, unit, low=0.0, low_open=low_open, sample=sample, log=log)


def nonnegative(meaning: str, unit: str, sample: tuple[float, float], log: bool = False):
    return Domain("real", meaning, unit, low=0.0, sample=sample, log=log)


def unit_interval(meaning: str, low_open=False, high_open=False, sample=(0.05, 0.95)):
    return Domain(
        "real", meaning, low=0.0, high=1.0, low_open=low_open, high_open=high_open, sample=sample
    )


def real(meaning: str, unit: str = "", sample: tuple[float, float] = (-3.0, 3.0)):
    return Domain("real", meaning, unit, sample=sample)


PROBABILITY = unit_interval("a probability")

# One table: the notes' names, one meaning each.
ARGUMENTS: dict[str, Domain] = {
    # --- model shape -------------------------------------------------------------
    "n_layers": count("transformer blocks (layers) L", sample=(2, 128)),
    "d_model": count("model width d", sample=(64, 16384), log=True),
    "vocab": count("vocabulary size V", sample=(1000, 256000), log=True),
    "n_ctx": count("learned positions (context length); 0 for none", low=0, sample=(0, 8192)),
    "n_heads": count("attention heads a (or h)", sample=(1, 128)),
    "n_kv_heads": count("key/value heads (GQA groups)", sample=(1, 64)),
    "d_head": count("width of one attention head", sample=(32, 256)),
    "d_ff": count("hidden width of the MLP", sample=(128, 65536), log=True),
    "d_in": count("input width of a matrix", sample=(64, 16384), log=True),
    "d_out": count("output width of a matrix", sample=(64, 16384), log=True),
    "rank": count("LoRA rank r", sample=(1, 256), log=True),
    "kernel_size": count("convolution kernel side k", sample=(1, 11)),
    "in_channels": count("input channels c_in", sample=(1, 1024), log=True),
    "out_channels": count("output channels c_out", sample=(1, 1024), log=True),
    "input_size": count("input side H (pixels)", sample=(8, 512)),
    "padding": count("zero padding p on each side", low=0, sample=(0, 5)),
    "stride": count("stride s", sample=(1, 4)),
    "biases": Domain("bool", "count biases and layer norms"),
    "gated": Domain("bool", "gated (SwiGLU) MLP with three matrices"),
    "flash_attention": Domain("bool", "FlashAttention: the a*s^2 score terms are not stored"),
    # --- counts of things ---------------------------------------------------------
    "n_params": amount("parameters N", "", (1e6, 1e12)),
    "n_tokens": amount("training tokens D", "", (1e8, 1e13)),
    "tokens": amount("tokens processed", "", (1e3, 1e13)),
    "seq_len": count("sequence length s (tokens)", sample=(128, 32768), log=True),
    "batch": count("batch size b (sequences)", sample=(1, 512), log=True),
    "n_gpus": count("accelerators (GPUs)", sample=(1, 4096), log=True),
    "n_workers": count("workers p taking part in the collective", sample=(2, 1024), log=True),
    "n_stages": count("pipeline stages p", sample=(1, 64)),
    "n_microbatches": count("micro-batches m per step", sample=(1, 512)),
    "interleave": count("virtual stages per device v (interleaved schedule)", sample=(1, 8)),
    "tensor_parallel": count("tensor-parallel degree t", sample=(1, 16)),
    "pipeline_parallel": count("pipeline-parallel degree p", sample=(1, 64)),
    "data_parallel": count("data-parallel degree d", sample=(1, 1024), log=True),
    "stage": Domain("choice", "ZeRO stage (0 = plain data parallelism)", choices=(0, 1, 2, 3)),
    "segment_length": amount("layers per checkpointed segment k", "", (1, 64), log=False),
    # --- bytes, FLOPs, seconds ----------------------------------------------------
    "bytes_per_param": amount("bytes per parameter", "byte", (1, 20), log=False),
    "optimizer_bytes_per_param": nonnegative(
        "optimizer-state bytes per parameter", "byte", (0, 16)
    ),
    "bytes_per_value": amount("bytes per stored value (2 for bf16)", "byte", (0.5, 4), False),
    "n_bytes": amount("message size", "byte", (1e3, 1e10)),
    "bytes_moved": amount("bytes moved to and from memory", "byte", (1e3, 1e12)),
    "weight_bytes": amount("bytes of weights read per decode step", "byte", (1e8, 1e12)),
    "flops": amount("floating-point operations", "FLOP", (1e6, 1e18)),
    "total_flops": amount("total training FLOPs C", "FLOP", (1e15, 1e25)),
    "compute": amount("compute budget C", "FLOP", (1e18, 1e25)),
    "flops_per_token": amount("FLOPs per token", "FLOP", (1e6, 1e13)),
    "peak_flops": amount("peak FLOP/s of one accelerator", "FLOP/s", (1e12, 2e15)),
    "bandwidth": amount("bandwidth (bytes per second)", "byte/s", (1e9, 1e13)),
    "latency": nonnegative("latency of one message", "s", (0, 1e-4)),
    "intensity": amount("arithmetic intensity (FLOP per byte)", "FLOP/byte", (0.1, 1e4)),
    "seconds": amount("duration", "s", (1, 1e8)),
    "hours": amount("duration in hours", "hour", (1, 1e4)),
    "tokens_per_second": amount("tokens processed per second", "1/s", (1, 1e8)),
    "gpu_hours": amount("GPU-hours", "hour", (1, 1e7)),
    "watts": amount("power of one accelerator", "W", (50, 1500)),
    "pue": Domain("real", "power usage effectiveness (>= 1)", low=1.0, sample=(1.0, 2.0)),
    "carbon_intensity": nonnegative("grams of CO2 per kWh", "", (10, 800)),
    "energy_kwh": nonnegative("energy in kWh", "kWh", (1, 1e7)),
    "mfu": unit_interval("model FLOPs utilisation", low_open=True, sample=(0.1, 0.7)),
    "parallel_fraction": unit_interval("fraction of the work that parallelises"),
    "serial_fraction": unit_interval("fraction of the work that stays serial"),
    # --- probabilities and counts of trials ---------------------------------------
    "p": PROBABILITY,
    "n": count("count n", low=0, sample=(1, 50)),
    "c": count("correct samples c", low=0, sample=(0, 50)),
    "k": count("count k", sample=(1, 50)),
    "extra_forwards": count("forward passes recomputed per step", low=0, sample=(0, 3)),
}


def register_arguments(domains: dict[str, Domain]) -> None:
    """Add argument names a module introduces; the same name must keep one meaning."""
    for name, dom in domains.items():
        known = ARGUMENTS.get(name)
        if known is not None and known != dom:
            raise ValueError(f"argument {name!r} registered twice with different domains")
        ARGUMENTS[name] = dom


def domain_of(name: str, *, where: str) -> Domain:
    """The domain of argument ``name``; a formula with an unknown argument fails at import."""
    try:
        return ARGUMENTS[name]
    except KeyError:
        raise KeyError(
            f"{where}: argument {name!r} has no domain: add it to costmodel.arguments.ARGUMENTS "
            "or pass domains={...} to @formula"
        ) from None
