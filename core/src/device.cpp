#include "loom/device.h"

#include "loom/backend.h"
#include "loom/error.h"
#include "loom/standin.h"

namespace loom {

Device parse_device(const std::string& name) {
  if (name == "cpu") return kCPU;
  if (name == "standin") {
    enable_standin_device();
    return Device::standin(0);
  }
  int index = 0;
  if (name != "cuda") {
    const bool well_formed = name.rfind("cuda:", 0) == 0 && name.size() > 5 && name.size() <= 8 &&
                             name.find_first_not_of("0123456789", 5) == std::string::npos;
    LOOM_CHECK(well_formed, "device '{}': expected cpu, cuda, cuda:N or standin", name);
    index = std::stoi(name.substr(5));
  }
  std::string why;
  LOOM_CHECK(load_cuda_layer(&why), "device '{}': {}", name,
             why.empty() ? "this build has no CUDA backend (nvcc was not found when it was configured)"
                         : "the CUDA layer could not be loaded: " + why);
  const int count = backend(DeviceType::cuda).device_count();
  LOOM_CHECK(count > 0, "device '{}': no CUDA GPU is available on this machine (no device, or no driver)", name);
  LOOM_CHECK(index < count, "device '{}': this machine has {} CUDA GPU(s), cuda:0 to cuda:{}", name, count, count - 1);
  return Device::cuda(index);
}

}  // namespace loom
