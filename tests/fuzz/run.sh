#!/usr/bin/env bash
# Builds a libFuzzer harness with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer, -DNDEBUG as cvest's Release build) and runs it
# for SECONDS on a fresh copy of its seed corpus. Any crash, sanitizer
# report, uncaught exception, leak or hang (10 s a deck, 30 s a file) fails; the input
# that did it is left in WORK and printed. The mutations follow a fixed seed
# (CVEST_FUZZ_SEED, default 1; 0 draws one), so a CI run is repeatable: a
# crash it found is found again; longer runs with other seeds explore more.
# Memory: 2 GiB resident at most, and a single allocation over 2 GiB fails
# (returns null, as a production malloc may: ASan's max_allocation_size_mb;
# libFuzzer's own -malloc_limit_mb would call it a crash instead, as seed 2
# did): on a damaged superblock HDF5 1.10.8 allocates 4 GiB inside H5Fopen
# and zeroes all of it, which under an 8 GiB allocation limit ran past the
# resident limit or the timeout.
#   run.sh SOURCE_DIR WORK deck|input [SECONDS]
# deck:  the deck loader (toml++, cvest's checks, --set); seeds in
#        tests/fuzz/corpus/deck.
# input: opening an input file (HDF5's metadata, cvest's checks and
#        readers); seeds made by input_seeds.py with h5py.
set -euo pipefail
src=$1; work=$2; target=$3; seconds=${4:-45}
command -v clang++ > /dev/null || { echo "fuzz: clang++ not found (scripts/setup installs clang)" >&2; exit 1; }
mkdir -p "$work"
flags=(-std=c++17 -O1 -g -DNDEBUG -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$src")
case $target in
  deck)
    sources=("$src/app/Deck.cpp" "$src/app/AsciiToml.cpp" "$src/core/Names.cpp" "$src/core/Strategy.cpp" "$src/core/Plan.cpp")
    headers=("$src/app/Deck.hpp" "$src/app/AsciiToml.hpp" "$src/core/Plan.hpp" "$src/core/Names.hpp")
    libs=(-lfmt)
    what="deck loader"; unit="decks"; timeout=10 ;;
  input)
    hdf5_include=$(pkg-config --cflags hdf5-serial 2> /dev/null || echo -I/usr/include/hdf5/serial)
    hdf5_libs=$(pkg-config --libs hdf5-serial 2> /dev/null || echo "-L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5")
    sources=("$src/io/input/Input.cpp" "$src/io/hdf5/ChunkFiles.cpp" "$src/io/cube/RawCube.cpp" "$src/io/cube/ChunkedCube.cpp" "$src/io/cube/HeldChunks.cpp" "$src/io/cube/CubeReader.cpp" "$src/io/cube/CubeFile.cpp" "$src"/io/codecs/*.cpp "$src/io/os/DirectIo.cpp" "$src/io/os/ReadWriteAt.cpp" "$src/io/os/DirectWriter.cpp" "$src/io/os/DirectReader.cpp" "$src/io/hdf5/Hdf5.cpp" "$src/io/hdf5/MetadataSandbox.cpp" "$src/io/os/Faults.cpp" "$src/io/os/TempFiles.cpp" "$src/core/Interrupt.cpp" "$src/core/Names.cpp"
             "$src/core/Plan.cpp")
    headers=("$src/io/input/Input.hpp" "$src/io/hdf5/ChunkFiles.hpp" "$src/io/cube/RawCube.hpp" "$src/io/cube/ChunkedCube.hpp" "$src/io/cube/HeldChunks.hpp" "$src/io/cube/CubeReader.hpp" "$src/io/cube/CubeFile.hpp" "$src"/io/codecs/*.hpp "$src/io/os/DirectIo.hpp" "$src/io/os/ReadWriteAt.hpp" "$src/io/os/DirectReader.hpp" "$src/io/os/DirectWriter.hpp" "$src/io/hdf5/Hdf5.hpp" "$src/io/hdf5/MetadataSandbox.hpp" "$src/core/Plan.hpp" "$src/core/Names.hpp")
    flags+=(-fopenmp $hdf5_include)
    flags+=($(pkg-config --cflags liblzf libdeflate blosc liblz4 zlib))
    libs=($hdf5_libs -lhdf5_hl $(pkg-config --libs liblzf libdeflate blosc liblz4 zlib) -lfmt)
    # 30 s: on some damaged superblocks HDF5 1.10.8 allocates and zeroes
    # 4 GiB inside H5Fopen (14 s natively here), and each file is opened
    # twice (cvest's metadata reader, then the harness): one such file took
    # 3.9 s here and over 10 s in a loaded CI run. A hang still fails.
    what="input files"; unit="files"; timeout=30 ;;
  *) echo "fuzz: unknown target '$target' (deck or input)" >&2; exit 2 ;;
esac
harness=$src/tests/fuzz/fuzz_$target.cpp
binary=$work/fuzz_$target
newest=$(ls -t "${sources[@]}" "${headers[@]}" "$harness" | head -1)
if [ ! -x "$binary" ] || [ "$newest" -nt "$binary" ]; then
  clang++ "${flags[@]}" "${sources[@]}" "$harness" "${libs[@]}" -o "$binary"
fi
corpus=$work/corpus-$target
rm -rf "$corpus"
if [ "$target" = input ]; then
  /usr/bin/python3 "$src/tests/fuzz/input_seeds.py" "$corpus"
else
  cp -r "$src/tests/fuzz/corpus/deck" "$corpus"
fi
cd "$work"
rm -f crash-* leak-* timeout-* oom-*
# The harness's files go in a folder of this run's own, removed after (not
# /tmp: names there could be planted, and were left behind).
scratch=$work/scratch-$target
rm -rf "$scratch" && mkdir -m 700 "$scratch"
trap 'rm -rf "$scratch"' EXIT
log=fuzz-$target.log
if ! TMPDIR=$scratch OMP_NUM_THREADS=2 LSAN_OPTIONS=suppressions=$src/tests/fuzz/hdf5-leaks.supp:print_suppressions=0 \
     ASAN_OPTIONS=allocator_may_return_null=1:max_allocation_size_mb=2048:suppressions=$src/tests/fuzz/hdf5-asan.supp "$binary" -seed="${CVEST_FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb=2048 -malloc_limit_mb=65536 -print_final_stats=1 "$corpus" > "$log" 2>&1; then
  grep -E "ERROR|runtime error|Test unit written|uncaught|SUMMARY|#0|#1 |#2 |#3 " "$log" | head -30
  for f in crash-* leak-* timeout-* oom-*; do [ -f "$f" ] && { echo "input $work/$f:"; od -c "$f" | head -20; }; done
  exit 1
fi
executed=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
# A harness that ran nothing (a build or corpus fault) has found nothing either.
[ "${executed:-0}" -gt 0 ] || { tail -20 "$log"; echo "fuzz: $what: no input was executed" >&2; exit 1; }
echo "fuzz: $what: $executed $unit in ${seconds} s, no crash"
