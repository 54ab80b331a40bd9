"""Memory of training and serving: model states, ZeRO, activations, checkpointing, KV cache.

000 §1.2 (the memory budget), §2.5 (checkpointing), §3.2 (ZeRO), §6.1–6.2 (KV cache,
paging); 001 ch. 1, 4 and 5.  Mixed-precision Adam keeps, per parameter, 2 bytes of
bf16 weights, 2 of bf16 gradients and 12 of fp32 optimizer states (master weights,
first and second moments): 16 bytes.  Everything is in bytes; GB and GiB are for the
edges.
"""

from __future__ import annotations

import math

from costmodel._numeric import ceil, floor
from costmodel._registry import derivation, formula
from costmodel.arguments import (
    ArgumentError,
    Domain,
    amount,
    count,
    nonnegative,
    register_arguments,
)

register_arguments(
    {
        "largest_layer_params": nonnegative(
            "parameters of the largest layer (gathered whole under ZeRO-3)", "", (0, 1e9)
        ),
        "free_bytes": amount("memory left for the KV cache after the weights", "byte", (1e9, 1e11)),
        "out_tokens": count("tokens a request generates", sample=(1, 4096), log=True),
        "max_tokens": count("tokens reserved per request (l_max)", sample=(128, 32768), log=True),
        "block_size": count("tokens per KV-cache block B_s", sample=(1, 64)),
    }
)

# Bytes per parameter of each model state under mixed-precision Adam (000 Prop 1.2).
WEIGHT_BYTES = 2  # bf16 weights
GRADIENT_BYTES = 2  # bf16 gradients
FP32_GRADIENT_BYTES = 4  # the fp32 gradient copy DeepSpeed also counts (the notes do not)


@formula("000 §1.2, Prop 1.2; 001 §1.4, def 1.4", "byte")
def model_state_bytes(n_params: float, bytes_per_param: float = 16) -> float:
    """Model states N·bytes_per_param: 16N for mixed-precision Adam (2 + 2 + 12 bytes).

    ``bytes_per_param=2`` gives the bf16 weights (or gradients) alone.
    """
    return n_params * bytes_per_param


@derivation(model_state_bytes, fixed={"bytes_per_param": 16})
def _(sp):
    """16N: bf16 weights and gradients, fp32 master weights, first and second moments."""
    N = sp.symbols("n_params", positive=True)
    per_param = {"weights": 2, "gradients": 2, "master": 4, "m": 4, "v": 4}
    return N * sum(per_param.values()), 16 * N


# --- ZeRO ---------------------------------------------------------------------------

# Which states each ZeRO stage shards over the N_d data-parallel GPUs (000 Prop 3.7).
ZERO_SHARDED = {
    0: (),
    1: ("optimizer",),
    2: ("optimizer", "gradients"),
    3: ("optimizer", "gradients", "weights"),
}

_CONVENTION = Domain(
    "choice",
    "whose count of ZeRO memory: the notes' table or DeepSpeed's estimator",
    choices=("notes", "deepspeed"),
)


def _state_bytes(optimizer_bytes_per_param: float) -> dict[str, float]:
    return {
        "weights": WEIGHT_BYTES,
        "gradients": GRADIENT_BYTES,
        "optimizer": optimizer_bytes_per_param,
    }


@formula(
    "000 §3.2, Prop 3.7; 001 ch. 4, def 4.2; DeepSpeed estimate_zero{2,3}_model_states_mem_needs",
    "byte",
    domains={"convention": _CONVENTION},
)
def zero_bytes_per_gpu(
    n_params: float,
    n_gpus: int,
    stage: int,
    optimizer_bytes_per_param: float = 12,
    convention: str = "notes",
    largest_layer_params: float = 0,
) -> float:
    """Model states per GPU under ZeRO: 16Φ, (4 + 12/N_d)Φ, (2 + 14/N_d)Φ, 16Φ/N_d.

    ``convention="notes"`` (the default) is the table of 000 Prop 3.7: stage s shards
    the states of :data:`ZERO_SHARDED` over N_d = ``n_gpus`` GPUs (stage 0 is plain data
    parallelism) and counts only the persistent states.

    ``convention="deepspeed"`` reproduces DeepSpeed's estimators with offload off (the
    ``gpu_mem`` of ``estimate_zero2_model_states_mem_needs`` and
    ``estimate_zero3_model_states_mem_needs``; DeepSpeed has none for stages 0 and 1):

    - stage 2: 2Φ + 18Φ/N_d.  The 2Φ are the replicated bf16 weights; the 18 sharded
      bytes are, in DeepSpeed's own comment, 2 (bf16 gradients) + 4 (fp32 gradients)
      + 4 (fp32 master weights) + 8 (Adam moments).  The 4 bytes of fp32 gradients are
      what the notes do not count, hence 18 instead of 14.
    - stage 3: 18Φ/N_d + 4·``largest_layer_params``: the same 18 bytes per sharded
      parameter (the source does not itemise them; the 2-byte bf16 weight shard is not
      added on top), plus the largest layer gathered whole, at 4 bytes per parameter.

    With ``optimizer_bytes_per_param`` K other than 12, the DeepSpeed count keeps its
    6 bytes of gradients (2 + 4) beside K: 6 + K sharded bytes.
    """
    name = "memory.zero_bytes_per_gpu"
    if largest_layer_params and (convention, stage) != ("deepspeed", 3):
        raise ArgumentError(
            f"{name}: largest_layer_params is counted only by DeepSpeed's ZeRO-3 estimate "
            "(pass convention='deepspeed', stage=3, or leave it 0)"
        )
    if convention == "deepspeed":
        sharded = (
            (GRADIENT_BYTES + FP32_GRADIENT_BYTES + optimizer_bytes_per_param) * n_params / n_gpus
        )
        if stage == 2:
            return WEIGHT_BYTES * n_params + sharded
        if stage == 3:
            return sharded + 4 * largest_layer_params
        raise ArgumentError(
            f"{name}: stage = {stage}: DeepSpeed estimates stages 2 and 3 only "
            "(use convention='notes' for stages 0 and 1)"
        )
    states = _state_bytes(optimizer_bytes_per_param)
    return n_params * sum(
        b / n_gpus if state in ZERO_SHARDED[stage] else b for state, b in states.items()
    )


def _zero_derived(sp, stage: int):
    """Φ·Σ (bytes of each state, divided by N_d when the stage shards it)."""
    Phi, N_d, K = sp.symbols("n_params n_gpus optimizer_bytes_per_param", positive=True)
    states = {"weights": 2, "gradients": 2, "optimizer": K}
    derived = Phi * sum(b / N_d if s in ZERO_SHARDED[stage] else b for s, b in states.items())
    return derived, (Phi, N_d, K)


@derivation(zero_bytes_per_gpu, fixed={"stage": 1, "convention": "notes"})
def _(sp):
    """ZeRO-1 (4 + K/N_d)Φ: only the optimizer states are sharded."""
    derived, (Phi, N_d, K) = _zero_derived(sp, 1)
    return derived, (4 + K / N_d) * Phi


@derivation(zero_bytes_per_gpu, fixed={"stage": 2, "convention": "notes"})
def _(sp):
    """ZeRO-2 (2 + (2 + K)/N_d)Φ, (2 + 14/N_d)Φ for Adam: gradients sharded too."""
    derived, (Phi, N_d, K) = _zero_derived(sp, 2)
    return derived, (2 + (2 + K) / N_d) * Phi


@derivation(zero_bytes_per_gpu, fixed={"stage": 3, "convention": "notes"})
def _(sp):
    """ZeRO-3 (4 + K)Φ/N_d, 16Φ/N_d for Adam: every state sharded."""
    derived, (Phi, N_d, K) = _zero_derived(sp, 3)
    return derived, (4 + K) * Phi / N_d


@derivation(zero_bytes_per_gpu, fixed={"stage": 2, "convention": "deepspeed"})
def _(sp):
    """DeepSpeed ZeRO-2 2Φ + (6 + K)Φ/N_d, 2Φ + 18Φ/N_d for Adam: fp32 gradients sharded too."""
    Phi, N_d, K = sp.symbols("n_params n_gpus optimizer_bytes_per_param", positive=True)
    replicated = {"bf16 weights": 2}
    sharded = {"bf16 gradients": 2, "fp32 gradients": 4, "optimizer": K}
    derived = Phi * (sum(replicated.values()) + sum(sharded.values()) / N_d)
    return derived, 2 * Phi + (6 + K) * Phi / N_d


# Collectives each stage runs per step, and how many Φ-sized passes each is: a ring
# reduce-scatter or all-gather sends (N_d − 1)/N_d·Φ values per GPU (000 Thm 3.3).
ZERO_COLLECTIVES = {
    0: ("reduce-scatter gradients", "all-gather gradients"),  # the all-reduce of DDP
    1: ("reduce-scatter gradients", "all-gather gradients"),
    2: ("reduce-scatter gradients", "all-gather updated weights"),
    3: (
        "all-gather weights (forward)",
        "all-gather weights (backward)",
        "reduce-scatter gradients",
    ),
}


@formula("000 §3.2, Prop 3.7; 000 written exam Q1", "")
def zero_communication_volume(n_params: float, stage: int) -> float:
    """Values each GPU sends per step under ZeRO: 2Φ for stages 0–2, 3Φ for stage 3.

    Counted from :data:`ZERO_COLLECTIVES`, each a ring collective of (N_d − 1)/N_d·Φ
    ≈ Φ values for large N_d (multiply by 2 bytes for bf16).  ZeRO-3 pays one more
    all-gather of the weights, because they are dropped after the forward pass.
    """
    return len(ZERO_COLLECTIVES[stage]) * n_params


@derivation(
    zero_communication_volume,
    call=lambda f, v: tuple(f(n_params=v["n_params"], stage=s) for s in range(4)),
)
def _(sp):
    """(2Φ, 2Φ, 2Φ, 3Φ): the large-N_d limit of the ring collectives of each stage."""
    Phi, N_d = sp.symbols("n_params n_gpus", positive=True)
    per_collective = (N_d - 1) / N_d * Phi  # values one GPU sends in a ring RS or AG
    derived = tuple(
        sp.limit(len(ZERO_COLLECTIVES[s]) * per_collective, N_d, sp.oo) for s in range(4)
    )
    return derived, (2 * Phi, 2 * Phi, 2 * Phi, 3 * Phi)


# Bytes per parameter at each stage of `accelerate estimate-memory` ("Training using
# Adam"), as a multiple of the fp32 model size 4Φ (accelerate.commands.estimate).
ACCELERATE_STAGES = {
    "float32": {"model": 4, "gradients": 4, "optimizer": 8, "step": 16},
    "float16": {"model": 4, "gradients": 4 + 2, "optimizer": 8, "step": 8},
    "bfloat16": {"model": 4, "gradients": 4 + 2, "optimizer": 8, "step": 8},
}


@formula(
    "accelerate estimate-memory (estimate_training_usage); cf. 000 Prop 1.2",
    "byte",
    domains={
        "dtype": Domain(
            "choice", "training precision given to accelerate", choices=tuple(ACCELERATE_STAGES)
        )
    },
)
def accelerate_training_bytes(n_params: float, dtype: str = "float32") -> float:
    """``accelerate estimate-memory`` training figure: max over its stages, 16N fp32, 8N mixed.

    The stages of :data:`ACCELERATE_STAGES` (bytes per parameter) are snapshots, and
    the tool reports the largest one, not their sum: 16Φ in fp32 (the optimizer step,
    4× the fp32 model) and 8Φ in mixed precision (the fp32 Adam moments).  The notes'
    16Φ (000 Prop 1.2) is a sum of persistent states (2 + 2 + 12); it equals the fp32
    figure only by coincidence, and is twice the mixed-precision one.  Activations are
    counted by neither.  (int8/int4 are "N/A" for training in accelerate.)
    """
    return n_params * max(ACCELERATE_STAGES[dtype].values())


# --- activations --------------------------------------------------------------------


@formula("000 §1.2, Example 1.3; §2.3 (FlashAttention); Korthikanti et al. 2023", "byte")
def activation_bytes_per_layer(
    seq_len: int, batch: int, d_model: int, n_heads: int, flash_attention: bool = False
) -> float:
    """Activations one transformer layer stores for backward: sbh(34 + 5as/h) bytes.

    s = ``seq_len``, b = ``batch``, h = ``d_model``, a = ``n_heads``; bf16 tensors and
    1-byte dropout masks, no tensor parallelism.  FlashAttention recomputes the a·s²
    scores, which removes the 5as/h term: 34sbh.
    """
    sbh = seq_len * batch * d_model
    scores = 0 if flash_attention else 5 * n_heads * seq_len / d_model
    return sbh * (34 + scores)


def _korthikanti_terms(sp):
    """Bytes of every tensor one layer keeps for backward (Korthikanti et al. §4.1)."""
    s, b, h, a = sp.symbols("seq_len batch d_model n_heads", positive=True)
    attention = {
        "QKV input": 2 * s * b * h,
        "Q and K (for QK^T)": 4 * s * b * h,
        "softmax output": 2 * a * s * s * b,
        "softmax dropout mask": a * s * s * b,
        "dropout output (times V)": 2 * a * s * s * b,
        "V": 2 * s * b * h,
        "output projection input": 2 * s * b * h,
        "attention dropout mask": s * b * h,
    }
    mlp = {
        "first linear input": 2 * s * b * h,
        "GeLU input": 8 * s * b * h,  # 4h wide
        "second linear input": 8 * s * b * h,
        "MLP dropout mask": s * b * h,
    }
    norms = {"two LayerNorm inputs": 4 * s * b * h}
    return {**attention, **mlp, **norms}, (s, b, h, a)


@derivation(activation_bytes_per_layer, fixed={"flash_attention": False})
def _(sp):
    """sbh(34 + 5as/h): the sum of the tensors attention, MLP and norms keep."""
    terms, (s, b, h, a) = _korthikanti_terms(sp)
    return sum(terms.values()), s * b * h * (34 + 5 * a * s / h)


@derivation(activation_bytes_per_layer, fixed={"flash_attention": True, "n_heads": 16})
def _(sp):
    """34sbh: FlashAttention drops the three a·s² tensors (scores, mask, dropout output)."""
    terms, (s, b, h, a) = _korthikanti_terms(sp)
    kept = [v for v in terms.values() if not v.has(a)]
    return sum(kept), 34 * s * b * h


@formula("000 §1.2, Example 1.3; Exercise 1(c)", "byte")
def activation_bytes(
    n_layers: int,
    seq_len: int,
    batch: int,
    d_model: int,
    n_heads: int,
    flash_attention: bool = False,
) -> float:
    """Activations of all layers: L·sbh(34 + 5as/h) (34·L·sbh with FlashAttention)."""
    per_layer = activation_bytes_per_layer(
        seq_len=seq_len,
        batch=batch,
        d_model=d_model,
        n_heads=n_heads,
        flash_attention=flash_attention,
    )
    return n_layers * per_layer


@formula("000 §1.2, Prop 1.2 and Example 1.3; Exercise 1(c)", "byte")
def training_memory_bytes(
    n_params: float,
    n_layers: int,
    seq_len: int,
    batch: int,
    d_model: int,
    n_heads: int,
    flash_attention: bool = False,
    bytes_per_param: float = 16,
) -> float:
    """Model states plus activations: 16N + L·sbh(34 + 5as/h) (no buffers, no logits)."""
    states = model_state_bytes(n_params=n_params, bytes_per_param=bytes_per_param)
    acts = activation_bytes(
        n_layers=n_layers,
        seq_len=seq_len,
        batch=batch,
        d_model=d_model,
        n_heads=n_heads,
        flash_attention=flash_attention,
    )
    return states + acts


_BYTES = amount("bytes", "byte", (1e9, 1e12))


@formula("000 Exercise 1(c)", "", domains={"required_bytes": _BYTES, "memory_bytes": _BYTES})
def fits_in_memory(required_bytes: float, memory_bytes: float) -> bool:
    """Whether a run fits: required ≤ memory, in bytes (a "24 GB" card is 24e9 bytes)."""
    return required_bytes <= memory_bytes


# --- activation checkpointing -------------------------------------------------------

_SEGMENT = amount("layers per inner segment k", "", (1, 64), log=False)


@formula("000 §2.5, Prop 2.8; 001 ch. 4, thm 4.1", "")
def checkpoint_peak_units(n_layers: int, segment_length: float) -> float:
    """Peak activation memory with a checkpoint every k layers: n/k + k layer units.

    n/k checkpoints stay stored; during backward one segment of k layers is recomputed
    and held.  Multiply by the bytes of one layer's activations for bytes.
    """
    if segment_length > n_layers:
        raise ArgumentError(
            f"memory.checkpoint_peak_units: segment_length = {segment_length} exceeds "
            f"n_layers = {n_layers} (use at most one segment of all the layers)"
        )
    return n_layers / segment_length + segment_length


@derivation(checkpoint_peak_units, where=lambda v: v["segment_length"] <= v["n_layers"])
def _(sp):
    """n/k + k: one stored checkpoint per segment plus the layers of one segment."""
    n, k = sp.symbols("n_layers segment_length", positive=True)
    j = sp.symbols("j", integer=True, positive=True)
    checkpoints = sp.summation(1, (j, 1, n / k))  # one per segment
    recomputed = sp.summation(1, (j, 1, k))  # the layers of the segment in backward
    return checkpoints + recomputed, n / k + k


@formula("000 §2.5, Prop 2.8, Exercise 7(a); 001 ch. 4, thm 4.1", "")
def checkpoint_optimal_segment(n_layers: int) -> float:
    """Segment length minimising the checkpointing peak n/k + k: k* = √n."""
    return math.sqrt(n_layers)


@derivation(checkpoint_optimal_segment)
def _(sp):
    """√n from d/dk (n/k + k) = 0."""
    n, k = sp.symbols("n_layers k", positive=True)
    (k_star,) = sp.solve(sp.diff(n / k + k, k), k)
    return k_star, sp.sqrt(n)


@formula("000 §2.5, Prop 2.8; 001 ch. 4, thm 4.1; 001 exam Q3(a)", "")
def checkpoint_min_peak_units(n_layers: int) -> float:
    """Smallest checkpointing peak: 2√n layer units, at k = √n."""
    return 2 * math.sqrt(n_layers)


@derivation(checkpoint_min_peak_units)
def _(sp):
    """2√n: n/k + k at its stationary point."""
    n, k = sp.symbols("n_layers k", positive=True)
    peak = n / k + k
    (k_star,) = sp.solve(sp.diff(peak, k), k)
    return peak.subs(k, k_star), 2 * sp.sqrt(n)


@formula(
    "000 §2.5, Exercise 7(b)", "", domains={"outer_segment": _SEGMENT, "inner_segment": _SEGMENT}
)
def two_level_checkpoint_peak_units(
    n_layers: int, outer_segment: float, inner_segment: float
) -> float:
    """Two-level checkpointing peak: n/k₁ + k₁/k₂ + k₂ layer units.

    Outer checkpoints every k₁ layers (n/k₁ of them); inside the segment being
    processed, inner checkpoints every k₂ layers (k₁/k₂) and one inner segment (k₂).
    """
    if not inner_segment <= outer_segment <= n_layers:
        raise ArgumentError(
            "memory.two_level_checkpoint_peak_units: need inner_segment <= outer_segment "
            f"<= n_layers, got {inner_segment}, {outer_segment}, {n_layers} "
            "(inner segments split an outer one)"
        )
    return n_layers / outer_segment + outer_segment / inner_segment + inner_segment


@formula("000 §2.5, Exercise 7(b)", "")
def two_level_checkpoint_optimal_segments(n_layers: int) -> tuple[float, float]:
    """Best two-level segment lengths: k₁ = n^(2/3), k₂ = n^(1/3)."""
    return n_layers ** (2 / 3), n_layers ** (1 / 3)


def _two_level_stationary(sp):
    """The stationary point of n/k₁ + k₁/k₂ + k₂: ∂/∂k₂ = 0 gives k₁ = k₂², then ∂/∂k₁ = 0."""
    n, k1, k2 = sp.symbols("n_layers k1 k2", positive=True)
    peak = n / k1 + k1 / k2 + k2
    (k1_of_k2,) = sp.solve(sp.diff(peak, k2), k1)
    (k2_star,) = sp.solve(sp.diff(peak, k1).subs(k1, k1_of_k2), k2)
    k1_star = k1_of_k2.subs(k2, k2_star)
    return n, peak.subs({k1: k1_star, k2: k2_star}), (k1_star, k2_star)


@derivation(two_level_checkpoint_optimal_segments)
def _(sp):
    """(n^(2/3), n^(1/3)) from ∇(n/k₁ + k₁/k₂ + k₂) = 0."""
    n, _peak, segments = _two_level_stationary(sp)
    return segments, (n ** sp.Rational(2, 3), n ** sp.Rational(1, 3))


@formula("000 §2.5, Exercise 7(b)", "")
def two_level_checkpoint_min_peak_units(n_layers: int) -> float:
    """Smallest two-level peak: 3n^(1/3) layer units (for two extra forward passes)."""
    return 3 * n_layers ** (1 / 3)


@derivation(two_level_checkpoint_min_peak_units)
def _(sp):
    """3n^(1/3): n/k₁ + k₁/k₂ + k₂ at its stationary point (AM–GM on three terms)."""
    n, peak, _segments = _two_level_stationary(sp)
    return peak, 3 * n ** sp.Rational(1, 3)


@formula("000 §2.5 (code: 16, then 32 calls)", "")
def layer_forward_calls(n_layers: int, extra_forwards: int = 0) -> int:
    """Layer forward calls per step: n(1 + extra), one extra per level of recomputation."""
    return n_layers * (1 + extra_forwards)


# --- KV cache and paging ------------------------------------------------------------


@formula("000 §6.1, Prop 6.2; 001 ch. 5, def 5.1", "byte")
def kv_cache_bytes_per_token(
    n_layers: int, n_kv_heads: int, d_head: int, bytes_per_value: float = 2
) -> float:
    """KV cache per token: 2·L·n_kv·d_head·bytes (a key and a value per layer and KV head)."""
    return 2 * n_layers * n_kv_heads * d_head * bytes_per_value


@derivation(kv_cache_bytes_per_token)
def _(sp):
    """2·L·n_kv·d_head·bytes: sum over layers of K and V, each n_kv·d_head values."""
    L, g, dh, nb = sp.symbols("n_layers n_kv_heads d_head bytes_per_value", positive=True)
    layer = sp.symbols("l", integer=True, positive=True)
    per_layer = sum(g * dh * nb for _tensor in ("K", "V"))
    return sp.summation(per_layer, (layer, 1, L)), 2 * L * g * dh * nb


@formula("000 §6.1, Prop 6.2, Exercise 5(a)", "byte")
def kv_cache_bytes_per_sequence(
    n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, bytes_per_value: float = 2
) -> float:
    """KV cache of one sequence of s tokens: 2·L·n_kv·d_head·bytes·s."""
    per_token = kv_cache_bytes_per_token(
        n_layers=n_layers,
        n_kv_heads=n_kv_heads,
        d_head=d_head,
        bytes_per_value=bytes_per_value,
    )
    return per_token * seq_len


@formula("000 §6.1, Prop 6.2, Exercise 5", "")
def max_concurrent_sequences(
    free_bytes: float,
    n_layers: int,
    n_kv_heads: int,
    d_head: int,
    seq_len: int,
    bytes_per_value: float = 2,
) -> int:
    """Sequences whose KV cache fits in the free memory: ⌊free / (2·L·n_kv·d_head·bytes·s)⌋."""
    per_seq = kv_cache_bytes_per_sequence(
        n_layers=n_layers,
        n_kv_heads=n_kv_heads,
        d_head=d_head,
        seq_len=seq_len,
        bytes_per_value=bytes_per_value,
    )
    return floor(free_bytes / per_seq)


@formula("001 ch. 5, def 5.1, Exercise 3(a); 000 §6.1 (GQA)", "")
def gqa_kv_cache_factor(n_kv_heads: int, n_heads: int) -> float:
    """KV cache of grouped-query attention relative to multi-head: g/h (g KV groups, h heads)."""
    if n_heads % n_kv_heads:
        raise ArgumentError(
            f"memory.gqa_kv_cache_factor: n_kv_heads = {n_kv_heads} must divide "
            f"n_heads = {n_heads} (each KV group serves the same number of query heads)"
        )
    return n_kv_heads / n_heads


@derivation(
    gqa_kv_cache_factor,
    domains={"n_kv_heads": count("key/value heads (GQA groups)", sample=(1, 8))},
    where=lambda v: v["n_heads"] % v["n_kv_heads"] == 0,
)
def _(sp):
    """g/h: the per-token cache with g KV heads over the one with h."""
    L, g, h, dh = sp.symbols("n_layers n_kv_heads n_heads d_head", positive=True)
    return (2 * L * g * dh) / (2 * L * h * dh), g / h


@formula("000 §6.2", "")
def preallocation_waste(out_tokens: int, max_tokens: int) -> float:
    """Share of a pre-allocated l_max-token KV reservation left unused: 1 − out/l_max."""
    if out_tokens > max_tokens:
        raise ArgumentError(
            f"memory.preallocation_waste: out_tokens = {out_tokens} exceeds max_tokens = "
            f"{max_tokens} (a request cannot outgrow its reservation)"
        )
    return 1 - out_tokens / max_tokens


@derivation(preallocation_waste, where=lambda v: v["out_tokens"] <= v["max_tokens"])
def _(sp):
    """1 − out/l_max: unused slots over reserved slots."""
    out, l_max = sp.symbols("out_tokens max_tokens", positive=True)
    return (l_max - out) / l_max, 1 - out / l_max


@formula("000 §6.2 (Kwon et al. 2023)", "")
def paging_waste(out_tokens: int, block_size: int) -> float:
    """Share of allocated KV slots left unused with blocks of B_s tokens (the last block's gap).

    (B_s⌈out/B_s⌉ − out)/(B_s⌈out/B_s⌉): 1.3 % for 300 tokens in blocks of 16.
    """
    allocated = block_size * ceil(out_tokens / block_size)
    return (allocated - out_tokens) / allocated


@formula("000 §6.2 (Kwon et al. 2023)", "")
def paging_worst_case_waste(out_tokens: int, block_size: int) -> float:
    """Worst-case paging waste: (B_s − 1)/(out + B_s − 1), the last block holding one token."""
    return (block_size - 1) / (out_tokens + block_size - 1)


@derivation(paging_worst_case_waste)
def _(sp):
    """(B_s − 1)/(out + B_s − 1): j blocks with out = (j − 1)B_s + 1 tokens."""
    out, B = sp.symbols("out_tokens block_size", positive=True)
    j = (out - 1) / B + 1  # blocks allocated when the last one holds a single token
    return (j * B - out) / (j * B), (B - 1) / (out + B - 1)
