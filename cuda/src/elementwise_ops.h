#pragma once
// The CUDA side of the elementwise ops of loom/kernels/elementwise_ops.h (the one
// list every backend reads): elementwise.cu turns each line into a kernel,
// elementwise.cpp into a registration.
#include "loom/cuda/launch.h"
#include "loom/kernels/elementwise_ops.h"
#include "type_lists.h"

#include <cuda_runtime_api.h>

namespace loom::cuda {

#define LOOM_CUDA_ENUMERATOR(name, functor, types) name,
enum class UnaryOp { LOOM_UNARY_OPS(LOOM_CUDA_ENUMERATOR) };
enum class BinaryOp { LOOM_BINARY_OPS(LOOM_CUDA_ENUMERATOR) LOOM_COMPARE_OPS(LOOM_CUDA_ENUMERATOR) };
#undef LOOM_CUDA_ENUMERATOR

// Pointers are each operand's element 0; s walks all of them over out's shape.
template <typename T>
void launch_unary(UnaryOp op, const Strided<2>& s, void* out, const void* x, double a, double b, cudaStream_t stream);
template <typename T>
void launch_binary(BinaryOp op, const Strided<3>& s, void* out, const void* a, const void* b, cudaStream_t stream);
template <typename T>
void launch_where(const Strided<4>& s, void* out, const void* condition, const void* a, const void* b,
                  cudaStream_t stream);
// out (element type `to`) = x (From) converted.
template <typename From>
void launch_cast(ElementType to, const Strided<2>& s, void* out, const void* x, cudaStream_t stream);

}  // namespace loom::cuda
