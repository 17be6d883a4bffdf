#!/usr/bin/env python3
"""flat/left's streams and flat/right's dates at once measured on this
machine (`cvest tune --walks-only`): recorded per CPU and thread count, listed
by `cvest info`, taken by the next commands (the bench's header says so, and
its flat rows stay right; records made to say one and two streams, and one
date, each show in the bench's walk), a damaged record refused with one
warning line (the stated defaults taken).

    tune_walks.py CVEST_BINARY
"""
import json
import statistics
import re
import os
import subprocess
import sys
import tempfile
from checks import check, failures, host_kernels_only

cvest = sys.argv[1]

host_kernels_only(cvest, "flat's host walks do not apply")

with tempfile.TemporaryDirectory(prefix="cvest-walks-", dir=os.getcwd()) as work:
    env = dict(os.environ, CVEST_CACHE_DIR=work)
    env.pop("CVEST_FLAT_DATES", None)

    def run(*args):
        return subprocess.run([cvest, *args], env=env, capture_output=True, text=True, timeout=300)

    def bench(layout="left"):  # flat in memory: its header line on the walk, and whether its rows were checked
        b = run("bench", "--dates", "16", "--ids", "3000", "--cols", "5", "--strategies", "flat", "--layouts",
                layout, "--repeats", "1", "--warm", "0", "--explain")
        head = "flat/left streams on these arrays" if layout == "left" else "flat/right dates at once on these arrays"
        line = next((l for l in b.stdout.splitlines() if l.startswith(head)), "")
        return b, line

    b, line = bench()
    check(b.returncode == 0 and "measured" not in line and "streams" in line,
          f"nothing measured: the stated default ({line})")
    b, line = bench("right")
    # How the dates group on these arrays depends on where the allocator put
    # discount and cv within a page (test_Multiply places them to check it).
    check(b.returncode == 0 and "measured" not in line
          and re.search(r"double: (2 at once, \d apart|one at a time \(no group)", line) is not None,
          f"nothing measured: flat/right's stated default, 2 at most ({line})")

    t = run("tune", "--walks-only", "--walk-size", "0")
    errors = [l for l in t.stderr.splitlines() if "error" in l]
    check(t.returncode == 2 and len(errors) == 1 and "--walk-size" in errors[0]
          and not os.path.exists(os.path.join(work, "flat-walks.json")),
          f"--walk-size 0: exit 2, one line, nothing recorded ({t.returncode}, {errors})")
    t = run("tune", "--walks-only", "--walk-size", "4MiB", "--repeats", "2")
    if "this build writes without streaming stores" in t.stdout:
        print("not run: no streaming stores in this build; flat walks one stream and one date at a time")
        sys.exit(77)
    path = os.path.join(work, "flat-walks.json")
    check(t.returncode == 0 and t.stdout.count("flat/left now walks at once at most") == 2
          and t.stdout.count("flat/right now takes at once at most") == 2 and ", in float on this machine" in t.stdout
          and os.path.exists(path),
          f"cvest tune --walks-only: measured and recorded ({t.returncode}: {t.stderr.strip()[-300:]})")
    progress = [l for l in t.stderr.splitlines() if "flat/left at " in l]
    check(len(progress) == 6 and all("1 stream" in l and "2 streams" in l and "4 streams" in l for l in progress)
          and sum(" double, " in l for l in progress) == 3 and sum(" float, " in l for l in progress) == 3,
          f"flat/left: all three shapes, every count, each precision ({progress})")
    progress = [l for l in t.stderr.splitlines() if "flat/right at " in l]
    check(len(progress) == 6 and all("1 date" in l and "2 dates" in l and "4 dates" in l for l in progress),
          f"flat/right: all three shapes, every count, each precision ({progress})")
    with open(path) as f:
        rec = json.load(f)["records"]
    check(len(rec) == 4 and sorted((r["walk"], r["precision"]) for r in rec)
          == [("left streams", "double"), ("left streams", "float"), ("right dates", "double"), ("right dates", "float")]
          and all(r["best"] in (1, 2, 4) and len(r["seconds"]) == 3
                  and all(len(p) == 5 for shape in r["seconds"] for p in shape)
                  and len(r["walked"]) == 3 and all(len(w) == 3 and w[0] == 1 for w in r["walked"]) for r in rec),
          f"four records (each walk in each precision), each three shapes, three counts, five passes each, and what "
          f"each count walked ({rec})")
    def best_at(r, many):
        """The record's count on one side of 28 dates (core/FlatRun.hpp flat_many_dates): of the counts
        that walked as said at every shape on that side (the record's "walked"), the least lag behind the
        fastest count over those shapes (each round's passes paired where every count has one a round), the
        fewest where tied; flat/left's streams the fewest within 2% of the least (app/tune/WalkRecords.cpp)."""
        shapes = [s for s, name in enumerate(r["shapes"]) if (int(name.split()[0]) >= 28) == many]

        def lag_at(passes, i):
            if len({len(p) for p in passes}) == 1:
                return statistics.median(passes[i][k] / min(p[k] for p in passes) for k in range(len(passes[i])))
            return statistics.median(passes[i]) / min(statistics.median(p) for p in passes)
        lags = [max(lag_at(r["seconds"][s], i) for s in shapes) for i in range(len(r["streams"]))]
        if "walked" not in r:  # a record from before 12-06: the fewest within 2% of the least
            return min(c for c, lag in zip(r["streams"], lags) if lag <= min(lags) * 1.02)
        said = [i for i, c in enumerate(r["streams"]) if all(r["walked"][s][i] == c for s in shapes)]
        alike = 1.02 if r["walk"] == "left streams" else 1.0
        return min(r["streams"][i] for i in said if lags[i] <= min(lags[j] for j in said) * alike)

    def counts(r):
        few, many = best_at(r, False), best_at(r, True)
        return str(many) if few == many else f"{few} below 28 dates, {many} from 28"

    said = {(r["walk"], r["precision"]): counts(r) for r in rec}
    i = run("info")
    check("flat's walks measured (cvest tune or first use, " in i.stdout
          and all(f"flat/left streams at once ({p}), at most: {said.get(('left streams', p))} (measured here by cvest "
                  f"tune on" in i.stdout
                  and f"flat/right dates at once ({p}), at most: {said.get(('right dates', p))} (measured here by "
                  f"cvest tune on" in i.stdout for p in ("double", "float")),
          f"cvest info lists the records and what they set, each precision, each count at its dates "
          f"({i.stdout[-800:]})")

    b, line = bench()  # 16 dates of double: below 28, the count measured at 8 and 20
    left = next(r for r in rec if r["walk"] == "left streams" and r["precision"] == "double")
    check(b.returncode == 0 and "measured here by cvest tune on" in line
          and (best_at(left, False) == 1) == ("one stream" in line),
          f"the bench takes the record at its dates and says so ({line})")
    def force(walk, best):
        """The record of `walk` made to say `best` (1, 2 or 4) is fastest at every shape."""
        with open(path) as f:
            doc = json.load(f)
        for r in doc["records"]:
            if r["walk"] == walk:
                r["seconds"] = [[[1.0 if n == best else 2.0 + n] for n in r["streams"]]] * len(r["shapes"])
        with open(path, "w") as f:
            json.dump(doc, f)
        return f"(measured here by cvest tune on {next(r['date'] for r in rec if r['walk'] == walk)})"

    # flat/left's record made to say one stream, then two (with four at
    # most, placement walked two here already, so the stated default could
    # pass for two): the bench's line then names the record and its count.
    measured = force("left streams", 1)
    b, line = bench()
    check(b.returncode == 0 and line.endswith(f"double: one stream {measured}"),
          f"the bench takes flat/left's record of one stream and says so ({line})")
    measured = force("left streams", 2)
    b, line = bench()
    check(b.returncode == 0 and re.search(r"double: 2 streams at once, \d+ runs apart " + re.escape(measured) + "$", line),
          f"the bench takes flat/left's record of two streams and says so ({line})")
    # flat/right's record made to say one date at a time, whatever the
    # allocator's placement allows: the bench's line then names the record.
    measured = force("right dates", 1)
    b, line = bench("right")
    check(b.returncode == 0 and line.endswith(f"double: one at a time {measured}"),
          f"the bench takes flat/right's record and says so ({line})")

    with open(path, "w") as f:
        f.write('{"records": [{"key": 1}]}')
    b, line = bench()
    warnings = [l for l in b.stderr.splitlines() if "warning" in l]
    check(b.returncode == 0 and len(warnings) == 1 and "flat-walks.json: damaged, not used" in warnings[0]
          and "measured" not in line, f"a damaged record: one warning, the stated default ({warnings}, {line})")

sys.exit(1 if failures else 0)
