"""The time budget: seconds, GPU-hours, MFU, accelerators, Amdahl (000 §1.3, Ex. 2; 001 ch. 1, 6).

A run of C FLOPs on n accelerators of peak π FLOP/s at model FLOPs utilisation MFU
sustains n·π·MFU FLOP/s, so it lasts C/(n·π·MFU) seconds.
"""

from __future__ import annotations

import math

from costmodel._numeric import ceil
from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError

SECONDS_PER_HOUR = 3600
SECONDS_PER_DAY = 86400


@formula("000 §1.3; 001 Exam Q2(b) (0.4 × 312 TFLOP/s ≈ 1.25e14)", "FLOP/s")
def sustained_flops(peak_flops: float, mfu: float) -> float:
    """FLOP/s one accelerator sustains on the model: MFU·peak."""
    return mfu * peak_flops


@formula("000 §1.3; 001 ch. 1 (counting code), Ex. 1, Ex. 7", "s")
def training_seconds(total_flops: float, n_gpus: int, peak_flops: float, mfu: float) -> float:
    """Wall-clock seconds of a run: C/(n·peak·MFU)."""
    return total_flops / (n_gpus * sustained_flops(peak_flops=peak_flops, mfu=mfu))


@derivation(training_seconds)
def _(sp):
    """C/(nπ·MFU): solve C = (n accelerators × MFU·π FLOP/s each) × t for t."""
    C, n, peak, m, t = sp.symbols("total_flops n_gpus peak_flops mfu t", positive=True)
    rate = n * (m * peak)  # FLOP/s of the whole job
    return sp.solve(sp.Eq(C, rate * t), t)[0], C / (n * peak * m)


@formula("000 Ex. 2; 001 ch. 1 (LLaMA-7B ≈ 80 000 GPU-hours), Ex. 1, Ex. 7", "hour")
def gpu_hours(total_flops: float, peak_flops: float, mfu: float) -> float:
    """Accelerator-hours of a run: C/(peak·MFU)/3600 (independent of how many GPUs share it)."""
    return total_flops / sustained_flops(peak_flops=peak_flops, mfu=mfu) / SECONDS_PER_HOUR


@derivation(gpu_hours)
def _(sp):
    """C/(π·MFU·3600): n GPUs busy for t = C/(nπ·MFU) seconds; n cancels."""
    C, n, peak, m = sp.symbols("total_flops n_gpus peak_flops mfu", positive=True)
    seconds = C / (n * peak * m)
    return n * seconds / SECONDS_PER_HOUR, C / (peak * m * 3600)


@formula("000 Ex. 2 (0.4 × 3e14 × 86 400 ≈ 1.04e19 FLOPs per day)", "FLOP")
def delivered_flops(peak_flops: float, mfu: float, seconds: float = SECONDS_PER_DAY) -> float:
    """FLOPs one accelerator delivers in a duration (a day by default): MFU·peak·T."""
    return sustained_flops(peak_flops=peak_flops, mfu=mfu) * seconds


@derivation(delivered_flops)
def _(sp):
    """MFU·π·T: the sustained rate integrated over T seconds."""
    peak, m, T, tau = sp.symbols("peak_flops mfu seconds tau", positive=True)
    return sp.integrate(m * peak, (tau, 0, T)), m * peak * T


@formula("000 Ex. 2 (20 accelerators for 24 h)", "")
def accelerators_needed(total_flops: float, peak_flops: float, mfu: float, seconds: float) -> int:
    """Accelerators to finish C FLOPs within T seconds: ⌈C/(peak·MFU·T)⌉."""
    exact = total_flops / delivered_flops(peak_flops=peak_flops, mfu=mfu, seconds=seconds)
    return ceil(exact)  # an exact fit is not rounded up by float noise


@formula("000 §1.3 (MFU); 001 ch. 6; PaLM (Chowdhery et al. 2022), app. B", "")
def mfu(tokens_per_second: float, flops_per_token: float, n_gpus: int, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over peak, tokens/s·FLOPs per token/(n·peak).

    ``flops_per_token`` is the training count 6N (or 6N + attention), not the FLOPs the
    hardware executed (recomputation does not count).
    """
    achieved = tokens_per_second * flops_per_token  # model FLOP/s of the job
    value = achieved / (n_gpus * peak_flops)
    if value > 1 + 1e-9:  # float noise at exactly 100 % is not an error
        raise ArgumentError(
            f"budget.mfu: tokens_per_second × flops_per_token = {achieved:.3g} FLOP/s exceeds "
            f"n_gpus × peak_flops = {n_gpus * peak_flops:.3g} (check the units of peak_flops "
            "and that flops_per_token is the per-token training count, 6N)"
        )
    return value


def _under_peak(v: dict) -> bool:
    return v["tokens_per_second"] * v["flops_per_token"] <= v["n_gpus"] * v["peak_flops"]


@derivation(mfu, where=_under_peak)
def _(sp):
    """tokens/s·FLOPs/token/(nπ): invert t = C/(nπ·MFU) for D tokens processed in D/(tokens/s)."""
    tps, fpt, n, peak, m, D = sp.symbols(
        "tokens_per_second flops_per_token n_gpus peak_flops m D", positive=True
    )
    seconds = D / tps  # time to process D tokens
    C = fpt * D  # model FLOPs of those tokens
    return sp.solve(sp.Eq(seconds, C / (n * peak * m)), m)[0], tps * fpt / (n * peak)


@formula("001 ch. 6, prop 6.3 (Amdahl 1967)", "")
def amdahl_speedup(serial_fraction: float, n_gpus: int) -> float:
    """Amdahl speed-up on n workers with serial fraction f: 1/(f + (1 − f)/n)."""
    return 1 / (serial_fraction + (1 - serial_fraction) / n_gpus)


@derivation(amdahl_speedup)
def _(sp):
    """1/(f + (1 − f)/n): the serial time f stays, the parallel time 1 − f is split n ways."""
    f, n = sp.symbols("serial_fraction n_gpus", positive=True)
    one_worker = f + (1 - f)  # normalised time on one worker
    n_workers = f + (1 - f) / n
    return one_worker / n_workers, 1 / (f + (1 - f) / n)


@formula("001 ch. 6, prop 6.3 (Amdahl's ceiling)", "")
def amdahl_max_speedup(serial_fraction: float) -> float:
    """Speed-up with unlimited workers: 1/f (infinite when nothing is serial)."""
    return math.inf if serial_fraction == 0 else 1 / serial_fraction


@derivation(amdahl_max_speedup)
def _(sp):
    """1/f: the limit of 1/(f + (1 − f)/n) as n → ∞."""
    f, n = sp.symbols("serial_fraction n", positive=True)
    return sp.limit(1 / (f + (1 - f) / n), n, sp.oo), 1 / f
