"""The roofline model: arithmetic intensity against the ridge (000 §2.1; 001 ch. 6, def 6.1).

A kernel doing F FLOPs while moving B bytes to and from memory has intensity I = F/B;
on a device of peak π FLOP/s and memory bandwidth β byte/s it runs at most at
min(π, βI).  It is memory-bound below the ridge I = π/β and compute-bound above.
"""

from __future__ import annotations

from costmodel._registry import derivation, formula
from costmodel.arguments import amount, count

_DIM = count("matrix dimension", sample=(1, 8192), log=True)
_FLOPS_PER_ELEMENT = amount("FLOPs per element of a pointwise kernel", "FLOP", (1, 100))


@formula("000 §2.1; 001 ch. 6, def 6.1", "FLOP/byte")
def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """Arithmetic intensity I = FLOPs / bytes moved to and from memory."""
    return flops / bytes_moved


@formula("000 §2.1, Exercise 3; 001 ch. 6, def 6.1, example 6.2", "FLOP/byte")
def ridge_intensity(peak_flops: float, bandwidth: float) -> float:
    """Ridge point π/β: the intensity where the memory roof βI meets the compute roof π."""
    return peak_flops / bandwidth


@derivation(ridge_intensity)
def _(sp):
    """π/β: solve βI = π for I."""
    pi, beta, intensity = sp.symbols("peak_flops bandwidth I", positive=True)
    (ridge,) = sp.solve(sp.Eq(beta * intensity, pi), intensity)
    return ridge, pi / beta


@formula("000 §2.1, Exercise 3; 001 ch. 6, def 6.1", "FLOP/s")
def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """Attainable throughput min(π, βI)."""
    return min(peak_flops, bandwidth * intensity)


@formula("000 §2.1, Exercise 3(b)", "")
def fraction_of_peak(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """Share of the peak a kernel can reach: min(π, βI)/π = min(1, I/ridge)."""
    return attainable_flops(intensity, peak_flops, bandwidth) / peak_flops


@formula(
    "000 §2.1, Exercise 3; 001 exam Q1", "FLOP/byte", domains={"m": _DIM, "n": _DIM, "k": _DIM}
)
def gemm_intensity(m: int, n: int, k: int, bytes_per_value: float = 2) -> float:
    """Intensity of an (m×k)·(k×n) product: 2mnk / (bytes·(mk + kn + mn)).

    A and B are read once and C written once (each tile of the product reused from
    on-chip memory).
    """
    return 2 * m * n * k / (bytes_per_value * (m * k + k * n + m * n))


@derivation(gemm_intensity)
def _(sp):
    """2mnk/(bytes(mk + kn + mn)): matmul FLOPs over the bytes of A, B and C."""
    m, n, k, nb = sp.symbols("m n k bytes_per_value", positive=True)
    i = sp.symbols("i", integer=True)
    flops = m * n * sp.summation(2, (i, 1, k))  # mn outputs, k multiply-adds each
    moved = nb * (m * k) + nb * (k * n) + nb * (m * n)  # read A, read B, write C
    return flops / moved, 2 * m * n * k / (nb * (m * k + k * n + m * n))


@formula("000 §2.1, Exercise 3(a)", "FLOP/byte", domains={"n": _DIM})
def square_gemm_intensity(n: int, bytes_per_value: float = 2) -> float:
    """Intensity of an n×n by n×n product: 2n/(3·bytes), n/3 in bf16."""
    return 2 * n / (3 * bytes_per_value)


@derivation(square_gemm_intensity)
def _(sp):
    """n/3 in bf16: 2n³ FLOPs over three n×n matrices of bytes each."""
    n, nb = sp.symbols("n bytes_per_value", positive=True)
    m = k = n
    general = 2 * m * n * k / (nb * (m * k + k * n + m * n))
    return general, 2 * n / (3 * nb)


@formula("000 Exercise 3(b); 001 exam Q1", "FLOP/byte")
def decode_intensity(batch: int = 1, bytes_per_value: float = 2) -> float:
    """Intensity of a decode step (a skinny GEMM): 2b/bytes, ≈ b for bf16 weights.

    Each weight is read once (bytes) and used for a multiply-add (2 FLOPs) by each of
    the b sequences of the batch; the b×d activations are negligible against the d×d
    weights.  Batch 1 in bf16: 1 FLOP/byte.
    """
    return 2 * batch / bytes_per_value


@derivation(decode_intensity)
def _(sp):
    """2b/bytes: the (b×d)·(d×d) GEMM intensity as the width d → ∞."""
    b, d, nb = sp.symbols("batch d bytes_per_value", positive=True)
    skinny = 2 * b * d * d / (nb * (b * d + d * d + b * d))
    return sp.limit(skinny, d, sp.oo), 2 * b / nb


@formula("001 exam Q1 (prefill compute-bound beyond ≈ 150 tokens)", "")
def compute_bound_tokens(peak_flops: float, bandwidth: float, bytes_per_value: float = 2) -> float:
    """Tokens sharing each weight read beyond which a matmul is compute-bound: π·bytes/(2β).

    Prefill of n prompt tokens (or decode at batch n) has intensity 2n/bytes; it
    reaches the ridge at n = π·bytes/(2β), the ridge itself in bf16 (156 on an A100).
    """
    return peak_flops * bytes_per_value / (2 * bandwidth)


@derivation(compute_bound_tokens)
def _(sp):
    """π·bytes/(2β): solve 2n/bytes = π/β for n."""
    pi, beta, nb, n = sp.symbols("peak_flops bandwidth bytes_per_value n", positive=True)
    (tokens,) = sp.solve(sp.Eq(2 * n / nb, pi / beta), n)
    return tokens, pi * nb / (2 * beta)


@formula("001 Exercise 4", "FLOP/byte", domains={"m": _DIM, "n": _DIM})
def gemv_intensity(m: int, n: int, bytes_per_value: float = 4) -> float:
    """Intensity of y = Xw with X m×n: 2mn / (bytes·(mn + m + n)); → 2/bytes as m grows.

    001 Ex. 4 counts fp32 (4 bytes): I < 1/2 for every m, memory-bound on any GPU.
    """
    return 2 * m * n / (bytes_per_value * (m * n + m + n))


@derivation(gemv_intensity)
def _(sp):
    """2mn/(bytes(mn + m + n)): m dot products of length n over the bytes of X, w and y."""
    m, n, nb = sp.symbols("m n bytes_per_value", positive=True)
    i = sp.symbols("i", integer=True)
    flops = m * sp.summation(2, (i, 1, n))
    moved = nb * (m * n) + nb * n + nb * m  # read X, read w, write y
    return flops / moved, 2 * m * n / (nb * (m * n + m + n))


@formula(
    "000 Exercise 3(c) (layer norm)", "FLOP/byte", domains={"flops_per_element": _FLOPS_PER_ELEMENT}
)
def elementwise_intensity(flops_per_element: float, bytes_per_value: float = 2) -> float:
    """Intensity of a pointwise kernel reading and writing each element once: f/(2·bytes).

    A bf16 layer norm at about 8 FLOPs per element: 8/4 = 2.
    """
    return flops_per_element / (2 * bytes_per_value)
