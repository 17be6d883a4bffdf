#!/usr/bin/env python3
"""cvest.multiply ÷ NumPy's np.multiply(m[None], d[, out=]) at every size,
from 1 element to 10^8, in one process.

    scripts/cvest python bench/python_small.py [MAX_ELEMENTS REPEATS]

For each size (1, 10, 100, ... elements of discount; K = 5 columns where
there are five, T = 10 dates from 10^5 elements on), both orders (C, and
Fortran: LayoutLeft), both precisions, with and without out=: the two
contenders take turns on the same arrays (each call repeated until a turn
lasts about 50 ms, and at least 3 calls), REPEATS turns each, interleaved; the first turn of each
is a warm-up. Prints the median time per call of each, the ratio of the
medians and its spread (the ratio of turn k to turn k, min-max), and the
caller-thread limit cvest measured (below it, calls are computed on the
calling thread; above it, on cvest's Kokkos thread). The bits are checked
equal once per case.
"""
import os
import platform
import sys
import time

import numpy as np

import cvest

max_elements = int(float(sys.argv[1])) if len(sys.argv) > 1 else 10 ** 8
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7


def shape_for(n):
    K = 5 if n >= 5 else n
    T = 10 if n >= 10 ** 5 else 1
    return T, n // (T * K), K


def per_call(f, seconds=0.05, at_least=3):
    """Seconds per call of f, over a turn of about `seconds` and at least
    `at_least` calls (a large call's page faults swing from one to the next)."""
    calls, start = 0, time.perf_counter()
    while True:
        f()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and calls >= at_least:
            return elapsed / calls


def case(n, order, dtype, with_out):
    T, N, K = shape_for(n)
    rng = np.random.default_rng(n)
    m = np.asarray(rng.random((N, K)) + 0.5, dtype=dtype, order=order)
    d = np.asarray(rng.random((T, N, K)), dtype=dtype, order=order)
    out_c = np.empty_like(d, order=order)
    out_n = np.empty_like(d, order=order)
    if with_out:
        ours = lambda: cvest.multiply(m, d, out=out_c)  # noqa: E731
        theirs = lambda: np.multiply(m[None], d, out=out_n)  # noqa: E731
    else:
        ours = lambda: cvest.multiply(m, d)  # noqa: E731
        theirs = lambda: np.multiply(m[None], d)  # noqa: E731
    a, b = ours(), theirs()
    same = a.dtype == b.dtype and a.tobytes(order="A") == b.tobytes(order="A")
    mine, numpy = [], []
    for r in range(repeats + 1):
        for f, into in ((ours, mine), (theirs, numpy)) if r % 2 == 0 else ((theirs, numpy), (ours, mine)):
            into.append(per_call(f))
    mine, numpy = mine[1:], numpy[1:]
    ratios = sorted(x / y for x, y in zip(mine, numpy))
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    return med(mine), med(numpy), med(mine) / med(numpy), ratios[0], ratios[-1], same


def main():
    cvest.threads()
    limit = cvest._caller_thread_limit()
    print(f"cvest.multiply vs np.multiply(m[None], d[, out=]); {platform.processor() or platform.machine()}, "
          f"{cvest.threads()} threads; calling thread below {limit / 2**20:.2f} MiB of discount (measured), "
          f"cvest's Kokkos thread above; medians of {repeats} interleaved turns")
    print(f"{'elements':>10} {'order':>5} {'dtype':>7} {'out':>4} {'cvest us':>11} {'numpy us':>11} "
          f"{'ratio':>6} {'spread':>11}  bits")
    worst = 0.0
    n = 1
    while n <= max_elements:
        for dtype in ("float64", "float32"):
            for order in ("C", "F"):
                for with_out in (True, False):
                    a, b, ratio, lo, hi, same = case(n, order, dtype, with_out)
                    worst = max(worst, ratio)
                    print(f"{n:>10} {order:>5} {dtype:>7} {'yes' if with_out else 'no':>4} {a * 1e6:>11.2f} "
                          f"{b * 1e6:>11.2f} {ratio:>6.2f} {lo:>5.2f}-{hi:<5.2f}  {'same' if same else 'DIFFER'}",
                          flush=True)
        n *= 10
    print(f"worst ratio of medians: {worst:.2f}")


if __name__ == "__main__":
    sys.exit(main())
