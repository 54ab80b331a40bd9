"""Activation checkpointing (000 §2.5, Proposition 2.8).

``layers`` is a torch.nn.ModuleList of n layers, each mapping a (b, w) tensor to a (b, w)
tensor; ``x`` is the (b, w) input, which may or may not require a gradient.  The function
returns the output of the n layers applied in order, as the plain forward
``for layer in layers: x = layer(x)`` does, but keeps only the input of each segment of
``k`` consecutive layers: layers [0, k), [k, 2k), ..., the last segment shorter when k
does not divide n.  During the backward pass each segment is recomputed from its stored
input, so the peak is about n/k + k layers of activations instead of n, for one extra
forward pass per layer.

Use torch.utils.checkpoint.checkpoint(..., use_reentrant=False) on each segment, as in
the notes' code.  The autograder wraps every layer to count its calls, runs your forward
and then a backward pass, and checks: the output and all the gradients (parameters, and
the input when it requires one) equal those of the plain forward and backward; every
layer runs twice, once forward and once recomputed (the last segment may run once if you
keep its activations); and the backward pass recomputes the layers in runs of exactly
the k layers of each segment, from the last segment to the first.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint  # use_reentrant=False


def run_segment(layers: torch.nn.ModuleList, h: torch.Tensor, start: int, stop: int):
    """Layers start, ..., stop − 1 applied to h."""
    for layer in layers[start:stop]:
        h = layer(h)
    return h


def checkpointed_forward(layers: torch.nn.ModuleList, x: torch.Tensor, k: int) -> torch.Tensor:
    """The n layers applied to x, storing only each segment's input (Proposition 2.8)."""
    ### BEGIN SOLUTION your checkpointed forward here
    n = len(layers)
    for start in range(0, n, k):  # keep only the input of each segment of k layers
        x = checkpoint(run_segment, layers, x, start, min(start + k, n), use_reentrant=False)
    return x
    ### END SOLUTION


if __name__ == "__main__":
    torch.manual_seed(0)
    n, width = 16, 64
    layers = torch.nn.ModuleList(
        [torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh()) for _ in range(n)]
    )
    calls = [0]
    for layer in layers:
        layer.register_forward_pre_hook(lambda *args: calls.__setitem__(0, calls[0] + 1))
    x = torch.randn(32, width)
    plain = run_segment(layers, x, 0, n).pow(2).mean()
    plain.backward()
    expected = [p.grad.clone() for p in layers.parameters()]
    layers.zero_grad()
    calls[0] = 0
    checkpointed_forward(layers, x, 4).pow(2).mean().backward()
    print("layer forward calls:", calls[0])  # 32: each of the 16 layers twice
    same = all(
        torch.allclose(p.grad, g) for p, g in zip(layers.parameters(), expected, strict=True)
    )
    print("same gradients:", same)
