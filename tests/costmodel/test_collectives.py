"""Ring and tree all-reduce, parameter server (000 §3.1, Ex. 8, 13; 001 ch. 3, Ex. 5, exam Q2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, collectives

GB, MB, US = 1e9, 1e6, 1e-6
EX8 = {"n_bytes": 1 * GB, "n_workers": 64, "bandwidth": 25 * GB}  # 000 Exercise 8(b)


def test_exercise_8b_ring_and_server():
    # 000 Ex. 8(b): 126 steps of 10⁻⁵ + 6.25·10⁻⁴ s ≈ 0.080 s; server 5.1 s, 2.6 s pipelined
    assert collectives.ring_allreduce_steps(n_workers=64) == 126
    assert collectives.ring_step_seconds(**EX8) == pytest.approx(6.25e-4)
    ring = collectives.ring_allreduce_seconds(**EX8, latency=10 * US)
    assert ring == pytest.approx(126 * (1e-5 + 6.25e-4))
    assert round(ring, 3) == 0.080
    assert collectives.parameter_server_seconds(**EX8) == pytest.approx(5.12)
    assert collectives.parameter_server_pipelined_seconds(**EX8) == pytest.approx(2.56)
    # "32 to 64 times faster"
    assert round(collectives.parameter_server_pipelined_seconds(**EX8) / ring) == 32
    assert round(collectives.parameter_server_seconds(**EX8) / ring) == 64


def test_exercise_8c_latency_crossover():
    # 000 Ex. 8(c): n = αpW = 16 MB, where the two terms of the ring are equal
    n = collectives.ring_latency_crossover_bytes(n_workers=64, bandwidth=25 * GB, latency=10 * US)
    assert n == pytest.approx(16 * MB)
    p, alpha = 64, 10 * US
    assert 2 * (p - 1) * alpha == pytest.approx(
        collectives.ring_allreduce_seconds(n_bytes=n, n_workers=p, bandwidth=25 * GB)
    )


def test_bandwidth_term_alone():
    # 001 written exam Q2(d): 2 × 31/32 × 6/25 ≈ 0.47 s for a 6 GB gradient on 32 GPUs
    t = collectives.ring_allreduce_seconds(n_bytes=6 * GB, n_workers=32, bandwidth=25 * GB)
    assert t == pytest.approx(0.465)
    # 000 Exercise 13: 2.7 GB of bf16 gradients across 8 nodes at 25 GB/s ≈ 0.19 s
    t = collectives.ring_allreduce_seconds(n_bytes=2.734375 * GB, n_workers=8, bandwidth=25 * GB)
    assert t == pytest.approx(0.19140625)


def _simulate_ring(p: int, n: int, seed: int = 0):
    """The notes' ring code (000 §3.1): reduce-scatter then all-gather over p chunks."""
    rng = np.random.default_rng(seed)
    x = [rng.standard_normal(n) for _ in range(p)]
    buf = [np.split(xi.copy(), p) for xi in x]  # buf[i][c]: chunk c held by worker i
    sent, steps = np.zeros(p), 0
    for s in range(p - 1):  # reduce-scatter
        msgs = [(i, (i - s) % p, buf[i][(i - s) % p].copy()) for i in range(p)]
        for i, c, data in msgs:
            buf[(i + 1) % p][c] += data
            sent[i] += data.size
        steps += 1
    for s in range(p - 1):  # all-gather
        msgs = [(i, (i + 1 - s) % p, buf[i][(i + 1 - s) % p].copy()) for i in range(p)]
        for i, c, data in msgs:
            buf[(i + 1) % p][c] = data
            sent[i] += data.size
        steps += 1
    correct = all(np.allclose(np.concatenate(b), sum(x)) for b in buf)
    return correct, sent, steps


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
def test_ring_code_sums_and_counts_match_the_formulas(p):
    # 000 §3.1 code: every worker ends with the sum and sent 2(p − 1)n/p entries (18 for 4, 12)
    n = 12 * p
    correct, sent, steps = _simulate_ring(p, n)
    assert correct
    assert steps == collectives.ring_allreduce_steps(n_workers=p)
    assert all(
        s == collectives.ring_allreduce_bytes_per_worker(n_bytes=n, n_workers=p) for s in sent
    )


def test_notes_ring_code_sends_18_entries():
    # 000 §3.1 code: p = 4, n = 12 prints 18 for every worker
    _, sent, _ = _simulate_ring(4, 12)
    assert list(sent) == [18.0] * 4
    assert collectives.ring_allreduce_bytes_per_worker(n_bytes=12, n_workers=4) == 18


def test_tree_levels_are_exact_at_powers_of_two():
    # 2⌈log₂ p⌉(α + n/W): 3 levels for 8 workers, 4 for 9
    t8 = collectives.tree_allreduce_seconds(n_bytes=1.0, n_workers=8, bandwidth=1.0, latency=0.0)
    t9 = collectives.tree_allreduce_seconds(n_bytes=1.0, n_workers=9, bandwidth=1.0, latency=0.0)
    assert (t8, t9) == (6.0, 8.0)


def test_exercise_5_ring_against_tree():
    # 001 Ex. 5: S = 1 GB, α = 2 µs, b = 25 GB/s, P = 2…512: the ring wins once S/P ≫ αb
    link = {"bandwidth": 25 * GB, "latency": 2 * US}
    for p in [2, 4, 16, 64, 512]:
        ring = collectives.ring_allreduce_seconds(n_bytes=1 * GB, n_workers=p, **link)
        tree = collectives.tree_allreduce_seconds(n_bytes=1 * GB, n_workers=p, **link)
        assert ring < tree
    # for a small message on many workers the tree is faster
    small = {"n_bytes": 10e3, "n_workers": 512, **link}
    assert collectives.tree_allreduce_seconds(**small) < collectives.ring_allreduce_seconds(**small)


@settings(max_examples=100)
@given(p=st.integers(4, 4096), alpha=st.floats(1e-7, 1e-4), w=st.floats(1e9, 1e12))
def test_ring_tree_crossover_is_where_times_are_equal(p, alpha, w):
    n = collectives.ring_tree_crossover_bytes(n_workers=p, bandwidth=w, latency=alpha)
    link = {"n_workers": p, "bandwidth": w, "latency": alpha}
    ring = collectives.ring_allreduce_seconds(n_bytes=n, **link)
    tree = collectives.tree_allreduce_seconds(n_bytes=n, **link)
    assert ring == pytest.approx(tree, rel=1e-9)
    assert collectives.ring_allreduce_seconds(n_bytes=2 * n, **link) < (
        collectives.tree_allreduce_seconds(n_bytes=2 * n, **link)
    )


def test_ring_never_slower_than_tree_for_three_workers_or_fewer():
    for p in (2, 3):
        assert collectives.ring_tree_crossover_bytes(n_workers=p, bandwidth=1e9, latency=1e-6) == 0


@settings(max_examples=100)
@given(n=st.floats(1e3, 1e11), w=st.floats(1e9, 1e12))
def test_ring_time_tends_to_2n_over_w(n, w):
    # the bandwidth term 2(p − 1)/p·n/W grows with p towards 2n/W, never above
    times = [
        collectives.ring_allreduce_seconds(n_bytes=n, n_workers=p, bandwidth=w)
        for p in (2, 8, 64, 10**6)
    ]
    assert times == sorted(times)
    assert times[-1] <= 2 * n / w
    assert times[-1] == pytest.approx(2 * n / w, rel=1e-5)


@settings(max_examples=100)
@given(p=st.integers(2, 10_000), n=st.floats(1.0, 1e12))
def test_each_worker_sends_under_twice_the_buffer(p, n):
    sent = collectives.ring_allreduce_bytes_per_worker(n_bytes=n, n_workers=p)
    assert n <= sent < 2 * n


@settings(max_examples=100)
@given(p=st.integers(2, 4096), n=st.floats(1e3, 1e11), w=st.floats(1e9, 1e12))
def test_ring_beats_the_pipelined_server_without_latency(p, n, w):
    ring = collectives.ring_allreduce_seconds(n_bytes=n, n_workers=p, bandwidth=w)
    server = collectives.parameter_server_pipelined_seconds(n_bytes=n, n_workers=p, bandwidth=w)
    assert ring <= server
    assert server == pytest.approx(
        collectives.parameter_server_seconds(n_bytes=n, n_workers=p, bandwidth=w) / 2
    )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_bytes": 1e9, "n_workers": 0, "bandwidth": 1e9}, "n_workers"),
        ({"n_bytes": 1e9, "n_workers": 2.5, "bandwidth": 1e9}, "n_workers"),
        ({"n_bytes": -1.0, "n_workers": 8, "bandwidth": 1e9}, "n_bytes"),
        ({"n_bytes": 1e9, "n_workers": 8, "bandwidth": 0.0}, "bandwidth"),
        ({"n_bytes": 1e9, "n_workers": 8, "bandwidth": 1e9, "latency": -1e-6}, "latency"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs, name):
    with pytest.raises(ArgumentError, match=name):
        collectives.ring_allreduce_seconds(**kwargs)


def test_a_single_worker_communicates_nothing():
    one = {"n_bytes": 1e9, "n_workers": 1, "bandwidth": 1e9, "latency": 1e-6}
    assert collectives.ring_allreduce_seconds(**one) == 0
    assert collectives.tree_allreduce_seconds(**one) == 0


def test_latency_term_scales_linearly_in_workers():
    # 000 §3.1: the latency term 2(p − 1)α grows with p
    t = [
        collectives.ring_allreduce_seconds(n_bytes=1.0, n_workers=p, bandwidth=1e30, latency=1e-6)
        for p in (2, 3, 5)
    ]
    assert t == pytest.approx([2e-6, 4e-6, 8e-6])
    assert math.isclose(t[2] - t[1], 2 * (t[1] - t[0]))
