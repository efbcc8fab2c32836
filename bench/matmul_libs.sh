#!/bin/sh
# OpenBLAS sgemm vs oneDNN matmul (float32, bf16) on the Transformer's shapes,
# and oneDNN float32's bits for 1 vs N threads. Usage: bench/matmul_libs.sh [threads]
set -e
out=$(mktemp -d)
g++ -O2 -std=c++20 -fopenmp "$(dirname "$0")/matmul_libs.cpp" -o "$out/matmul_libs" -ldnnl -lopenblas
OMP_NUM_THREADS=${1:-2} GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000} "$out/matmul_libs"
rm -rf "$out"
