"""Roofline, pipelines, 3D layouts, tensor and data parallelism (000 ch. 1–3; 001 ch. 2, 6).

Percentages are converted here (× 100), bytes to GB (1e9).
"""

from costmodel import memory, parallel, roofline

GB = 1e9
EX3_PEAK = 1e15  # 000 Exercise 3: π = 10^15 FLOP/s (not repeated in every entry's inputs)
EX4_M = 63  # 000 Exercise 4(a): the micro-batches of part (b)
EX4_P = 8  # 000 Exercise 4: p = 8 stages


def _layout(i):
    return {"tensor_parallel": i["t"], "pipeline_parallel": i["p_stages"]}


CASES = {
    # --- roofline (000 Exercise 3; 001 exam Q1) ---
    "d0_ex3_ridge": lambda i: roofline.ridge_intensity(
        peak_flops=i["peak_FLOPs"], bandwidth=i["bandwidth_Bps"]
    ),
    "d0_ex3a_I": lambda i: roofline.square_gemm_intensity(
        n=i["n"], bytes_per_value=i["bytes_per_elem"]
    ),
    "d0_ex3a_att": lambda i: roofline.attainable_flops(
        intensity=roofline.square_gemm_intensity(n=i["n"]),
        peak_flops=i["peak_FLOPs"],
        bandwidth=i["bandwidth_Bps"],
    ),
    # exact intensity of the (8×4096)·(4096×4096) product (the notes round it to b = 8)
    "d0_ex3b_I": lambda i: roofline.gemm_intensity(
        m=i["b"], n=i["n"], k=i["n"], bytes_per_value=i["bytes_per_elem"]
    ),
    "d0_ex3b_att": lambda i: roofline.attainable_flops(
        intensity=roofline.decode_intensity(batch=i["b"]),
        peak_flops=EX3_PEAK,
        bandwidth=i["bandwidth_Bps"],
    ),
    "d0_ex3b_frac": lambda i: (
        100
        * roofline.fraction_of_peak(
            intensity=roofline.decode_intensity(batch=i["b"]),
            peak_flops=i["peak_FLOPs"],
            bandwidth=i["bandwidth_Bps"],
        )
    ),
    # 8 FLOPs per element; bytes_per_elem_rw = 4 is the bf16 read (2) plus write (2)
    "d0_ex3c_I": lambda i: roofline.elementwise_intensity(
        flops_per_element=i["flops_per_elem"], bytes_per_value=i["bytes_per_elem_rw"] / 2
    ),
    "d0_ex3c_att": lambda i: roofline.attainable_flops(
        intensity=i["I"], peak_flops=EX3_PEAK, bandwidth=i["bandwidth_Bps"]
    ),
    "d1_examQ1_decode_I": lambda i: roofline.decode_intensity(
        batch=1, bytes_per_value=i["bytes_per_weight"]
    ),
    "d1_examQ1_ridge": lambda i: roofline.ridge_intensity(
        peak_flops=i["peak_FLOPs"], bandwidth=i["bandwidth_Bps"]
    ),
    "d1_examQ1_prefill": lambda i: roofline.compute_bound_tokens(
        peak_flops=i["peak_FLOPs"], bandwidth=i["bandwidth_Bps"]
    ),
    # --- pipeline (000 Prop 3.13, Exercises 4 and 13, exam Q2; 001 thm 2.3, Exercise 2) ---
    "d0_ex4a_m": lambda i: parallel.min_microbatches_for_bubble(
        n_stages=i["p"], max_bubble=i["max_bubble"]
    ),
    "d0_ex4b_gpipe": lambda i: parallel.microbatches_in_memory(
        n_stages=EX4_P, n_microbatches=i["m"], schedule="gpipe"
    ),
    "d0_ex4b_1f1b": lambda i: parallel.microbatches_in_memory(
        n_stages=i["p"], n_microbatches=EX4_M, schedule="1f1b"
    ),
    "d0_ex13_layers_per_stage": lambda i: parallel.layers_per_stage(
        n_layers=i["layers"], n_stages=i["p_stages"]
    ),
    "d0_ex13_microbatches": lambda i: parallel.microbatches_per_pipeline(
        global_batch=i["seqs"], data_parallel=i["d_dp"], batch=i["micro_batch_seqs"]
    ),
    "d0_ex13_bubble": lambda i: (
        100 * parallel.pipeline_bubble_fraction(n_stages=i["p"], n_microbatches=i["m"])
    ),
    "d0_examQ2c_bubble": lambda i: (
        100 * parallel.pipeline_bubble_fraction(n_stages=i["p"], n_microbatches=i["m"])
    ),
    "d1_ex2_m": lambda i: parallel.min_microbatches_for_efficiency(
        n_stages=i["p"], efficiency=i["efficiency"]
    ),
    # --- 3D layout (000 Exercise 13) ---
    "d0_ex13_dp": lambda i: parallel.data_parallel_degree(
        n_gpus=i["nodes"] * i["gpus_per_node"], **_layout(i)
    ),
    "d0_ex13_params_gpu": lambda i: parallel.params_per_gpu(n_params=i["N_params"], **_layout(i)),
    "d0_ex13_states_gpu": lambda i: (
        parallel.state_bytes_per_gpu(n_params=i["N_params"], **_layout(i)) / GB
    ),
    "d0_ex13_zero1_gpu": lambda i: (
        parallel.state_bytes_per_gpu(
            n_params=i["N_params"], **_layout(i), data_parallel=i["N_d"], stage=1
        )
        / GB
    ),
    "d0_ex13_grad_bytes": lambda i: (
        memory.model_state_bytes(
            n_params=parallel.params_per_gpu(n_params=i["N_params"], **_layout(i)),
            bytes_per_param=memory.GRADIENT_BYTES,
        )
        / GB
    ),
    # --- data parallelism and accumulation (000 Exercise 6) ---
    "d0_ex6_global_batch": lambda i: parallel.global_batch_size(
        batch=i["micro_batch"], n_gpus=i["gpus"], accumulation_steps=i["accum"]
    ),
    "d0_ex6b_sum_factor": lambda i: parallel.sum_loss_gradient_factor(
        batch=i["micro_batch"], accumulation_steps=i["accum"]
    ),
}

SKIP = {
    "d0_s16_ddp_bucket": "PyTorch's DDP default bucket size (25 MiB), a library constant, not "
    "a formula",
    "d0_code111_ddp_diff": "printed by running DDP over gloo (float32 round-off, 2.4e-7): "
    "depends on the run, not a formula",
    "d0_code33_tp_mlp": "torch.allclose of the column/row-split MLP against the full one: a "
    "numerical check of code, not a cost formula",
}
