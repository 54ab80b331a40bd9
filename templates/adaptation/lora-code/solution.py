"""A LoRA layer (000 §5.2; 001 ch. 0, LoRA in five lines; Hu et al. 2022).

``LoRALinear(base, r, alpha)`` wraps a pretrained ``nn.Linear`` (weight W₀ of shape
d_out × d_in, bias b) and learns a low-rank correction of its weight:

    y = W₀ x + b + (α/r) · B A x,      A: r × d_in,   B: d_out × r

- ``self.base`` is the wrapped layer, frozen: its weight and bias get no gradient and
  never change;
- ``self.A`` and ``self.B`` are the two trainable ``nn.Parameter`` factors, in these
  shapes: A random, N(0, 1/d_in) as in the notes (randn(r, d_in) / √d_in); B = 0, so that
  training starts exactly from the pretrained layer;
- the correction is scaled by α/r (Hu et al.), so that changing r does not change the
  size of the initial updates; with α = r it is the notes' W₀ + BA;
- only r(d_in + d_out) parameters are trainable.

Make A and B of the base weight's dtype.  The autograder checks B A (read from your
layer) and the output at the start, that the base stays frozen, the number of trainable
parameters, the forward pass with given A and B and its scaling by α/r, and that training
A and B alone fits a rank-r change of the weight, which a rank r − 1 adapter cannot: the
outputs and gradients while training, and the outputs on new inputs after it, must be
those of base(x) + (α/r)·B A x with the layer's own A and B.
"""

from __future__ import annotations

import torch
from torch import nn


class LoRALinear(nn.Module):
    """base(x) + (α/r) B A x, with ``base`` frozen and only A (r × d_in), B (d_out × r) trained."""

    def __init__(self, base: nn.Linear, r: int, alpha: float):
        super().__init__()
        ### BEGIN SOLUTION your LoRA layer here: self.base, self.A, self.B
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)  # W0 and b frozen: no gradient, no Adam state
        d_out, d_in = base.weight.shape
        kw = {"dtype": base.weight.dtype, "device": base.weight.device}
        self.A = nn.Parameter(torch.randn(r, d_in, **kw) / d_in**0.5)  # (r, d_in), random
        self.B = nn.Parameter(torch.zeros(d_out, r, **kw))  # (d_out, r), zero: starts at W0
        self.scale = alpha / r
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION base(x) + (alpha / r) B A x
        return self.base(x) + self.scale * (x @ self.A.T) @ self.B.T  # (..., d_out)
        ### END SOLUTION


if __name__ == "__main__":
    torch.manual_seed(0)
    base = nn.Linear(64, 32)
    layer = LoRALinear(base, r=4, alpha=8)
    x = torch.randn(2, 64)
    print(torch.equal(layer(x), base(x)))  # True: B = 0, training starts at W0
    trainable = sum(p.numel() for p in layer.parameters() if p.requires_grad)
    print(trainable, 4 * (64 + 32))  # r(d_in + d_out); §5.2: 65 536 for 4096 × 4096, r = 8
