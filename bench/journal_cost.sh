#!/usr/bin/env bash
# What the resume journal costs: the same deck with `[output] journal = true`
# (the default) and `false`, file to file, interleaved (the order alternates
# each round), each started with the input cached and the disk idle
# (bench/lib.sh); medians (min-max) and the ratio. Both sync the finished
# output before renaming it (that is not the journal's cost).
#   bench/journal_cost.sh [DATES IDS COLS] [ROUNDS]   (default 200 200000 5: 1.6 GB; 5 rounds)
#   CVEST_BUDGET=256MiB, CVEST_BENCH_DIR=/tmp/…
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
T=${1:-200}; N=${2:-200000}; K=${3:-5}; rounds=${4:-5}
build=$("$root/scripts/build" cvest | tail -1)
work="${CVEST_BENCH_DIR:-/tmp/cvest-journal-cost}"
mkdir -p "$work"
in="$work/in_${T}x${N}x${K}.h5"
[ -f "$in" ] || "$build/cvest" generate --dates "$T" --ids "$N" --cols "$K" --out "$in" >&2
for journal in true false; do
  cat > "$work/deck_$journal.toml" <<DECK
[input]
file = "$in"
[output]
file = "$work/cv.h5"
overwrite = true
journal = $journal
[run]
strategy = "flat"
memory_budget = "${CVEST_BUDGET:-256MiB}"
DECK
done
source "$root/bench/lib.sh"
cat "$in" > /dev/null
declare -A times
for r in $(seq "$rounds"); do
  line="round $r:"
  for journal in $([ $((r % 2)) = 1 ] && echo true false || echo false true); do
    clean "$work/cv.h5"; s=$(now); "$build/cvest" run "$work/deck_$journal.toml" > /dev/null 2>&1; t=$(since "$s")
    times[$journal]+=" $t"; line+=" journal=$journal $t s"
  done
  echo "$line" >&2
done
on=$(median ${times[true]}); off=$(median ${times[false]})
printf 'input %s (%.2f GB), %d rounds, medians (min-max): journal %.3f s (%s), no journal %.3f s (%s); journal / none = %.3f\n' \
  "$in" "$(awk -v s="$(stat -c %s "$in")" 'BEGIN{print s/1e9}')" "$rounds" "$on" "$(spread ${times[true]})" "$off" \
  "$(spread ${times[false]})" "$(awk -v a="$on" -v b="$off" 'BEGIN{print a/b}')"
