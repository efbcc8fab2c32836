#include "runtime.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "fill.h"
#include "loom/error.h"

namespace loom::cuda {

void fail_cuda(cudaError_t status, const char* call) {
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  fail("cuda: {} failed: {} ({})", call, cudaGetErrorString(status), cudaGetErrorName(status));
}

void fail_cublas(cublasStatus_t status, const char* call) {
  fail("cuda: {} failed: {} ({})", call, cublasGetStatusString(status), cublasGetStatusName(status));
}

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

DeviceGuard::DeviceGuard(int device) {
  LOOM_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) LOOM_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int now = previous_;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

namespace {
struct PerDevice {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublas_lt = nullptr;
  Workspace lt_workspace;
  uint64_t* random_base = nullptr;  // made before a capture begins (no cudaMalloc inside one)
};

std::mutex g_mutex;
std::vector<PerDevice>& per_device() {
  static auto* devices = new std::vector<PerDevice>;  // never destroyed: storages may outlive main
  return *devices;
}

PerDevice& device_state(int device) {
  LOOM_CHECK(device >= 0 && device < device_count(), "cuda: device cuda:{} does not exist ({} GPU(s) visible)", device,
             device_count());
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& all = per_device();
  if (all.empty()) all.resize(static_cast<size_t>(device_count()));
  return all[static_cast<size_t>(device)];
}

bool initial_tf32() {
  const char* env = std::getenv("LOOM_CUDA_TF32");
  return env && std::strcmp(env, "1") == 0;
}
bool g_tf32 = initial_tf32();
}  // namespace

cudaStream_t stream(int device) {
  PerDevice& d = device_state(device);
  if (!d.stream) {
    DeviceGuard guard(device);
    LOOM_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  }
  return d.stream;
}

cublasHandle_t cublas(int device) {
  PerDevice& d = device_state(device);
  if (!d.cublas) {
    DeviceGuard guard(device);
    LOOM_CUBLAS_CHECK(cublasCreate(&d.cublas));
    LOOM_CUBLAS_CHECK(cublasSetStream(d.cublas, stream(device)));
  }
  return d.cublas;
}

cublasLtHandle_t cublas_lt(int device) {
  PerDevice& d = device_state(device);
  if (!d.cublas_lt) {
    DeviceGuard guard(device);
    LOOM_CUBLAS_CHECK(cublasLtCreate(&d.cublas_lt));
  }
  return d.cublas_lt;
}

// 32 MiB: what PyTorch gives cuBLASLt on Hopper; its larger tiles' split-k needs it.
Workspace lt_workspace(int device) {
  constexpr size_t kBytes = size_t{32} << 20;
  PerDevice& d = device_state(device);
  if (!d.lt_workspace.data) {
    DeviceGuard guard(device);
    LOOM_CUDA_CHECK(cudaMalloc(&d.lt_workspace.data, kBytes));
    d.lt_workspace.bytes = kBytes;
  }
  return d.lt_workspace;
}

bool stream_capturing(int device) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  LOOM_CUDA_CHECK(cudaStreamIsCapturing(stream(device), &status));
  return status == cudaStreamCaptureStatusActive;
}

namespace {
uint64_t* random_base_word(int device) {
  PerDevice& d = device_state(device);
  if (!d.random_base) {
    DeviceGuard guard(device);
    LOOM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d.random_base), sizeof(uint64_t)));
    LOOM_CUDA_CHECK(cudaMemsetAsync(d.random_base, 0, sizeof(uint64_t), stream(device)));
  }
  return d.random_base;
}
}  // namespace

const uint64_t* captured_random_base(int device) {
  return stream_capturing(device) ? random_base_word(device) : nullptr;
}

void set_captured_random_base(int device, uint64_t offset) {
  DeviceGuard guard(device);
  launch_fill(random_base_word(device), &offset, sizeof(offset), 1, stream(device));
}

void fail_kernel(const char* message) { fail("cuda: {}", message); }

void check_kernel_launch(const char* kernel) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    fail("cuda: launching {} failed: {} ({})", kernel, cudaGetErrorString(status), cudaGetErrorName(status));
}

bool tf32_enabled() { return g_tf32; }
void set_tf32_enabled(bool enabled) { g_tf32 = enabled; }

}  // namespace loom::cuda
