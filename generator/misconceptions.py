"""Named wrong transforms of a key, for ``use:`` in a question's misconceptions.

Each maps the correct SI value (and the variant's parameters and answers) to the value
a student with that misconception reports, also in SI, with the feedback it earns.
Questions add their own with ``args``, ``scale`` or ``value``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

GIB_PER_GB = 2**30 / 1e9


@dataclass(frozen=True)
class Transform:
    apply: Callable[[float, Mapping[str, Any]], float]
    feedback: str


LIBRARY: dict[str, Transform] = {
    "gib_as_gb": Transform(
        lambda key, _: key / GIB_PER_GB,
        "Your number is in GiB (2^30 bytes) but the question asks for GB (10^9 bytes): "
        "multiply by 1.074.",
    ),
    "gb_as_gib": Transform(
        lambda key, _: key * GIB_PER_GB,
        "Your number is in GB (10^9 bytes) but the question asks for GiB (2^30 bytes): "
        "divide by 1.074.",
    ),
    "mib_as_mb": Transform(
        lambda key, _: key / (2**20 / 1e6),
        "Your number is in MiB (2^20 bytes) but the question asks for MB (10^6 bytes): "
        "multiply by 1.049.",
    ),
    "bits_for_bytes": Transform(
        lambda key, _: key * 8,
        "You counted bits where the question asks for bytes (1 byte = 8 bits).",
    ),
    "bytes_for_bits": Transform(
        lambda key, _: key / 8,
        "You counted bytes where the question asks for bits (1 byte = 8 bits).",
    ),
    "forward_only": Transform(
        lambda key, _: key / 3,
        "You counted the forward pass only (2ND); training also runs the backward pass, "
        "twice the forward: C = 6ND (000 Prop 1.1).",
    ),
    "percent_as_fraction": Transform(
        lambda key, _: key / 100,
        "The question asks for a percentage: write 13.5 (or '13.5 %'), not 0.135.",
    ),
}
