"""Cost-model speed: `scalegrade verify` against its 60 s target, and the price of argument checks.

Run: .venv/bin/python bench/costmodel_bench.py
Prints ratios against baselines measured in the same run.
"""

from __future__ import annotations

import time
import timeit

import costmodel
from costmodel.verify import verify_all

TARGET_VERIFY_S = 60.0


def main() -> None:
    start = time.perf_counter()
    checks = verify_all()
    verify_s = time.perf_counter() - start
    print(
        f"verify: {len(checks)} derivations in {verify_s:.1f} s "
        f"= {verify_s / TARGET_VERIFY_S:.2f} x the 60 s target"
    )

    f = costmodel.formulas()["transformer.param_count"]
    raw = f.func.__wrapped__
    kwargs = {"n_layers": 24, "d_model": 2048, "vocab": 50_000}
    n = 20_000
    t_raw = min(timeit.repeat(lambda: raw(**kwargs), number=n, repeat=3)) / n
    t_checked = min(timeit.repeat(lambda: f.func(**kwargs), number=n, repeat=3)) / n
    t_eval = (
        min(timeit.repeat(lambda: costmodel.evaluate(f.name, **kwargs), number=n, repeat=3)) / n
    )
    print(
        f"param_count: raw {t_raw * 1e6:.2f} us, checked {t_checked * 1e6:.2f} us "
        f"({t_checked / t_raw:.1f} x), evaluate() {t_eval * 1e6:.2f} us ({t_eval / t_raw:.1f} x)"
    )
    # a roster of 300 students x 10 questions x 5 answers, all through evaluate():
    per_roster = 300 * 10 * 5 * t_eval
    print(f"15 000 evaluations (300 students x 50 answers): {per_roster * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
