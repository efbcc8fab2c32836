#include "loom/matmul_precision.h"

#include <atomic>

namespace loom {

namespace {
std::atomic<MatmulPrecision> g_matmul_precision{MatmulPrecision::float32};
}

MatmulPrecision matmul_precision() { return g_matmul_precision.load(std::memory_order_relaxed); }

MatmulPrecision set_matmul_precision(MatmulPrecision precision) { return g_matmul_precision.exchange(precision); }

const char* to_string(MatmulPrecision precision) { return precision == MatmulPrecision::bf16 ? "bf16" : "float32"; }

}  // namespace loom
