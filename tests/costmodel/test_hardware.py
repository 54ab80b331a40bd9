"""The hardware catalog: the notes' values, sources, lookups."""

from __future__ import annotations

import pytest

from costmodel.hardware import CATALOG, gpu


def test_the_notes_values_are_what_the_catalog_gives():
    # 001 Ex. 3b and exam Q1: A100 312 TFLOP/s bf16, 2 TB/s, ridge 156 FLOP/byte
    a100 = gpu("A100")
    assert a100.peak("bf16") == 312e12
    assert a100.memory_bandwidth == 2e12
    assert a100.ridge() == pytest.approx(156)
    # 001 Ex. 7: H100 ≈ 990 TFLOP/s bf16, 700 W; 000 intro: 80 GB
    h100 = gpu("H100")
    assert h100.peak("bf16") == 990e12 and h100.tdp_watts == 700
    assert h100.memory_bytes == 80e9 == gpu("A100-80GB").memory_bytes


def test_required_gpus_are_present_with_sources():
    for name in (
        "A100-40GB",
        "A100-80GB",
        "H100-SXM",
        "H100-PCIe",
        "H200",
        "L4",
        "T4",
        "V100-32GB",
    ):
        g = gpu(name)
        assert g.sources and all(g.sources)
        assert g.memory_bytes > 0 and g.memory_bandwidth > 0 and g.tdp_watts > 0
        assert g.peak("fp16") > g.peak("fp32") > 0


def test_lookup_ignores_case_and_punctuation():
    assert gpu("h100 sxm") is gpu("H100-SXM") is gpu("H100")


def test_unsupported_precision_and_unknown_gpu_say_what_exists():
    with pytest.raises(KeyError, match="T4 has no bf16"):
        gpu("T4").peak("bf16")
    with pytest.raises(KeyError, match="the catalog has: A100-40GB"):
        gpu("Z9000")


def test_names_are_unique():
    keys = [g.name for g in CATALOG]
    assert len(keys) == len(set(keys))
