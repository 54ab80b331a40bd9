"""Collectives, compression, local SGD, gossip, asynchrony (000 ch. 3–4, 001 ch. 3)."""

from costmodel import budget, collectives, compression, transformer

BF16_BYTES = 2  # bytes per gradient entry in bf16


def _ex8(i):
    """000 Exercise 8(b): the arguments of the ring and the server."""
    return {"n_bytes": i["n_bytes"], "n_workers": i["p"], "bandwidth": i["W_Bps"]}


def _ex8_ring(i):
    return collectives.ring_allreduce_seconds(**_ex8(i), latency=i["alpha_s"])


def _examq2d_step_seconds(i):
    """001 exam Q2(d): compute time of one step of 10⁶ tokens, 6N FLOPs per token."""
    flops = transformer.training_flops(n_params=i["N_params"], n_tokens=i["tokens"])
    return budget.training_seconds(
        total_flops=flops, n_gpus=i["gpus"], peak_flops=i["peak_FLOPs"], mfu=i["MFU"]
    )


def _examq2d_ring_seconds(i):
    """001 exam Q2(d): the ring's bandwidth term for the bf16 gradient of N parameters."""
    return collectives.ring_allreduce_seconds(
        n_bytes=BF16_BYTES * i["N_params"], n_workers=i["gpus"], bandwidth=i["b_Bps"]
    )


def _ring_lambda(i):
    return compression.gossip_ring_lambda(n_workers=i["p"])


def _torus_lambda(i):
    return compression.gossip_torus_lambda(q=i["q"])


CASES = {
    # 000 §3.1, ring all-reduce code: p = 4 workers, buffers of 12 entries
    "d0_code31_ring_sent": lambda i: collectives.ring_allreduce_bytes_per_worker(
        n_bytes=i["n"], n_workers=i["p"]
    ),
    # 000 Exercise 8(b): 1 GB, 64 workers, 25 GB/s, 10 µs
    "d0_ex8b_server": lambda i: collectives.parameter_server_seconds(**_ex8(i)),
    "d0_ex8b_server_pipe": lambda i: collectives.parameter_server_pipelined_seconds(**_ex8(i)),
    "d0_ex8b_ring_steps": lambda i: collectives.ring_allreduce_steps(n_workers=i["p"]),
    "d0_ex8b_ring_chunk": lambda i: collectives.ring_step_seconds(**_ex8(i)),
    "d0_ex8b_ring": _ex8_ring,
    "d0_ex8b_ratio_lo": lambda i: (
        collectives.parameter_server_pipelined_seconds(**_ex8(i)) / _ex8_ring(i)
    ),
    "d0_ex8b_ratio_hi": lambda i: collectives.parameter_server_seconds(**_ex8(i)) / _ex8_ring(i),
    # 000 Exercise 8(c), in MB
    "d0_ex8c_crossover": lambda i: (
        collectives.ring_latency_crossover_bytes(
            n_workers=i["p"], bandwidth=i["W_Bps"], latency=i["alpha_s"]
        )
        / 1e6
    ),
    # 000 Exercise 13: data-parallel ring over 8 nodes, latency neglected
    "d0_ex13_dp_ring": lambda i: collectives.ring_allreduce_seconds(
        n_bytes=i["n_bytes"], n_workers=i["p"], bandwidth=i["W_Bps"]
    ),
    # 001 written exam Q2(d): the ring's bandwidth term, and its share of a step in %
    "d1_examQ2d_ring": lambda i: collectives.ring_allreduce_seconds(
        n_bytes=i["S_bytes"], n_workers=i["P"], bandwidth=i["b_Bps"]
    ),
    "d1_examQ2d_ratio": lambda i: 100 * _examq2d_ring_seconds(i) / _examq2d_step_seconds(i),
    # 000 §4.2: a ternary code
    "d0_s42_ternary_bits": lambda i: compression.bits_per_coordinate(levels=i["levels"]),
    # 000 Exercise 9: d = 10⁶, k = 10³
    "d0_ex9a_omega": lambda i: compression.random_k_omega(d=i["d"], k=i["k"]),
    "d0_ex9a_penalty": lambda i: compression.compressed_sgd_penalty(
        omega=compression.random_k_omega(d=i["d"], k=i["k"])
    ),
    "d0_ex9a_savings": lambda i: compression.sparsification_saving(d=i["d"], k=i["k"]),
    "d0_ex9b_p": lambda i: compression.workers_for_penalty(omega=i["omega"], target_penalty=2),
    "d0_ex9c_delta": lambda i: compression.top_k_delta(d=i["d"], k=i["k"]),
    "d0_ex9c_memory": lambda i: compression.error_feedback_memory_bound(delta=i["delta"]),
    # 000 §4.3: DiLoCo with H = 500 inner steps
    "d0_s43_diloco_reduction": lambda i: compression.local_sgd_communication_reduction(
        inner_steps=i["H_inner_steps"]
    ),
    # 000 Exercise 10: ring of 16 and 4×4 torus, disagreement divided by 1000
    "d0_ex10_lambda_ring": _ring_lambda,
    "d0_ex10_lambda_torus": _torus_lambda,
    "d0_ex10_rounds_ring": lambda i: compression.gossip_rounds(
        lam=_ring_lambda(i), epsilon=1 / i["factor"]
    ),
    "d0_ex10_rounds_torus": lambda i: compression.gossip_rounds(
        lam=_torus_lambda(i), epsilon=1 / i["factor"]
    ),
    # 000 §4.5, stability code: bisection on the roots against the closed form
    **{
        f"d0_code45_async_tau{tau}": lambda i: compression.async_stability_threshold(tau=i["tau"])
        for tau in (0, 1, 2, 4, 8)
    },
}

_SIMULATION = (
    "output of a random simulation in the notes' code (depends on the seed), not a formula"
)

SKIP = {
    "d0_code31_ring_correct": "a property of the notes' ring code (every worker ends with the "
    "sum), checked by simulation in tests/costmodel/test_collectives.py, not a formula",
    "d0_code43_local_sgd_err_H1": _SIMULATION,
    "d0_code43_local_sgd_err_H10": _SIMULATION,
    "d0_code43_local_sgd_err_H100": _SIMULATION,
    "d0_ex10_observed_ring": _SIMULATION + " (the bound of Prop 4.14 is d0_ex10_rounds_ring)",
    "d0_ex10_observed_torus": _SIMULATION + " (the bound of Prop 4.14 is d0_ex10_rounds_torus)",
}
