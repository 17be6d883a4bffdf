#!/usr/bin/env bash
# Lab bench for flat on LayoutRight: walks of one cube, each x a streaming
# copy of its bytes timed beside it in the same process (flat_walks.cpp says
# what each variant is). Threads placed as cvest places them.
#   bench/flat_walks/run.sh [DATES IDS REPEATS VARIANT...]
#   default: 20 2000000 41 tile:1024 tile:4096 copywalk:1024 mtiny:1024 pair:1024:4
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="${TMPDIR:-/tmp}/cvest-flat-walks-$(id -u)"
mkdir -p "$out"
g++ -std=c++17 -O3 -fopenmp -fno-omit-frame-pointer -Wall -o "$out/flat_walks" "$here/flat_walks.cpp"
[ $# -gt 0 ] || set -- 20 2000000 41 tile:1024 tile:4096 copywalk:1024 mtiny:1024 pair:1024:4
OMP_PROC_BIND="${OMP_PROC_BIND:-spread}" OMP_PLACES="${OMP_PLACES:-threads}" exec "$out/flat_walks" "$@"
