#!/usr/bin/env bash
# File-to-file wall time of `cvest run` against `cp` and `dd bs=16M` of the
# same input, measured in the same run, interleaved, repeated; medians and
# ratios. Each command starts with the page cache holding the input and no
# dirty pages or freed blocks pending (rm + sync before each, untimed).
#   bench/file_to_file.sh [DATES IDS COLS] [ROUNDS]     (default 100 400000 5, 5 rounds)
#   CVEST_BUDGET=512MiB     the deck's memory_budget
#   CVEST_BENCH_DIR=/tmp/…  where the files go (needs ~3x the input's size)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
T=${1:-100}; N=${2:-400000}; K=${3:-5}; rounds=${4:-5}
build=$("$root/scripts/build" cvest | tail -1)
export OMP_PROC_BIND="${OMP_PROC_BIND:-spread}" OMP_PLACES="${OMP_PLACES:-threads}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
work="${CVEST_BENCH_DIR:-/tmp/cvest-file-to-file}"
mkdir -p "$work"
in="$work/in_${T}x${N}x${K}.h5"
[ -f "$in" ] || "$build/cvest" generate --dates "$T" --ids "$N" --cols "$K" --out "$in" >&2
cat > "$work/deck.toml" <<DECK
[input]
file = "$in"
[output]
file = "$work/cv.h5"
overwrite = true
[run]
strategy = "flat"
layout = "right"
memory_budget = "${CVEST_BUDGET:-512MiB}"
[report]
json = "$work/report.json"
DECK
cat "$in" > /dev/null  # page-cache the input
clean() { rm -f "$work/cp.h5" "$work/dd.h5" "$work/cv.h5"; sync; sleep 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
declare -a t_cp t_dd t_cvest
for r in $(seq "$rounds"); do
  clean; s=$(now); cp "$in" "$work/cp.h5"; t_cp+=("$(since "$s")")
  clean; s=$(now); dd if="$in" of="$work/dd.h5" bs=16M status=none; t_dd+=("$(since "$s")")
  clean; s=$(now); "$build/cvest" run "$work/deck.toml" > /dev/null 2>&1; t_cvest+=("$(since "$s")")
  echo "round $r: cp ${t_cp[-1]} s, dd ${t_dd[-1]} s, cvest ${t_cvest[-1]} s" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
mc=$(median "${t_cp[@]}"); md=$(median "${t_dd[@]}"); mv=$(median "${t_cvest[@]}")
size=$(stat -c %s "$in")
awk -v file="$in" -v size="$size" -v r="$rounds" -v c="$mc" -v d="$md" -v v="$mv" -v b="${CVEST_BUDGET:-512MiB}" 'BEGIN {
  printf "input %s (%.2f GB), budget %s, %d rounds, medians: cp %.2f s, dd %.2f s, cvest %.2f s\n", file, size / 1e9, b, r, c, d, v
  printf "cvest / cp = %.2f   cvest / dd = %.2f\n", v / c, v / d }'
"$build/cvest" verify "$work/cv.h5" --input "$in" >&2
rm -f "$work/cp.h5" "$work/dd.h5"
