// `loom study scaling`: why attention divides q.k by sqrt(d_k) (section 3.2.1).
// For q, k with independent N(0, 1) components, q.k has variance d_k, so the
// softmax's inputs grow with d_k, it saturates (one key takes all the weight)
// and its gradient vanishes. Measured in float64 with loom's own ops, with and
// without the scale: the sample variance of q.k (with its standard error,
// sqrt((2 d_k^2 + 6 d_k) / N)), the mean largest softmax weight over 32 keys,
// and the mean norm of d(sum(softmax(s) * u))/ds per query for random u.
#include <cmath>

#include "gnuplot.h"
#include "loom/ops.h"
#include "study.h"

namespace loom::tools {

namespace {

constexpr int64_t kSamples = 20000, kQueries = 1000, kKeys = 32;

struct SoftmaxStats {
  double max_weight, grad_norm;
};

// The softmax over each row of scores [queries, keys], its largest weight and its gradient's size.
SoftmaxStats softmax_stats(const Tensor& scores, Generator& gen) {
  Tensor s = scores.clone().requires_grad_();
  Tensor p = softmax(s, -1);
  Tensor u = randn(s.shape(), {DType::f64}, gen);
  sum(mul(p, u)).backward();
  Tensor g = s.grad();
  return {amax(p.detach(), {1}).mean().item<double>(), sqrt(sum(mul(g, g), {1})).mean().item<double>()};
}

}  // namespace

void study_scaling(const StudyOptions& o) {
  Table table{{"d_k", "var_unscaled", "var_scaled", "var_unscaled_stderr", "max_weight_unscaled", "max_weight_scaled",
               "grad_norm_unscaled", "grad_norm_scaled"},
              {}};
  std::string rows;
  for (int64_t d_k : {4, 8, 16, 32, 64, 128, 256, 512, 1024}) {
    // Sampled leaves: nothing here needs a graph but the softmax in softmax_stats.
    Generator gen(o.seed * 1000 + static_cast<uint64_t>(d_k));
    Tensor q = randn({kSamples, d_k}, {DType::f64}, gen), k = randn({kSamples, d_k}, {DType::f64}, gen);
    Tensor dots = sum(mul(q, k), {1});
    const double mean = dots.mean().item<double>();
    const double variance = sum(mul(dots - mean, dots - mean)).item<double>() / (kSamples - 1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d_k));
    Tensor queries = randn({kQueries, d_k}, {DType::f64}, gen), keys = randn({kKeys, d_k}, {DType::f64}, gen);
    Tensor scores = matmul(queries, transpose(keys, 0, 1));
    const SoftmaxStats unscaled = softmax_stats(scores, gen), scaled = softmax_stats(scores * scale, gen);
    const auto d = static_cast<double>(d_k);
    table.rows.push_back({d, variance, variance * scale * scale, std::sqrt((2 * d * d + 6 * d) / kSamples),
                          unscaled.max_weight, scaled.max_weight, unscaled.grad_norm, scaled.grad_norm});
    rows += fmt::format("{} {} {} {} {} {} {}\n", d_k, variance, variance * scale * scale, unscaled.max_weight,
                        scaled.max_weight, unscaled.grad_norm, scaled.grad_norm);
  }
  write_table(o, "scaling", table);
  for (const char* ext : {".png", ".svg"}) {
    GnuplotFigure figure(o.out + "/scaling" + ext, 1500, 450);
    figure.add_data("s", rows);
    figure.script()
        << "set multiplot layout 1,3 title 'Why scores are scaled by 1/sqrt(d_k): q, k ~ N(0, I), " << kSamples
        << " pairs; softmax over " << kKeys << " keys'\n"
        << "set grid\nset logscale x 2\nset xlabel 'd_k'\nset key top left\n"
        << "set title 'variance of q.k'\nset logscale y 2\n"
        << "plot $s using 1:2 with linespoints pt 7 title 'q.k', $s using 1:3 with linespoints pt 7 title "
           "'q.k / sqrt(d_k)', x with lines dt 2 title 'd_k'\n"
        << "unset logscale y\nset yrange [0:1.05]\nset title 'largest softmax weight (saturation)'\n"
        << "plot $s using 1:4 with linespoints pt 7 title 'unscaled', $s using 1:5 with linespoints pt 7 title "
           "'scaled'\n"
        << "set autoscale y\nset logscale y 10\nset title 'gradient norm through the softmax'\nset key bottom left\n"
        << "plot $s using 1:6 with linespoints pt 7 title 'unscaled', $s using 1:7 with linespoints pt 7 title "
           "'scaled'\nunset multiplot\n";
    figure.render();
  }
  fmt::print("plot: {}/scaling.png, .svg\n", o.out);
}

}  // namespace loom::tools
