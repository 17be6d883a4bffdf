#!/usr/bin/env bash
# gzip files, file to file: cvest against h5py + NumPy on the same data, in
# the same run, interleaved, repeated; medians and ratios.
#   1. gzip output: plain input -> gzip (level 4) + shuffle output
#      (cvest's deck vs bench/peers h5py_numpy_gzip);
#   2. gzip input: cvest's gzip output of step 1 as the input (its chunks
#      (1, ~1 MiB of ids, K), gzip + shuffle) -> plain output
#      (cvest vs h5py_numpy);
#   3. gzip input as h5py writes it with compression="gzip" alone (h5py's
#      chunk guess, which splits the columns: (2, 12500, 1) at the default
#      size; no shuffle) -> plain output (cvest vs h5py_numpy).
# Every output is verified bit for bit against its input with `cvest verify`.
# Each command starts with no dirty pages pending (rm + sync, untimed).
#   bench/compressed.sh [DATES IDS COLS] [ROUNDS]     (default 100 400000 5, 3 rounds)
#   CVEST_BENCH_DIR=/tmp/…  where the files go (needs ~4x the input's size)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
T=${1:-100}; N=${2:-400000}; K=${3:-5}; rounds=${4:-3}
build=$("$root/scripts/build" cvest | tail -1)
export OMP_PROC_BIND="${OMP_PROC_BIND:-spread}" OMP_PLACES="${OMP_PLACES:-threads}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
py=/usr/bin/python3
peers="$root/bench/peers/peers.py"
work="${CVEST_BENCH_DIR:-/tmp/cvest-compressed}"
mkdir -p "$work"
in="$work/in_${T}x${N}x${K}.h5"
gz_in="$work/in_gzip_${T}x${N}x${K}.h5"
h5py_in="$work/in_h5py_gzip_${T}x${N}x${K}.h5"
[ -f "$in" ] || "$build/cvest" generate --dates "$T" --ids "$N" --cols "$K" --out "$in" >&2
deck() {  # deck FILE INPUT OUTPUT COMPRESSION
  printf '[input]\nfile = "%s"\n[output]\nfile = "%s"\noverwrite = true\ncompression = "%s"\n[run]\nstrategy = "flat"\nlayout = "right"\nmemory_budget = "512MiB"\n' \
    "$2" "$3" "$4" > "$1"
}
deck "$work/gzip_out.toml" "$in" "$work/cvest_gz.h5" gzip
deck "$work/gzip_in.toml" "$gz_in" "$work/cvest_plain.h5" none
deck "$work/h5py_in.toml" "$h5py_in" "$work/cvest_plain.h5" none
if [ ! -f "$gz_in" ]; then  # a gzip input: cvest's gzip output with its multBy, cv renamed discount
  "$build/cvest" run "$work/gzip_out.toml" > /dev/null 2>&1
  $py - "$in" "$work/cvest_gz.h5" "$gz_in" <<'PY'
import h5py, shutil, sys
src, gz, dst = sys.argv[1:]
shutil.copyfile(gz, dst)
with h5py.File(src, "r") as f, h5py.File(dst, "a") as g:
    g.move("cv", "discount")
    g.create_dataset("multBy", data=f["multBy"][...])
PY
fi
if [ ! -f "$h5py_in" ]; then  # h5py's defaults: about a minute, once
  $py - "$in" "$h5py_in" <<'PY'
import h5py, sys
with h5py.File(sys.argv[1], "r") as f, h5py.File(sys.argv[2] + ".tmp", "w") as g:
    g.create_dataset("multBy", data=f["multBy"][...], compression="gzip")
    d = f["discount"]
    out = g.create_dataset("discount", shape=d.shape, dtype=d.dtype, compression="gzip")
    for t in range(0, d.shape[0], 10):
        out[t:t + 10] = d[t:t + 10]
    print(f"h5py's default chunks: {out.chunks}", file=sys.stderr)
PY
  mv "$h5py_in.tmp" "$h5py_in"
fi
clean() { rm -f "$work"/cvest_gz.h5 "$work"/cvest_plain.h5 "$work"/peer_*.h5; sync; sleep 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
declare -a out_cvest out_peer in_cvest in_peer h5_cvest h5_peer
check() { if [ "$r" = 1 ]; then "$build/cvest" verify "$1" --input "$2" >&2; fi; }  # round 1, untimed
for r in $(seq "$rounds"); do
  clean; s=$(now); "$build/cvest" run "$work/gzip_out.toml" > /dev/null 2>&1; out_cvest+=("$(since "$s")")
  check "$work/cvest_gz.h5" "$in"
  clean; s=$(now); $py "$peers" file h5py_numpy_gzip "$in" "$work/peer_gz.h5" > /dev/null; out_peer+=("$(since "$s")")
  check "$work/peer_gz.h5" "$in"
  clean; s=$(now); "$build/cvest" run "$work/gzip_in.toml" > /dev/null 2>&1; in_cvest+=("$(since "$s")")
  check "$work/cvest_plain.h5" "$gz_in"
  clean; s=$(now); $py "$peers" file h5py_numpy "$gz_in" "$work/peer_plain.h5" > /dev/null; in_peer+=("$(since "$s")")
  check "$work/peer_plain.h5" "$gz_in"
  clean; s=$(now); "$build/cvest" run "$work/h5py_in.toml" > /dev/null 2>&1; h5_cvest+=("$(since "$s")")
  check "$work/cvest_plain.h5" "$h5py_in"
  clean; s=$(now); $py "$peers" file h5py_numpy "$h5py_in" "$work/peer_plain.h5" > /dev/null; h5_peer+=("$(since "$s")")
  check "$work/peer_plain.h5" "$h5py_in"
  echo "round $r: gzip out: cvest ${out_cvest[-1]} s, h5py+NumPy ${out_peer[-1]} s; gzip in: cvest ${in_cvest[-1]} s, h5py+NumPy ${in_peer[-1]} s; h5py's gzip in: cvest ${h5_cvest[-1]} s, h5py+NumPy ${h5_peer[-1]} s" >&2
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
a=$(median "${out_cvest[@]}"); b=$(median "${out_peer[@]}"); c=$(median "${in_cvest[@]}"); d=$(median "${in_peer[@]}")
e=$(median "${h5_cvest[@]}"); f=$(median "${h5_peer[@]}")
awk -v size="$(stat -c %s "$in")" -v gz="$(stat -c %s "$gz_in")" -v r="$rounds" -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v e="$e" -v f="$f" 'BEGIN {
  printf "%.2f GB plain, %.2f GB gzip, %d rounds, medians:\n", size / 1e9, gz / 1e9, r
  printf "gzip output: cvest %.2f s, h5py+NumPy %.2f s -> %.1fx\n", a, b, b / a
  printf "gzip input:  cvest %.2f s, h5py+NumPy %.2f s -> %.1fx\n", c, d, d / c
  printf "h5py gzip input:  cvest %.2f s, h5py+NumPy %.2f s -> %.1fx\n", e, f, f / e }'
rm -f "$work"/peer_*.h5
