#!/usr/bin/env bash
# OpenBLAS sgemm vs oneDNN matmul (float32, bf16) on the Transformer's shapes,
# and oneDNN float32's bits for 1 vs N threads. Usage: bench/matmul_libs.sh [threads]
# Ends with bench/quiet.sh's check (exit code 3 when the machine was not quiet).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -O2 -std=c++20 -fopenmp bench/matmul_libs.cpp -o "$out/matmul_libs" -ldnnl -lopenblas
source bench/quiet.sh
quiet_start
OMP_NUM_THREADS=${1:-2} GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000} "$out/matmul_libs"
quiet_end
