"""costmodel.parallel: pipeline bubbles, 3D layouts, tensor and data parallelism."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, parallel

LAYOUT_175B = {"tensor_parallel": 8, "pipeline_parallel": 16}  # 000 Exercise 13


def _idle_slots_of_gpipe_grid(p: int, m: int) -> int:
    """Simulate the forward grid: stage i works on micro-batch j at slot i + j."""
    busy = {(i, i + j) for i in range(p) for j in range(m)}
    return p * (m + p - 1) - len(busy)


@pytest.mark.parametrize(("p", "m"), [(4, 8), (8, 63), (16, 96), (1, 5)])
def test_bubble_matches_the_simulated_schedule(p, m):
    # 000 Prop 3.13, 001 thm 2.3 (the 1F1B chart of Exercise 2 uses p = 4, m = 8)
    simulated = _idle_slots_of_gpipe_grid(p, m) / (p * (m + p - 1))
    assert parallel.pipeline_bubble_fraction(n_stages=p, n_microbatches=m) == pytest.approx(
        simulated
    )


def test_bubbles_of_the_notes():
    # 000 Exercise 13: 15/111 ≈ 13.5 %; 000 exam Q2(c): 3/35 ≈ 8.6 %
    assert parallel.pipeline_bubble_fraction(n_stages=16, n_microbatches=96) == 15 / 111
    assert parallel.pipeline_bubble_fraction(n_stages=4, n_microbatches=32) == 3 / 35


def test_interleaving_divides_the_bubble_time_by_v():
    # 000 §3.4 (Narayanan et al. 2021): bubble time (p − 1)/v against m of work
    plain = parallel.pipeline_bubble_fraction(n_stages=8, n_microbatches=32)
    inter = parallel.pipeline_bubble_fraction(n_stages=8, n_microbatches=32, interleave=4)
    assert plain / (1 - plain) == pytest.approx(4 * inter / (1 - inter))


def test_smallest_micro_batch_counts():
    # 000 Exercise 4(a): m = 63 for a bubble of at most 10 % with p = 8
    assert parallel.min_microbatches_for_bubble(n_stages=8, max_bubble=0.1) == 63
    # 001 Exercise 2: m = 135 for an efficiency of 90 % with p = 16
    assert parallel.min_microbatches_for_efficiency(n_stages=16, efficiency=0.9) == 135
    assert parallel.pipeline_efficiency(n_stages=16, n_microbatches=135) >= 0.9
    assert parallel.pipeline_efficiency(n_stages=16, n_microbatches=134) < 0.9


@settings(max_examples=100)
@given(p=st.integers(2, 64), beta=st.floats(0.01, 0.9), v=st.integers(1, 8))
def test_min_microbatches_is_the_smallest_that_works(p, beta, v):
    m = parallel.min_microbatches_for_bubble(n_stages=p, max_bubble=beta, interleave=v)
    assert parallel.pipeline_bubble_fraction(p, m, v) <= beta + 1e-9
    if m > 1:
        assert parallel.pipeline_bubble_fraction(p, m - 1, v) > beta - 1e-9


@settings(max_examples=100)
@given(p=st.integers(1, 64), m=st.integers(1, 10_000))
def test_bubble_shrinks_to_zero_as_micro_batches_grow(p, m):
    here = parallel.pipeline_bubble_fraction(n_stages=p, n_microbatches=m)
    assert 0 <= here < 1
    assert parallel.pipeline_bubble_fraction(n_stages=p, n_microbatches=m + 1) <= here
    assert parallel.pipeline_bubble_fraction(n_stages=p, n_microbatches=10**9) < 1e-7


def test_micro_batches_held_in_memory():
    # 000 Exercise 4(b): GPipe keeps all 63, 1F1B at most p = 8
    assert parallel.microbatches_in_memory(n_stages=8, n_microbatches=63) == 63
    assert parallel.microbatches_in_memory(n_stages=8, n_microbatches=63, schedule="1f1b") == 8
    with pytest.raises(ArgumentError, match="schedule"):
        parallel.microbatches_in_memory(n_stages=8, n_microbatches=63, schedule="zb")


def test_layout_of_exercise_13():
    # 000 Exercise 13: 128 nodes × 8 GPUs, t = 8, p = 16: d = 8, 6 layers per stage,
    # 1.37e9 parameters and 21.9 GB of states per GPU, 7.5 GB with ZeRO-1, 2.7 GB of
    # bf16 gradients, 96 micro-batches per pipeline
    assert parallel.data_parallel_degree(n_gpus=1024, **LAYOUT_175B) == 8
    assert parallel.layers_per_stage(n_layers=96, n_stages=16) == 6
    assert parallel.params_per_gpu(n_params=175e9, **LAYOUT_175B) == 1_367_187_500
    assert parallel.state_bytes_per_gpu(n_params=175e9, **LAYOUT_175B) == 21.875e9
    zero1 = parallel.state_bytes_per_gpu(n_params=175e9, **LAYOUT_175B, data_parallel=8, stage=1)
    assert zero1 == pytest.approx(7.51953125e9)
    assert parallel.microbatches_per_pipeline(global_batch=768, data_parallel=8) == 96


def test_layouts_must_divide_evenly():
    with pytest.raises(ArgumentError, match="n_gpus"):
        parallel.data_parallel_degree(n_gpus=1000, **LAYOUT_175B)
    with pytest.raises(ArgumentError, match="n_stages"):
        parallel.layers_per_stage(n_layers=96, n_stages=7)
    with pytest.raises(ArgumentError, match="global_batch"):
        parallel.microbatches_per_pipeline(global_batch=733, data_parallel=8)
    with pytest.raises(ArgumentError, match="tensor_parallel"):
        parallel.params_per_gpu(n_params=1e9, tensor_parallel=0, pipeline_parallel=1)


def test_tensor_parallel_volume():
    # 000 §3.3: 2 + 2 all-reduces of b·s·d values per block; a ring sends 2(t − 1)/t of each
    b, s, d, t = 8, 2048, 4096, 8
    got = parallel.tensor_parallel_comm_bytes(
        batch=b, seq_len=s, d_model=d, n_layers=1, tensor_parallel=t
    )
    assert got == pytest.approx(4 * 2 * (t - 1) / t * b * s * d * 2)


@settings(max_examples=100)
@given(t=st.integers(1, 64))
def test_tensor_parallel_volume_saturates_at_8bsd_per_layer(t):
    got = parallel.tensor_parallel_comm_bytes(
        batch=1, seq_len=1, d_model=1, n_layers=1, tensor_parallel=t, bytes_per_value=1
    )
    assert got < 8
    assert got == 0 if t == 1 else got >= 4


def test_accumulation_of_exercise_6():
    # 000 Exercise 6: 4 GPUs × micro-batch 8 × 2 steps = 64; summed losses give 16× the
    # gradient (the examples per GPU)
    assert parallel.global_batch_size(batch=8, n_gpus=4, accumulation_steps=2) == 64
    assert parallel.sum_loss_gradient_factor(batch=8, accumulation_steps=2) == 16


def test_sum_factor_on_a_least_squares_gradient():
    # 000 Exercise 6(b), checked numerically: DDP mean over GPUs of per-GPU summed losses
    rng = np.random.default_rng(0)
    X, y, w = rng.standard_normal((64, 3)), rng.standard_normal(64), rng.standard_normal(3)
    grad = 2 * X.T @ (X @ w - y)  # per-example gradients summed, shape (3,)
    shards = zip(np.split(X, 4), np.split(y, 4), strict=True)  # 16 examples per GPU
    per_gpu = [2 * Xs.T @ (Xs @ w - ys) for Xs, ys in shards]  # summed over 2 × 8
    ddp = np.mean(per_gpu, axis=0)
    factor = parallel.sum_loss_gradient_factor(batch=8, accumulation_steps=2)
    np.testing.assert_allclose(ddp, factor * grad / 64)
