"""A circular convolution layer and its shift equivariance (001 ch. 1, def. 1.7,
prop. 1.8, Ex. 8(b, c)).

A convolutional layer (def. 1.7) with c_out filters of shape c_in × k × k (k odd) computes,
with stride s and the padding p = (k − 1)/2 that keeps the size at stride 1,

    y[o, i, j] = Σ_c Σ_{u, v} w[o, c, u, v] · x[c, s·i + u − p, s·j + v − p],

the cross-correlation of torch.nn.functional.conv2d.  With circular padding the indices
are taken modulo H and W: the image wraps around like a torus, and the layer commutes
exactly with a cyclic shift torch.roll (prop. 1.8, Ex. 8(b)).  The stride-s output is the
stride-1 output at (s·i, s·j): a shift of the input by 2t moves the stride-2 output by t,
and a shift by an odd number of pixels is not a shift of the output (Ex. 8(c)).

Your function
-------------
``circular_conv2d(x, w, stride=1)`` takes x, a float64 tensor of shape (c_in, H, W), and
w, of shape (c_out, c_in, k, k) with k odd, and returns the tensor of shape
(c_out, ⌊(H − 1)/s⌋ + 1, ⌊(W − 1)/s⌋ + 1), no bias.  F.pad(..., mode="circular") and
F.conv2d are allowed, or write the sum over the k × k taps with torch.roll.

The autograder compares your output with conv2d with padding_mode="circular" (one
channel, k = 3 and 5; then c_in = 3 → c_out = 2) at stride 1 and at stride 2; checks that
your stride-1 layer commutes with torch.roll for random shifts; and that your stride-2
layer moves its output by t when the input moves by 2t, but cannot follow a shift by an
odd number of pixels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: F401 - F.pad and F.conv2d are allowed


def circular_conv2d(x: torch.Tensor, w: torch.Tensor, stride: int = 1) -> torch.Tensor:
    """Circular cross-correlation of x (c_in, H, W) with w (c_out, c_in, k, k), stride s."""
    ### BEGIN SOLUTION your circular convolution here
    c_out, c_in, k, _ = w.shape
    p = (k - 1) // 2
    y = x.new_zeros((c_out, *x.shape[1:]))  # (c_out, H, W): the stride-1 output
    for u in range(k):
        for v in range(k):
            tap = torch.roll(x, shifts=(p - u, p - v), dims=(1, 2))  # x[c, i + u − p, j + v − p]
            y += torch.einsum("oc,chw->ohw", w[:, :, u, v], tap)
    return y[:, ::stride, ::stride]  # stride s keeps the outputs at (s·i, s·j)
    ### END SOLUTION


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(3, 8, 10, dtype=torch.float64)
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular", bias=False).double()
    conv.weight.data = w
    print((circular_conv2d(x, w) - conv(x[None])[0]).abs().max())  # ~1e-15
    shifted = circular_conv2d(torch.roll(x, (3, 5), dims=(1, 2)), w)
    print((shifted - torch.roll(circular_conv2d(x, w), (3, 5), dims=(1, 2))).abs().max())  # ~1e-15
    y2 = circular_conv2d(x, w, stride=2)
    even = circular_conv2d(torch.roll(x, (2, 4), dims=(1, 2)), w, stride=2)
    print((even - torch.roll(y2, (1, 2), dims=(1, 2))).abs().max())  # ~1e-15: 2t → t
    odd = circular_conv2d(torch.roll(x, (1, 0), dims=(1, 2)), w, stride=2)
    print((odd - y2).abs().max(), (odd - torch.roll(y2, (1, 0), dims=(1, 2))).abs().max())  # > 0
