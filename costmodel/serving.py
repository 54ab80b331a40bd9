"""Serving: speculative decoding, quantized weights, the decode ceiling, prefix caching
(000 ch. 6 and §7.4, 001 §5 and Ex. 3).

A decode step at small batch reads every weight once, so its time is the weight bytes
over the memory bandwidth (000 Prop 6.4).  Quantization shrinks those bytes;
speculative decoding spends the idle compute of that step on checking γ draft tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from costmodel._derive import general_branch
from costmodel._registry import derivation, formula
from costmodel.arguments import (
    ArgumentError,
    Domain,
    amount,
    count,
    register_arguments,
    unit_interval,
)

register_arguments(
    {
        "draft_cost": unit_interval(
            "cost of one draft pass relative to one target pass c", sample=(0.01, 0.5)
        ),
        "bits_per_weight": amount(
            "storage bits per weight, scales included", "bit", (2, 16), log=False
        ),
        "tokens_per_turn": count(
            "tokens m appended to the context at each agent turn", sample=(10, 2000), log=True
        ),
        "n_turns": count("turns T of an agent session", sample=(1, 100)),
    }
)

# Names whose meaning is local to speculative decoding and quantization.
_ALPHA = unit_interval("acceptance probability α of one draft token", sample=(0.3, 0.99))
_ALPHA_BELOW_ONE = unit_interval(
    "acceptance probability α of one draft token", high_open=True, sample=(0.3, 0.99)
)
_GAMMA = count("draft tokens γ proposed per target pass", low=0, sample=(0, 16))
_TARGET = Domain("distribution", "target model's next-token distribution p")
_DRAFT = Domain("distribution", "draft model's next-token distribution q")
_BITS = amount("bits b of one quantized weight", "bit", (2, 16), log=False)
_GROUP = count("weights g sharing one scale", sample=(16, 1024), log=True)
_SCALE_BITS = amount("bits s of one scale", "bit", (8, 32), log=False)
_BASE_BITS = amount("bits per weight before quantization (16 for bf16)", "bit", (8, 32), log=False)
_MEMORY = amount("accelerator memory available for the weights", "byte", (1e9, 2e11))
_SPECULATIVE = {"alpha": _ALPHA, "gamma": _GAMMA}


# --- speculative decoding (000 §6.4) --------------------------------------------------


def _same_vocabulary(where: str, p: Sequence[float], q: Sequence[float]) -> None:
    if len(p) != len(q):
        raise ArgumentError(
            f"serving.{where}: p has {len(p)} tokens and q has {len(q)} "
            "(target and draft must share one vocabulary)"
        )


@formula("000 §6.4, Thm 6.11; Ex. 12(a)", "", domains={"p": _TARGET, "q": _DRAFT})
def speculative_acceptance(p: Sequence[float], q: Sequence[float]) -> float:
    """Acceptance probability of one draft token: α = Σ_x min(p(x), q(x)) = 1 − TV(p, q).

    The draft token x ~ q is kept with probability min(1, p(x)/q(x)).
    """
    _same_vocabulary("speculative_acceptance", p, q)
    return float(sum(min(pi, qi) for pi, qi in zip(p, q, strict=True)))


@formula("000 §6.4, Thm 6.11; Ex. 12(a)", "", domains={"p": _TARGET, "q": _DRAFT})
def speculative_residual(p: Sequence[float], q: Sequence[float]) -> tuple[float, ...]:
    """Residual distribution sampled after a rejection: (p − q)₊ / Σ (p − q)₊.

    It puts its mass on the tokens the draft under-samples; with it the output has
    exactly the target distribution p.
    """
    _same_vocabulary("speculative_residual", p, q)
    excess = [max(pi - qi, 0.0) for pi, qi in zip(p, q, strict=True)]  # (p − q)₊ per token
    total = sum(excess)  # = 1 − α, the rejection probability
    if total <= 0:
        raise ArgumentError(
            "serving.speculative_residual: p = q, so no draft token is ever rejected "
            "(the residual is undefined when α = 1)"
        )
    return tuple(e / total for e in excess)


@formula("000 §6.4, Prop 6.12", "", domains=_SPECULATIVE)
def speculative_tokens_per_pass(alpha: float, gamma: int) -> float:
    """Expected tokens per target pass: (1 − α^(γ+1)) / (1 − α); γ + 1 when α = 1.

    The i-th draft token survives with probability α^i; the target adds one token
    (the residual sample, or a bonus token after γ acceptances).
    """
    if alpha == 1:
        return float(gamma + 1)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


@derivation(speculative_tokens_per_pass, where=lambda v: v["alpha"] < 1)
def _(sp):
    """Tail sum: E[tokens] = Σ_{i=0}^{γ} P(at least i drafts accepted) = Σ α^i."""
    alpha, gamma = sp.symbols("alpha gamma", positive=True)
    i = sp.symbols("i", integer=True, nonnegative=True)
    tail = sp.summation(alpha**i, (i, 0, gamma))  # P(≥ i accepted) = α^i; i = 0 is the target's
    return general_branch(sp, tail), (1 - alpha ** (gamma + 1)) / (1 - alpha)


@formula("000 §6.4", "", domains={"gamma": _GAMMA})
def speculative_draft_overhead(gamma: int, draft_cost: float) -> float:
    """Draft cost per target pass, in target passes: γc."""
    return gamma * draft_cost


@formula("000 §6.4, Thm 6.11, Prop 6.12; Ex. 12(b)", "", domains=_SPECULATIVE)
def speculative_speedup(alpha: float, gamma: int, draft_cost: float) -> float:
    """Wall-clock speed-up of speculative decoding: (1 − α^(γ+1)) / ((1 − α)(1 + γc))."""
    tokens = speculative_tokens_per_pass(alpha=alpha, gamma=gamma)
    return tokens / (1 + speculative_draft_overhead(gamma=gamma, draft_cost=draft_cost))


@derivation(speculative_speedup, where=lambda v: v["alpha"] < 1)
def _(sp):
    """Tokens per target pass over the time of one round: a target pass and γ draft passes."""
    alpha, gamma, c = sp.symbols("alpha gamma draft_cost", positive=True)
    i = sp.symbols("i", integer=True, nonnegative=True)
    tokens = general_branch(sp, sp.summation(alpha**i, (i, 0, gamma)))
    round_time = 1 + sp.summation(c, (i, 1, gamma))  # in target passes
    return tokens / round_time, (1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1))


@formula(
    "000 §6.4, Ex. 12(b)",
    "",
    domains={
        "alpha": _ALPHA_BELOW_ONE,
        "draft_cost": unit_interval(
            "cost of one draft pass relative to one target pass c",
            low_open=True,
            sample=(0.01, 0.5),
        ),
    },
)
def speculative_optimal_gamma(alpha: float, draft_cost: float) -> int:
    """Draft length γ maximizing the speed-up (1 − α^(γ+1)) / ((1 − α)(1 + γc)).

    The speed-up is a concave function over an affine one, hence unimodal in γ: walk up
    from γ = 0 (no speculation) while it still grows.  α = 0.9, c = 0.1 gives γ = 10.
    """
    gamma = 0
    while speculative_speedup(alpha, gamma + 1, draft_cost) > speculative_speedup(
        alpha, gamma, draft_cost
    ):
        gamma += 1
    return gamma


# --- quantized weights and the decode ceiling (000 §6.1, §6.3; 001 Ex. 3) -------------


@formula(
    "000 §6.3", "bit", domains={"bits": _BITS, "group_size": _GROUP, "scale_bits": _SCALE_BITS}
)
def bits_per_weight(bits: float, group_size: int, scale_bits: float = 16) -> float:
    """Storage bits per weight with one scale per group: b + s/g (4 + 16/128 = 4.125)."""
    return bits + scale_bits / group_size


@derivation(bits_per_weight)
def _(sp):
    """b + s/g: a group stores g weights of b bits and one scale of s bits."""
    b, g, s = sp.symbols("bits group_size scale_bits", positive=True)
    group_bits = g * b + s
    return group_bits / g, b + s / g


@formula("000 §5.2, §6.3; 001 Ex. 3(c)", "byte")
def quantized_weight_bytes(n_params: float, bits_per_weight: float) -> float:
    """Bytes of the weights stored on b bits each: N·b/8 (65B at 4 bits = 32.5 GB)."""
    return n_params * bits_per_weight / 8


@formula("000 §5.2 (QLoRA), §6.3", "", domains={"memory_bytes": _MEMORY})
def weights_fit(n_params: float, bits_per_weight: float, memory_bytes: float) -> bool:
    """Whether the quantized weights alone fit in memory: N·b/8 ≤ M."""
    return quantized_weight_bytes(n_params, bits_per_weight) <= memory_bytes


@formula("000 §6.1, Prop 6.4; 001 §5, def 5.1, Ex. 3(b)", "1/s")
def decode_tokens_per_second_bound(weight_bytes: float, bandwidth: float) -> float:
    """Decode ceiling of one sequence: bandwidth / weight bytes (tokens/s).

    Each decode step reads every weight once; the KV cache only lowers this bound.
    """
    return bandwidth / weight_bytes


@derivation(decode_tokens_per_second_bound)
def _(sp):
    """1 / (step time), the step time being the weight bytes over the bandwidth."""
    w, bw = sp.symbols("weight_bytes bandwidth", positive=True)
    step_time = w / bw  # s per token: all weights pass through memory once
    return 1 / step_time, bw / w


@formula("001 Ex. 3(c)", "", domains={"bits": _BITS, "base_bits": _BASE_BITS})
def decode_ceiling_gain(bits: float, base_bits: float = 16) -> float:
    """Gain of the decode ceiling from quantizing the weights: base bits / bits (int8 ×2)."""
    return base_bits / bits


@derivation(decode_ceiling_gain)
def _(sp):
    """Ratio of the two ceilings bandwidth / (N·b/8): N and the bandwidth cancel."""
    b, b0, n, bw = sp.symbols("bits base_bits n_params bandwidth", positive=True)

    def ceiling(bits):  # tokens/s with N weights of `bits` bits each
        return bw / (n * bits / 8)

    return ceiling(b) / ceiling(b0), b0 / b


# --- prefix caching for agents (000 §7.4) ---------------------------------------------


@formula("000 §7.4", "")
def prefill_tokens_without_cache(tokens_per_turn: int, n_turns: int) -> int:
    """Tokens prefilled over T turns of m tokens, re-sending the history: m·T(T + 1)/2."""
    return tokens_per_turn * n_turns * (n_turns + 1) // 2


@derivation(prefill_tokens_without_cache)
def _(sp):
    """Σ_{t=1}^{T} m·t: turn t prefills the whole history of t·m tokens."""
    m, T = sp.symbols("tokens_per_turn n_turns", positive=True, integer=True)
    t = sp.symbols("t", integer=True, positive=True)
    return sp.summation(m * t, (t, 1, T)), m * T * (T + 1) / 2


@formula("000 §7.4", "")
def prefill_tokens_with_cache(tokens_per_turn: int, n_turns: int) -> int:
    """Tokens prefilled with a prefix cache: m·T (only each turn's new tokens)."""
    return tokens_per_turn * n_turns


@formula("000 §7.4", "")
def prefix_cache_saving(n_turns: int) -> float:
    """Prefill tokens saved by the prefix cache, as a ratio: (T + 1)/2."""
    return (n_turns + 1) / 2


@derivation(prefix_cache_saving)
def _(sp):
    """Σ_t m·t over Σ_t m: the history sum over the new tokens; m cancels."""
    m, T = sp.symbols("tokens_per_turn n_turns", positive=True, integer=True)
    t = sp.symbols("t", integer=True, positive=True)
    ratio = sp.summation(m * t, (t, 1, T)) / sp.summation(m, (t, 1, T))
    return ratio, (T + 1) / 2
