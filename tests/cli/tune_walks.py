#!/usr/bin/env python3
"""flat/left's streams measured on this machine (`cvest tune --walks-only`):
recorded per CPU and thread count, listed by `cvest info`, taken by the next
commands (the bench's header says so, and its flat/left rows stay right), a
damaged record refused with one warning line (the stated default taken).

    tune_walks.py CVEST_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
from checks import check, failures

cvest = sys.argv[1]

info = subprocess.run([cvest, "info"], capture_output=True, text=True).stdout
if "(default OpenMP)" not in info and "(default Serial)" not in info:
    print("not run: the kernels run on a device here; flat/left's host streams do not apply")
    sys.exit(77)

with tempfile.TemporaryDirectory(prefix="cvest-walks-", dir=os.getcwd()) as work:
    env = dict(os.environ, CVEST_CACHE_DIR=work)
    env.pop("CVEST_FLAT_DATES", None)

    def run(*args):
        return subprocess.run([cvest, *args], env=env, capture_output=True, text=True, timeout=300)

    def bench():  # flat/left in memory: its header line on the streams, and whether its rows were checked
        b = run("bench", "--dates", "16", "--ids", "3000", "--cols", "5", "--strategies", "flat", "--layouts",
                "left", "--repeats", "1", "--warm", "0")
        line = next((l for l in b.stdout.splitlines() if l.startswith("flat/left streams on these arrays")), "")
        return b, line

    b, line = bench()
    check(b.returncode == 0 and "measured" not in line and "streams" in line,
          f"nothing measured: the stated default ({line})")

    t = run("tune", "--walks-only", "--walk-size", "0")
    errors = [l for l in t.stderr.splitlines() if "error" in l]
    check(t.returncode == 2 and len(errors) == 1 and "--walk-size" in errors[0]
          and not os.path.exists(os.path.join(work, "flat-walks.json")),
          f"--walk-size 0: exit 2, one line, nothing recorded ({t.returncode}, {errors})")
    t = run("tune", "--walks-only", "--walk-size", "4MiB", "--repeats", "2")
    path = os.path.join(work, "flat-walks.json")
    check(t.returncode == 0 and "flat/left now walks at most" in t.stdout and os.path.exists(path),
          f"cvest tune --walks-only: measured and recorded ({t.returncode}: {t.stderr.strip()[-300:]})")
    progress = [l for l in t.stderr.splitlines() if "flat/left at " in l]
    check(len(progress) == 2 and all("1 stream" in l and "2 streams" in l and "4 streams" in l for l in progress),
          f"both shapes, every count ({progress})")
    with open(path) as f:
        rec = json.load(f)["records"]
    check(len(rec) == 1 and rec[0]["best"] in (1, 2, 4) and len(rec[0]["seconds"]) == 2
          and all(len(p) == 5 for shape in rec[0]["seconds"] for p in shape),
          f"one record: two shapes, three counts, five passes each ({rec})")
    best = rec[0]["best"] if rec else 0

    i = run("info")
    check("flat/left streams measured (cvest tune, " in i.stdout and f"flat/left streams at once, at most: {best} "
          "(measured here by cvest tune on" in i.stdout, "cvest info lists the record and what it sets")

    b, line = bench()
    check(b.returncode == 0 and "measured here by cvest tune on" in line
          and (best == 1) == ("one stream" in line), f"the bench takes the record and says so ({line})")

    with open(path, "w") as f:
        f.write('{"records": [{"key": 1}]}')
    b, line = bench()
    warnings = [l for l in b.stderr.splitlines() if "warning" in l]
    check(b.returncode == 0 and len(warnings) == 1 and "flat-walks.json: damaged, not used" in warnings[0]
          and "measured" not in line, f"a damaged record: one warning, the stated default ({warnings}, {line})")

sys.exit(1 if failures else 0)
