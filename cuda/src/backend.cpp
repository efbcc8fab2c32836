// The cuda Backend: device memory through the caching allocator (cudaMalloc
// only when no cached block fits), copies and fills on each device's stream.
// Registered at load time; core never sees a CUDA header.
#include "loom/backend.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

#include "fill.h"
#include "loom/cuda.h"
#include "loom/error.h"
#include "runtime.h"

namespace loom::cuda {

namespace {

// The caching policy (core's CachingAllocator) over cudaMalloc/cudaFree. Every
// kernel of a device runs on its one stream, so a block freed by one op and
// handed to the next is stream-ordered: the next op's kernels start after the
// last use of the block. cudaFree waits for the device, so releasing the cache
// never frees memory a queued kernel still reads.
class DeviceAllocator final : public CachingAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  // Not destroyed (see CudaBackend): the CUDA runtime may be gone at exit.

 protected:
  void* system_allocate(size_t bytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      return nullptr;  // the caching policy releases its cache and tries once more
    }
    LOOM_CUDA_CHECK(status);
    return ptr;
  }
  // Reached from Storage's destructor (which must not throw), also at exit after
  // the runtime has unloaded: a failure is reported on stderr, never thrown.
  void system_free(void* ptr) override {
    int previous = device_;
    cudaGetDevice(&previous);
    cudaSetDevice(device_);
    const cudaError_t status = cudaFree(ptr);
    cudaSetDevice(previous);
    if (status != cudaSuccess && status != cudaErrorCudartUnloading)
      std::fprintf(stderr, "loom: warning: cuda: cudaFree on cuda:%d failed: %s\n", device_,
                   cudaGetErrorString(status));
    cudaGetLastError();
  }

 private:
  int device_;
};

// A captured step as a CUDA graph (loom/capture.h): one launch replays its kernels,
// copies and fills. The memory it used stays its own (the allocator's private pool)
// until it is destroyed.
class CudaGraph final : public CapturedWork {
 public:
  CudaGraph(int device, cudaGraph_t graph) : device_(device), graph_(graph) {
    LOOM_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &nodes_));
    const cudaError_t status = cudaGraphInstantiate(&exec_, graph_, 0);
    if (status != cudaSuccess) {
      cudaGraphDestroy(graph_);
      fail_cuda(status, "cudaGraphInstantiate(&exec, graph, 0)");
    }
  }
  ~CudaGraph() override {
    DeviceGuard guard(device_);
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);  // then its pool (stream order: later work reuses the blocks after the last replay)
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay(uint64_t random_offset) override {
    DeviceGuard guard(device_);
    set_captured_random_base(device_, random_offset);
    LOOM_CUDA_CHECK(cudaGraphLaunch(exec_, stream(device_)));
  }
  size_t operations() const override { return nodes_; }

 private:
  int device_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

class CudaBackend final : public Backend {
 public:
  std::unique_ptr<CapturedWork> capture(int device_index, const std::function<void()>& work, uint64_t& pool) override {
    DeviceGuard guard(device_index);
    const cudaStream_t s = stream(device_index);
    // What is created on first use is created now: no cudaMalloc or handle inside the capture
    // but the allocator's own (legal while capturing, and from the private pool).
    cublas(device_index);
    cublas_lt(device_index);
    lt_workspace(device_index);
    set_captured_random_base(device_index, 0);
    Allocator& pool_owner = allocator(device_index);
    pool = pool_owner.begin_pool(pool);
    // Thread-local mode: this thread may not call what is unsafe while capturing
    // (a synchronize, a copy to the host), and other threads are left alone.
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      work();
    } catch (...) {
      cudaStreamEndCapture(s, &graph);  // ends the (invalidated) capture
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      pool_owner.end_pool();
      throw;
    }
    const cudaError_t ended = cudaStreamEndCapture(s, &graph);
    pool_owner.end_pool();
    if (ended != cudaSuccess) {
      fail(
          "capture: cudaStreamEndCapture failed: {} ({}): the captured work waited for the device, copied to or "
          "from the host, or used another stream",
          cudaGetErrorString(ended), cudaGetErrorName(ended));
    }
    return std::make_unique<CudaGraph>(device_index, graph);
  }

  Allocator& allocator(int device_index) override {
    std::lock_guard<std::mutex> lock(mutex_);
    check_device(device_index);
    if (allocators_.empty()) allocators_.resize(static_cast<size_t>(cuda::device_count()));
    auto& slot = allocators_[static_cast<size_t>(device_index)];
    if (!slot) slot = std::make_unique<DeviceAllocator>(device_index);
    return *slot;
  }

  void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) override {
    if (bytes == 0) return;
    check_capturable_copy(dst_device.is_cuda() ? dst_device : src_device, src_device, dst_device, bytes);
    if (src_device.is_cuda() && dst_device.is_cuda() && src_device.index != dst_device.index) {
      // Between two GPUs: the source's pending work first, then a peer copy.
      synchronize(src_device.index);
      DeviceGuard guard(dst_device.index);
      LOOM_CUDA_CHECK(
          cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, bytes, stream(dst_device.index)));
      return;
    }
    const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
    DeviceGuard guard(device);
    cudaMemcpyKind kind = dst_device.is_cuda()
                              ? (src_device.is_cuda() ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                              : cudaMemcpyDeviceToHost;
    // Host to device from pageable memory returns once the source is staged, so
    // the host buffer may be freed right after; device to host waits, so the
    // host reads the finished value.
    LOOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream(device)));
    if (kind == cudaMemcpyDeviceToHost) LOOM_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
  }

  void fill(void* dst, Device device, const void* value, size_t element_bytes, size_t count) override {
    DeviceGuard guard(device.index);
    launch_fill(dst, value, element_bytes, count, stream(device.index));
  }

  void synchronize(int device_index) override {
    DeviceGuard guard(device_index);
    LOOM_CUDA_CHECK(cudaStreamSynchronize(stream(device_index)));
  }

  int device_count() const override { return cuda::device_count(); }
  bool host_accessible() const override { return false; }

 private:
  static void check_device(int index) {
    LOOM_CHECK(cuda::device_count() > 0, "cuda: no GPU is available (cudaGetDeviceCount found none or failed)");
    LOOM_CHECK(index >= 0 && index < cuda::device_count(), "cuda: device cuda:{} does not exist ({} GPU(s) visible)",
               index, cuda::device_count());
  }

  std::mutex mutex_;
  std::vector<std::unique_ptr<DeviceAllocator>> allocators_;
};

// Registered when the library loads; never destroyed (storages may outlive main).
const bool g_registered = [] {
  register_backend(DeviceType::cuda, new CudaBackend);
  return true;
}();

}  // namespace

}  // namespace loom::cuda
