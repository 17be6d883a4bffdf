#!/usr/bin/env bash
# A cold input, file to file: `cvest run` with the page cache dropped first,
# its input read past the page cache (`[input] direct = true`) and through
# it (`direct = false`), against the device's own rates measured in the same
# rounds: `dd iflag=direct bs=1M` reading the input and `dd oflag=direct
# bs=16M` writing as many bytes. The reference is a direct read plus a
# direct write of the same bytes, one after the other; the two dd's started
# together (until both end) say what this device gives when reads and
# writes share it, as cvest's do (a VM's disk may cap the two together, or
# each on its own). Each command starts
# with the page cache dropped and the disk idle (lib.sh's clean), the
# commands take turns, medians and spreads are printed. Needs root (to drop
# the page cache) and ~2.1x the input's size free.
#   bench/cold_input.sh [DATES IDS COLS] [ROUNDS]   (default 60 10000000 5: 24 GB; 3 rounds)
#   CVEST_BUDGET=1GiB          the deck's memory_budget
#   CVEST_BENCH_DIR=/tmp/…     where the files go
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
T=${1:-60}; N=${2:-10000000}; K=${3:-5}; rounds=${4:-3}
[ -w /proc/sys/vm/drop_caches ] || { echo "bench/cold_input.sh: dropping the page cache needs root" >&2; exit 1; }
build=$("$root/scripts/build" cvest | tail -1)
export OMP_PROC_BIND="${OMP_PROC_BIND:-spread}" OMP_PLACES="${OMP_PLACES:-threads}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
work="${CVEST_BENCH_DIR:-/tmp/cvest-cold-input}"
mkdir -p "$work"
in="$work/in_${T}x${N}x${K}.h5"
[ -f "$in" ] || "$build/cvest" generate --dates "$T" --ids "$N" --cols "$K" --out "$in" >&2
size=$(stat -c %s "$in")
for mode in true false; do
  cat > "$work/deck_$mode.toml" <<DECK
[input]
file = "$in"
direct = $mode
[output]
file = "$work/cv.h5"
overwrite = true
direct = true
[run]
strategy = "flat"
layout = "right"
memory_budget = "${CVEST_BUDGET:-1GiB}"
[report]
json = "$work/report_$mode.json"
DECK
done
source "$root/bench/lib.sh"
drop_caches() { sync && echo 3 > /proc/sys/vm/drop_caches; }
declare -a t_read t_write t_both t_true t_false
read_in() { dd if="$in" of=/dev/null bs=1M iflag=direct status=none; }
write_out() { dd if=/dev/zero of="$work/dd.bin" bs=16M count=$((size / (16 << 20))) oflag=direct conv=fsync status=none; }
for r in $(seq "$rounds"); do
  for what in $([ $((r % 2)) = 1 ] && echo read write both true false || echo false true both write read); do
    clean "$work/cv.h5" "$work/dd.bin"; drop_caches; s=$(now)
    case $what in
      read) read_in; t_read+=("$(since "$s")") ;;
      write) write_out; t_write+=("$(since "$s")") ;;
      both) read_in & rpid=$!; write_out || { kill "$rpid"; exit 1; }; wait "$rpid"; t_both+=("$(since "$s")") ;;
      true) "$build/cvest" run "$work/deck_true.toml" --explain > "$work/run_true.txt" 2>&1; t_true+=("$(since "$s")")
            # checked once, after its first run (untimed): the next command removes it
            [ ${#t_true[@]} -gt 1 ] || "$build/cvest" verify "$work/cv.h5" --input "$in" >&2 ;;
      false) "$build/cvest" run "$work/deck_false.toml" --explain > "$work/run_false.txt" 2>&1; t_false+=("$(since "$s")") ;;
    esac
  done
  echo "round $r: dd iflag=direct ${t_read[-1]} s, dd oflag=direct ${t_write[-1]} s, both at once ${t_both[-1]} s, cvest (input direct = true) ${t_true[-1]} s, cvest (input direct = false) ${t_false[-1]} s" >&2
done
clean "$work/dd.bin"
mr=$(median "${t_read[@]}"); mw=$(median "${t_write[@]}"); mb=$(median "${t_both[@]}"); ma=$(median "${t_true[@]}"); mf=$(median "${t_false[@]}")
# dd writes whole 16 MiB pieces: its time scaled to the input's bytes.
written=$(( size / (16 << 20) * (16 << 20) ))
awk -v f="$in" -v size="$size" -v n="$rounds" -v r="$mr" -v w="$mw" -v wb="$written" -v a="$ma" -v b="$mf" -v both="$mb" -v sboth="$(spread "${t_both[@]}")" \
    -v sr="$(spread "${t_read[@]}")" -v sw="$(spread "${t_write[@]}")" -v sa="$(spread "${t_true[@]}")" \
    -v sb="$(spread "${t_false[@]}")" -v budget="${CVEST_BUDGET:-1GiB}" 'BEGIN {
  w = w * size / wb
  printf "input %s (%.2f GB), budget %s, %d rounds, cold, medians (min-max):\n", f, size / 1e9, budget, n
  printf "  dd iflag=direct %.2f s (%s), dd oflag=direct %.2f s (%s, scaled to the input bytes): reference %.2f s\n", r, sr, w, sw, r + w
  printf "  both dd commands at once %.2f s (%s, the write unscaled): %.2f x reference\n", both, sboth, both / (r + w)
  printf "  cvest, input direct = true   %.2f s (%s): %.2f x reference, %.2f x the two at once\n", a, sa, a / (r + w), a / both
  printf "  cvest, input direct = false  %.2f s (%s): %.2f x reference, %.2f x the two at once\n", b, sb, b / (r + w), b / both }'
grep -E "^input: read|peak RSS|^flat" "$work/run_true.txt" | cut -c1-200 >&2
