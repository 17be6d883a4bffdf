#!/usr/bin/env bash
# LayoutLeft against LayoutRight file to file: one deck (`flat` on both
# layouts, `repeats = 3`, each job's time the median of its runs) run ROUNDS
# times; each round's left/right ratio comes from one process, so both
# layouts meet the same machine state. Prints the ratio's median (min-max)
# and each layout's median seconds per phase (busy seconds summed over the
# threads). With CVEST_OTHER=/path/to/another/cvest (a previous build) the
# two binaries alternate round by round and both are reported.
#   bench/layouts_file.sh [DATES IDS COLS] [ROUNDS]   (default 200 200000 5: 1.6 GB; 9 rounds)
#   CVEST_BUDGET=1GiB, CVEST_PRECISION=double|float, CVEST_BENCH_DIR=/tmp/…
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
T=${1:-200}; N=${2:-200000}; K=${3:-5}; rounds=${4:-9}
build=$("$root/scripts/build" cvest | tail -1)
work="${CVEST_BENCH_DIR:-/tmp/cvest-layouts-file}"
mkdir -p "$work"
precision=${CVEST_PRECISION:-double}
in="$work/in_${T}x${N}x${K}_$precision.h5"
[ -f "$in" ] || "$build/cvest" generate --dates "$T" --ids "$N" --cols "$K" --precision "$precision" --out "$in" >&2
cat > "$work/deck.toml" <<DECK
[input]
file = "$in"
[output]
file = "$work/cv.h5"
overwrite = true
[run]
strategy = "flat"
layout = "all"
repeats = 3
memory_budget = "${CVEST_BUDGET:-1GiB}"
[report]
json = "$work/report.json"
DECK
binaries=("$build/cvest")
[ -n "${CVEST_OTHER:-}" ] && binaries+=("$CVEST_OTHER")
cat "$in" > /dev/null
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
: > "$work/rounds.jsonl"
for r in $(seq "$rounds"); do
  for b in "${binaries[@]}"; do
    "$b" run "$work/deck.toml" > /dev/null 2>&1
    /usr/bin/python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(json.dumps({"binary": sys.argv[2], "jobs": [{k: j[k] for k in ("layout", "block_dates", "block_ids", "kernel_ids", "seconds") if k in j} for j in r["jobs"]]}))' \
      "$work/report.json" "$b" >> "$work/rounds.jsonl"
  done
  echo "round $r of $rounds done" >&2
done
/usr/bin/python3 - "$work/rounds.jsonl" "$in" <<'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"input {sys.argv[2]}; flat, both layouts, repeats 3 per run; {len(rows)} runs")
for binary in dict.fromkeys(r["binary"] for r in rows):
    mine = [r for r in rows if r["binary"] == binary]
    ratios = sorted(j["left"]["seconds"]["total"] / j["right"]["seconds"]["total"]
                    for j in ({x["layout"]: x for x in r["jobs"]} for r in mine))
    print(f"{binary}: left/right per round {statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})")
    for layout in ("right", "left"):
        jobs = [j for r in mine for j in r["jobs"] if j["layout"] == layout]
        med = {k: statistics.median(j["seconds"][k] for j in jobs) for k in ("total", "read", "h2d", "kernel", "d2h", "write")}
        j = jobs[0]
        block = f'{j["block_dates"]}x{j["block_ids"]}' + (f'/{j["kernel_ids"]}' if j.get("kernel_ids", j["block_ids"]) < j["block_ids"] else "")
        print(f"  {layout:5s} {block:>12s}  " + "  ".join(f"{k} {v:.3f}" for k, v in med.items()))
PY
