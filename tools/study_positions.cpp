// `loom study positions`: what the sinusoidal positional encodings look like
// (section 3.5): the table of nn::PositionalEncoding as a heat map, a few
// dimensions as curves over the positions, and the dot product of two
// positions' encodings by their distance. That dot product depends on the
// distance k only: PE(p).PE(p+k) = sum_i cos(w_i k), w_i = 10000^(-2i/d); the
// table shows the measured mean, min and max over p beside that formula.
#include <cmath>

#include "gnuplot.h"
#include "loom/nn.h"
#include "loom/ops.h"
#include "study.h"

namespace loom::tools {

void study_positions(const StudyOptions& o) {
  constexpr int64_t kDModel = 128, kPositions = 100, kMaxDistance = 60;
  nn::PositionalEncoding encoding(kDModel, 0.0, kPositions);
  const std::vector<double> pe = to_dtype(encoding.table(), DType::f64).to_vector<double>();
  auto at = [&](int64_t p, int64_t i) { return pe[static_cast<size_t>(p * kDModel + i)]; };

  std::string heat, curves, similarity;
  for (int64_t p = 0; p < kPositions; ++p) {
    for (int64_t i = 0; i < kDModel; ++i) heat += fmt::format("{}{:.5f}", i ? " " : "", at(p, i));
    heat += "\n";
    curves += fmt::format("{} {} {} {} {}\n", p, at(p, 4), at(p, 5), at(p, 6), at(p, 7));
  }
  Table table{{"distance", "mean_dot", "min_dot", "max_dot", "formula"}, {}};
  for (int64_t k = 0; k <= kMaxDistance; ++k) {
    double total = 0, low = INFINITY, high = -INFINITY;
    for (int64_t p = 0; p + k < kPositions; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < kDModel; ++i) dot += at(p, i) * at(p + k, i);
      total += dot;
      low = std::min(low, dot);
      high = std::max(high, dot);
    }
    double formula = 0;
    for (int64_t i = 0; i < kDModel / 2; ++i)
      formula += std::cos(static_cast<double>(k) * std::pow(10000.0, -2.0 * static_cast<double>(i) / kDModel));
    const double mean = total / static_cast<double>(kPositions - k);
    table.rows.push_back({static_cast<double>(k), mean, low, high, formula});
    similarity += fmt::format("{} {} {} {} {}\n", k, mean, low, high, formula);
  }
  write_table(o, "positions", table);
  for (const char* ext : {".png", ".svg"}) {
    GnuplotFigure figure(o.out + "/positions" + ext, 1600, 500);
    figure.add_data("pe", heat);
    figure.add_data("curves", curves);
    figure.add_data("sim", similarity);
    figure.script()
        << "set multiplot layout 1,3 title 'Sinusoidal positional encoding, d_model " << kDModel << "'\n"
        << "set title 'PE[position, dimension]'\nset xlabel 'dimension'\nset ylabel 'position'\n"
        << "set palette defined (0 '#2166ac', 0.5 'white', 1 '#b2182b')\nset cbrange [-1:1]\n"
        << fmt::format("set xrange [-0.5:{}]\nset yrange [{}:-0.5]\n", kDModel - 0.5, kPositions - 0.5)
        << "plot $pe matrix with image pixels notitle\n"
        << "set autoscale\nset yrange [*:*] noreverse\nset grid\nset ylabel 'value'\nset xlabel 'position'\n"
        << "set title 'dimensions 4 to 7'\nset key bottom right\n"
        << "plot for [c=2:5] $curves using 1:c with lines title sprintf('dim %d', c + 2)\n"
        << "set title 'PE(p) . PE(p+k) by distance k (mean, min, max over p)'\nset xlabel 'distance k'\n"
        << "set ylabel 'dot product'\nset key top right\n"
        << "plot $sim using 1:3:4 with filledcurves fillcolor '#cccccc' title 'min..max', "
           "$sim using 1:2 with lines lw 2 title 'mean', $sim using 1:5 with points pt 6 title "
           "'sum_i cos(w_i k)'\nunset multiplot\n";
    figure.render();
  }
  fmt::print("plot: {}/positions.png, .svg\n", o.out);
}

}  // namespace loom::tools
