"""Energy and emissions (001 Ex. 7; 000 §8.5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import ArgumentError, budget, energy, transformer
from costmodel._registry import all_derivations
from costmodel.verify import check


def test_exercise_7_energy():
    # 001 Ex. 7: 13B on 300B tokens, 64 H100 at 990 TFLOP/s, 40 % MFU, 700 W:
    # 16 414 GPU-hours × 0.7 kW ≈ 11 490 kWh at the chips
    c = transformer.training_flops(n_params=13e9, n_tokens=300e9)
    hours = budget.gpu_hours(total_flops=c, peak_flops=990e12, mfu=0.4)
    kwh = energy.energy_kwh(gpu_hours=hours, watts=700)
    assert kwh == pytest.approx(16_414.14 * 0.7, rel=1e-6)
    # with a data-centre PUE of 1.1 (Patterson et al. 2021 quote 1.1 for Google's centres)
    assert energy.energy_kwh(gpu_hours=hours, watts=700, pue=1.1) == pytest.approx(1.1 * kwh)


def test_emissions_scale_with_the_grid():
    # emissions = energy × carbon intensity: 11 490 kWh at 50 g/kWh (a low-carbon grid) is 574.5 kg,
    # at 475 g/kWh (a world average often quoted, IEA) 5.46 t
    assert energy.emissions_kg(energy_kwh=11_490, carbon_intensity=50) == pytest.approx(574.5)
    assert energy.emissions_kg(energy_kwh=11_490, carbon_intensity=475) == pytest.approx(5457.75)


def test_one_gpu_hour_at_one_kilowatt_is_one_kwh():
    assert energy.energy_kwh(gpu_hours=1, watts=1000) == 1


@pytest.mark.parametrize(
    ("bad", "name"),
    [({"pue": 0.9}, "pue"), ({"watts": 0}, "watts"), ({"gpu_hours": -1}, "gpu_hours")],
)
def test_bad_arguments_are_refused_by_name(bad, name):
    with pytest.raises(ArgumentError, match=name):
        energy.energy_kwh(**{"gpu_hours": 10.0, "watts": 700.0, **bad})


def test_negative_intensity_is_refused():
    with pytest.raises(ArgumentError, match="carbon_intensity"):
        energy.emissions_kg(energy_kwh=10, carbon_intensity=-1)


@settings(max_examples=100)
@given(h=st.floats(1, 1e7), w=st.floats(50, 1500), pue=st.floats(1, 2), i=st.floats(0, 800))
def test_energy_and_emissions_are_linear(h, w, pue, i):
    e = energy.energy_kwh(gpu_hours=h, watts=w, pue=pue)
    assert e >= energy.energy_kwh(gpu_hours=h, watts=w) * (1 - 1e-12)  # PUE ≥ 1 only adds
    assert energy.energy_kwh(gpu_hours=2 * h, watts=w, pue=pue) == pytest.approx(2 * e)
    assert energy.emissions_kg(energy_kwh=e, carbon_intensity=i) == pytest.approx(e * i / 1000)


@pytest.mark.parametrize(
    "derivation",
    [d for d in all_derivations() if d.formula.startswith("energy.")],
    ids=lambda d: d.formula,
)
def test_derivations(derivation):
    result = check(derivation)
    assert result.ok, result.detail
