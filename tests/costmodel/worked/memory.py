"""Model states, ZeRO, activations, checkpointing, KV cache, paging (000 ch. 1–3, 6; 001 ch. 4).

Bytes from the core are converted here, at the edge: GB = 1e9 bytes, MB = 1e6, KiB = 1024.
"""

from costmodel import memory, transformer
from costmodel._registry import get
from costmodel.verify import check

GB, MB, KiB = 1e9, 1e6, 1024


def _acts(i, flash=False):
    """Activations of Exercise 1(c): s, b, h, a (and L) as the entry names them."""
    return memory.activation_bytes(
        n_layers=i["L"],
        seq_len=i["s"],
        batch=i["b"],
        d_model=i["h_hidden"],
        n_heads=i["a_heads"],
        flash_attention=flash,
    )


def _training(i, flash):
    return memory.training_memory_bytes(
        n_params=i["N_params"],
        n_layers=i["L"],
        seq_len=i["s"],
        batch=i["b"],
        d_model=i["h_hidden"],
        n_heads=i["a_heads"],
        flash_attention=flash,
    )


def _kv(i):
    return {
        "n_layers": i["L"],
        "n_kv_heads": i["n_kv"],
        "d_head": i["d_head"],
        "bytes_per_value": i["bytes_per_elem"],
    }


def _derivations_hold(name):
    return all(c.ok for c in map(check, get(name).derivations))


CASES = {
    # --- model states (000 Prop 1.2, 001 def 1.4) ---
    "d0_intro_7b_model_states": lambda i: (
        memory.model_state_bytes(n_params=i["N_params"], bytes_per_param=i["bytes_per_param"]) / GB
    ),
    "d0_s52_frozen_bf16_7b": lambda i: (
        memory.model_state_bytes(n_params=i["N_params"], bytes_per_param=i["bytes_per_param"]) / GB
    ),
    "d0_ex1b_states": lambda i: memory.model_state_bytes(n_params=i["N_params"]) / GB,
    "d0_examQ2b_states": lambda i: memory.model_state_bytes(n_params=i["N_params"]) / GB,
    "d1_ex7_states": lambda i: memory.model_state_bytes(n_params=i["N_params"]) / GB,
    "d1_examQ2c_total": lambda i: memory.model_state_bytes(n_params=i["N_params"]) / GB,
    "d1_examQ2d_grad": lambda i: (
        memory.model_state_bytes(n_params=i["N_params"], bytes_per_param=memory.GRADIENT_BYTES) / GB
    ),
    # --- activations and "does it fit" (000 Example 1.3, Exercise 1(c)) ---
    "d0_ex1c_act_layer": lambda i: (
        memory.activation_bytes_per_layer(
            seq_len=i["s"], batch=i["b"], d_model=i["h_hidden"], n_heads=i["a_heads"]
        )
        / MB
    ),
    "d0_ex1c_act_total": lambda i: _acts(i) / GB,
    "d0_ex1c_flash_act": lambda i: _acts(i, flash=True) / GB,
    "d0_ex1c_no_fit": lambda i: _training(i, flash=False) / GB,
    "d0_ex1c_flash_total": lambda i: _training(i, flash=True) / GB,
    # --- ZeRO (000 Prop 3.7, exam Q1–Q2; 001 exam Q2) ---
    "d0_examQ1_comm_units": lambda i: [
        memory.zero_communication_volume(n_params=1, stage=s) for s in range(4)
    ],
    "d0_examQ2b_zero3": lambda i: (
        memory.zero_bytes_per_gpu(n_params=i["N_params"], n_gpus=i["N_d"], stage=3) / GB
    ),
    "d1_examQ2c_zero3": lambda i: (
        memory.zero_bytes_per_gpu(n_params=i["N_params"], n_gpus=i["N_d"], stage=3) / GB
    ),
    # --- checkpointing (000 Prop 2.8, Exercise 7; 001 thm 4.1, Exercise 6, exam Q3) ---
    "d0_s25_ckpt_peak_n48": lambda i: memory.checkpoint_peak_units(
        n_layers=i["n_layers"], segment_length=i["k"]
    ),
    "d0_code25_calls_plain": lambda i: memory.layer_forward_calls(n_layers=i["n"]),
    "d0_code25_calls_ckpt": lambda i: memory.layer_forward_calls(n_layers=i["n"], extra_forwards=1),
    "d0_ex7a_sqrt": lambda i: memory.checkpoint_optimal_segment(n_layers=i["n"]),
    "d0_ex7a_peak": lambda i: memory.checkpoint_peak_units(n_layers=i["n"], segment_length=i["k"]),
    "d0_ex7b_two_level": lambda i: memory.two_level_checkpoint_min_peak_units(n_layers=i["n"]),
    "d1_ex6b_segments": lambda i: memory.checkpoint_optimal_segment(n_layers=i["blocks"]),
    # (k + L/k)·a: the peak in layer units times the 1.2 GB of one block
    "d1_ex6b_mem": lambda i: (
        memory.checkpoint_peak_units(n_layers=i["blocks"], segment_length=i["k"])
        * i["act_GB_per_block"]
    ),
    "d1_ex6b_fits": lambda i: (
        memory.checkpoint_peak_units(n_layers=i["blocks"], segment_length=i["k"])
        * i["act_GB_per_block"]
    ),
    "d1_ex6b_time": lambda i: transformer.recomputation_overhead(extra_forwards=1),
    "d1_examQ3b_overhead": lambda i: transformer.recomputation_overhead(extra_forwards=1),
    # the sympy derivations of k* = √L and the 2√L minimum are the proof asked for
    "d1_examQ3a_opt": lambda i: (
        _derivations_hold("memory.checkpoint_optimal_segment")
        and _derivations_hold("memory.checkpoint_min_peak_units")
    ),
    # --- KV cache (000 Prop 6.2, Exercise 5) ---
    "d0_ex5a_kv_per_token": lambda i: memory.kv_cache_bytes_per_token(**_kv(i)),
    "d0_ex5a_kv_KiB": lambda i: memory.kv_cache_bytes_per_token(**_kv(i)) / KiB,
    "d0_ex5a_per_seq": lambda i: memory.kv_cache_bytes_per_sequence(**_kv(i), seq_len=i["T"]) / GB,
    "d0_ex5a_n_seq": lambda i: memory.max_concurrent_sequences(
        free_bytes=i["free_GB"] * GB, **_kv(i), seq_len=i["T"]
    ),
    "d0_ex5b_n_seq_int8": lambda i: memory.max_concurrent_sequences(
        free_bytes=i["free_GB"] * GB, **_kv(i), seq_len=i["T"]
    ),
    # --- paging (000 §6.2) ---
    "d0_s62_prealloc_waste": lambda i: memory.preallocation_waste(
        out_tokens=i["out_tokens"], max_tokens=i["l_max"]
    ),
    "d0_s62_paging_waste": lambda i: memory.paging_worst_case_waste(
        out_tokens=i["out_tokens"], block_size=i["B_s"]
    ),
}

SKIP = {
    "d0_ex1c_24GiB": "unit conversion (24 GiB = 25.8 GB), done at the edges by pint, "
    "not a formula of the core",
    "d1_ex6a_all": "L·a with the per-block activations a given (36 GB): the product of the "
    "two inputs, no formula to apply (activation_bytes needs s, b, h, a)",
    "d0_code25_same_grads": "output of running torch.utils.checkpoint (allclose of two "
    "gradient vectors), a code fact, not a formula",
    "d0_code0_bf16_update_lost": "a bf16 rounding fact shown by running torch (spacing 2^-7 "
    "at 1), not a cost formula",
    "d0_code0_fp32_update_kept": "an fp32 rounding fact shown by running torch, not a cost formula",
    "d0_code24_fp16_underflow": "np.float16(1e-8) underflows to 0: a numpy float fact, not "
    "a cost formula",
    "d0_code24_loss_scaling": "the printed value of a numpy fp16 round trip (9.997e-9), a "
    "float fact, not a cost formula",
}
