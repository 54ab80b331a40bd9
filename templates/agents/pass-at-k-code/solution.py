"""The unbiased pass@k estimator (000 §7.3, Proposition 7.5; Chen et al. 2021).

``pass_at_k(n, c, k)``: from n sampled answers of which c are right, the probability that
k of them drawn without replacement contain at least one right answer,

    pass@k = 1 − C(n − c, k) / C(n, k)          (1 when n − c < k: every draw has one),

an unbiased estimate of 1 − (1 − p)^k when the n samples are right independently with
probability p.  The binomial coefficients overflow a float for n in the thousands
(C(5000, 200) > 10^308), so compute the ratio as a product of factors below 1:

    C(n − c, k) / C(n, k) = Π_{i = n − c + 1}^{n} (1 − k / i)      (c factors)
                          = Π_{j = 0}^{k − 1} (n − c − j) / (n − j)   (k factors)

Return a float.  The autograder checks values on random (n, c, k), the edge cases
(c = 0, n − c < k), n up to 20 000 with k up to 1000, and unbiasedness: over
c ~ Binomial(n, p), the estimator averages to 1 − (1 − p)^k.
"""

from __future__ import annotations

import math  # math.prod, math.comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 − C(n − c, k)/C(n, k), as a product of min(c, k) factors in (0, 1]."""
    ### BEGIN SOLUTION your unbiased pass@k here
    if n - c < k:
        return 1.0  # every k-subset holds a right answer
    if c <= k:
        ratio = math.prod(1 - k / i for i in range(n - c + 1, n + 1))
    else:
        ratio = math.prod((n - c - j) / (n - j) for j in range(k))
    return 1.0 - ratio
    ### END SOLUTION


if __name__ == "__main__":
    print(pass_at_k(20, 2, 5))  # 1 − C(18, 5)/C(20, 5) = 0.447…
    print(pass_at_k(20, 0, 5), pass_at_k(20, 17, 5))  # 0.0 and 1.0 (n − c < k)
    print(pass_at_k(10_000, 5, 500))  # C(10 000, 500) overflows a float; the product does not
