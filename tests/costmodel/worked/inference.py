"""Serving and agents: speculative decoding, quantization, the decode ceiling, prefix
caching and reliability arithmetic (000 ch. 6–7, 001 Ex. 3)."""

import numpy as np

from costmodel import agents, serving

GB = 1e9


def _dirichlet_pair(seed: int, vocab: int) -> tuple[list[float], list[float]]:
    """The target and draft distributions drawn by the code of 000 §6.4."""
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab))
    return p.tolist(), q.tolist()


CASES = {
    # --- 000 §6.4 speculative decoding: α = 0.8, γ = 4, c = 0.05 -------------------------
    "d0_s64_tokens_per_pass": lambda i: serving.speculative_tokens_per_pass(
        alpha=i["alpha"], gamma=i["gamma"]
    ),
    "d0_s64_draft_overhead": lambda i: serving.speculative_draft_overhead(
        gamma=i["gamma"], draft_cost=i["c_draft"]
    ),
    "d0_s64_speedup": lambda i: serving.speculative_speedup(
        alpha=i["alpha"], gamma=i["gamma"], draft_cost=i["c_draft"]
    ),
    # 000 §6.4 code: 1 − TV(p, q) of the two Dirichlet draws of default_rng(0)
    "d0_code64_one_minus_tv": lambda i: serving.speculative_acceptance(
        *_dirichlet_pair(i["seed"], i["V"])
    ),
    # 000 Exercise 12: p = (0.5, 0.3, 0.2), q = (0.6, 0.2, 0.2), c = 0.1
    "d0_ex12a_alpha": lambda i: serving.speculative_acceptance(p=i["p"], q=i["q"]),
    "d0_ex12a_residual_mass_token2": lambda i: serving.speculative_residual(p=i["p"], q=i["q"])[1],
    "d0_ex12b_gamma": lambda i: serving.speculative_optimal_gamma(
        alpha=i["alpha"], draft_cost=i["c_draft"]
    ),
    "d0_ex12b_speedup": lambda i: serving.speculative_speedup(
        alpha=i["alpha"], gamma=i["gamma"], draft_cost=i["c_draft"]
    ),
    # --- 000 §5.2, §6.3 quantized weights; 001 Exercise 3(c) ----------------------------
    "d0_s52_qlora_65b_fits": lambda i: (
        serving.quantized_weight_bytes(n_params=i["N_params"], bits_per_weight=i["bits"]) / GB
    ),
    "d0_s63_bits_per_weight": lambda i: serving.bits_per_weight(
        bits=i["bits"], group_size=i["g"], scale_bits=i["scale_bits"]
    ),
    "d0_s63_7b_int4_size": lambda i: (
        serving.quantized_weight_bytes(n_params=i["N_params"], bits_per_weight=i["bits_per_weight"])
        / GB
    ),
    "d1_ex3c_int8": lambda i: serving.decode_ceiling_gain(
        bits=8 * i["bytes_int8"], base_bits=8 * i["bytes_fp16"]
    ),
    "d1_ex3c_int4": lambda i: serving.decode_ceiling_gain(
        bits=8 * i["bytes_int4"], base_bits=8 * i["bytes_fp16"]
    ),
    # --- decode ceiling: 000 introduction, 001 Exercise 3(b) ----------------------------
    "d0_intro_7b_bf16_weights": lambda i: (
        serving.quantized_weight_bytes(
            n_params=i["N_params"], bits_per_weight=8 * i["bytes_per_param"]
        )
        / GB
    ),
    "d1_ex3b_a100": lambda i: serving.decode_tokens_per_second_bound(
        weight_bytes=serving.quantized_weight_bytes(
            n_params=i["N_params"], bits_per_weight=8 * i["bytes_per_param"]
        ),
        bandwidth=i["bandwidth_Bps"],
    ),
    "d1_ex3b_1TB": lambda i: serving.decode_tokens_per_second_bound(
        weight_bytes=serving.quantized_weight_bytes(
            n_params=i["N_params"], bits_per_weight=8 * i["bytes_per_param"]
        ),
        bandwidth=i["bandwidth_Bps"],
    ),
    # --- 000 §7.4 prefix cache: m = 500 tokens per turn, T = 30 turns -------------------
    "d0_s74_prefill_nocache": lambda i: serving.prefill_tokens_without_cache(
        tokens_per_turn=i["m"], n_turns=i["T_turns"]
    ),
    "d0_s74_prefill_cache": lambda i: serving.prefill_tokens_with_cache(
        tokens_per_turn=i["m"], n_turns=i["T_turns"]
    ),
    "d0_s74_ratio": lambda i: serving.prefix_cache_saving(n_turns=i["T_turns"]),
    # --- 000 §7.2 reliability arithmetic ------------------------------------------------
    "d0_s72_chain": lambda i: agents.chain_success(p=i["p"], n=i["n"]),
    "d0_s72_step_verifier": lambda i: agents.verified_step_success(
        p=i["p"], attempts=i["attempts"]
    ),
    "d0_s72_chain_verifier": lambda i: agents.chain_success(p=i["p_step"], n=i["n"]),
    "d0_s72_hoeffding": lambda i: agents.majority_vote_error_bound(p=i["p"], k=i["k"]),
    "d0_s72_majority_exact": lambda i: agents.majority_vote_error(p=i["p"], k=i["k"]),
    # --- 000 Exercise 14: n = 10 steps, p = 0.8 -----------------------------------------
    "d0_ex14a_verifier": lambda i: agents.verified_chain_success(p=i["p"], n=i["n"], attempts=2),
    "d0_ex14a_single": lambda i: agents.chain_success(p=i["p"], n=i["n"]),
    "d0_ex14a_plur_ge2": lambda i: agents.binomial_tail(p=i["q"], n=i["runs"], k=2),
    "d0_ex14a_plur_tie": lambda i: (
        agents.plurality_vote_success(p=i["q"], n_runs=i["runs"])
        - agents.binomial_tail(p=i["q"], n=i["runs"], k=2)
    ),
    "d0_ex14a_plur_total": lambda i: agents.plurality_vote_success(p=i["q"], n_runs=i["runs"]),
    "d0_ex14b_step": lambda i: agents.verified_step_success(
        p=i["p"], attempts=2, false_accept=i["false_accept"]
    ),
    "d0_ex14b_task": lambda i: agents.chain_success(p=i["p_step"], n=i["n"]),
    "d0_ex14c_calls_verifier": lambda i: agents.verifier_model_calls(p=i["p"], n=i["n"]),
    "d0_ex14c_calls_vote": lambda i: agents.vote_model_calls(n=i["n"], n_runs=i["runs"]),
}

SKIP = {
    "d0_code64_acceptance": "empirical acceptance rate of 200 000 random draws (a simulation; "
    "its expectation 1 − TV is d0_code64_one_minus_tv)",
    "d0_code63_int8_per_tensor": "quantization error of one random 1024×1024 matrix with random "
    "outliers (a simulation, not a closed form)",
    "d0_code63_int8_per_group": "quantization error of one random 1024×1024 matrix with random "
    "outliers (a simulation, not a closed form)",
    "d0_code63_int4_per_tensor": "quantization error of one random 1024×1024 matrix with random "
    "outliers (a simulation, not a closed form)",
    "d0_code63_int4_per_group": "quantization error of one random 1024×1024 matrix with random "
    "outliers (a simulation, not a closed form)",
}
