#!/usr/bin/env bash
# File-to-file wall time of `cvest run` against `cp` and `dd bs=16M` of the
# same input, each until its output is on disk (cvest syncs its output before
# renaming it; `cp` is followed by `sync FILE`, `dd` runs with conv=fsync), measured in the same run, interleaved, repeated; medians and
# ratios. The device's own rates in the same rounds: `dd oflag=direct` (the
# cached input written past the page cache) and `dd iflag=direct` (the input
# read past it); and cvest once more with the input cold (the page cache
# dropped first: needs root, else that row is skipped), against the direct
# read plus the direct write. Three times for cvest: on the input `cvest
# generate` writes ((1, ~1 MiB) chunks), the same with `[output] direct =
# false` (through the page cache), and on the same values as h5py writes them
# date by date (one chunk per date), since users' files are h5py's. Each command starts with the
# page cache holding the input and the disk idle: rm + sync, then a wait
# until the device has no I/O in flight (untimed). On a file system mounted
# with `discard` (this project's machines) deleting the last output makes
# the device trim its blocks for seconds after the sync returns; a write
# started then ran 3-7x slower, which once looked like a cost of the input's
# chunking.
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
h5in="$work/in_${T}x${N}x${K}_h5py.h5"
[ -f "$h5in" ] || /usr/bin/python3 - "$in" "$h5in" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:
    dst["multBy"] = src["multBy"][...]
    d = src["discount"]
    out = dst.create_dataset("discount", d.shape, d.dtype, chunks=(1,) + d.shape[1:])
    for t in range(d.shape[0]):
        out[t] = d[t]
PY
for deck in generated h5py buffered; do
  cat > "$work/deck_$deck.toml" <<DECK
[input]
file = "$([ $deck = h5py ] && echo "$h5in" || echo "$in")"
[output]
file = "$work/cv.h5"
overwrite = true
direct = $([ $deck = buffered ] && echo false || echo '"auto"')
chunk = $(/usr/bin/python3 -c "import h5py; print(h5py.File('$in')['discount'].chunks[1])")
[run]
strategy = "flat"
layout = "right"
memory_budget = "${CVEST_BUDGET:-512MiB}"
[report]
json = "$work/report_$deck.json"
DECK
done
cat "$in" "$h5in" > /dev/null  # page-cache the inputs
source "$root/bench/lib.sh"
declare -a t_cp t_dd t_cvest t_h5py t_dw t_dr t_cold t_buf
drop_caches() { sync && echo 3 > /proc/sys/vm/drop_caches 2> /dev/null; }
can_drop=$([ -w /proc/sys/vm/drop_caches ] && echo 1 || echo 0)
for r in $(seq "$rounds"); do
  clean "$work/cp.h5" "$work/dd.h5" "$work/cv.h5"; s=$(now); cp "$in" "$work/cp.h5" && sync "$work/cp.h5"; t_cp+=("$(since "$s")")
  clean "$work/cp.h5" "$work/dd.h5" "$work/cv.h5"; s=$(now); dd if="$in" of="$work/dd.h5" bs=16M conv=fsync status=none; t_dd+=("$(since "$s")")
  clean "$work/cp.h5" "$work/dd.h5" "$work/cv.h5"; s=$(now); dd if="$in" of="$work/dd.h5" bs=16M oflag=direct conv=fsync status=none; t_dw+=("$(since "$s")")
  if [ "$can_drop" = 1 ]; then
    clean "$work/cp.h5" "$work/dd.h5" "$work/cv.h5"; drop_caches; s=$(now); dd if="$in" of=/dev/null bs=16M iflag=direct status=none; t_dr+=("$(since "$s")")
    clean "$work/cp.h5" "$work/dd.h5" "$work/cv.h5"; drop_caches; s=$(now); "$build/cvest" run "$work/deck_generated.toml" > /dev/null 2>&1; t_cold+=("$(since "$s")")
    cat "$in" "$h5in" > /dev/null  # cached again for the rest
  fi
  # the decks take turns to go first, so none always follows another's output
  for deck in $([ $((r % 2)) = 1 ] && echo generated h5py buffered || echo buffered h5py generated); do
    clean "$work/cp.h5" "$work/dd.h5" "$work/cv.h5"; s=$(now); "$build/cvest" run "$work/deck_$deck.toml" > /dev/null 2>&1
    case $deck in generated) t_cvest+=("$(since "$s")") ;; h5py) t_h5py+=("$(since "$s")") ;; *) t_buf+=("$(since "$s")") ;; esac
  done
  echo "round $r: cp ${t_cp[-1]} s, dd ${t_dd[-1]} s, dd oflag=direct ${t_dw[-1]} s, cvest ${t_cvest[-1]} s, cvest direct = false ${t_buf[-1]} s, cvest on h5py's input ${t_h5py[-1]} s${t_cold:+, dd iflag=direct ${t_dr[-1]} s, cvest cold ${t_cold[-1]} s}" >&2
done
mc=$(median "${t_cp[@]}"); md=$(median "${t_dd[@]}"); mv=$(median "${t_cvest[@]}"); mh=$(median "${t_h5py[@]}")
size=$(stat -c %s "$in")
awk -v file="$in" -v size="$size" -v r="$rounds" -v c="$mc" -v d="$md" -v v="$mv" -v h="$mh" -v b="${CVEST_BUDGET:-512MiB}" \
    -v sc="$(spread "${t_cp[@]}")" -v sd="$(spread "${t_dd[@]}")" -v sv="$(spread "${t_cvest[@]}")" -v sh="$(spread "${t_h5py[@]}")" 'BEGIN {
  printf "input %s (%.2f GB), budget %s, %d rounds, medians (min-max): cp %.2f s (%s), dd %.2f s (%s), cvest %.2f s (%s), cvest on h5py-written input %.2f s (%s)\n", file, size / 1e9, b, r, c, sc, d, sd, v, sv, h, sh
  printf "cvest / cp = %.2f   cvest / dd = %.2f   h5py-written / cvest-written input = %.2f\n", v / c, v / d, h / v }'
mw=$(median "${t_dw[@]}"); mb=$(median "${t_buf[@]}")
awk -v w="$mw" -v sw="$(spread "${t_dw[@]}")" -v v="$mv" -v b="$mb" -v sb="$(spread "${t_buf[@]}")" 'BEGIN {
  printf "the device: dd oflag=direct (cached input, written past the page cache) %.2f s (%s); cvest / it = %.2f\n", w, sw, v / w
  printf "cvest with [output] direct = false (through the page cache) %.2f s (%s); / direct = auto %.2f\n", b, sb, b / v }'
if [ "$can_drop" = 1 ]; then
  mr=$(median "${t_dr[@]}"); mo=$(median "${t_cold[@]}")
  awk -v w="$mw" -v r="$mr" -v sr="$(spread "${t_dr[@]}")" -v o="$mo" -v so="$(spread "${t_cold[@]}")" 'BEGIN {
    printf "cold input (page cache dropped): dd iflag=direct %.2f s (%s), cvest %.2f s (%s); cvest / (direct read + direct write) = %.2f\n", r, sr, o, so, o / (r + w) }'
else
  echo "cold input: skipped (dropping the page cache needs root)"
fi
"$build/cvest" verify "$work/cv.h5" --input "$h5in" >&2
rm -f "$work/cp.h5" "$work/dd.h5"
