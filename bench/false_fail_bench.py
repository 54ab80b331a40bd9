"""The false-fail rate of the bank's code checks: how often a correct solution loses points.

Every code part's reference (its ``solution.py`` without the markers) is graded by its
checks for N grading seeds, through the same wire as a student's function
(``autograder.grading.checks.run_locally``: the probe's calls cross as data, the result goes
through JSON).  A statistical check states its rate per test (``FALSE_FAIL``); the bench
prints, per part, the seeds where the reference lost any point, the rate measured, and
the bound the check states (FALSE_FAIL times its number of statistical tests, when it
says), with the exact binomial probability of seeing that many failures or more at that
bound: a small one means the stated rate is not kept.  Deterministic checks must show 0.

    .venv/bin/python bench/false_fail_bench.py [--seeds 200] [--parts sampler,vote]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.grading.checks import load_checks, run_locally  # noqa: E402
from generator import bank  # noqa: E402
from generator.starter import split  # noqa: E402


def reference(folder: Path, solution: str, function: str):
    """The reference function of a code part, as a notebook cell defines it."""
    path = folder / solution
    source = split(path.read_text(encoding="utf-8"), str(path)).solution
    ns: dict = {"__name__": "notebook_cell"}
    exec(compile(source, str(path), "exec"), ns)  # noqa: S102 - the bank's own reference
    return ns[function]


def tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--parts", default="", help="comma-separated substrings of part ids")
    args = ap.parse_args()
    wanted = [w for w in args.parts.split(",") if w]
    b = bank.load()
    print(f"{'question / part':58} {'seeds':>5} {'failed':>6} {'rate':>8} {'stated':>8} {'P':>8}")
    for q in b.all_questions():
        for part in q.spec.code:
            name = f"{q.id} {part.id}"
            if part.checks is None or (wanted and not any(w in name for w in wanted)):
                continue
            module = load_checks(q.folder, part.checks).module
            fn = reference(q.folder, part.solution, part.function)
            failed, start = [], time.perf_counter()
            for seed in range(1, args.seeds + 1):
                props = run_locally(q.folder / part.checks, fn, seed)
                if any(p["score"] < 1 for p in props):
                    failed.append(seed)
            rate = len(failed) / args.seeds
            per_test = getattr(module, "FALSE_FAIL", None)
            tests = getattr(module, "STATISTICAL_TESTS", None)
            stated = per_test * tests if per_test is not None and tests else per_test
            odds = f"{tail(len(failed), args.seeds, stated):.3g}" if stated else ""
            print(
                f"{name:58} {args.seeds:5d} {len(failed):6d} {rate:8.4f} "
                f"{'' if stated is None else f'{stated:.1e}':>8} {odds:>8}"
                f"  ({time.perf_counter() - start:.0f} s{'; seeds ' if failed else ''}"
                f"{', '.join(map(str, failed[:8]))})",
                flush=True,
            )


if __name__ == "__main__":
    main()
