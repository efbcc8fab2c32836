// OpenBLAS sgemm against oneDNN's matmul (float32 and bf16 inputs with float32
// output) on the Transformer's shapes, and whether oneDNN's float32 result has
// the same bits for 1 and N threads. Built and run by bench/matmul_libs.sh, and by
// bench/step.sh for its last line, the gemm ceilings: the median over the table's
// shapes of the faster library in float32, and of oneDNN in bf16 (a median, not the
// best shape: one lucky timing would move a maximum).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <random>
#include <vector>

using namespace dnnl;
using dt = memory::data_type;

struct Shape {
  const char* name;
  int m, k, n;
};

double seconds_per_call(auto&& fn) {
  fn();
  int reps = 0;
  auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < 0.5 || reps < 3) {
    fn();
    ++reps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return elapsed / reps;
}

struct OnednnMatmul {
  engine eng{engine::kind::cpu, 0};
  stream strm{eng};
  memory a, b, c;
  matmul prim;
  OnednnMatmul(int m, int k, int n, dt in, const std::vector<float>& A, const std::vector<float>& B) {
    memory::desc ad({m, k}, in, memory::format_tag::ab), bd({k, n}, in, memory::format_tag::ab),
        cd({m, n}, dt::f32, memory::format_tag::ab);
    prim = matmul(matmul::primitive_desc(matmul::desc(ad, bd, cd), eng));
    a = memory(ad, eng);
    b = memory(bd, eng);
    c = memory(cd, eng);
    fill(a, A, in);
    fill(b, B, in);
  }
  void fill(memory& mem, const std::vector<float>& v, dt in) {
    memory src({{static_cast<long>(v.size())}, dt::f32, memory::format_tag::a}, eng, const_cast<float*>(v.data()));
    memory dst({{static_cast<long>(v.size())}, in, memory::format_tag::a}, eng, mem.get_data_handle());
    reorder(src, dst).execute(strm, src, dst);
    strm.wait();
  }
  void run() {
    prim.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    strm.wait();
  }
  std::vector<float> result(int size) {
    const float* p = static_cast<const float*>(c.get_data_handle());
    return {p, p + size};
  }
};

int main() {
  const Shape shapes[] = {{"small qkv 768x256x768", 768, 256, 768},   {"small ffn 768x256x1024", 768, 256, 1024},
                          {"base qkv 768x512x1536", 768, 512, 1536},  {"base ffn1 768x512x2048", 768, 512, 2048},
                          {"base ffn2 768x2048x512", 768, 2048, 512}, {"logits 768x512x10000", 768, 512, 10000}};
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  const int threads = omp_get_max_threads();
  std::printf("threads %d; GFLOP/s\n%-26s %10s %10s %10s %s\n", threads, "shape", "openblas", "dnnl f32", "dnnl bf16",
              "dnnl f32 same bits 1 vs N threads");
  std::vector<double> f32_rates, bf16_rates;
  for (const Shape& s : shapes) {
    std::vector<float> A(size_t(s.m) * s.k), B(size_t(s.k) * s.n), C(size_t(s.m) * s.n);
    for (float& x : A) x = normal(gen);
    for (float& x : B) x = normal(gen);
    const double flop = 2.0 * s.m * s.k * s.n;
    double blas = seconds_per_call([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1, A.data(), s.k, B.data(), s.n, 0,
                  C.data(), s.n);
    });
    OnednnMatmul f32(s.m, s.k, s.n, dt::f32, A, B);
    double t32 = seconds_per_call([&] { f32.run(); });
    double t16 = 1.0 / 0.0;  // bf16 needs AVX512-BF16 or AMX: elsewhere oneDNN has no bf16 matmul
    try {
      OnednnMatmul b16(s.m, s.k, s.n, dt::bf16, A, B);
      t16 = seconds_per_call([&] { b16.run(); });
    } catch (const dnnl::error&) {
    }
    f32.run();
    std::vector<float> many = f32.result(s.m * s.n);
    omp_set_num_threads(1);
    OnednnMatmul one(s.m, s.k, s.n, dt::f32, A, B);  // primitives are made for the thread count at creation
    one.run();
    std::vector<float> single = one.result(s.m * s.n);
    omp_set_num_threads(threads);
    bool same = std::memcmp(many.data(), single.data(), many.size() * sizeof(float)) == 0;
    std::printf("%-26s %10.0f %10.0f %10.0f %s\n", s.name, flop / blas / 1e9, flop / t32 / 1e9, flop / t16 / 1e9,
                same ? "yes" : "NO");
    f32_rates.push_back(flop / std::min(blas, t32) / 1e9);
    bf16_rates.push_back(flop / t16 / 1e9);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
  };
  std::printf("gemm ceiling: float32 %.0f GFLOP/s, bf16 %.0f GFLOP/s (medians over the shapes%s)\n", median(f32_rates),
              median(bf16_rates), median(bf16_rates) > 0 ? "" : "; no bf16 matmul on this CPU");
}
