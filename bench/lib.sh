# Shared by the file-to-file benchmarks (sourced): starting each command
# with the disk idle, timing, medians and spreads. Needs $work (where the
# outputs go) set before sourcing.
# On a file system mounted with `discard` (this project's machines) deleting
# the last output makes the device trim its blocks for seconds after the
# sync returns; a write started then ran 3-7x slower.
device=$(basename "$(findmnt -no SOURCE --target "$work" 2>/dev/null || echo none)")
in_flight() { awk -v d="$device" '$3 == d { print $12 }' /proc/diskstats; }
clean() {
  rm -f "$@"; sync
  local idle=0 waited=0
  while [ "$idle" -lt 2 ] && [ "$waited" -lt 60 ]; do  # two quiet polls in a row, at most 30 s
    sleep 0.5; waited=$((waited + 1))
    if [ "$(in_flight)" = 0 ] || [ -z "$(in_flight)" ]; then idle=$((idle + 1)); else idle=0; fi
  done
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
spread() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.2f-%.2f", lo, hi }'; }
