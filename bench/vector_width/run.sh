#!/usr/bin/env bash
# Lab bench: flat/right's walk in 16- and 32-byte vectors, kernel against its
# copy (vector_width.cpp says why). Threads placed as cvest places them.
#   bench/vector_width/run.sh [IDS STEP REPEATS]    default: 400000 2 10
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="${TMPDIR:-/tmp}/cvest-vector-width-$(id -u)"
mkdir -p "$out"
g++ -std=c++17 -O2 -fopenmp -Wall -o "$out/vector_width" "$here/vector_width.cpp"
[ $# -gt 0 ] || set -- 400000 2 10
OMP_PROC_BIND="${OMP_PROC_BIND:-spread}" OMP_PLACES="${OMP_PLACES:-threads}" exec "$out/vector_width" "$@"
