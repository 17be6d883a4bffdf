#!/usr/bin/env bash
# Wall time of one deck run as one plain process and under `mpiexec -n R`
# for R = 1, 2, 4 (oversubscribed where the machine has fewer cores), in the
# same run, interleaved (the order rotates each round), each started with
# the input in the page cache and the disk idle (bench/lib.sh). Also the
# start-up cost alone: the same commands on a tiny deck. Prints medians
# (min-max), each R's time over the plain process's, and the last round's
# per-rank phase seconds from the report rank 0 writes.
#   bench/mpi_scaling.sh [DATES IDS COLS] [ROUNDS]   (default 200 200000 5: 1.6 GB; 3 rounds)
#   CVEST_BUDGET=256MiB       the deck's memory_budget (split among the ranks of a node: each rank's own)
#   CVEST_BENCH_DIR=/tmp/…    where the files go (needs ~2x the input's size)
#   CVEST_COMPRESSION=gzip    compressed output (rank 0 then stores the others' chunks: parts_stored_s)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
T=${1:-200}; N=${2:-200000}; K=${3:-5}; rounds=${4:-3}
build=$("$root/scripts/build" cvest | tail -1)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_hwloc_base_binding_policy=none OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
work="${CVEST_BENCH_DIR:-/tmp/cvest-mpi-scaling}"
mkdir -p "$work"
in="$work/in_${T}x${N}x${K}.h5"
[ -f "$in" ] || "$build/cvest" generate --dates "$T" --ids "$N" --cols "$K" --out "$in" >&2
[ -f "$work/tiny.h5" ] || "$build/cvest" generate --dates 2 --ids 1000 --cols "$K" --out "$work/tiny.h5" >&2
for job in big tiny; do
  cat > "$work/deck_$job.toml" <<DECK
[input]
file = "$([ $job = big ] && echo "$in" || echo "$work/tiny.h5")"
[output]
file = "$work/cv_$job.h5"
overwrite = true
compression = "${CVEST_COMPRESSION:-none}"
[run]
strategy = "flat"
layout = "right"
memory_budget = "${CVEST_BUDGET:-256MiB}"
[report]
json = "$work/report_$job.json"
DECK
done
source "$root/bench/lib.sh"
cat "$in" > /dev/null  # page-cache the input
launch() {  # plain | 1 | 2 | 4, then the cvest arguments
  local how=$1; shift
  if [ "$how" = plain ]; then "$build/cvest" "$@"; else mpiexec -q -n "$how" "$build/cvest" "$@"; fi
}
contenders=(plain 1 2 4)
declare -A times
for r in $(seq "$rounds"); do
  line="round $r:"
  for k in $(seq 0 3); do
    how=${contenders[$(( (k + r) % 4 ))]}
    clean "$work/cv_tiny.h5"; s=$(now); launch "$how" run "$work/deck_tiny.toml" > /dev/null 2>&1; times[tiny_$how]+=" $(since "$s")"
    clean "$work/cv_big.h5"; s=$(now); launch "$how" run "$work/deck_big.toml" > /dev/null 2>&1; t=$(since "$s")
    times[big_$how]+=" $t"
    cp "$work/report_big.json" "$work/report_big_$how.json"
    line+=" $how $t s"
  done
  echo "$line" >&2
done
size=$(stat -c %s "$in")
plain=$(median ${times[big_plain]}); tiny_plain=$(median ${times[tiny_plain]})
printf 'input %s (%.2f GB), budget %s, %d rounds, %s; medians (min-max)\n' "$in" "$(awk -v s="$size" 'BEGIN{print s/1e9}')" \
       "${CVEST_BUDGET:-256MiB}" "$rounds" "$(nproc) cores"
printf '%-8s %10s %14s %10s %12s %14s\n' how "wall s" "(min-max)" "/ plain" "start-up s" "start-up - plain"
for how in "${contenders[@]}"; do
  m=$(median ${times[big_$how]}); tm=$(median ${times[tiny_$how]})
  printf '%-8s %10.3f %14s %10.2f %12.3f %14.3f\n' "$([ $how = plain ] && echo plain || echo "-n $how")" "$m" \
         "$(spread ${times[big_$how]})" "$(awk -v a="$m" -v b="$plain" 'BEGIN{print a/b}')" "$tm" \
         "$(awk -v a="$tm" -v b="$tiny_plain" 'BEGIN{print a-b}')"
done
echo "per rank, last round (seconds: wall, and busy read / kernel / write):"
for how in plain 1 2 4; do
  /usr/bin/python3 - "$work/report_big_$how.json" "$how" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["jobs"][0]
ranks = job.get("per_rank") or [{"total_s": job["seconds"]["total"], "seconds": job["seconds"], "blocks": job["blocks"]}]
cells = [f"r{i} {r['total_s']:.3f} ({r['seconds']['read']:.2f}/{r['seconds']['kernel']:.2f}/{r['seconds']['write']:.2f})"
         for i, r in enumerate(ranks)]
print(f"  {'plain' if sys.argv[2] == 'plain' else '-n ' + sys.argv[2]}: " + "  ".join(cells) + (f"; balance {job['load_balance']:.2f}" if "load_balance" in job else "")
      + (f"; rank 0 stored the others' chunks in {job['parts_stored_s']:.3f} s" if job.get("parts_stored_s", 0) > 0.0005 else ""))
PY
done
"$build/cvest" verify "$work/cv_big.h5" --input "$in" >&2
