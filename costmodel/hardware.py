"""The accelerators questions draw from, with their sources.

SI units throughout: FLOP/s (dense, no structured sparsity), bytes, bytes/s, watts.
Memory capacities are the vendor's marketed decimal gigabytes (an "80 GB" H100 holds
80·10⁹ bytes here), which is how the notes compare budgets against cards; the GB/GiB
distinction is a question of its own (000 Ex. 1c).

Where the notes state a value (A100: 312 TFLOP/s bf16 and 2 TB/s; H100: ≈ 990 TFLOP/s
bf16 and 700 W), the catalog gives the notes' value and the source line records the
datasheet figure it rounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

T = 1e12
GB = 1e9


@dataclass(frozen=True)
class GPU:
    """One accelerator model.

    ``peak_flops`` maps a precision (``"fp64"``, ``"fp32"``, ``"tf32"``, ``"bf16"``,
    ``"fp16"``, ``"fp8"``, ``"int8"``) to dense peak FLOP/s (OP/s for int8); a missing
    precision is not supported by the tensor cores of that GPU.  ``nvlink_bandwidth``
    is the total (both directions) GPU-to-GPU bandwidth inside a node, 0 without NVLink;
    ``network_bandwidth`` is the inter-node bandwidth per GPU of the vendor's reference
    server, one direction.
    """

    name: str
    vendor: str
    architecture: str
    peak_flops: Mapping[str, float]
    memory_bytes: float
    memory_kind: str
    memory_bandwidth: float
    nvlink_bandwidth: float
    pcie_bandwidth: float
    network_bandwidth: float
    tdp_watts: float
    sources: tuple[str, ...]
    aliases: tuple[str, ...] = field(default=())

    def peak(self, precision: str = "bf16") -> float:
        """Dense peak FLOP/s in ``precision``; a clear error if the GPU lacks it."""
        try:
            return self.peak_flops[precision]
        except KeyError:
            have = ", ".join(self.peak_flops)
            raise KeyError(
                f"{self.name} has no {precision} tensor-core peak (it has: {have})"
            ) from None

    def ridge(self, precision: str = "bf16") -> float:
        """Ridge intensity π/β in FLOP per byte (000 §2.1)."""
        return self.peak(precision) / self.memory_bandwidth


# Dense tensor-core peaks shared by several cards: the A100 40 GB and 80 GB have the same
# cores, and so do the H100 SXM and the H200 (which differ in memory only).
AMPERE_A100 = MappingProxyType(
    {
        "fp64": 19.5 * T,
        "fp32": 19.5 * T,
        "tf32": 156 * T,
        "bf16": 312 * T,
        "fp16": 312 * T,
        "int8": 624 * T,
    }
)
HOPPER_SXM = MappingProxyType(
    {
        "fp64": 67 * T,
        "fp32": 67 * T,
        "tf32": 495 * T,
        "bf16": 990 * T,
        "fp16": 990 * T,
        "fp8": 1979 * T,
        "int8": 1979 * T,
    }
)


CATALOG: tuple[GPU, ...] = (
    GPU(
        name="A100-40GB",
        vendor="NVIDIA",
        architecture="Ampere",
        peak_flops=AMPERE_A100,
        memory_bytes=40 * GB,
        memory_kind="HBM2",
        memory_bandwidth=1555 * GB,
        nvlink_bandwidth=600 * GB,
        pcie_bandwidth=64 * GB,
        network_bandwidth=25 * GB,
        tdp_watts=400,
        sources=(
            "NVIDIA A100 Tensor Core GPU datasheet (2021): SXM4 40GB, 1,555 GB/s, 400 W",
            "DGX A100 reference: 8x 200 Gb/s HDR InfiniBand, one per GPU (25 GB/s)",
        ),
        aliases=("A100-SXM4-40GB", "A100 40GB"),
    ),
    GPU(
        name="A100-80GB",
        vendor="NVIDIA",
        architecture="Ampere",
        peak_flops=AMPERE_A100,
        memory_bytes=80 * GB,
        memory_kind="HBM2e",
        memory_bandwidth=2000 * GB,
        nvlink_bandwidth=600 * GB,
        pcie_bandwidth=64 * GB,
        network_bandwidth=25 * GB,
        tdp_watts=400,
        sources=(
            "NVIDIA A100 Tensor Core GPU datasheet (2021): SXM4 80GB, 2,039 GB/s, 400 W",
            "the notes round the bandwidth to 2 TB/s (001 Ex. 3b, exam Q1: ridge 156)",
            "DGX A100 reference: 8x 200 Gb/s HDR InfiniBand, one per GPU (25 GB/s)",
        ),
        aliases=("A100", "A100-SXM4-80GB", "A100 80GB"),
    ),
    GPU(
        name="H100-SXM",
        vendor="NVIDIA",
        architecture="Hopper",
        peak_flops=HOPPER_SXM,
        memory_bytes=80 * GB,
        memory_kind="HBM3",
        memory_bandwidth=3350 * GB,
        nvlink_bandwidth=900 * GB,
        pcie_bandwidth=128 * GB,
        network_bandwidth=50 * GB,
        tdp_watts=700,
        sources=(
            "NVIDIA H100 Tensor Core GPU datasheet (2023): SXM5, bf16 989.4 TFLOP/s dense "
            "(1,979 with sparsity), 3.35 TB/s, 700 W",
            "the notes use ≈ 990 TFLOP/s bf16 and 700 W (001 Ex. 7)",
            "DGX H100 reference: 8x 400 Gb/s NDR InfiniBand, one per GPU (50 GB/s)",
        ),
        aliases=("H100", "H100-SXM5", "H100 SXM"),
    ),
    GPU(
        name="H100-PCIe",
        vendor="NVIDIA",
        architecture="Hopper",
        peak_flops={
            "fp64": 51 * T,
            "fp32": 51 * T,
            "tf32": 378 * T,
            "bf16": 756 * T,
            "fp16": 756 * T,
            "fp8": 1513 * T,
            "int8": 1513 * T,
        },
        memory_bytes=80 * GB,
        memory_kind="HBM2e",
        memory_bandwidth=2000 * GB,
        nvlink_bandwidth=600 * GB,
        pcie_bandwidth=128 * GB,
        network_bandwidth=50 * GB,
        tdp_watts=350,
        sources=(
            "NVIDIA H100 Tensor Core GPU datasheet (2023): PCIe, bf16 756 TFLOP/s dense, "
            "2 TB/s, 300-350 W, NVLink bridge 600 GB/s",
        ),
        aliases=("H100 PCIe",),
    ),
    GPU(
        name="H200",
        vendor="NVIDIA",
        architecture="Hopper",
        peak_flops=HOPPER_SXM,
        memory_bytes=141 * GB,
        memory_kind="HBM3e",
        memory_bandwidth=4800 * GB,
        nvlink_bandwidth=900 * GB,
        pcie_bandwidth=128 * GB,
        network_bandwidth=50 * GB,
        tdp_watts=700,
        sources=(
            "NVIDIA H200 Tensor Core GPU datasheet (2024): SXM, 141 GB HBM3e, 4.8 TB/s, "
            "same tensor cores as H100 SXM (bf16 989 TFLOP/s dense), up to 700 W",
        ),
        aliases=("H200-SXM", "H200 SXM"),
    ),
    GPU(
        name="L4",
        vendor="NVIDIA",
        architecture="Ada Lovelace",
        peak_flops={
            "fp32": 30.3 * T,
            "tf32": 60 * T,
            "bf16": 121 * T,
            "fp16": 121 * T,
            "fp8": 242.5 * T,
            "int8": 242.5 * T,
        },
        memory_bytes=24 * GB,
        memory_kind="GDDR6",
        memory_bandwidth=300 * GB,
        nvlink_bandwidth=0.0,
        pcie_bandwidth=64 * GB,
        network_bandwidth=0.0,
        tdp_watts=72,
        sources=(
            "NVIDIA L4 Tensor Core GPU datasheet (2023): bf16 121 TFLOP/s dense (242 with "
            "sparsity), 24 GB GDDR6, 300 GB/s, 72 W, PCIe Gen4 x16",
        ),
    ),
    GPU(
        name="L40S",
        vendor="NVIDIA",
        architecture="Ada Lovelace",
        peak_flops={
            "fp32": 91.6 * T,
            "tf32": 183 * T,
            "bf16": 362 * T,
            "fp16": 362 * T,
            "fp8": 733 * T,
            "int8": 733 * T,
        },
        memory_bytes=48 * GB,
        memory_kind="GDDR6",
        memory_bandwidth=864 * GB,
        nvlink_bandwidth=0.0,
        pcie_bandwidth=64 * GB,
        network_bandwidth=0.0,
        tdp_watts=350,
        sources=(
            "NVIDIA L40S datasheet (2023): bf16 362 TFLOP/s dense (733 with sparsity), 48 GB "
            "GDDR6, 864 GB/s, 350 W, PCIe Gen4 x16",
        ),
    ),
    GPU(
        name="T4",
        vendor="NVIDIA",
        architecture="Turing",
        peak_flops={"fp32": 8.1 * T, "fp16": 65 * T, "int8": 130 * T},
        memory_bytes=16 * GB,
        memory_kind="GDDR6",
        memory_bandwidth=320 * GB,
        nvlink_bandwidth=0.0,
        pcie_bandwidth=32 * GB,
        network_bandwidth=0.0,
        tdp_watts=70,
        sources=(
            "NVIDIA T4 Tensor Core GPU datasheet (2019): fp16 mixed precision 65 TFLOP/s, "
            "16 GB GDDR6, 320 GB/s, 70 W, PCIe Gen3 x16; no bf16",
        ),
        aliases=("Tesla T4",),
    ),
    GPU(
        name="V100-32GB",
        vendor="NVIDIA",
        architecture="Volta",
        peak_flops={"fp64": 7.8 * T, "fp32": 15.7 * T, "fp16": 125 * T},
        memory_bytes=32 * GB,
        memory_kind="HBM2",
        memory_bandwidth=900 * GB,
        nvlink_bandwidth=300 * GB,
        pcie_bandwidth=32 * GB,
        network_bandwidth=12.5 * GB,
        tdp_watts=300,
        sources=(
            "NVIDIA V100 Tensor Core GPU datasheet (2020): SXM2, fp16 tensor 125 TFLOP/s, "
            "32 GB HBM2, 900 GB/s, NVLink 300 GB/s, 300 W; no bf16",
            "DGX-1 V100 reference: 4x 100 Gb/s EDR InfiniBand for 8 GPUs (12.5 GB/s per port)",
        ),
        aliases=("V100", "V100-SXM2-32GB"),
    ),
    GPU(
        name="MI300X",
        vendor="AMD",
        architecture="CDNA 3",
        peak_flops={
            "fp64": 163.4 * T,
            "fp32": 163.4 * T,
            "tf32": 653.7 * T,
            "bf16": 1307.4 * T,
            "fp16": 1307.4 * T,
            "fp8": 2614.9 * T,
            "int8": 2614.9 * T,
        },
        memory_bytes=192 * GB,
        memory_kind="HBM3",
        memory_bandwidth=5300 * GB,
        nvlink_bandwidth=896 * GB,
        pcie_bandwidth=128 * GB,
        network_bandwidth=50 * GB,
        tdp_watts=750,
        sources=(
            "AMD Instinct MI300X data sheet (2023): bf16 1,307.4 TFLOP/s dense, 192 GB HBM3, "
            "5.3 TB/s, 750 W; Infinity Fabric 7 links x 128 GB/s (listed as nvlink_bandwidth)",
        ),
    ),
)


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


_BY_KEY = {_key(n): g for g in CATALOG for n in (g.name, *g.aliases)}


def gpu(name: str) -> GPU:
    """Look a GPU up by name or alias, ignoring case, spaces and dashes."""
    try:
        return _BY_KEY[_key(name)]
    except KeyError:
        names = ", ".join(g.name for g in CATALOG)
        raise KeyError(f"unknown GPU {name!r}; the catalog has: {names}") from None


def names() -> list[str]:
    return [g.name for g in CATALOG]
