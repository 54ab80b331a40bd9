"""Energy and emissions of a run (001 Ex. 7; 000 §8.5, Patterson et al. 2021).

Energy is the accelerators' power times their busy time, scaled by the data centre's
power usage effectiveness (PUE ≥ 1: cooling, power conversion); emissions are energy
times the grid's carbon intensity (grams of CO2-equivalent per kWh).
"""

from __future__ import annotations

from costmodel._registry import derivation, formula

JOULES_PER_KWH = 3.6e6
SECONDS_PER_HOUR = 3600


@formula("001 Ex. 7 (64 H100 at 700 W); 000 §8.5; Patterson et al. 2021", "kWh")
def energy_kwh(gpu_hours: float, watts: float, pue: float = 1.0) -> float:
    """Energy of a run in kWh: GPU-hours × watts × PUE / 1000."""
    return gpu_hours * watts * pue / 1000


@derivation(energy_kwh)
def _(sp):
    """GPU-h·P·PUE/1000: joules P·t summed over the GPU-seconds, times PUE, over 3.6e6 J/kWh."""
    h, P, pue = sp.symbols("gpu_hours watts pue", positive=True)
    joules_at_the_chips = P * (h * SECONDS_PER_HOUR)  # W × s, all GPUs together
    joules_at_the_meter = pue * joules_at_the_chips  # cooling and conversion overhead
    return joules_at_the_meter / JOULES_PER_KWH, h * P * pue / 1000


@formula("001 Ex. 7 (FR/world emissions); Patterson et al. 2021", "kg")
def emissions_kg(energy_kwh: float, carbon_intensity: float) -> float:
    """CO2-equivalent emissions in kg: energy (kWh) × carbon intensity (g/kWh) / 1000."""
    return energy_kwh * carbon_intensity / 1000


@derivation(emissions_kg)
def _(sp):
    """E·I/1000: grams E·I (kWh × g/kWh), in kilograms."""
    E, I = sp.symbols("energy_kwh carbon_intensity", positive=True)
    grams = E * I
    return grams / 1000, E * I / 1000
