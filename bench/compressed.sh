#!/usr/bin/env bash
# Compressed files, file to file, in the same run, interleaved, repeated;
# medians and ratios. Two benchmarks:
#
# gzip (the default): cvest against h5py + NumPy on the same data:
#   1. gzip output: plain input -> gzip (level 4) + shuffle output
#      (cvest's deck vs bench/peers h5py_numpy_gzip);
#   2. gzip input: cvest's gzip output of step 1 as the input (its chunks
#      (1, ~1 MiB of ids, K), gzip + shuffle) -> plain output
#      (cvest vs h5py_numpy);
#   3. gzip input as h5py writes it with compression="gzip" alone (h5py's
#      chunk guess, which splits the columns: (2, 12500, 1) at the default
#      size; no shuffle) -> plain output (cvest vs h5py_numpy).
#   bench/compressed.sh [DATES IDS COLS] [ROUNDS]     (default 100 400000 5, 3 rounds)
#
# codecs: a plain input of `cvest generate --values VALUES` (uniform or
# smooth) -> each output compression: cvest plain (the write mode auto
# picks), gzip, lzf, blosc (lz4 and zstd inside, byte shuffle, level 5) and
# bitshuffle-lz4, each against h5py + NumPy (+ hdf5plugin) writing the same
# codec in the same chunks (bench/peers), and `dd oflag=direct` of the plain
# bytes as the disk's reference: wall time until the output is on disk
# (cvest fsyncs; a peer's file is synced inside its timing), output bytes,
# the ratio to the plain cvest run and to the peer.
#   bench/compressed.sh codecs VALUES [DATES IDS COLS] [ROUNDS]   (default smooth 40 1000000 5, 3 rounds)
#
# Every output is verified bit for bit against its input with `cvest verify`
# (round 1, untimed). Each command starts with the disk idle (bench/lib.sh).
#   CVEST_BENCH_DIR=/tmp/…  where the files go (needs ~4x the input's size)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=gzip
if [ "${1:-}" = codecs ]; then mode=codecs; values=${2:-smooth}; shift 2 || shift $#; fi
if [ "$mode" = codecs ]; then T=${1:-40}; N=${2:-1000000}; K=${3:-5}; rounds=${4:-3}
else T=${1:-100}; N=${2:-400000}; K=${3:-5}; rounds=${4:-3}; fi
build=$("$root/scripts/build" cvest | tail -1)
export OMP_PROC_BIND="${OMP_PROC_BIND:-spread}" OMP_PLACES="${OMP_PLACES:-threads}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
py=/usr/bin/python3
peers="$root/bench/peers/peers.py"
work="${CVEST_BENCH_DIR:-/tmp/cvest-compressed}"
mkdir -p "$work"
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

if [ "$mode" = codecs ]; then
  in="$work/in_${values}_${T}x${N}x${K}.h5"
  [ -f "$in" ] || "$build/cvest" generate --dates "$T" --ids "$N" --cols "$K" --values "$values" --out "$in" >&2
  # name | cvest's [output] keys | the peer writing the same
  cases=("plain|compression = \"none\"|h5py_numpy"
         "gzip|compression = \"gzip\"|h5py_numpy_gzip"
         "lzf|compression = \"lzf\"|h5py_numpy_lzf"
         "blosc-lz4|compression = \"blosc\"\ncodec = \"lz4\"|h5py_numpy_blosc_lz4"
         "blosc-zstd|compression = \"blosc\"\ncodec = \"zstd\"|h5py_numpy_blosc_zstd"
         "bitshuffle-lz4|compression = \"bitshuffle-lz4\"|h5py_numpy_bitshuffle_lz4")
  plain_bytes=$(( T * N * K * 8 ))
  declare -A secs size
  for r in $(seq "$rounds"); do
    clean "$work/dd.bin"; s=$(now)
    dd if="$in" of="$work/dd.bin" bs=1M count=$(( plain_bytes >> 20 )) oflag=direct conv=fsync status=none
    secs[dd]+="$(since "$s") "
    for c in "${cases[@]}"; do
      IFS='|' read -r name keys peer <<< "$c"
      printf "[input]\nfile = \"%s\"\n[output]\nfile = \"%s\"\noverwrite = true\n$keys\n[run]\nstrategy = \"flat\"\nlayout = \"right\"\nmemory_budget = \"512MiB\"\n" \
        "$in" "$work/cvest.h5" > "$work/$name.toml"
      clean "$work/cvest.h5" "$work/peer.h5" "$work/dd.bin"; s=$(now)
      "$build/cvest" run "$work/$name.toml" > /dev/null 2>&1
      secs[cvest_$name]+="$(since "$s") "; size[cvest_$name]=$(stat -c %s "$work/cvest.h5")
      [ "$r" = 1 ] && "$build/cvest" verify "$work/cvest.h5" --input "$in" >&2
      clean "$work/cvest.h5"; s=$(now)
      $py "$peers" file "$peer" "$in" "$work/peer.h5" > /dev/null && sync "$work/peer.h5"
      secs[peer_$name]+="$(since "$s") "; size[peer_$name]=$(stat -c %s "$work/peer.h5")
      [ "$r" = 1 ] && "$build/cvest" verify "$work/peer.h5" --input "$in" >&2
      echo "round $r: $name: cvest $(echo "${secs[cvest_$name]}" | awk '{print $NF}') s, peer $(echo "${secs[peer_$name]}" | awk '{print $NF}') s" >&2
    done
  done
  clean "$work/cvest.h5" "$work/peer.h5" "$work/dd.bin"
  dd_s=$(median ${secs[dd]})
  plain_s=$(median ${secs[cvest_plain]})
  printf '%s values, %d x %d x %d doubles (%.2f GB plain), %d rounds; medians (min-max) of wall seconds until on disk\n' \
    "$values" "$T" "$N" "$K" "$(awk -v b="$plain_bytes" 'BEGIN { print b / 1e9 }')" "$rounds"
  printf 'dd oflag=direct of the plain bytes: %.2f s (%s)\n' "$dd_s" "$(spread ${secs[dd]})"
  printf '%-15s %22s %10s %9s %9s %22s %10s %9s\n' output "cvest s" "GB" "x plain" "x dd" "h5py+NumPy s" "GB" "peer/cvest"
  for c in "${cases[@]}"; do
    IFS='|' read -r name keys peer <<< "$c"
    a=$(median ${secs[cvest_$name]}); b=$(median ${secs[peer_$name]})
    printf '%-15s %8.2f (%s) %10.2f %9.2f %9.2f %8.2f (%s) %10.2f %9.1f\n' "$name" "$a" "$(spread ${secs[cvest_$name]})" \
      "$(awk -v b="${size[cvest_$name]}" 'BEGIN { print b / 1e9 }')" "$(awk -v a="$a" -v p="$plain_s" 'BEGIN { print a / p }')" \
      "$(awk -v a="$a" -v d="$dd_s" 'BEGIN { print a / d }')" "$b" "$(spread ${secs[peer_$name]})" \
      "$(awk -v b="${size[peer_$name]}" 'BEGIN { print b / 1e9 }')" "$(awk -v a="$a" -v b="$b" 'BEGIN { print b / a }')"
  done
  exit 0
fi
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
clean_all() { clean "$work"/cvest_gz.h5 "$work"/cvest_plain.h5 "$work"/peer_*.h5; }
declare -a out_cvest out_peer in_cvest in_peer h5_cvest h5_peer
check() { if [ "$r" = 1 ]; then "$build/cvest" verify "$1" --input "$2" >&2; fi; }  # round 1, untimed
for r in $(seq "$rounds"); do
  clean_all; s=$(now); "$build/cvest" run "$work/gzip_out.toml" > /dev/null 2>&1; out_cvest+=("$(since "$s")")
  check "$work/cvest_gz.h5" "$in"
  clean_all; s=$(now); $py "$peers" file h5py_numpy_gzip "$in" "$work/peer_gz.h5" > /dev/null; out_peer+=("$(since "$s")")
  check "$work/peer_gz.h5" "$in"
  clean_all; s=$(now); "$build/cvest" run "$work/gzip_in.toml" > /dev/null 2>&1; in_cvest+=("$(since "$s")")
  check "$work/cvest_plain.h5" "$gz_in"
  clean_all; s=$(now); $py "$peers" file h5py_numpy "$gz_in" "$work/peer_plain.h5" > /dev/null; in_peer+=("$(since "$s")")
  check "$work/peer_plain.h5" "$gz_in"
  clean_all; s=$(now); "$build/cvest" run "$work/h5py_in.toml" > /dev/null 2>&1; h5_cvest+=("$(since "$s")")
  check "$work/cvest_plain.h5" "$h5py_in"
  clean_all; s=$(now); $py "$peers" file h5py_numpy "$h5py_in" "$work/peer_plain.h5" > /dev/null; h5_peer+=("$(since "$s")")
  check "$work/peer_plain.h5" "$h5py_in"
  echo "round $r: gzip out: cvest ${out_cvest[-1]} s, h5py+NumPy ${out_peer[-1]} s; gzip in: cvest ${in_cvest[-1]} s, h5py+NumPy ${in_peer[-1]} s; h5py's gzip in: cvest ${h5_cvest[-1]} s, h5py+NumPy ${h5_peer[-1]} s" >&2
done
a=$(median "${out_cvest[@]}"); b=$(median "${out_peer[@]}"); c=$(median "${in_cvest[@]}"); d=$(median "${in_peer[@]}")
e=$(median "${h5_cvest[@]}"); f=$(median "${h5_peer[@]}")
awk -v size="$(stat -c %s "$in")" -v gz="$(stat -c %s "$gz_in")" -v r="$rounds" -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v e="$e" -v f="$f" 'BEGIN {
  printf "%.2f GB plain, %.2f GB gzip, %d rounds, medians:\n", size / 1e9, gz / 1e9, r
  printf "gzip output: cvest %.2f s, h5py+NumPy %.2f s -> %.1fx\n", a, b, b / a
  printf "gzip input:  cvest %.2f s, h5py+NumPy %.2f s -> %.1fx\n", c, d, d / c
  printf "h5py gzip input:  cvest %.2f s, h5py+NumPy %.2f s -> %.1fx\n", e, f, f / e }'
rm -f "$work"/peer_*.h5
