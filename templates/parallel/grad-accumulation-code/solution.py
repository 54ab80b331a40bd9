"""Gradient accumulation (000 §1.5, Proposition 1.10, Exercise 6).

``model`` is a torch.nn.Module, ``x`` and ``y`` a batch of B examples (first dimension B)
and ``loss_fn(pred, y)`` returns the loss of each example, a 1-D tensor: the training
loss of a batch is their mean.  ``accumulation_steps`` = k divides B.

The function splits the batch into k micro-batches of B/k consecutive examples
(x.chunk(k)); for each, it runs the forward pass, takes the mean of the micro-batch's
losses divided by k, and calls backward(), which adds the micro-batch's gradient to
.grad.  It returns nothing: after the call, the .grad of every parameter holds the
gradient of the mean loss over the whole batch (Proposition 1.10: the mean over B
examples is the average over k micro-batches of the mean over B/k examples), while only
one micro-batch's activations are alive at a time.  The autograder sets every .grad to
None before the call; do not zero them inside.

The autograder checks, for three values of k: the accumulated gradient is proportional
to the full-batch gradient (every example counted once); it equals it (micro-losses are
means divided by k; a sum over examples multiplies it by the number of examples, Exercise
6(b)); and the model runs k forward passes on micro-batches of B/k examples, each
followed by its own backward pass.
"""

from __future__ import annotations

import torch


def accumulate_gradients(model, loss_fn, x: torch.Tensor, y: torch.Tensor, accumulation_steps: int):
    """Leave in .grad the gradient of the batch's mean loss, one micro-batch at a time."""
    ### BEGIN SOLUTION your gradient accumulation here
    k = accumulation_steps
    for x_micro, y_micro in zip(x.chunk(k), y.chunk(k), strict=True):
        loss = loss_fn(model(x_micro), y_micro).mean() / k  # a mean, divided by k
        loss.backward()  # adds this micro-batch's share; its graph is freed
    ### END SOLUTION


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    x, y = torch.randn(64, 5), torch.randn(64, 3)

    def squared_error(pred, target):
        return ((pred - target) ** 2).sum(dim=1)  # one loss per example

    squared_error(model(x), y).mean().backward()  # the full batch at once
    full = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    accumulate_gradients(model, squared_error, x, y, 4)  # 4 micro-batches of 16
    print(
        all(torch.allclose(p.grad, g) for p, g in zip(model.parameters(), full, strict=True))
    )  # True
