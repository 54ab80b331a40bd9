"""costmodel.memory: model states, ZeRO, activations, checkpointing, KV cache, paging."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, memory

PHI = 7e9  # a 7B model (000 introduction)


# --- model states and ZeRO ----------------------------------------------------------


def test_model_states_of_a_7b_model_are_112_gb():
    # 000 introduction and Prop 1.2: 16 bytes per parameter
    assert memory.model_state_bytes(n_params=PHI) == 112e9
    # 000 §5.2: frozen bf16 weights
    assert memory.model_state_bytes(n_params=PHI, bytes_per_param=2) == 14e9


@pytest.mark.parametrize(
    ("stage", "per_param"),
    # 000 Prop 3.7 with N_d = 8: 16, 4 + 12/8, 2 + 14/8, 16/8
    [(0, 16), (1, 4 + 12 / 8), (2, 2 + 14 / 8), (3, 16 / 8)],
)
def test_zero_table_of_prop_3_7(stage, per_param):
    got = memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=8, stage=stage)
    assert got == pytest.approx(per_param * PHI)


def test_zero3_of_the_written_exams():
    # 000 exam Q2(b): 13B over 256 GPUs, about 0.8 GB; 001 exam Q2(c): 3B over 32, 1.5 GB
    assert memory.zero_bytes_per_gpu(n_params=13e9, n_gpus=256, stage=3) == 0.8125e9
    assert memory.zero_bytes_per_gpu(n_params=3e9, n_gpus=32, stage=3) == 1.5e9


def test_zero_communication_is_2_2_2_3_phi():
    # 000 Prop 3.7 and exam Q1
    got = [memory.zero_communication_volume(n_params=PHI, stage=s) for s in range(4)]
    assert got == [2 * PHI, 2 * PHI, 2 * PHI, 3 * PHI]


def test_deepspeed_counts_18_sharded_bytes():
    # DeepSpeed estimate_zero2_model_states_mem_needs (offload off): 2Φ + 18Φ/N_d
    ds2 = memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=8, stage=2, convention="deepspeed")
    assert ds2 == pytest.approx((2 + 18 / 8) * PHI)
    # the 4 bytes of fp32 gradients are the whole difference with the notes
    notes2 = memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=8, stage=2)
    assert ds2 - notes2 == pytest.approx(4 * PHI / 8)


@pytest.mark.parametrize("n_gpus", [4, 8, 64])
def test_zero_closed_forms_apply_to_their_own_convention(n_gpus):
    # the notes' closed forms must not be used to check DeepSpeed's count, and back
    from costmodel.verify import symbolic_value

    for stage in (1, 2, 3):
        args = {"n_params": PHI, "n_gpus": n_gpus, "stage": stage}
        want = memory.zero_bytes_per_gpu(**args)
        assert symbolic_value("memory.zero_bytes_per_gpu", args)[0] == pytest.approx(want)
    ds = {"n_params": PHI, "n_gpus": n_gpus, "stage": 2, "convention": "deepspeed"}
    want = memory.zero_bytes_per_gpu(**ds)
    assert want == pytest.approx((2 + 18 / n_gpus) * PHI)
    assert symbolic_value("memory.zero_bytes_per_gpu", ds)[0] == pytest.approx(want)


def test_deepspeed_zero3_adds_the_gathered_largest_layer():
    # DeepSpeed's printout for t5-small (60.5M params, 16.4M in the shared embedding),
    # 1 GPU, no offload: "1.08GB" per GPU (GiB): 18·Φ + 4·largest
    got = memory.zero_bytes_per_gpu(
        n_params=60_506_624,
        n_gpus=1,
        stage=3,
        convention="deepspeed",
        largest_layer_params=32128 * 512,
    )
    assert round(got / 2**30, 2) == 1.08


def test_accelerate_reports_the_peak_stage_not_the_sum():
    # accelerate estimate-memory: fp32 peak is the optimizer step (4 × 4Φ), mixed the moments
    assert memory.accelerate_training_bytes(n_params=PHI) == 16 * PHI
    assert memory.accelerate_training_bytes(n_params=PHI, dtype="bfloat16") == 8 * PHI
    assert memory.accelerate_training_bytes(
        n_params=PHI, dtype="float16"
    ) < memory.model_state_bytes(n_params=PHI)


def test_zero_conventions_refuse_what_they_do_not_count():
    with pytest.raises(ArgumentError, match="stage"):
        memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=8, stage=1, convention="deepspeed")
    with pytest.raises(ArgumentError, match="largest_layer_params"):
        memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=8, stage=3, largest_layer_params=1e6)
    with pytest.raises(ArgumentError, match="convention"):
        memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=8, stage=3, convention="fsdp")
    with pytest.raises(ArgumentError, match="stage"):
        memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=8, stage=4)
    with pytest.raises(ArgumentError, match="n_gpus"):
        memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=0, stage=3)


@settings(max_examples=100)
@given(n_gpus=st.integers(1, 4096), stage=st.sampled_from([1, 2, 3]))
def test_zero_never_exceeds_plain_data_parallelism(n_gpus, stage):
    plain = memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=n_gpus, stage=0)
    assert memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=n_gpus, stage=stage) <= plain


@settings(max_examples=100)
@given(n_gpus=st.integers(1, 4096))
def test_zero3_memory_is_inversely_proportional_to_n_d(n_gpus):
    one = memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=1, stage=3)
    assert memory.zero_bytes_per_gpu(n_params=PHI, n_gpus=n_gpus, stage=3) == pytest.approx(
        one / n_gpus
    )


# --- activations --------------------------------------------------------------------

EX1C = {"seq_len": 2048, "batch": 1, "d_model": 2048, "n_heads": 16}  # 000 Exercise 1(c)


def test_activations_of_exercise_1c():
    # 000 Exercise 1(c): 478 MB per layer, 11.5 GB for 24 layers, 3.4 GB with FlashAttention
    assert memory.activation_bytes_per_layer(**EX1C) == pytest.approx(478.150656e6)
    assert memory.activation_bytes(n_layers=24, **EX1C) / 1e9 == pytest.approx(11.4756, 1e-4)
    flash = memory.activation_bytes(n_layers=24, **EX1C, flash_attention=True)
    assert flash == 34 * 24 * 2048 * 1 * 2048


def test_exercise_1c_does_not_fit_a_24_gb_card():
    # 000 Exercise 1(c): 16N + activations = 32.4 GB > 24 GB; 24.4 GB with FlashAttention
    n_params = 1_310_359_552
    full = memory.training_memory_bytes(n_params=n_params, n_layers=24, **EX1C)
    flash = memory.training_memory_bytes(
        n_params=n_params, n_layers=24, **EX1C, flash_attention=True
    )
    assert full == pytest.approx(32.44e9, rel=1e-3)
    assert flash == pytest.approx(24.39e9, rel=1e-3)
    assert not memory.fits_in_memory(required_bytes=full, memory_bytes=24e9)
    assert not memory.fits_in_memory(required_bytes=flash, memory_bytes=24e9)


@settings(max_examples=100)
@given(seq_len=st.integers(1, 32768), n_heads=st.integers(1, 128))
def test_flash_attention_only_removes_memory(seq_len, n_heads):
    shape = {"seq_len": seq_len, "batch": 2, "d_model": 1024, "n_heads": n_heads}
    full = memory.activation_bytes_per_layer(**shape)
    flash = memory.activation_bytes_per_layer(**shape, flash_attention=True)
    assert flash < full
    assert full - flash == pytest.approx(5 * n_heads * seq_len**2 * 2)


# --- checkpointing ------------------------------------------------------------------


def test_checkpointing_numbers_of_the_notes():
    # 000 §2.5 and Exercise 7(a): n = 48, k = 7 gives about 14 units; √48 ≈ 6.9
    peak = memory.checkpoint_peak_units(n_layers=48, segment_length=7)
    assert peak == pytest.approx(48 / 7 + 7) and round(peak) == 14
    assert memory.checkpoint_optimal_segment(n_layers=48) == pytest.approx(6.93, 1e-3)
    # 000 Exercise 7(b): about 11 units; best integers k1 = 14, k2 = 4 give 10.93
    assert memory.two_level_checkpoint_min_peak_units(n_layers=48) == pytest.approx(10.90, 1e-3)
    assert memory.two_level_checkpoint_peak_units(
        n_layers=48, outer_segment=14, inner_segment=4
    ) == pytest.approx(10.93, 1e-3)
    # 001 Exercise 6(b): 30 blocks of 1.2 GB, 5 segments: 13.2 GB
    assert memory.checkpoint_peak_units(n_layers=30, segment_length=5) * 1.2 == pytest.approx(13.2)
    # 000 §2.5 code: 16 layer calls, then 32 with checkpointing
    assert memory.layer_forward_calls(n_layers=16) == 16
    assert memory.layer_forward_calls(n_layers=16, extra_forwards=1) == 32


@settings(max_examples=100)
@given(n=st.integers(1, 4096), k=st.floats(1, 4096))
def test_no_segment_beats_the_2_sqrt_n_floor(n, k):
    if k <= n:
        floor = memory.checkpoint_min_peak_units(n_layers=n)
        assert memory.checkpoint_peak_units(n_layers=n, segment_length=k) >= floor * (1 - 1e-12)


@settings(max_examples=100)
@given(n=st.integers(1, 100_000))
def test_two_levels_beat_one_for_deep_networks(n):
    k1, k2 = memory.two_level_checkpoint_optimal_segments(n_layers=n)
    assert k2 == pytest.approx(k1**0.5)
    if n >= 27:  # 3n^(1/3) <= 2√n from n = (3/2)^6 ≈ 11.4 on
        two = memory.two_level_checkpoint_min_peak_units(n_layers=n)
        assert two <= memory.checkpoint_min_peak_units(n_layers=n)


def test_checkpoint_segments_are_checked():
    with pytest.raises(ArgumentError, match="segment_length"):
        memory.checkpoint_peak_units(n_layers=8, segment_length=9)
    with pytest.raises(ArgumentError, match="segment_length"):
        memory.checkpoint_peak_units(n_layers=8, segment_length=0)
    with pytest.raises(ArgumentError, match="inner_segment"):
        memory.two_level_checkpoint_peak_units(n_layers=48, outer_segment=4, inner_segment=8)


# --- KV cache and paging ------------------------------------------------------------

EX5 = {"n_layers": 80, "n_kv_heads": 8, "d_head": 128}  # 000 Exercise 5


def test_kv_cache_of_exercise_5():
    # 000 Exercise 5: 327 680 bytes (320 KiB) per token, 2.68 GB per 8192 tokens,
    # 14 sequences in 40 GB, 29 with an 8-bit cache
    assert memory.kv_cache_bytes_per_token(**EX5) == 327_680
    assert memory.kv_cache_bytes_per_sequence(**EX5, seq_len=8192) == pytest.approx(2.68435456e9)
    assert memory.max_concurrent_sequences(free_bytes=40e9, **EX5, seq_len=8192) == 14
    assert (
        memory.max_concurrent_sequences(free_bytes=40e9, **EX5, seq_len=8192, bytes_per_value=1)
        == 29
    )


def test_gqa_saves_g_over_h():
    # 001 Exercise 3(a): the cache shrinks by g/h; 8 KV heads for 64 query heads: 1/8
    assert memory.gqa_kv_cache_factor(n_kv_heads=8, n_heads=64) == 1 / 8
    with pytest.raises(ArgumentError, match="n_kv_heads"):
        memory.gqa_kv_cache_factor(n_kv_heads=5, n_heads=64)


def test_paging_against_preallocation():
    # 000 §6.2: l_max = 2048, 300 tokens: pre-allocation wastes 85 %, paging (B_s = 16) < 5 %
    prealloc = memory.preallocation_waste(out_tokens=300, max_tokens=2048)
    assert round(prealloc, 2) == 0.85
    assert memory.paging_worst_case_waste(out_tokens=300, block_size=16) == pytest.approx(15 / 315)
    assert memory.paging_waste(out_tokens=300, block_size=16) == pytest.approx(4 / 304)
    with pytest.raises(ArgumentError, match="out_tokens"):
        memory.preallocation_waste(out_tokens=3000, max_tokens=2048)


@settings(max_examples=100)
@given(out=st.integers(1, 100_000), block=st.integers(1, 256))
def test_paging_waste_stays_under_its_worst_case(out, block):
    exact = memory.paging_waste(out_tokens=out, block_size=block)
    assert 0 <= exact <= memory.paging_worst_case_waste(out_tokens=out, block_size=block) + 1e-15


def test_kv_arguments_are_checked():
    with pytest.raises(ArgumentError, match="n_layers"):
        memory.kv_cache_bytes_per_token(n_layers=0, n_kv_heads=8, d_head=128)
    with pytest.raises(ArgumentError, match="free_bytes"):
        memory.max_concurrent_sequences(free_bytes=-1, **EX5, seq_len=8192)
    assert math.isclose(memory.kv_cache_bytes_per_token(**EX5, bytes_per_value=0.5), 81_920)
