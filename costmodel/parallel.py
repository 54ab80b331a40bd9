"""Data, tensor and pipeline parallelism and their combination (000 ch. 1 and 3; 001 ch. 2).

A run on N_GPU = d·t·p devices: d data-parallel replicas (with gradient accumulation
and ZeRO), t-way tensor parallelism inside a node, p pipeline stages across nodes,
each fed m micro-batches per step.
"""

from __future__ import annotations

from costmodel import memory
from costmodel._numeric import ceil
from costmodel._registry import derivation, formula
from costmodel.arguments import ArgumentError, Domain, count, register_arguments, unit_interval

register_arguments(
    {
        "accumulation_steps": count(
            "gradient-accumulation micro-steps k per optimizer step", sample=(1, 64)
        ),
        "global_batch": count(
            "sequences per optimizer step (all replicas)", sample=(1, 4096), log=True
        ),
    }
)

_MAX_BUBBLE = unit_interval(
    "largest acceptable bubble fraction", low_open=True, high_open=True, sample=(0.01, 0.5)
)
_EFFICIENCY = unit_interval(
    "required pipeline efficiency (busy share)", low_open=True, high_open=True, sample=(0.5, 0.99)
)
_SCHEDULE = Domain("choice", "pipeline schedule", choices=("gpipe", "1f1b"))


# --- pipeline -----------------------------------------------------------------------


@formula("000 §3.4, Prop 3.13; 001 ch. 2, thm 2.3; Narayanan et al. 2021 (interleaving)", "")
def pipeline_bubble_fraction(n_stages: int, n_microbatches: int, interleave: int = 1) -> float:
    """Idle share of a pipelined step: (p − 1)/(m + p − 1); (p − 1)/(vm + p − 1) interleaved.

    GPipe and 1F1B have the same bubble.  With v chunks per device each slot lasts 1/v,
    so the p − 1 slots of fill and drain shrink v-fold (the bubble time is divided by v).
    """
    ramp = (n_stages - 1) / interleave  # fill + drain time per device, in micro-batch units
    return ramp / (n_microbatches + ramp)


@derivation(pipeline_bubble_fraction, fixed={"interleave": 1})
def _(sp):
    """(p − 1)/(m + p − 1): idle slots of the p × (m + p − 1) forward grid.

    Stage i (0-based) waits i slots for the first micro-batch and is idle p − 1 − i
    slots after its last one; it is busy m slots.
    """
    p, m = sp.symbols("n_stages n_microbatches", positive=True, integer=True)
    i = sp.symbols("i", integer=True, nonnegative=True)
    idle = sp.summation(i + (p - 1 - i), (i, 0, p - 1))
    grid = p * (m + p - 1)
    return idle / grid, (p - 1) / (m + p - 1)


@derivation(pipeline_bubble_fraction)
def _(sp):
    """(p − 1)/(vm + p − 1): the same grid with v chunks per device, slots of 1/v."""
    p, m, v = sp.symbols("n_stages n_microbatches interleave", positive=True, integer=True)
    i = sp.symbols("i", integer=True, nonnegative=True)
    slot = 1 / v  # one micro-batch through one chunk
    idle = sp.summation((i + (p - 1 - i)) * slot, (i, 0, p - 1))
    busy = p * (m * v) * slot  # every device runs m micro-batches through v chunks
    return idle / (idle + busy), (p - 1) / (v * m + p - 1)


@formula("001 ch. 2, thm 2.3, Exercise 2", "")
def pipeline_efficiency(n_stages: int, n_microbatches: int, interleave: int = 1) -> float:
    """Busy share of a pipelined step: m/(m + p − 1) = 1 − bubble."""
    return 1 - pipeline_bubble_fraction(n_stages, n_microbatches, interleave)


def _min_microbatches(n_stages: int, max_bubble: float, interleave: int) -> int:
    """Smallest m with (p − 1)/(vm + p − 1) ≤ β: m ≥ (p − 1)(1 − β)/(vβ)."""
    m_star = (n_stages - 1) * (1 - max_bubble) / (interleave * max_bubble)
    return max(1, ceil(m_star))  # 63.0000000001 from 0.1 in binary is 63


@formula("000 §3.4, Prop 3.13, Exercise 4(a)", "", domains={"max_bubble": _MAX_BUBBLE})
def min_microbatches_for_bubble(n_stages: int, max_bubble: float, interleave: int = 1) -> int:
    """Fewest micro-batches for a bubble ≤ β: ⌈(p − 1)(1 − β)/(vβ)⌉ (63 for p = 8, 10 %)."""
    return _min_microbatches(n_stages, max_bubble, interleave)


@derivation(min_microbatches_for_bubble, where=lambda v: v["n_stages"] > 1)
def _(sp):
    """⌈(p − 1)(1 − β)/(vβ)⌉: solve the bubble equation for m, then round up."""
    p, m, v, beta = sp.symbols("n_stages m interleave max_bubble", positive=True)
    (m_star,) = sp.solve(sp.Eq((p - 1) / (v * m + p - 1), beta), m)
    return sp.ceiling(m_star), sp.ceiling((p - 1) * (1 - beta) / (v * beta))


@formula("001 ch. 2, thm 2.3, Exercise 2", "", domains={"efficiency": _EFFICIENCY})
def min_microbatches_for_efficiency(n_stages: int, efficiency: float, interleave: int = 1) -> int:
    """Fewest micro-batches for m/(m + p − 1) ≥ e: ⌈(p − 1)e/(v(1 − e))⌉ (135 for p = 16, 90 %)."""
    return _min_microbatches(n_stages, 1 - efficiency, interleave)


@formula("000 §3.4, Exercise 4(b)", "", domains={"schedule": _SCHEDULE})
def microbatches_in_memory(n_stages: int, n_microbatches: int, schedule: str = "gpipe") -> int:
    """Micro-batches whose activations the first stage holds: m under GPipe, min(p, m) under 1F1B.

    GPipe runs all m forwards before the first backward; 1F1B starts a backward as soon
    as a micro-batch leaves the last stage, so at most p are in flight.
    """
    return n_microbatches if schedule == "gpipe" else min(n_stages, n_microbatches)


@formula("000 §3.5, Exercise 13", "")
def layers_per_stage(n_layers: int, n_stages: int) -> int:
    """Layers held by each pipeline stage: L/p."""
    if n_layers % n_stages:
        raise ArgumentError(
            f"parallel.layers_per_stage: n_stages = {n_stages} does not divide n_layers = "
            f"{n_layers} (choose a divisor so that the stages are balanced)"
        )
    return n_layers // n_stages


# --- 3D layout ----------------------------------------------------------------------


@formula("000 §3.5, Exercise 13", "")
def data_parallel_degree(n_gpus: int, tensor_parallel: int, pipeline_parallel: int) -> int:
    """Data-parallel degree of a 3D layout: d = N_GPU/(t·p)."""
    if n_gpus % (tensor_parallel * pipeline_parallel):
        raise ArgumentError(
            f"parallel.data_parallel_degree: tensor_parallel × pipeline_parallel = "
            f"{tensor_parallel * pipeline_parallel} does not divide n_gpus = {n_gpus} "
            "(every replica needs t·p whole GPUs)"
        )
    return n_gpus // (tensor_parallel * pipeline_parallel)


@formula("000 §3.5, Exercise 13", "")
def params_per_gpu(n_params: float, tensor_parallel: int, pipeline_parallel: int) -> float:
    """Parameters held by one GPU: N/(t·p) (each layer split t ways, the layers p ways)."""
    return n_params / (tensor_parallel * pipeline_parallel)


@formula("000 §3.5, Exercise 13; §3.2, Prop 3.7", "byte")
def state_bytes_per_gpu(
    n_params: float,
    tensor_parallel: int,
    pipeline_parallel: int,
    data_parallel: int = 1,
    stage: int = 0,
    optimizer_bytes_per_param: float = 12,
) -> float:
    """Model states per GPU of a 3D layout: 16N/(t·p), or ZeRO over the d replicas.

    ZeRO-1 over d: (4 + 12/d)·N/(t·p) (the notes' convention of
    :func:`costmodel.memory.zero_bytes_per_gpu`).
    """
    local = params_per_gpu(n_params, tensor_parallel, pipeline_parallel)
    return memory.zero_bytes_per_gpu(
        n_params=local,
        n_gpus=data_parallel,
        stage=stage,
        optimizer_bytes_per_param=optimizer_bytes_per_param,
    )


@derivation(state_bytes_per_gpu, fixed={"stage": 1})
def _(sp):
    """(4 + K/d)·N/(t·p): ZeRO-1's sharding of the optimizer states of the local N/(t·p)."""
    N, t, p, d, K = sp.symbols(
        "n_params tensor_parallel pipeline_parallel data_parallel optimizer_bytes_per_param",
        positive=True,
    )
    local = N / (t * p)
    derived = local * 2 + local * 2 + local * K / d  # weights, gradients, sharded optimizer
    return derived, (4 + K / d) * N / (t * p)


# --- tensor parallelism -------------------------------------------------------------


@formula(
    "000 §3.3 (Shoeybi et al. 2019; sequence parallelism: Korthikanti et al. 2023); "
    "000 Thm 3.3 (ring)",
    "byte",
)
def tensor_parallel_comm_bytes(
    batch: int,
    seq_len: int,
    d_model: int,
    n_layers: int,
    tensor_parallel: int,
    bytes_per_value: float = 2,
) -> float:
    """Bytes one GPU sends per training step for tensor parallelism: 8L(t − 1)/t·bsd·bytes.

    Each block runs 2 all-reduces forward (after attention and after the MLP) and 2
    backward (the input gradients of the column-split layers), each of b·s·d values;
    a ring all-reduce sends 2(t − 1)/t of its message per GPU.  Sequence parallelism
    replaces each all-reduce by a reduce-scatter plus an all-gather, (t − 1)/t each:
    the same volume (second derivation), so this count holds with or without it.
    """
    message = batch * seq_len * d_model * bytes_per_value
    ring_allreduce = 2 * (tensor_parallel - 1) / tensor_parallel * message  # per GPU
    return n_layers * 4 * ring_allreduce


def _tp_symbols(sp):
    return sp.symbols(
        "batch seq_len d_model n_layers tensor_parallel bytes_per_value", positive=True
    )


@derivation(tensor_parallel_comm_bytes)
def _(sp):
    """8L(t − 1)/t·bsd·bytes: 4 ring all-reduces of bsd values per block."""
    b, s, d, L, t, nb = _tp_symbols(sp)
    allreduce = 2 * (t - 1) / t * b * s * d * nb  # ring all-reduce, per GPU (000 Thm 3.3)
    per_block = {
        "attention fwd": allreduce,
        "MLP fwd": allreduce,
        "attention bwd": allreduce,
        "MLP bwd": allreduce,
    }
    return L * sum(per_block.values()), 8 * L * (t - 1) / t * b * s * d * nb


@derivation(tensor_parallel_comm_bytes)
def _(sp):
    """Sequence parallelism: 4 reduce-scatters + 4 all-gathers per block, the same volume."""
    b, s, d, L, t, nb = _tp_symbols(sp)
    half = (t - 1) / t * b * s * d * nb  # one ring reduce-scatter or all-gather, per GPU
    per_block = 4 * (half + half)
    return L * per_block, 8 * L * (t - 1) / t * b * s * d * nb


# --- data parallelism and accumulation ----------------------------------------------


@formula("000 §1.5, Exercise 6", "")
def global_batch_size(batch: int, n_gpus: int, accumulation_steps: int = 1) -> int:
    """Examples per optimizer step: micro-batch × GPUs × accumulation steps."""
    return batch * n_gpus * accumulation_steps


@formula("000 §1.5, Exercise 6(b)", "")
def sum_loss_gradient_factor(batch: int, accumulation_steps: int = 1) -> int:
    """Gradient with summed (not averaged) micro-losses over the true mean gradient: b·k.

    Each GPU accumulates the sum over its b·k examples and DDP averages over GPUs, so
    the factor is the number of examples per GPU (16 for micro-batch 8, 2 steps).
    """
    return batch * accumulation_steps


@derivation(sum_loss_gradient_factor)
def _(sp):
    """b·k: DDP's mean over GPUs of per-GPU sums, over the mean over all p·k·b examples."""
    b, k, p, g = sp.symbols("batch accumulation_steps n_gpus g", positive=True)
    r, j, e = sp.symbols("r j e", integer=True, positive=True)
    per_gpu_sum = sp.summation(sp.summation(g, (e, 1, b)), (j, 1, k))  # summed micro-losses
    ddp = sp.summation(per_gpu_sum, (r, 1, p)) / p  # the all-reduce averages
    true_mean = sp.summation(per_gpu_sum, (r, 1, p)) / (p * k * b)
    return ddp / true_mean, b * k


@formula("000 §3.5, Exercise 13", "")
def microbatches_per_pipeline(global_batch: int, data_parallel: int, batch: int = 1) -> int:
    """Micro-batches each pipeline runs per step: global batch / (d · micro-batch)."""
    if global_batch % (data_parallel * batch):
        raise ArgumentError(
            f"parallel.microbatches_per_pipeline: data_parallel × batch = "
            f"{data_parallel * batch} does not divide global_batch = {global_batch} "
            "(round the global batch to a multiple)"
        )
    return global_batch // (data_parallel * batch)
