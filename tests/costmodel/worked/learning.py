"""Post-training, reinforcement learning and diffusion (000 ch. 5, 001 ch. 7)."""

import sympy as sp

from costmodel import diffusion, posttraining, rl
from costmodel._registry import get
from costmodel.verify import check

GB, KB = 1e9, 1e3


def _derivation_holds(name: str) -> bool:
    """The formula's sympy derivation checks out (symbolically and at random points)."""
    return all(check(d).ok for d in get(name).derivations)


def _precisions_add() -> bool:
    """Written exam Q4: α_t(1 − ᾱ_{t−1}) + β_t = 1 − ᾱ_t, with ᾱ_t = α_t ᾱ_{t−1}, α_t = 1 − β_t."""
    beta, ab_prev = sp.symbols("beta_t alpha_bar_prev", positive=True)
    alpha = 1 - beta
    identity = sp.simplify(alpha * (1 - ab_prev) + beta - (1 - alpha * ab_prev)) == 0
    return identity and _derivation_holds("diffusion.posterior_variance")


CASES = {
    # --- 000 Exercise 11: the DPO gradient ----------------------------------------------
    # (a) d/du[−log σ(u)] = −σ(−u), the derivation of the pair weight
    "d0_ex11a_dpo_derivative": lambda i: _derivation_holds("posttraining.dpo_pair_weight"),
    "d0_ex11b_weight": lambda i: posttraining.dpo_pair_weight(margin=i["u"]),
    # --- 001 §7.2 and Exercise 10: REINFORCE variance, σ = 0.9 --------------------------
    "d1_ex10a_variance_formula": lambda i: _derivation_holds("rl.reinforce_variance"),
    "d1_ex10b_bstar": lambda i: rl.reinforce_optimal_baseline(sigma=i["sigma"]),
    "d1_ex10b_var_b0.0": lambda i: rl.reinforce_variance(sigma=i["sigma"], b=i["b"]),
    "d1_ex10b_var_b0.9": lambda i: rl.reinforce_variance(sigma=i["sigma"], b=i["b"]),
    "d1_ex10b_var_b0.1": lambda i: rl.reinforce_variance(sigma=i["sigma"], b=i["b"]),
    "d1_ex10b_rollouts_b0.0": lambda i: rl.reinforce_rollouts(
        sigma=i["sigma"], b=i["b"], rel_err=i["rel_err"]
    ),
    "d1_ex10b_rollouts_b0.9": lambda i: rl.reinforce_rollouts(
        sigma=i["sigma"], b=i["b"], rel_err=i["rel_err"]
    ),
    "d1_ex10b_rollouts_b0.1": lambda i: rl.reinforce_rollouts(
        sigma=i["sigma"], b=i["b"], rel_err=i["rel_err"]
    ),
    "d1_ex10b_cost_factor": lambda i: (
        rl.reinforce_variance(sigma=i["sigma"], b=i["sigma"])
        / rl.reinforce_variance(sigma=i["sigma"], b=0.0)
    ),
    "d1_s72_halve_error": lambda i: rl.rollouts_for_error_factor(error_factor=i["error_factor"]),
    # --- 001 §7.2 replay memory: a million Atari transitions ----------------------------
    "d1_s72_atari_state": lambda i: (
        rl.state_bytes_of_frames(
            frames_per_state=i["frames"],
            height=i["H"],
            width=i["W"],
            bytes_per_pixel=i["bytes_per_px"],
        )
        / KB
    ),
    "d1_s72_replay_s_sprime": lambda i: (
        rl.replay_buffer_bytes(n_transitions=i["transitions"], state_bytes=i["state_bytes"]) / GB
    ),
    "d1_s72_replay_frames_once": lambda i: (
        rl.replay_buffer_bytes(
            n_transitions=i["transitions"], state_bytes=4 * i["frame_bytes"], frames_once=True
        )
        / GB
    ),
    # --- 001 Exercise 9 and written exam Q4: DDPM on Gaussian data ----------------------
    "d1_ex9a_eps_star": lambda i: _derivation_holds("diffusion.optimal_noise_prediction"),
    "d1_examQ4_identity": lambda i: _precisions_add(),
    **{
        f"d1_ex9b_std_s{s}_{variance}": lambda i: diffusion.ddpm_sample_std(
            data_std=i["s"],
            n_steps=i["T_steps"],
            beta_1=i["beta_1"],
            beta_T=i["beta_T"],
            sampler_variance=i["sigma2"],
        )
        for s in ("0.5", "2")
        for variance in ("beta", "beta_tilde")
    },
}

SKIP = {}
