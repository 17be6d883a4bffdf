#!/usr/bin/env python3
"""flat at its roof with no tune step (issue 59, item 5): for each round, each
N of 400,000, 1,000,000, 2,000,000 and 10,000,000 ids (T = 40,000,000 / N
dates, 5 columns), each precision and layout, `cvest bench --strategies
flat --layouts L --precision P --repeats 5 --warm 2` in a fresh, empty
cache folder (so every bench measures on first use), each binary given in
turn (a build without streaming stores beside the plain one). Prints each
bench's x roof (the median of 5 per-repeat ratios against a copy of its own
bytes beside it; UNSTEADY where the bench marks its pairs so, FAULT where it
marks the row a MEASUREMENT FAULT: the kernel outran its copy), its
quartiles, the first use's seconds and choices, and
the figures by cell over the rounds. Each bench waits while another
engineer's work runs on the machine (others_busy).

    first_use_grid.py [--rounds 2] [--ids 400000,1000000,...] NAME=CVEST_BINARY ...
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def others_busy():
    """Another engineer measuring (/tmp/cvest-quiet-57), or building or testing
    (a compiler, or a process of /work/main) on this shared VM."""
    if os.path.exists("/tmp/cvest-quiet-57"):
        return True
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if b"cc1plus" in cmd or b"/work/main/" in cmd:
            return True
    return False


def wait_quiet():
    waited = 0
    while others_busy():
        time.sleep(10)
        waited += 10
    if waited:
        print(f"(waited {waited} s for the machine to be quiet)", flush=True)

parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=2)
parser.add_argument("--ids", default="400000,1000000,2000000,10000000")
parser.add_argument("--precisions", default="double,float")
parser.add_argument("--layouts", default="right,left")
parser.add_argument("binaries", nargs="+", help="NAME=PATH")
args = parser.parse_args()
binaries = [b.split("=", 1) for b in args.binaries]

rows = {}  # (name, N, precision, layout) -> [x roof per round]
for rnd in range(1, args.rounds + 1):
    for n in [int(x) for x in args.ids.split(",")]:
        T = 40_000_000 // n
        for precision in args.precisions.split(","):
            for layout in args.layouts.split(","):
                for name, binary in binaries:
                    wait_quiet()
                    with tempfile.TemporaryDirectory(prefix="cvest-grid-") as cache:
                        report = os.path.join(cache, "bench.json")
                        env = dict(os.environ, CVEST_CACHE_DIR=cache, CVEST_FIRST_USE="on")
                        b = subprocess.run([binary, "bench", "--dates", str(T), "--ids", str(n), "--cols", "5",
                                            "--strategies", "flat", "--layouts", layout, "--precision", precision,
                                            "--repeats", "5", "--warm", "2", "--json", report],
                                           env=env, capture_output=True, text=True, timeout=900)
                        if b.returncode != 0:
                            print(f"round {rnd} {name} {T} x {n} {precision} {layout}: failed: "
                                  f"{b.stderr.strip()[-300:]}", flush=True)
                            continue
                        with open(report) as f:
                            j = json.load(f)
                    res = j["results"][0]
                    first = j.get("first_use", "")
                    took = first.split(" in ")[1].split(" s ")[0] if " in " in first else "-"
                    chose = first[first.find("(") + 1:first.find(")")] if "(" in first else first
                    q1, q3 = res["roof_fraction_quartiles"]
                    # A row whose pairs swung (the bench's UNSTEADY) measured the machine, not the kernel;
                    # one that outran its copy (the bench's MEASUREMENT FAULT) measured neither.
                    unsteady = res.get("pairs_unsteady", False)
                    fault = res.get("measurement_fault", False)
                    mark = (" FAULT" if fault else "") + (" unsteady" if unsteady else "")
                    rows.setdefault((name, n, precision, layout), []).append(f"{res['roof_fraction']:.2f}{mark}")
                    print(f"round {rnd} {name:9} {T:3} x {n:8} {precision:6} {layout:5} x roof {res['roof_fraction']:.2f}"
                          f"{mark.upper()} "
                          f"({q1:.2f}-{q3:.2f}) best-of {res['roof_fraction_best']:.2f} "
                          f"{res['GBps']:.1f} GB/s, roof {res['roof_GBps']:.1f} GB/s, stores "
                          f"{'streaming' if res['streaming_stores'] else 'regular'}; first use {took} s: {chose}",
                          flush=True)

print("\nby cell, x roof per round:")
for (name, n, precision, layout), fractions in sorted(rows.items()):
    print(f"{name:9} N {n:8} {precision:6} {layout:5}: " + ", ".join(fractions))
