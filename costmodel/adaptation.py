"""Low-rank adaptation (LoRA): trainable parameters of an adapter (000 §5.2, 001 ch. 0).

LoRA freezes a pretrained matrix W0 of shape d_out×d_in and learns W = W0 + BA with
B: d_out×r (zero at start) and A: r×d_in, r ≪ min(d_in, d_out) (Hu et al. 2022).
"""

from __future__ import annotations

from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError


def _check_rank(where: str, d_in: int, d_out: int, rank: int) -> None:
    if rank > min(d_in, d_out):
        raise ArgumentError(
            f"adaptation.{where}: rank = {rank} exceeds min(d_in, d_out) = {min(d_in, d_out)} "
            "(a LoRA rank larger than the matrix saves nothing; use r << min(d_in, d_out))"
        )


@formula("000 §5.2; 001 ch. 0 (LoRA in five lines); Hu et al. 2022", "")
def lora_param_count(d_in: int, d_out: int, rank: int) -> float:
    """Trainable parameters of a LoRA adapter on one matrix: r(d_in + d_out).

    B is d_out×r and A is r×d_in; the frozen W0 (d_out×d_in) gets no gradient.
    """
    _check_rank("lora_param_count", d_in, d_out, rank)
    return rank * (d_in + d_out)


def _factor_entries(sp):
    """Entries of the two factors B (d_out×r) and A (r×d_in), as sympy expressions."""
    d_in, d_out, r = sp.symbols("d_in d_out rank", positive=True, integer=True)
    B = sp.MatrixSymbol("B", d_out, r)  # starts at zero
    A = sp.MatrixSymbol("A", r, d_in)  # random init
    return B.shape[0] * B.shape[1] + A.shape[0] * A.shape[1], (d_in, d_out, r)


def _fits(v: dict) -> bool:
    return v["rank"] <= min(v["d_in"], v["d_out"])


@derivation(lora_param_count, where=_fits)
def _(sp):
    """r(d_in + d_out): the entries of B (d_out×r) plus those of A (r×d_in)."""
    entries, (d_in, d_out, r) = _factor_entries(sp)
    return entries, r * (d_in + d_out)


@formula("000 §5.2; 001 ch. 0 (LoRA)", "")
def full_param_count(d_in: int, d_out: int) -> float:
    """Parameters of the full (frozen) matrix W0 that LoRA adapts: d_in·d_out."""
    return d_in * d_out


@formula("000 §5.2 (0.39 % for d = k = 4096, r = 8)", "")
def lora_fraction(d_in: int, d_out: int, rank: int) -> float:
    """Share of a matrix's parameters that LoRA trains: r(d_in + d_out)/(d_in·d_out)."""
    _check_rank("lora_fraction", d_in, d_out, rank)
    return rank * (d_in + d_out) / (d_in * d_out)


@derivation(lora_fraction, where=_fits)
def _(sp):
    """r(d_in + d_out)/(d_in d_out): adapter entries over the entries of W0 (d_out×d_in)."""
    entries, (d_in, d_out, r) = _factor_entries(sp)
    W0 = sp.MatrixSymbol("W0", d_out, d_in)
    return entries / (W0.shape[0] * W0.shape[1]), r * (d_in + d_out) / (d_in * d_out)


@formula("001 ch. 0 (LoRA: 256 times fewer for 4096×4096, r = 8)", "")
def lora_reduction_factor(d_in: int, d_out: int, rank: int) -> float:
    """Times fewer trainable parameters than full fine-tuning: d_in·d_out/(r(d_in + d_out))."""
    _check_rank("lora_reduction_factor", d_in, d_out, rank)
    return d_in * d_out / (rank * (d_in + d_out))


@derivation(lora_reduction_factor, where=_fits)
def _(sp):
    """d_in d_out/(r(d_in + d_out)): entries of W0 over the entries of B and A."""
    entries, (d_in, d_out, r) = _factor_entries(sp)
    return (d_out * d_in) / entries, d_in * d_out / (r * (d_in + d_out))
