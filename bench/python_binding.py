#!/usr/bin/env python3
"""`cvest.multiply` against the numba and NumPy peers in one process, on the
same arrays, under equal conditions, and against `cvest bench`'s own kernel
call for the same strategy and layout (cvest.BenchServer: its own arrays,
timed in C++), interleaved with them.

    scripts/cvest python bench/python_binding.py [T N K ROUNDS WARM_SECONDS]

Every contender computes cv = m[None] * d from the same m, d into the same
preallocated cv (LayoutRight / C order, float64). First each takes turns
until WARM_SECONDS have passed (memory a process has just touched stays
slow for seconds on a VM), then ROUNDS rounds time each once, the order
rotating each round, with a pass of the server's copy roof (its copies of
the same bytes: regular, streaming, and in flat's walk) taking its turn among
them. GB/s counts d read, cv written and m read once. Prints min / median /
max per contender, the ratios the README quotes, and cvest.multiply and the
bench's kernel x that roof, round by round.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import cvest  # noqa: E402
from peers import make_inmem  # noqa: E402

T, N, K = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (100, 400000, 5)
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 7
warm_seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 3.0

rng = np.random.default_rng(1)
m = rng.random((N, K)) + 0.5
d = rng.random((T, N, K))
cv = np.empty_like(d)
gigabytes = (d.nbytes + cv.nbytes + m.nbytes) / 1e9

peers = {name: f for name, f in make_inmem().items()
         if name in ("numba_guvec_per_date_par", "numba_njit_prange", "numpy_broadcast")}
contenders = {"cvest.multiply flat": lambda m, d, cv: cvest.multiply(m, d, out=cv, strategy="flat")}
contenders.update(peers)
# cvest bench's own kernel call on its own arrays (Kokkos views, allocated
# and checked once), timed in C++: what the binding is compared with.
server = cvest.BenchServer(dates=T, ids=N, cols=K, strategies=["flat"], layouts=["right"])
server_seconds = []
contenders["cvest bench flat/right"] = lambda m, d, cv: server_seconds.append(server.time("flat", "right")["seconds"])

expected = m[None] * d
for name, f in contenders.items():  # compiles numba's kernels; checks each once
    if name.startswith("cvest bench"):
        continue  # checked against m * d when the server was made
    cv[...] = 0
    f(m, d, cv)
    assert np.array_equal(cv, expected), name
del expected

names = list(contenders)
started, passes = time.perf_counter(), 0
while time.perf_counter() - started < warm_seconds:
    for name in names:
        contenders[name](m, d, cv)
    server.roof()  # its roof's arrays too, so the roof printed below is a warm one
    passes += 1
times = {name: [] for name in names}
roofs = []  # a pass of each of the server's copies, each round, in its turn
for r in range(rounds):
    order = names + ["roof"]
    order = order[r % len(order):] + order[:r % len(order)]
    for name in order:
        if name == "roof":
            roofs.append(server.roof())
            continue
        t0 = time.perf_counter()
        contenders[name](m, d, cv)
        times[name].append(time.perf_counter() - t0)
        if name.startswith("cvest bench"):
            times[name][-1] = server_seconds[-1]  # its own fenced kernel time, not the call around it

import numba  # noqa: E402

print(f"{T} x {N} x {K} float64, C order; threads: cvest {cvest.threads()} ({cvest.execution_space}), numba "
      f"{numba.get_num_threads()} ({numba.threading_layer()} layer), NumPy 1; "
      f"warmed {passes} passes each in {warm_seconds:g} s, then {rounds} interleaved rounds")
print(f"{'contender':28} {'median GB/s':>12} {'min-max GB/s':>16}")
median = {}
for name in names:
    rates = sorted(gigabytes / s for s in times[name])
    median[name] = float(np.median(rates))
    print(f"{name:28} {median[name]:12.1f} {rates[0]:7.1f}-{rates[-1]:<8.1f}")

# The roof: the server's copy kind with the fastest median (regular, streaming,
# or in flat's walk with its dates at once where it has one), each round's
# contender over that kind's pass of the same round (as `cvest bench` pairs
# them, though here a round's roof pass may be a few contenders away from a
# contender's). Its copies move the same bytes on arrays of the same shape
# (cvest bench's own, not NumPy's).
kinds = [k for k in ("copy_GBps", "copy_streaming_GBps", "copy_walk_GBps") if k in roofs[0]]
roof_kind = min(kinds, key=lambda k: np.median([gigabytes / x[k] for x in roofs]))  # by seconds, as cvest bench
fastest_numba = max((n for n in names if n.startswith("numba")), key=lambda n: median[n])
ours = median["cvest.multiply flat"]
print(f"copy roof, interleaved (cvest bench's arrays, same bytes): "
      + ", ".join(f"{k[:-5]} {np.median([x[k] for x in roofs]):.1f} GB/s" for k in kinds) + f"; roof: {roof_kind[:-5]}")
for name in ("cvest.multiply flat", "cvest bench flat/right"):
    fractions = sorted((gigabytes / t) / x[roof_kind] for t, x in zip(times[name], roofs))
    print(f"{name} x roof: {np.median(fractions):.2f} (quartiles {np.quantile(fractions, 0.25):.2f}-"
          f"{np.quantile(fractions, 0.75):.2f})")
print(f"cvest.multiply / fastest numba ({fastest_numba}): {ours / median[fastest_numba]:.2f}x")
print(f"cvest.multiply / numpy_broadcast: {ours / median['numpy_broadcast']:.2f}x")
print(f"cvest.multiply / cvest bench flat/right (interleaved): {ours / median['cvest bench flat/right']:.2f}")
