#!/usr/bin/env bash
# Lab bench: a streaming copy's speed against the register its loads take
# as their base (rbp_loads.cpp says why). Threads placed as cvest places them.
#   bench/rbp_loads/run.sh [GB REPEATS]    default: 0.8 7
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="${TMPDIR:-/tmp}/cvest-rbp-loads-$(id -u)"
mkdir -p "$out"
g++ -std=c++17 -O2 -fopenmp -Wall -o "$out/rbp_loads" "$here/rbp_loads.cpp"
[ $# -gt 0 ] || set -- 0.8 7
OMP_PROC_BIND="${OMP_PROC_BIND:-spread}" OMP_PLACES="${OMP_PLACES:-threads}" exec "$out/rbp_loads" "$@"
