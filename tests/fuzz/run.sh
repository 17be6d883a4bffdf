#!/usr/bin/env bash
# Builds the libFuzzer harness for the deck loader with clang (AddressSanitizer
# and UndefinedBehaviorSanitizer, -DNDEBUG as cvest's Release build) and runs
# it for SECONDS on a copy of the corpus in tests/fuzz/corpus/deck. Any
# crash, sanitizer report, uncaught exception, leak or hang (10 s an input)
# fails; the input that did it is left in WORK and printed.
#   run.sh SOURCE_DIR WORK [SECONDS]
set -euo pipefail
src=$1; work=$2; seconds=${3:-45}
command -v clang++ > /dev/null || { echo "fuzz: clang++ not found (scripts/setup installs clang)" >&2; exit 1; }
mkdir -p "$work"
flags=(-std=c++17 -O1 -g -DNDEBUG -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$src")
sources=("$src/app/Deck.cpp" "$src/core/Names.cpp" "$src/core/Strategy.cpp" "$src/core/Plan.cpp" "$src/tests/fuzz/fuzz_deck.cpp")
newest=$(ls -t "${sources[@]}" "$src/app/Deck.hpp" "$src/core/Plan.hpp" "$src/core/Names.hpp" | head -1)
if [ ! -x "$work/fuzz_deck" ] || [ "$newest" -nt "$work/fuzz_deck" ]; then
  clang++ "${flags[@]}" "${sources[@]}" -lfmt -o "$work/fuzz_deck"
fi
rm -rf "$work/corpus" && cp -r "$src/tests/fuzz/corpus/deck" "$work/corpus"
cd "$work"
rm -f crash-* leak-* timeout-* oom-*
if ! ./fuzz_deck -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 corpus > fuzz.log 2>&1; then
  grep -E "ERROR|runtime error|Test unit written|uncaught|SUMMARY" fuzz.log | head -20
  for f in crash-* leak-* timeout-* oom-*; do [ -f "$f" ] && { echo "input $work/$f:"; od -c "$f" | head -20; }; done
  exit 1
fi
echo "fuzz: deck loader: $(grep -o 'stat::number_of_executed_units: *[0-9]*' fuzz.log | grep -o '[0-9]*$') executions in ${seconds} s, no crash"
