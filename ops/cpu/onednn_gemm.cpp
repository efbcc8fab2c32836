// oneDNN matmul with every size and stride given at run time, so one primitive per
// operand type and pair of transpose flags serves all shapes (oneDNN picks its jit
// gemms for these; bf16 measured at 400-1500 GFLOP/s on 2 cores, against ~270 for sgemm).
#include "onednn_gemm.h"

#include <dnnl.hpp>

#include <signal.h>

#include <array>
#include <mutex>
#include <vector>

namespace loom::onednn {

namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;
constexpr int64_t kRuntime = DNNL_RUNTIME_DIM_VAL;

const dnnl::engine& engine() {
  static const dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
  return cpu;
}

// Row-major [rows, cols] with row stride ld, or its transpose (stored [cols, rows]).
dims strides_of(bool trans, int64_t ld) { return trans ? dims{1, ld} : dims{ld, 1}; }

struct Gemm {
  dnnl::matmul::primitive_desc desc;
  dnnl::matmul primitive;
};

// One primitive per operand type and pair of transpose flags, made on first use.
const Gemm& gemm_for(dt type, bool trans_a, bool trans_b) {
  static std::array<std::once_flag, 8> once;
  static std::array<Gemm, 8> gemms;
  const int which = 4 * (type == dt::bf16) + 2 * trans_a + trans_b;
  std::call_once(once[which], [&] {
    const dims any{kRuntime, kRuntime};
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // each call brings its own
    dnnl::matmul::desc op({any, type, strides_of(trans_a, kRuntime)}, {any, type, strides_of(trans_b, kRuntime)},
                          {any, dt::f32, dims{kRuntime, 1}});
    dnnl::matmul::primitive_desc desc(op, attr, engine());
    gemms[which] = {desc, dnnl::matmul(desc)};
  });
  return gemms[which];
}

// Debian's oneDNN (2.6) runs its jit float32 and bf16 gemm kernels with rsp pointed
// at a heap workspace, so a signal handled on this thread meanwhile writes its frame
// into the heap: Ctrl-C in Python, a profiler's SIGPROF (oneDNN issue #4845, fixed
// in 3.x by uxlfoundation/oneDNN#4855). Asynchronous signals wait while a gemm runs;
// one that arrives then is handled as soon as it returns. Faults stay unblocked.
class AsyncSignalsHeld {
 public:
  AsyncSignalsHeld() {
    static const sigset_t asynchronous = [] {
      sigset_t all;
      sigfillset(&all);
      for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) sigdelset(&all, fault);
      return all;
    }();
    pthread_sigmask(SIG_BLOCK, &asynchronous, &previous_);
  }
  ~AsyncSignalsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  AsyncSignalsHeld(const AsyncSignalsHeld&) = delete;
  AsyncSignalsHeld& operator=(const AsyncSignalsHeld&) = delete;

 private:
  sigset_t previous_;
};

void run_gemm(dt type, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
              const void* b, int64_t ldb, float* c, int64_t ldc) {
  const Gemm& gemm = gemm_for(type, trans_a, trans_b);
  thread_local dnnl::stream stream(engine());
  thread_local std::vector<char> scratchpad;
  scratchpad.resize(std::max<size_t>(gemm.desc.scratchpad_desc().get_size(), 1));
  auto memory = [](dims shape, dt t, dims strides, const void* data) {
    return dnnl::memory({shape, t, strides}, engine(), const_cast<void*>(data));
  };
  AsyncSignalsHeld held;
  gemm.primitive.execute(
      stream, {{DNNL_ARG_SRC, memory({m, k}, type, strides_of(trans_a, lda), a)},
               {DNNL_ARG_WEIGHTS, memory({k, n}, type, strides_of(trans_b, ldb), b)},
               {DNNL_ARG_DST, memory({m, n}, dt::f32, {ldc, 1}, c)},
               {DNNL_ARG_SCRATCHPAD, dnnl::memory(gemm.desc.scratchpad_desc(), engine(), scratchpad.data())}});
  stream.wait();
}

}  // namespace

namespace {
bool has_isa(dnnl::cpu_isa wanted) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);  // nested bit sets
}
}  // namespace

bool bf16_available() {
  static const bool available = has_isa(dnnl::cpu_isa::avx512_core_bf16);
  return available;
}

bool f32_avx512_available() {
  static const bool available = has_isa(dnnl::cpu_isa::avx512_core);
  return available;
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t lda,
               const bfloat16* b, int64_t ldb, float* c, int64_t ldc) {
  run_gemm(dt::bf16, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
              int64_t ldb, float* c, int64_t ldc) {
  run_gemm(dt::f32, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
}

}  // namespace loom::onednn

namespace loom {
bool cpu_bf16_matmul_available() { return onednn::bf16_available(); }
}  // namespace loom
