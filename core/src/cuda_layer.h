#pragma once
// Opening the CUDA layer's shared library, once (allocator.cpp's backend table
// calls it when the cuda slot is empty; loom/backend.h: load_cuda_layer).
#include <string>

namespace loom::detail {

// Tries once per process; later calls return the first outcome. Returns "" when the
// library was opened (or this build has none to open), else what was tried and why
// it failed.
const std::string& open_cuda_layer();

}  // namespace loom::detail
