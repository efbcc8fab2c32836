#include <cstdint>
#include <cstring>

#include "fill.h"
#include "kernel_errors.h"
#include "loom/cuda/launch.h"

namespace loom::cuda {

namespace {
template <typename Word>
__global__ void fill_kernel(Word* dst, Word value, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <typename Word>
void fill_words(void* dst, const void* value, size_t count, cudaStream_t stream) {
  Word word;
  std::memcpy(&word, value, sizeof(Word));
  const int64_t n = static_cast<int64_t>(count);
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<Word*>(dst), word, n);
  check_kernel_launch("fill_kernel");
}
}  // namespace

void launch_fill(void* dst, const void* value, size_t element_bytes, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned char* bytes = static_cast<const unsigned char*>(value);
  bool zero = true;
  for (size_t b = 0; b < element_bytes; ++b) zero = zero && bytes[b] == 0;
  if (zero) {
    check_kernel_call(cudaMemsetAsync(dst, 0, element_bytes * count, stream), "cudaMemsetAsync");
    return;
  }
  switch (element_bytes) {
    case 1: return fill_words<uint8_t>(dst, value, count, stream);
    case 2: return fill_words<uint16_t>(dst, value, count, stream);
    case 4: return fill_words<uint32_t>(dst, value, count, stream);
    case 8: return fill_words<uint64_t>(dst, value, count, stream);
  }
  fail_kernel("fill: elements of this size are not supported on cuda");
}

}  // namespace loom::cuda
