"""Parameters, FLOPs, attention share (000 ch. 0–1, 001 ch. 0–1)."""

from costmodel import conv, scaling, transformer


def _fwd_bwd_ratio(i):
    """(forward + backward)/forward of a stack of linear layers (000 Thm 0.4)."""
    b, w = i["batch"], i["width"]
    forward = transformer.matmul_flops(m=b, n=w, k=w)  # X (b×w) · W (w×w)
    grad_input = transformer.matmul_flops(m=b, n=w, k=w)  # dY (b×w) · Wᵀ (w×w)
    grad_weight = transformer.matmul_flops(m=w, n=w, k=b)  # Xᵀ (w×b) · dY (b×w)
    layers = i["layers"]
    return layers * (forward + grad_input + grad_weight) / (layers * forward)


CASES = {
    # 000 Exercise 1(a): d = 2048, L = 24, V = 50 000
    "d0_ex1a_blocks": lambda i: i["L"] * transformer.block_param_count(d_model=i["d"]),
    "d0_ex1a_embed": lambda i: transformer.embedding_param_count(vocab=i["vocab"], d_model=i["d"]),
    "d0_ex1a_N": lambda i: transformer.param_count(
        n_layers=i["L"], d_model=i["d"], vocab=i["vocab"]
    ),
    # 001 Exercise 1: GPT-2 small with biases, positions and the final LayerNorm
    "d1_ex1_gpt2_params": lambda i: transformer.param_count(
        n_layers=i["L"], d_model=i["d"], vocab=i["vocab"], n_ctx=i["n_ctx"], biases=True
    ),
    "d1_c0_block_params": lambda i: transformer.block_param_count(d_model=i["d"], biases=True),
    # printed by the notes' code, but a closed form (12d² + 13d, 12d²): no randomness
    "d1_c0_block_params_code": lambda i: transformer.block_param_count(d_model=i["d"], biases=True),
    "d0_code0_block_params": lambda i: transformer.block_param_count(d_model=i["d"]),
    # 001 ch. 0: torchvision's ResNet-18 on CIFAR-10
    "d1_c0_resnet18_params": lambda i: conv.resnet18_param_count(n_classes=i["num_classes"]),
    "d1_c0_resnet18_approx": lambda i: conv.resnet18_param_count(n_classes=i["num_classes"]),
    # FLOPs
    "d0_thm04_fwd_bwd_ratio": _fwd_bwd_ratio,
    "d1_ex1_block_flops": lambda i: transformer.block_flops_per_token(
        d_model=i["d"], seq_len=i["n"]
    ),
    "d0_s11_attention_share": lambda i: transformer.attention_flops_share(
        seq_len=i["T"], d_model=i["d"]
    ),
    # 000 Exercise 2: D = 20N, C = 6ND
    "d0_ex2_D": lambda i: scaling.chinchilla_tokens(
        n_params=i["N_params"], tokens_per_param=i["tokens_per_param"]
    ),
    "d0_ex2_C": lambda i: transformer.training_flops(
        n_params=i["N_params"], n_tokens=i["tokens_per_param"] * i["N_params"]
    ),
    # 000 Exercise 13: 768 sequences of 2048 tokens, 175B parameters
    "d0_ex13_tokens_step": lambda i: transformer.tokens_per_batch(
        batch=i["seqs"], seq_len=i["seq_len"]
    ),
    "d0_ex13_flops_step": lambda i: transformer.training_flops(
        n_params=i["N_params"], n_tokens=i["tokens"]
    ),
    "d1_examQ2d_step_flops": lambda i: transformer.training_flops(
        n_params=i["N_params"], n_tokens=i["tokens"]
    ),
    # C = 6ND: 000 Exam Q2(a), 001 ch. 1 code (LLaMA-7B, deterministic), Ex. 1, Ex. 7, Exam Q2(a)
    **{
        entry: lambda i: transformer.training_flops(n_params=i["N_params"], n_tokens=i["D_tokens"])
        for entry in ("d0_examQ2a_C", "d1_c1_code_C", "d1_ex1_C", "d1_ex7_C", "d1_examQ2a_C")
    },
    # 001 ch. 0: unscaled scores at d_k = 64 have std 8 (the entry's value is a Monte Carlo run)
    "d1_c0_score_std": lambda i: transformer.attention_score_std(d_head=i["d_k"]),
    "d0_s25_ckpt_extra_compute": lambda i: transformer.recomputation_overhead(extra_forwards=1),
}

SKIP = {
    "d0_code23_online_softmax": "float64 rounding error of a run of the notes' online-softmax "
    "code (an implementation check, not a cost-model quantity)",
    "d1_c0_sinusoid_rotation": "property of sinusoidal positions (p_{i+Δ} is a rotation of p_i) "
    "checked numerically, not a cost-model quantity",
}
