// The CUDA backend: what the CPU can check (launch and indexing helpers, the
// backend's registration and kernel coverage, --device parsing) in every build,
// and what needs a GPU (values against the CPU, dropout masks, the allocator's
// statistics) where one is present; without one those cases print
// "cuda: no device, N rows skipped" (ctest's cuda_gpu entry reports them skipped).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "loom/backend.h"
#include "loom/cuda/launch.h"
#include "loom/dist/communicator.h"
#include "loom/gradcheck.h"
#include "loom/kernel_table.h"
#include "loom/matmul_precision.h"
#include "loom/ops.h"

using namespace loom;

#define CHECK_ERROR(expr, text) CHECK_THROWS_WITH_AS(expr, doctest::Contains(text), Error)

namespace {
bool gpu_present() { return has_backend(DeviceType::cuda) && backend(DeviceType::cuda).device_count() > 0; }

bool skip_without_gpu(const char* what, size_t rows) {
  if (gpu_present()) return false;
  fmt::print("cuda: no device, {} rows skipped ({})\n", rows, what);
  return true;
}
}  // namespace

// First in this file (doctest runs a file's cases in order): nothing before it asked for a GPU.
TEST_CASE("the CUDA layer is opened on first need: not mapped until a GPU is asked for, registered then") {
  auto mapped = [](const char* library) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line))
      if (line.find(library) != std::string::npos) return true;
    return false;
  };
  if (!mapped("libloom_core")) return;  // a static build links the layer whole
  CHECK_FALSE(mapped("libloom_cuda"));
  CHECK_FALSE(mapped("libcublas"));
#ifdef LOOM_HAS_CUDA
  CHECK(has_backend(DeviceType::cuda));
  CHECK(mapped("libloom_cuda"));
#else
  std::string why = "unset";
  CHECK_FALSE(load_cuda_layer(&why));
  CHECK(why.empty());  // nothing to load in a build without CUDA
#endif
}

TEST_CASE("blocks_for covers every element and caps the grid") {
  CHECK(cuda::blocks_for(0) == 1);
  CHECK(cuda::blocks_for(1) == 1);
  CHECK(cuda::blocks_for(cuda::kThreads) == 1);
  CHECK(cuda::blocks_for(cuda::kThreads + 1) == 2);
  CHECK(cuda::blocks_for(1000, 128, 4) == 2);
  CHECK(cuda::blocks_for(int64_t{1} << 40) == cuda::kMaxBlocks);  // grid-stride loops do the rest
}

TEST_CASE("strided_offsets walks a view the way the CPU's strided_offset does") {
  // A transposed [3, 4] view and a broadcast (stride 0) operand over the same shape.
  cuda::Strided<2> s;
  s.ndim = 2;
  s.numel = 12;
  s.contiguous = false;
  s.sizes[0] = 3, s.sizes[1] = 4;
  s.strides[0][0] = 1, s.strides[0][1] = 3;  // transposed
  s.strides[1][0] = 0, s.strides[1][1] = 1;  // a row broadcast down
  for (int64_t i = 0; i < 12; ++i) {
    int64_t off[2];
    cuda::strided_offsets(s, i, off);
    CHECK(off[0] == strided_offset(i, {3, 4}, {1, 3}));
    CHECK(off[1] == strided_offset(i, {3, 4}, {0, 1}));
  }
  s.contiguous = true;
  int64_t off[2];
  cuda::strided_offsets(s, 7, off);
  CHECK((off[0] == 7 && off[1] == 7));
}

TEST_CASE("walk_offset and the dropout block layout") {
  const int64_t sizes[3] = {2, 3, 4}, strides[3] = {1, 8, 2};
  for (int64_t i = 0; i < 24; ++i)
    CHECK(cuda::walk_offset(i, 3, sizes, strides) == strided_offset(i, {2, 3, 4}, {1, 8, 2}));
  // Element i of a random tensor draws word i % 4 of Philox block i / 4 on every device.
  CHECK(cuda::philox_block_of(0) == 0);
  CHECK(cuda::philox_block_of(3) == 0);
  CHECK(cuda::philox_block_of(4) == 1);
  const int64_t sorted[] = {1, 1, 4, 4, 4, 7};
  std::vector<bool> starts;
  for (int64_t p = 0; p < 6; ++p) starts.push_back(cuda::first_in_segment(sorted, p));
  CHECK(starts == std::vector<bool>{true, false, true, false, false, true});
}

TEST_CASE("--device parsing: well-formed names, and a clear error where there is no GPU") {
  CHECK(parse_device("cpu") == kCPU);
  CHECK_ERROR(parse_device("gpu"), "device 'gpu': expected cpu, cuda, cuda:N or standin");
  CHECK_ERROR(parse_device("cuda:x"), "expected cpu, cuda, cuda:N or standin");
  if (!has_backend(DeviceType::cuda)) {
    CHECK_ERROR(parse_device("cuda"), "this build has no CUDA backend");
  } else if (!gpu_present()) {
    CHECK_ERROR(parse_device("cuda:0"), "device 'cuda:0': no CUDA GPU is available on this machine");
    CHECK_ERROR(Tensor::empty({2}, {f32, Device::cuda(0)}), "cuda: no GPU is available");
  } else {
    CHECK(parse_device("cuda") == Device::cuda(0));
    CHECK_ERROR(parse_device("cuda:99"), "CUDA GPU(s)");
  }
}

#ifdef LOOM_HAS_CUDA
TEST_CASE("a CUDA build registers the cuda backend and kernels for the training path, GPU or not") {
  REQUIRE(has_backend(DeviceType::cuda));
  CHECK_FALSE(backend(DeviceType::cuda).host_accessible());
  std::set<std::string> ops;
  for (const KernelKey& k : registered_kernels())
    if (k.device == DeviceType::cuda) ops.insert(k.op);
  for (const char* op : {"add", "mul", "exp", "copy", "where", "eq", "gelu", "gelu_backward"}) {
    INFO(op);
    CHECK(ops.count(op) == 1);
  }
  // The ops of a Transformer training step, float32 and float64.
  for (const char* op : {"add",
                         "copy",
                         "sum",
                         "matmul",
                         "softmax",
                         "softmax_backward",
                         "log_softmax",
                         "log_softmax_backward",
                         "layer_norm",
                         "layer_norm_backward",
                         "dropout",
                         "dropout_backward",
                         "relu_dropout",
                         "relu_dropout_backward",
                         "label_smoothed_cross_entropy",
                         "label_smoothed_cross_entropy_backward",
                         "embedding",
                         "embedding_backward",
                         "adam_step_",
                         "adam_steps_",
                         "any_non_finite"}) {
    for (DType t : {f32, f64}) {
      INFO(op, " ", dtype_name(t));
      CHECK(supports(op, Device::cuda(0), t));
    }
  }
}
#endif

TEST_CASE("on a GPU: every op's values and gradients on cuda:0 match the CPU's (the registry's device rows)") {
  size_t samples = 0;
  for (const OpInfo& op : registered_ops()) samples += op.samples.size();
  if (skip_without_gpu("the registry's device rows for cuda:0", samples)) return;
  for (const OpInfo& op : registered_ops()) {
    for (const CheckResult& r : check_op(op)) {
      if (r.check != "device") continue;
      INFO(op.name, " [", r.sample, "]: ", r.message);
      CHECK(r.passed);
    }
  }
}

TEST_CASE("on a GPU: dropout draws the CPU's masks, bit for bit") {
  if (skip_without_gpu("dropout masks on cuda:0", 2)) return;
  for (DType t : {f32, f64}) {
    Generator a(123), b(123);
    Tensor x = ones({1000, 37}, {t});
    Tensor on_cpu = dropout(x, 0.3, true, a);
    Tensor on_gpu = dropout(x.to(Device::cuda(0)), 0.3, true, b).to(kCPU);
    CHECK(on_cpu.to_vector<double>() == on_gpu.to_vector<double>());
  }
}

TEST_CASE("on a GPU: bfloat16 conversions round as the CPU's, bit for bit") {
  if (skip_without_gpu("bfloat16 conversions on cuda:0", 2)) return;
  Tensor x = randn({1000, 37}) * 1000.0;
  CHECK(to_dtype(x, bf16).to_vector<float>() == to_dtype(x.to(Device::cuda(0)), bf16).to(kCPU).to_vector<float>());
  Tensor h = to_dtype(x, bf16);
  CHECK(to_dtype(h, f64).to_vector<double>() == to_dtype(h.to(Device::cuda(0)), f64).to(kCPU).to_vector<double>());
}

TEST_CASE("on a GPU: bf16 products (the dtype and the float32 precision mode) are float32 sums of bf16 values") {
  if (skip_without_gpu("bf16 matmuls on cuda:0", 2)) return;
  Tensor a = randn({3, 40, 64}), b = randn({64, 50});
  Tensor a16 = to_dtype(a, bf16), b16 = to_dtype(b, bf16);
  Tensor exact = matmul(to_dtype(a16, f64), to_dtype(b16, f64));  // products of the rounded values
  Tensor magnitude = matmul(abs(to_dtype(a16, f64)), abs(to_dtype(b16, f64)));
  auto worst = [&](const Tensor& got) {
    std::vector<double> g = to_dtype(got.to(kCPU), f64).to_vector<double>(), w = exact.to_vector<double>(),
                        s = magnitude.to_vector<double>();
    double e = 0;
    for (size_t i = 0; i < g.size(); ++i) e = std::max(e, std::abs(g[i] - w[i]) / s[i]);
    return e;
  };
  const Device gpu = Device::cuda(0);
  // The dtype: float32 sums (k = 64 terms), rounded once to bfloat16.
  CHECK(worst(matmul(a16.to(gpu), b16.to(gpu))) <= 0x1p-8 + 64 * 0x1p-24);
  // The mode: the same sums, a float32 result.
  MatmulPrecisionGuard guard(MatmulPrecision::bf16);
  CHECK(worst(matmul(a.to(gpu), b.to(gpu))) <= 64 * 0x1p-24);
}

TEST_CASE("on a GPU: the caching allocator reuses blocks and empty_cache gives them back") {
  if (skip_without_gpu("allocator statistics on cuda:0", 1)) return;
  Allocator& a = allocator(Device::cuda(0));
  a.empty_cache();
  const auto before = a.stats();
  { Tensor t = Tensor::empty({1024, 1024}, {f32, Device::cuda(0)}); }
  { Tensor t = Tensor::empty({1024, 1024}, {f32, Device::cuda(0)}); }
  const auto after = a.stats();
  CHECK(after.system_allocations == before.system_allocations + 1);
  CHECK(after.cache_hits == before.cache_hits + 1);
  CHECK(after.bytes_cached >= size_t{4} << 20);
  a.empty_cache();
  CHECK(a.stats().bytes_cached == 0);
}

#ifdef LOOM_HAS_CUDA
TEST_CASE("the cuda kernel table covers every CPU kernel but the named gaps") {
  REQUIRE(has_backend(DeviceType::cuda));  // opens the CUDA layer, whose kernels register as it loads
  // (op, dtype) pairs the CPU has and cuda does not; a new CPU kernel without a
  // cuda twin fails here until it gets one or joins this list.
  const std::set<std::string> gaps = {};
  std::set<std::string> missing, cpu_ops, cuda_ops;
  size_t cpu_kernels = 0, cuda_kernels = 0;
  for (const KernelKey& k : registered_kernels()) {
    if (k.device == DeviceType::cpu) {
      cpu_ops.insert(k.op), ++cpu_kernels;
      if (!supports(k.op, Device::cuda(0), k.dtype)) missing.insert(k.op + " " + std::string(dtype_name(k.dtype)));
    }
    if (k.device == DeviceType::cuda) cuda_ops.insert(k.op), ++cuda_kernels;
  }
  for (const std::string& m : missing) MESSAGE("no cuda kernel: ", m);
  CHECK(missing == gaps);
  // One line for the CI log (scripts/test): the two tables side by side.
  std::printf(
      "cuda kernel table: %zu (op, dtype) kernels for %zu ops; cpu: %zu for %zu ops; cpu kernels without a cuda twin: "
      "%zu\n",
      cuda_kernels, cuda_ops.size(), cpu_kernels, cpu_ops.size(), missing.size());
}
#endif

// The "nccl" communicator: on the CPU, that it is registered and refuses to start
// without a GPU; on one GPU, every collective at world size 1 (more GPUs: mpirun).
TEST_CASE("the nccl communicator comes with the CUDA layer and needs a GPU") {
#ifdef LOOM_HAS_NCCL
  CHECK(dist::has_communicator_backend("nccl"));
  if (!gpu_present()) CHECK_ERROR(dist::make_communicator("nccl"), "the nccl backend needs a GPU");
#else
  CHECK_ERROR(dist::make_communicator("nccl"), "unknown backend 'nccl'");
#endif
}

TEST_CASE("on a GPU: the nccl communicator sums, scatters, gathers and broadcasts CUDA tensors") {
  if (!dist::has_communicator_backend("nccl")) return;
  if (skip_without_gpu("the nccl communicator on cuda:0", 6)) return;
  auto comm = dist::make_communicator("nccl");
  REQUIRE(comm->world_size() == 1);
  CHECK(comm->backend_name() == "nccl");
  const Device gpu = Device::cuda(0);
  CHECK(comm->device() == gpu);
  const Tensor x = randn({1000});
  for (dist::Reduce mode : {dist::Reduce::exact, dist::Reduce::fast}) {
    Tensor t = x.to(gpu) * 2.0;  // queued before the sum: it must wait for this kernel
    comm->all_reduce_sum(t, mode);
    CHECK(t.to(kCPU).to_vector<float>() == (x * 2.0).to_vector<float>());
    Tensor part = Tensor::empty({1000}, {DType::f32, gpu});
    comm->reduce_scatter_sum(t, part, mode);
    CHECK(part.to(kCPU).to_vector<float>() == (x * 2.0).to_vector<float>());
  }
  Tensor ids = arange(10).to(gpu), gathered = Tensor::empty({10}, {DType::i64, gpu});
  comm->all_gather(ids, gathered);
  CHECK(gathered.to(kCPU).to_vector<int64_t>() == arange(10).to_vector<int64_t>());
  comm->broadcast(ids, 0);
  CHECK(ids.to(kCPU).to_vector<int64_t>()[9] == 9);
  Tensor on_cpu = x.clone();
  CHECK_ERROR(comm->all_reduce_sum(on_cpu), "this communicator's tensors must be on cuda:0");
}
