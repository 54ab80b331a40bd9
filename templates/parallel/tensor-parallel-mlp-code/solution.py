"""The tensor-parallel MLP of Megatron-LM, one rank at a time (000 §3.3).

The MLP of a transformer block is Y = GeLU(X W₁) W₂, with X of shape (b, d), W₁ of shape
(d, h) and W₂ of shape (h, d), h = 4d.  Tensor parallelism over t ranks (Shoeybi et al.,
2019) splits W₁ by columns and W₂ by rows, with matching blocks:

    A_r = W₁[:, r·h/t : (r + 1)·h/t]  = w1.chunk(t, dim=1)[r]
    B_r = W₂[r·h/t : (r + 1)·h/t, :]  = w2.chunk(t, dim=0)[r]

Rank r computes its partial output Y_r = GeLU(X A_r) B_r, of the full shape (b, d): GeLU
acts on each hidden unit separately, so it can be applied to the rank's own slice of the
hidden layer.  One all-reduce (a sum) of the partial outputs gives every rank
Y = Σ_r Y_r.  Nothing is exchanged between the two matrix products.

Your function runs once per rank (here each in its own thread; in the autograder each in
its own process).  For the simulation it receives the whole matrices, but it must use only
its own blocks A_r and B_r (the autograder fills the other ranks' columns of W₁ and rows of
W₂ with NaN in one run, and redraws them in others).  It reaches the other ranks only
through ``all_reduce(tensor)``, which returns the sum over the t ranks of the tensors they
passed in the same call; every rank must make the same calls.  Use
torch.nn.functional.gelu (its default, exact form).

The autograder checks, for t = 2, 4 and 8: every rank returns what all_reduce gives back,
unchanged (the autograder's all_reduce adds an offset of its own to the sum, so only a
result that came through it counts), and the partial outputs sum to GeLU(X W₁) W₂; every
rank calls all_reduce exactly once, with a (b, d) tensor; and a rank's messages do not
change when the columns of W₁ and rows of W₂ of the other ranks are replaced by NaN in its
copy, or redrawn in every rank's.
"""

from __future__ import annotations

import threading

import torch
import torch.nn.functional as F


def tp_mlp_forward(
    x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, rank: int, t: int, all_reduce
) -> torch.Tensor:
    """Rank ``rank`` of ``t``: its partial GeLU(X A_r) B_r, summed over ranks by one all-reduce."""
    ### BEGIN SOLUTION your tensor-parallel MLP here
    a_r = w1.chunk(t, dim=1)[rank]  # (d, h/t): column split
    b_r = w2.chunk(t, dim=0)[rank]  # (h/t, d): row split, the same hidden units
    partial = F.gelu(x @ a_r) @ b_r  # (b, d): this rank's share of the output
    return all_reduce(partial)  # one all-reduce of b·d values
    ### END SOLUTION


def simulate(fn, x, w1, w2, t: int, timeout: float = 10.0):
    """Run ``fn`` on t threads with a summing all_reduce; the outputs and the calls made.

    Returns (outputs, calls): outputs[r] is what rank r returned, calls[r] the list of
    the shapes rank r passed to all_reduce.  If a rank raised, raises its exception.
    """
    cond = threading.Condition()
    sent: dict[int, list] = {}  # all-reduce step -> the tensor of each rank
    calls: list[list] = [[] for _ in range(t)]
    done = [False] * t
    outputs: list = [None] * t

    def all_reduce_for(rank: int):
        def all_reduce(tensor):
            step = len(calls[rank])
            calls[rank].append(tuple(tensor.shape))
            with cond:
                parts = sent.setdefault(step, [None] * t)
                parts[rank] = tensor.detach().clone()
                cond.notify_all()
                everyone = cond.wait_for(
                    lambda: (
                        all(p is not None for p in parts)
                        or any(done[r] and parts[r] is None for r in range(t))
                    ),
                    timeout,
                )
            if not (everyone and all(p is not None for p in parts)):
                raise RuntimeError(f"all-reduce step {step}: some ranks never joined it")
            return sum(parts)

        return all_reduce

    def run(rank: int):
        try:
            outputs[rank] = fn(x.clone(), w1.clone(), w2.clone(), rank, t, all_reduce_for(rank))
        except Exception as err:  # noqa: BLE001 - reported to the caller
            outputs[rank] = err
        with cond:
            done[rank] = True
            cond.notify_all()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(t)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for out in outputs:
        if isinstance(out, Exception):
            raise out
    return outputs, calls


if __name__ == "__main__":
    torch.manual_seed(0)
    b, d, t = 8, 64, 4  # batch, width, tensor-parallel degree (the notes' example)
    X = torch.randn(b, d)
    A = torch.randn(d, 4 * d) / d**0.5
    B = torch.randn(4 * d, d) / (4 * d) ** 0.5
    full = F.gelu(X @ A) @ B
    outputs, calls = simulate(tp_mlp_forward, X, A, B, t)
    print(all(torch.allclose(full, y, atol=1e-5) for y in outputs))  # True
    print(calls)  # one all-reduce of a (b, d) tensor per rank
