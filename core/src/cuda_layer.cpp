// Opening the CUDA layer on first need (cuda_layer.h). Its library registers the
// cuda backend, its kernels and the nccl communicator from static initializers, so
// dlopen is all it takes; nothing here names a CUDA symbol.
#include "cuda_layer.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <vector>

namespace loom::detail {

const std::string& open_cuda_layer() {
  // Recursive: the layer's initializers, which run inside dlopen, may ask again.
  static std::recursive_mutex mutex;
  static bool tried = false;
  static std::string failure;
  std::lock_guard lock(mutex);
  if (tried) return failure;
  tried = true;
#ifdef LOOM_CUDA_LAYER
  // Beside this library (an installed package's lib folder), where the build put
  // it, then by name (LD_LIBRARY_PATH: scripts/gpu-bundle's copies on a GPU machine).
  std::vector<std::string> candidates;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&open_cuda_layer), &self) && self.dli_fname)
    candidates.push_back((std::filesystem::path(self.dli_fname).parent_path() / LOOM_CUDA_LAYER_NAME).string());
  candidates.push_back(LOOM_CUDA_LAYER);
  candidates.push_back(LOOM_CUDA_LAYER_NAME);
  for (const std::string& path : candidates) {
    const bool by_name = path.find('/') == std::string::npos;
    if (!by_name && !std::filesystem::exists(path)) continue;
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      failure.clear();
      return failure;
    }
    failure += (failure.empty() ? "" : "; ") + path + ": " + dlerror();
  }
#endif
  return failure;
}

}  // namespace loom::detail
