#!/usr/bin/env bash
# Command-line failure cases: each must print one line naming the file (and
# dataset), exit with its documented code, and leave nothing half-written.
#   errors.sh CVEST_BINARY CASE
set -uo pipefail
cvest="$1"; case_name="$2"
work=$(mktemp -d /tmp/cvest-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMP_PROC_BIND=spread OMP_PLACES=threads

fail() { echo "FAIL [$case_name]: $*" >&2; exit 1; }

# expect CODE PATTERN -- command...: runs it, checks exit code, one-line stderr
# containing PATTERN, and that no output or temporary file was left in out/.
expect() {
  local code="$1" pattern="$2"; shift 3
  "$@" > stdout.txt 2> stderr.txt
  local rc=$?
  [ "$rc" -eq "$code" ] || { cat stderr.txt >&2; fail "exit $rc, expected $code"; }
  local errors
  errors=$(grep -c '^cvest: \(error\|I/O error\|mismatch\)' stderr.txt)
  [ "$errors" -eq 1 ] || { cat stderr.txt >&2; fail "expected exactly one error line, got $errors"; }
  grep -q -- "$pattern" stderr.txt || { cat stderr.txt >&2; fail "message lacks '$pattern'"; }
  if [ -d out ]; then
    leftovers=$(find out -name '*.tmp*' -o -name 'cv.h5' | head -1)
    [ -z "$leftovers" ] || fail "left behind: $leftovers"
  fi
  echo "ok [$case_name]: exit $rc: $(grep '^cvest:' stderr.txt)"
}

deck() {  # a deck over in.h5 -> out/cv.h5, with extra lines appended
  { printf '[input]\nfile = "in.h5"\n[output]\nfile = "out/cv.h5"\n'; printf '%b' "${1:-}"; } > deck.toml
}

"$cvest" generate --dates 6 --ids 2000 --cols 5 --out in.h5 > /dev/null || fail "generate failed"

case "$case_name" in
  unknown_command) expect 2 "unknown command 'rnu' (did you mean 'run'?); valid: bench, transfers, run, generate, verify, tune, info" -- "$cvest" rnu ;;
  missing_input)   deck; rm in.h5; expect 2 "in.h5: no such file" -- "$cvest" run deck.toml ;;
  not_hdf5)        deck; echo "plain text" > in.h5; expect 2 "in.h5: not an HDF5 file" -- "$cvest" run deck.toml ;;
  truncated)       deck; truncate -s 100000 in.h5; expect 2 "truncated" -- "$cvest" run deck.toml ;;
  damaged_metadata)  # the root group's local heap without a data address: HDF5 1.10.8 (and h5py on it) crash
    deck; heap=$(grep -obUa HEAP in.h5 | head -1 | cut -d: -f1)
    [ -n "$heap" ] || fail "no local heap in in.h5"
    printf '\377\377\377\377\377\377\377\377' | dd of=in.h5 bs=1 seek=$((heap + 24)) conv=notrunc status=none
    bash -c "/usr/bin/python3 -c \"import h5py; 'multBy' in h5py.File('in.h5', 'r')\"; exit \$?" 2> /dev/null
    if [ $? -ge 128 ]; then
      expect 2 "in.h5: dataset 'multBy': damaged HDF5 metadata: HDF5 .* crashes (SIGSEGV) reading it" -- "$cvest" run deck.toml
    else  # an HDF5 that reports the damage instead: a metadata error naming the file, never "no such file"
      expect 2 "in.h5\(: dataset 'multBy'\)\?: .*\(metadata\|HDF5\|cannot read\|not found\)" -- "$cvest" run deck.toml
      ! grep -qi "no such file" stderr.txt || fail "the damaged file reported as missing"
    fi ;;
  missing_dataset) deck; expect 2 "dataset 'rates' not found" -- "$cvest" run deck.toml --set input.discount=rates ;;
  wrong_rank)      deck; expect 2 "dataset 'multBy' has rank 2 (2000, 5), expected rank 3" -- "$cvest" run deck.toml --set input.discount=multBy ;;
  deck_syntax)     printf '[input\nfile = "in.h5"\n' > deck.toml; expect 2 "deck.toml:1" -- "$cvest" run deck.toml ;;
  unknown_key)     deck '[run]\nstrategie = "flat"\n'; expect 2 "unknown key \[run\] strategie; valid: strategy" -- "$cvest" run deck.toml ;;
  wrong_type)      deck '[run]\nrepeats = "two"\n'; expect 2 "\[run\] repeats must be an integer, found a string" -- "$cvest" run deck.toml ;;
  unknown_strategy) deck; expect 2 "unknown strategy 'fastest'; valid: one_worker" -- "$cvest" run deck.toml --set run.strategy=fastest ;;
  negative_budget) deck '[run]\nmemory_budget = "-1GiB"\n'; expect 2 "must be positive" -- "$cvest" run deck.toml ;;
  absurd_budget)   deck '[run]\nmemory_budget = "100PB"\n'; expect 2 "absurd" -- "$cvest" run deck.toml ;;
  tiny_budget)     deck '[run]\nmemory_budget = 64\n'; expect 2 "too small: one id row needs" -- "$cvest" run deck.toml
                   # a budget of kilobytes runs, with a warning that names a budget giving 1 MiB blocks
                   deck '[run]\nmemory_budget = "1KiB"\n'; "$cvest" run deck.toml --plan > stdout.txt 2> stderr.txt || fail "plan failed"
                   grep -q "^cvest: warning: memory_budget 1.00 KiB cuts the cube into 6000 blocks of 80 B (1 dates x 2 ids); .*memory_budget = \"16MiB\" or more" stderr.txt \
                     || { cat stderr.txt; fail "no warning on tiny blocks"; }
                   deck '[run]\nmemory_budget = "64MiB"\n'; "$cvest" run deck.toml --plan > stdout.txt 2> stderr.txt || fail "plan failed"
                   ! grep -q "warning" stderr.txt || fail "a warning for a sound budget" ;;
  output_is_input) printf '[input]\nfile = "in.h5"\n[output]\nfile = "./in.h5"\n' > deck.toml
                   expect 2 "is the input file" -- "$cvest" run deck.toml
                   "$cvest" verify in.h5 --input in.h5 > /dev/null 2>&1; [ -f in.h5 ] || fail "input was removed" ;;
  existing_output) deck; mkdir -p out; echo keep > out/cv.h5
                   "$cvest" run deck.toml > stdout.txt 2> stderr.txt; rc=$?
                   [ $rc -eq 2 ] || fail "exit $rc, expected 2"
                   grep -q "output exists; set \[output\] overwrite = true" stderr.txt || fail "message"
                   [ "$(cat out/cv.h5)" = keep ] || fail "existing output was touched"
                   # cvest generate names its own flag
                   "$cvest" generate -T 2 -N 10 -K 5 -o in.h5 > stdout.txt 2> stderr.txt; rc=$?
                   [ $rc -eq 2 ] || fail "generate: exit $rc, expected 2"
                   grep -q "^cvest: error: in.h5: output exists; pass --overwrite to replace it$" stderr.txt || { cat stderr.txt; fail "generate's message"; }
                   echo "ok [$case_name]" ;;
  unwritable_dir)  echo file > blocker; printf '[input]\nfile = "in.h5"\n[output]\nfile = "blocker/sub/cv.h5"\n' > deck.toml
                   expect 3 "cannot create the output directory" -- "$cvest" run deck.toml ;;
  disk_full|disk_full_gzip)
                   compression=none; [ "$case_name" = disk_full_gzip ] && compression=gzip
                   "$cvest" generate --dates 6 --ids 200000 --cols 5 --out big.h5 --seed 5 > /dev/null || fail "generate"
                   printf '[input]\nfile = "big.h5"\n[output]\nfile = "out/cv.h5"\ncompression = "%s"\n[run]\nmemory_budget = "4MiB"\n' \
                     "$compression" > deck.toml
                   mkdir -p out
                   # RLIMIT_FSIZE makes writes past 4 MB fail with EFBIG: the plain
                   # output's allocation (HDF5's metadata past 4 MB), the gzip
                   # output's chunks part-way through. A real full file system
                   # (ENOSPC) mid-run: cli.disk_full_fs.
                   pattern="out/cv.h5: cannot allocate the output (disk full?)"
                   [ "$compression" = gzip ] && pattern="out/cv.h5: dataset 'cv': write of (1, "
                   expect 3 "$pattern" -- bash -c "trap '' XFSZ; ulimit -f 4096; exec \"$cvest\" run deck.toml" ;;
  writeback_eio)   # writeback's error, seen by write-behind's sync_file_range, fails the compressed output
                   # (a later fsync on another descriptor would no longer report it)
                   deck 'compression = "blosc"\n'
                   expect 3 "out/cv.h5: dataset 'cv': write failed: Input/output error" -- env CVEST_FAULT=writeback_eio "$cvest" run deck.toml ;;
  verify_mismatch) deck; "$cvest" run deck.toml > /dev/null 2>&1 || fail "run failed"
                   "$cvest" generate --dates 6 --ids 2000 --cols 5 --out other.h5 --seed 99 > /dev/null
                   "$cvest" verify out/cv.h5 --input other.h5 > stdout.txt 2> stderr.txt; rc=$?
                   [ $rc -eq 4 ] || fail "exit $rc, expected 4"
                   grep -q "out/cv.h5: dataset 'cv' differs from other.h5 'multBy' \* 'discount' at \[0, 0, 0\]" stderr.txt || { cat stderr.txt; fail "message"; }
                   echo "ok [$case_name]" ;;
  unknown_pipeline) deck; expect 2 "unknown pipeline 'fast'; valid: auto, overlapped, per_thread" -- "$cvest" run deck.toml --set run.pipeline=fast ;;
  per_thread_team) deck '[run]\nstrategy = "team"\npipeline = "per_thread"\n'
                   expect 2 'pipeline = "per_thread" does not apply to team/right' -- "$cvest" run deck.toml
                   [ -z "$(find . -name '*.tmp*')" ] || fail "temporary files left"; echo "ok [$case_name]" ;;
  per_thread_gzip) # gzip output: each thread compresses its own chunks; HDF5 reads them back
                   deck '[run]\nlayout = "all"\nmemory_budget = "2MiB"\nverify = true\n[report]\ncsv = "out/report.csv"\n'
                   "$cvest" run deck.toml --set output.compression=gzip > stdout.txt 2> stderr.txt || { cat stderr.txt; fail "run failed"; }
                   grep -q "output verified" stdout.txt || fail "not verified"
                   expected=overlapped  # per_thread wherever the build has OpenMP threads (from the build, not cvest info)
                   [ -n "${CVEST_DEFAULT_SPACE:-}" ] || fail "CVEST_DEFAULT_SPACE unset (ctest sets it from the configuration)"
                   [ "$CVEST_DEFAULT_SPACE" = OPENMP ] && [ "${OMP_NUM_THREADS:-$(nproc)}" -ge 2 ] && expected=per_thread
                   [ "$(grep -c ",$expected,[0-9]*,1,0,1.000,[0-9]*,[0-9]*,[0-9.]*,[0-9.]*$" out/report.csv)" = 2 ] || { cat out/report.csv; fail "expected $expected"; }
                   /usr/bin/python3 -c "import h5py, sys; d = h5py.File('out/cv.h5')['cv']; sys.exit(not (d.compression == 'gzip' and d.shuffle))" \
                     || fail "output is not gzip + shuffle"
                   [ -z "$(find out -name '*.tmp*')" ] || fail "temporary files left"; echo "ok [$case_name]" ;;
  success_mixed)   # team runs overlapped and writes; flat (per_thread where it applies) is checked against it
                   deck '[run]\nstrategy = ["team", "flat"]\nlayout = "all"\nmemory_budget = "1MiB"\nverify = true\n[report]\ncsv = "out/report.csv"\n'
                   "$cvest" run deck.toml > stdout.txt 2> stderr.txt || { cat stderr.txt; fail "run failed"; }
                   grep -q "output verified" stdout.txt || fail "not verified"
                   grep -q "^team,right,double,true,.*,overlapped,0,1,0,1.000,[0-9]*,[0-9]*,[0-9.]*,[0-9.]*$" out/report.csv || { cat out/report.csv; fail "team's pipeline"; }
                   [ "$(grep -c ',\(per_thread,[1-9][0-9]*\|overlapped,0\),1,0,1.000,[0-9]*,[0-9]*,[0-9.]*,[0-9.]*$' out/report.csv)" = 4 ] || { cat out/report.csv; fail "pipelines in the csv"; }
                   echo "ok [$case_name]" ;;
  mixed_precision) # float32 discount x float64 multBy: float64 as NumPy gives; a chosen float narrows, with a note
                   /usr/bin/python3 -c "import h5py, numpy as np; f = h5py.File('mixed.h5', 'w'); f['multBy'] = np.full((2000, 5), 0.1); f['discount'] = np.ones((6, 2000, 5), np.float32)" || fail "h5py"
                   deck; sed -i 's/in.h5/mixed.h5/' deck.toml
                   "$cvest" run deck.toml --explain > stdout.txt 2> stderr.txt || { cat stderr.txt; fail "run failed"; }
                   grep -q "^flat .* double " stdout.txt || { cat stdout.txt; fail "not computed in double"; }
                   ! grep -q "narrows" stderr.txt || fail "a note without a narrowing"
                   /usr/bin/python3 -c "import h5py, sys; sys.exit(h5py.File('out/cv.h5')['cv'].dtype != 'float64')" || fail "output not float64"
                   "$cvest" run deck.toml --set run.precision=float --set output.overwrite=true > stdout.txt 2> stderr.txt || fail "float run failed"
                   grep -q "^cvest: note: \[run\] precision = \"float\" narrows mixed.h5 'multBy' (float64) to float32; NumPy's multBy\[None\] \* discount would be float64$" stderr.txt \
                     || { cat stderr.txt; fail "no note on the narrowing"; }
                   [ "$(grep -c narrows stderr.txt)" = 1 ] || fail "more than one note"
                   echo "ok [$case_name]" ;;
  unreadable_filter) # h5py's lzf on big-endian doubles: cvest decodes lzf into native floats only (either width), HDF5 not at all
                   /usr/bin/python3 -c "import h5py, numpy as np; f = h5py.File('lzf.h5', 'w'); f['multBy'] = np.ones((2000, 5)); f.create_dataset('discount', data=np.ones((6, 2000, 5)), dtype='>f8', compression='lzf')" || fail "h5py"
                   deck '[run]\nprecision = "float"\n'; sed -i 's/in.h5/lzf.h5/' deck.toml
                   # (no plugins: Debian's bitshuffle package puts an lzf one in HDF5's default path)
                   HDF5_PLUGIN_PATH=$PWD/no-plugins expect 2 "lzf.h5: dataset 'discount' is stored with lzf (HDF5 filter 32000), which this HDF5 cannot decode" -- "$cvest" run deck.toml
                   ! grep -q "HDF5-DIAG" stderr.txt || fail "HDF5 printed its error stack"
                   # cvest info says which filters HDF5 has and which cvest decodes itself
                   "$cvest" info 2>/dev/null | grep -q "^HDF5 filters: deflate, shuffle" || fail "info: HDF5 filters"
                   "$cvest" info 2>/dev/null | grep -q "^coded by cvest's threads: shuffle, deflate (libdeflate [0-9.]*), lzf (liblzf [0-9.]*), blosc (c-blosc [0-9.]*, lz4 [0-9.]*, zstd [0-9.]*), bitshuffle-lz4 (lz4 [0-9.]*)$" \
                     || fail "info: cvest's decoders" ;;
  plan)            # --plan: what the run would do, and nothing written (not even a directory or the input to generate)
                   printf '[input]\nfile = "gen/in.h5"\ngenerate = { dates = 6, ids = 2000, cols = 5 }\n[output]\nfile = "out/cv.h5"\n[run]\nstrategy = ["flat", "team"]\n' > deck.toml
                   "$cvest" run deck.toml --plan > stdout.txt 2> stderr.txt || { cat stderr.txt; fail "plan failed"; }
                   grep -q "nothing was written" stdout.txt || { cat stdout.txt; fail "no plan"; }
                   grep -q "^input   gen/in.h5: 6 x 2000 x 5; chunks (1, 2000, 5); read with pread" stdout.txt || { cat stdout.txt; fail "input line"; }
                   grep -q "^output  out/cv.h5: uncompressed, 468.75 KiB" stdout.txt || { cat stdout.txt; fail "output line"; }
                   grep -q "^job     team/right double: overlapped pipeline" stdout.txt || { cat stdout.txt; fail "team's pipeline"; }
                   grep -q "would generate gen/in.h5" stderr.txt || { cat stderr.txt; fail "generation not mentioned"; }
                   [ ! -e gen ] && [ ! -e out ] || fail "--plan made $(ls -d gen out 2>/dev/null)"
                   # what the run would refuse, --plan refuses
                   touch earlier.h5
                   expect 2 "earlier.h5: output exists" -- "$cvest" run deck.toml --plan --set output.file=earlier.h5 ;;
  readme_deck)     # the deck README.md documents, every key in it, runs as written; the shipped decks plan
                   repo=$(cd "$(dirname "$0")/../.." && pwd)
                   awk '/^```toml$/ { on = 1; next } /^```$/ { on = 0 } on' "$repo/README.md" > deck.toml
                   grep -q '^\[report\]' deck.toml || fail "no deck block found in README.md"
                   "$cvest" run deck.toml > stdout.txt 2> stderr.txt || { cat stderr.txt; fail "README's deck failed"; }
                   [ -f cv.h5 ] && [ -f report.json ] && [ -f report.csv ] || fail "README's deck wrote $(ls)"
                   for shipped in seed layouts; do
                     "$cvest" run "$repo/inputs/$shipped.toml" --plan > stdout.txt 2> stderr.txt \
                       || { cat stderr.txt; fail "inputs/$shipped.toml --plan"; }
                   done
                   # inputs/full.toml's own comment: the same job smaller (smaller still here)
                   "$cvest" run "$repo/inputs/full.toml" --plan --set input.generate.ids=1000 \
                     --set input.file=../out/full/input-1k.h5 > stdout.txt 2> stderr.txt || { cat stderr.txt; fail "full.toml --set"; }
                   grep -q "200 x 1000 x 5" stdout.txt || { cat stdout.txt; fail "full.toml's override not taken"; }
                   # the deck `cvest run --help` shows runs, and the files it points to exist
                   "$cvest" run --help | awk '/^Every key/ { on = 0 } on { sub(/^  /, ""); print } /The smallest:$/ { on = 1 }' > help.toml
                   grep -q '^\[run\]' help.toml || fail "no deck in run --help"
                   rm -f cv.h5; "$cvest" run help.toml > stdout.txt 2> stderr.txt || { cat stderr.txt; fail "run --help's deck failed"; }
                   named=$("$cvest" run --help | grep -o '/[^ ]*/\(README.md\|inputs/\)')
                   [ -n "$named" ] || fail "run --help names no README.md or inputs/ folder to read"
                   for f in $named; do [ -e "$f" ] || fail "run --help names $f"; done
                   echo "ok [$case_name]" ;;
  success)         deck '[run]\nstrategy = ["flat", "per_date"]\nlayout = "all"\nmemory_budget = "1MiB"\nverify = true\n'
                   "$cvest" run deck.toml > stdout.txt 2> stderr.txt || { cat stderr.txt; fail "run failed"; }
                   [ -f out/cv.h5 ] || fail "no output"
                   grep -q "output verified" stdout.txt || fail "not verified"
                   "$cvest" verify out/cv.h5 --input in.h5 --deck deck.toml > /dev/null || fail "verify failed"
                   [ -z "$(find out -name '*.tmp*')" ] || fail "temporary files left"; echo "ok [$case_name]" ;;
  *) fail "unknown case" ;;
esac
