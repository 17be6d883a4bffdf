#!/usr/bin/env bash
# cvest under a Kokkos Tools library (kokkos_tools_probe.cpp): every strategy's
# kernel reaches the tool under its label, a tool never sees two kernels in
# flight at once (the per-thread pipeline launches one at a time when a tool
# is loaded), regions balance, and loading a tool does not change which
# pipeline runs or what it writes.
#   kokkos_tools.sh CVEST_BINARY PROBE_LIBRARY
set -uo pipefail
cvest="$1"; probe="$2"
work=$(mktemp -d /tmp/cvest-tools-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMP_PROC_BIND=spread OMP_PLACES=threads
fail() { echo "FAIL: $*" >&2; exit 1; }

"$cvest" generate --dates 20 --ids 30000 --cols 5 --out in.h5 > /dev/null || fail "generate failed"
cat > deck.toml <<'DECK'
[input]
file = "in.h5"
[output]
file = "cv.h5"
[run]
strategy = "all"
layout = ["right", "left"]
memory_budget = "16MiB"
max_block = "256KiB"
verify = true
[report]
csv = "report.csv"
DECK

"$cvest" run deck.toml > plain.txt 2>&1 || { cat plain.txt; fail "run without a tool failed"; }
mv report.csv plain.csv; rm cv.h5
# Both variables (3.x reads KOKKOS_PROFILE_LIBRARY, 4.x KOKKOS_TOOLS_LIBS).
KOKKOS_PROFILE_LIBRARY="$probe" KOKKOS_TOOLS_LIBS="$probe" CVEST_TOOLS_PROBE_OUT="$work/probe.txt" \
  "$cvest" run deck.toml > tool.txt 2>&1 || { cat tool.txt; fail "run with a tool failed"; }
[ -s probe.txt ] || { cat tool.txt; fail "the tool was not loaded (no probe.txt)"; }
cat probe.txt

value() { awk -v k="$1" '$1 == k { print $2 }' probe.txt; }
[ "$(value max_in_flight)" = 1 ] || fail "a tool saw $(value max_in_flight) kernels in flight at once"
[ "$(value interleaved)" = 0 ] || fail "$(value interleaved) tool callbacks interleaved between threads"
[ "$(value unbalanced_regions)" = 0 ] || fail "$(value unbalanced_regions) unbalanced region pushes/pops"
for s in one_worker per_date per_id elementwise flat team; do
  grep -q "^kernel cvest::kernel::$s [0-9]" probe.txt || fail "no kernel labelled cvest::kernel::$s"
done
# kokkos_kernels calls KokkosBlas::mult, whose kernels carry Kokkos Kernels'
# labels; cvest names the call with a region around it.
grep -q "^region cvest::kernel::kokkos_kernels [0-9]" probe.txt || fail "no region cvest::kernel::kokkos_kernels"
grep -q "^kernel KokkosBlas::" probe.txt || fail "no KokkosBlas kernel"

# Same pipeline per job with and without the tool (the CSV's pipeline column).
column() { awk -F, -v name=pipeline 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next } { print $1, $2, $c }' "$1"; }
[ -n "$(column plain.csv)" ] || fail "no pipeline column in report.csv"
diff <(column plain.csv) <(column report.csv) || fail "the pipeline changed with a tool loaded"
# Per-thread wherever the build's default space (from the configuration, not
# from cvest info) is OpenMP with two threads or more.
[ -n "${CVEST_DEFAULT_SPACE:-}" ] || fail "CVEST_DEFAULT_SPACE unset (ctest sets it from the configuration)"
if [ "$CVEST_DEFAULT_SPACE" = OPENMP ] && [ "${OMP_NUM_THREADS:-$(nproc)}" -ge 2 ]; then
  grep -q "per_thread" report.csv || fail "no per_thread job on a multi-threaded OpenMP build"
  grep -q "^kernel cvest::per_thread::transpose_in [0-9]" probe.txt || fail "no per_thread transpose reached the tool"
fi
grep -q "output verified" tool.txt || fail "output not verified"
echo "ok: $(grep -c '^\(kernel\|region\) cvest::kernel::' probe.txt) strategies labelled, one kernel in flight at a time, pipelines: $(column report.csv | awk '{print $3}' | sort | uniq -c | tr -s ' \n' ' ')"
