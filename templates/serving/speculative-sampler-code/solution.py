"""One step of speculative sampling (000 §6.4, Theorem 6.11).

A draft model proposes a token x ~ q; the target model, whose distribution is p, keeps it
with probability min(1, p(x)/q(x)).  After a rejection, a token is drawn from the residual
(p − q)₊ / Σ(p − q)₊.  Whatever q, the returned token then has exactly the distribution p,
and the draft is kept with probability α = Σ min(p, q) = 1 − TV(p, q).

Your function
-------------
``speculative_step(p, q, x, rng)`` receives the target's and the draft's next-token
distributions (1-D float arrays over the same V tokens, each summing to 1), the token x
the draft model proposed (an int, drawn from q), and a NumPy generator.  It decides about
that draft and returns ``(token, accepted)``: x itself and True when it keeps the draft,
else a residual sample and False.  Draw every random number from ``rng``: the autograder
seeds it, so the same code always gets the same grade.

The autograder draws the drafts itself, calls your function once per draft, and judges
each step given its draft (false-fail rate 1e-4 per property): a kept draft is the token
returned; the drafts of each token x are kept at the rate min(1, p(x)/q(x)); the tokens
returned after a rejection follow the residual; consecutive steps are independent; and
then the returned tokens follow p.
"""

from __future__ import annotations

import numpy as np


def speculative_step(
    p: np.ndarray, q: np.ndarray, x: int, rng: np.random.Generator
) -> tuple[int, bool]:
    """Keep the draft x ~ q with probability min(1, p(x)/q(x)), else sample the residual."""
    ### BEGIN SOLUTION your speculative sampler here
    if rng.random() < min(1.0, p[x] / q[x]):
        return int(x), True
    residual = np.maximum(p - q, 0.0)  # the mass the draft under-samples
    return int(rng.choice(len(p), p=residual / residual.sum())), False
    ### END SOLUTION


if __name__ == "__main__":
    p, q = np.array([0.5, 0.3, 0.2]), np.array([0.6, 0.2, 0.2])  # Exercise 12
    rng = np.random.default_rng(0)
    draws = [speculative_step(p, q, int(rng.choice(3, p=q)), rng) for _ in range(20_000)]
    tokens = np.array([t for t, _ in draws])
    print(np.bincount(tokens, minlength=3) / len(tokens), p)  # close to p
    print(np.mean([a for _, a in draws]), np.minimum(p, q).sum())  # close to α = 0.9
