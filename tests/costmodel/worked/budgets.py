"""Time, MFU, scaling laws, convolutions, LoRA (000 §1.3–1.4, §5.2, Ex. 2, 13, 15; 001 ch. 0–1).

Durations come back from the core in seconds or hours and are converted to the entry's
unit (days, accelerator-days) here.
"""

from costmodel import adaptation, budget, conv, scaling, transformer

HOUR, DAY = 3600, 86400


def _flops(i):
    """C = 6ND of the entry (D given, or 20 tokens per parameter as in 000 Ex. 2)."""
    tokens = i.get("D_tokens") or i.get("tokens")
    if tokens is None:
        tokens = scaling.chinchilla_tokens(n_params=i["N_params"])
    return transformer.training_flops(n_params=i["N_params"], n_tokens=tokens)


def _seconds(i, n_gpus):
    return budget.training_seconds(
        total_flops=_flops(i), n_gpus=n_gpus, peak_flops=i["peak_FLOPs"], mfu=i["MFU"]
    )


def _gpu_hours(i):
    return budget.gpu_hours(total_flops=_flops(i), peak_flops=i["peak_FLOPs"], mfu=i["MFU"])


def _inference_optimal_n(i):
    n_params, _ = scaling.inference_optimal(
        compute=i["C"],
        inference_tokens=i["D_inf"],
        E=i["E"],
        A=i["A"],
        B=i["B"],
        alpha=i["alpha"],
        beta=i["beta"],
    )
    return n_params


CASES = {
    # 000 Exercise 2: 1.31e9 parameters, 20 tokens/param, 3e14 FLOP/s at 40 % MFU, 24 h
    "d0_ex2_flops_per_day": lambda i: budget.delivered_flops(
        peak_flops=i["peak_FLOPs"], mfu=i["MFU"], seconds=i["s_per_day"]
    ),
    "d0_ex2_acc_days": lambda i: _gpu_hours(i) * HOUR / DAY,
    "d0_ex2_n_acc": lambda i: budget.accelerators_needed(
        total_flops=_flops(i), peak_flops=i["peak_FLOPs"], mfu=i["MFU"], seconds=i["hours"] * HOUR
    ),
    # 000 Exercise 13 and 001 Exam Q2(d): one step of 6N·tokens FLOPs
    "d0_ex13_step_time": lambda i: _seconds(i, i["gpus"]),
    "d1_examQ2d_step_time": lambda i: _seconds(i, i["gpus"]),
    # 000 Exam Q2(a): 13B parameters, 1T tokens, 256 accelerators
    "d0_examQ2a_t": lambda i: _seconds(i, i["gpus"]),
    "d0_examQ2a_days": lambda i: _seconds(i, i["gpus"]) / DAY,
    # 001 ch. 1 code (LLaMA-7B, deterministic arithmetic) and the reported 82 432 GPU-hours
    "d1_c1_code_hours": _gpu_hours,
    "d1_c1_llama_reported": _gpu_hours,
    # 001 Exercise 1 (GPT-2 small on 3B tokens) and Exercise 7 (13B on 300B tokens, 64 H100)
    "d1_ex1_hours": _gpu_hours,
    "d1_ex7_gpu_hours": _gpu_hours,
    "d1_ex7_days": lambda i: _seconds(i, i["gpus"]) / DAY,
    # 001 Exam Q2(b): 3B parameters, 60B tokens, 32 A100 at 40 % MFU
    "d1_examQ2b_eff": lambda i: budget.sustained_flops(peak_flops=i["peak_FLOPs"], mfu=i["MFU"]),
    "d1_examQ2b_gpu_s": lambda i: _seconds(i, 1),
    "d1_examQ2b_gpu_h": _gpu_hours,
    "d1_examQ2b_hours": lambda i: _seconds(i, i["gpus"]) / HOUR,
    "d1_examQ2b_days": lambda i: _seconds(i, i["gpus"]) / DAY,
    # Scaling laws: tokens per parameter (000 §1.4 Chinchilla, 001 Exam Q2(a))
    "d0_s14_chinchilla_ratio": lambda i: transformer.tokens_per_param(
        n_params=i["N_params"], n_tokens=i["D_tokens"]
    ),
    "d1_examQ2a_ratio": lambda i: transformer.tokens_per_param(
        n_params=i["N_params"], n_tokens=i["D_tokens"]
    ),
    # 000 Exercise 15: inference-aware optimum at the loss of the compute-optimal model
    "d0_ex15_N_Dinf_0e+00": _inference_optimal_n,
    "d0_ex15_N_Dinf_1e+12": _inference_optimal_n,
    "d0_ex15_N_Dinf_1e+13": _inference_optimal_n,
    # 001 group project 3: N = sqrt(C/(6·20)) at three budgets, and the sweep's FLOPs
    **{
        f"d1_proj3_Nopt_{c}": lambda i: scaling.fixed_ratio_allocation(
            compute=i["C"], tokens_per_param=i["tokens_per_param"]
        )[0]
        for c in ("1e+15", "1e+16", "5e+16")
    },
    "d1_proj3_total_flops": lambda i: scaling.isoflop_sweep_flops(
        budgets=i["budgets"], models_per_budget=i["models_per_budget"]
    ),
    # Convolutions: 001 ch. 0 (output side), ch. 1 (image values), Exercise 8(a)
    "d1_c0_conv_same": lambda i: conv.conv_output_size(
        input_size=i["H"], kernel_size=i["k"], padding=i["pad"], stride=i["stride"]
    ),
    "d1_c0_conv_stride2": lambda i: conv.conv_output_size(
        input_size=i["H"], kernel_size=i["k"], padding=i["pad"], stride=i["stride"]
    ),
    "d1_c1_image_values": lambda i: conv.image_values(height=i["H"], width=i["W"], channels=i["C"]),
    "d1_ex8a_rf": lambda i: conv.receptive_field(n_layers=i["L"], kernel_size=i["k"]),
    # the entries count weights in units of c²: one channel in and out
    "d1_ex8a_w3": lambda i: conv.stacked_conv_weights(
        n_layers=i["L"], kernel_size=i["k"], channels=1
    ),
    "d1_ex8a_w7": lambda i: conv.conv_param_count(
        kernel_size=i["k"], in_channels=1, out_channels=1
    ),
    # LoRA: 000 §5.2 (d = k = 4096, r = 8) and 001 ch. 0
    "d0_s52_lora_params": lambda i: adaptation.lora_param_count(
        d_in=i["k"], d_out=i["d"], rank=i["r"]
    ),
    "d0_s52_full_params": lambda i: adaptation.full_param_count(d_in=i["k"], d_out=i["d"]),
    "d0_s52_lora_fraction": lambda i: (
        100  # the entry is in percent
        * adaptation.lora_fraction(d_in=i["k"], d_out=i["d"], rank=i["r"])
    ),
    "d1_c0_lora_params": lambda i: adaptation.lora_param_count(
        d_in=i["d_in"], d_out=i["d_out"], rank=i["r"]
    ),
    "d1_c0_lora_full": lambda i: adaptation.full_param_count(d_in=i["d_in"], d_out=i["d_out"]),
    "d1_c0_lora_ratio": lambda i: adaptation.lora_reduction_factor(
        d_in=i["d_in"], d_out=i["d_out"], rank=i["r"]
    ),
}

_ADMIN = "course administration arithmetic, not a cost-model quantity"
_PROPERTY = "numerical check of a symmetry of the convolution (a property, not a cost quantity)"

SKIP = {
    **{
        entry: _ADMIN
        for entry in (
            "d0_admin_hours",
            "d0_admin_volume",
            "d0_admin_mva_org",
            "d0_admin_selfstudy",
            "d0_admin_assessment",
            "d1_admin_hours",
            "d1_admin_exam_points",
        )
    },
    "d1_ex8b_circular": _PROPERTY + ": circular convolution commutes with torch.roll",
    "d1_ex8c_stride2": _PROPERTY + ": stride 2 is equivariant to even shifts only",
}
